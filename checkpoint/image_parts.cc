#include "checkpoint/image_parts.h"

#include "checkpoint/xxh64.h"

namespace vgpu::checkpoint {

bool SplitImage(std::span<const uint8_t> image, ImageParts* out) {
  if (image.size() < kHeaderFixedBytes + kTrailerBytes) return false;
  ImageParts p;
  uint32_t lengths[3];
  if (!DecodeHeaderFixed(image, &p.header, lengths).empty() ||
      p.header.header_bytes > image.size() ||
      !DecodeHeaderStrings(image, lengths, &p.header).empty() ||
      !DecodeTrailer(image.subspan(image.size() - kTrailerBytes), &p.trailer).empty() ||
      !ValidateLayout(p.header, p.trailer, image.size()).empty())
    return false;
  const uint8_t* tables = image.data() + p.trailer.record_table_offset;
  for (uint64_t i = 0; i < p.trailer.record_count; ++i)
    p.records.push_back(DecodeRecord(tables + i * kRecordBytes));
  for (uint64_t i = 0; i < p.trailer.frame_count; ++i) {
    p.frames.push_back(
        DecodeFrame(image.data() + p.trailer.frame_table_offset + i * kFrameEntryBytes));
    const FrameEntry& f = p.frames.back();
    if (f.offset > image.size() || f.stored_size > image.size() - f.offset) return false;
    p.frame_data.emplace_back(image.begin() + f.offset, image.begin() + f.offset + f.stored_size);
  }
  *out = std::move(p);
  return true;
}

void SetHeaderBytes(ImageParts* p) {
  const Header& h = p->header;
  p->header.header_bytes = static_cast<uint32_t>(
      kHeaderFixedBytes + h.hostname.size() + h.writer_version.size() + h.device_metadata.size());
}

void Relayout(ImageParts* p) {
  uint64_t offset = p->header.header_bytes;
  for (size_t i = 0; i < p->frames.size(); ++i) {
    FrameEntry& f = p->frames[i];
    f.offset = offset;
    f.stored_size = static_cast<uint32_t>(p->frame_data[i].size());
    f.checksum = XXH64(p->frame_data[i].data(), p->frame_data[i].size(), 0);
    offset += f.stored_size;
  }
  Trailer& t = p->trailer;
  t.record_table_offset = offset + p->after_frames.size();
  uint64_t next_frame = 0;
  t.data_bytes = 0;
  for (RecordEntry& r : p->records) {
    r.first_frame = next_frame;
    // A record without frames points where its data would have started.
    r.data_offset = next_frame < p->frames.size() ? p->frames[next_frame].offset : offset;
    next_frame += r.frame_count;
    t.data_bytes += r.size;
  }
  t.record_count = p->records.size();
  t.frame_table_offset = t.record_table_offset + t.record_count * kRecordBytes;
  t.frame_count = p->frames.size();
}

std::vector<uint8_t> JoinImage(const ImageParts& p) {
  std::vector<uint8_t> header;
  EncodeHeader(p.header, &header);
  header.resize(p.header.header_bytes, 0);
  if (p.patch_header) p.patch_header(&header);
  std::vector<uint8_t> tables;
  for (const RecordEntry& r : p.records) EncodeRecord(r, &tables);
  for (const FrameEntry& f : p.frames) EncodeFrame(f, &tables);
  tables.insert(tables.end(), p.after_tables.begin(), p.after_tables.end());
  Trailer t = p.trailer;
  std::vector<uint8_t> trailer;
  EncodeTrailer(t, &trailer);
  if (!p.keep_digest) {
    t.digest = ComputeDigest(header, tables, std::span(trailer).first(kTrailerDigestOffset));
    trailer.clear();
    EncodeTrailer(t, &trailer);
  }
  std::vector<uint8_t> image = header;
  for (const std::vector<uint8_t>& d : p.frame_data) image.insert(image.end(), d.begin(), d.end());
  image.insert(image.end(), p.after_frames.begin(), p.after_frames.end());
  image.insert(image.end(), tables.begin(), tables.end());
  image.insert(image.end(), trailer.begin(), trailer.end());
  if (p.patch_image) p.patch_image(&image);
  return image;
}

}  // namespace vgpu::checkpoint
