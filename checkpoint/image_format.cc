#include "checkpoint/image_format.h"

#include <zstd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "checkpoint/xxh64.h"

namespace vgpu::checkpoint {
namespace {

// Explicit little-endian (de)serialization: independent of struct padding and
// of the host byte order.
void Put32(std::vector<uint8_t>* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void Put64(std::vector<uint8_t>* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<uint8_t>(v >> (8 * i)));
}
uint32_t Get32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
uint64_t Get64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

bool AllZero(const uint8_t* p, size_t n) {
  return std::all_of(p, p + n, [](uint8_t b) { return b == 0; });
}

std::string Num(uint64_t v) { return std::to_string(v); }

std::string ValidateFrames(const Header& h, const Trailer& t, std::span<const FrameEntry> frames) {
  uint64_t expect = h.header_bytes;
  for (size_t i = 0; i < frames.size(); ++i) {
    const FrameEntry& f = frames[i];
    const std::string where = "frame table entry " + Num(i) + ": ";
    if (f.offset != expect) return where + "offset " + Num(f.offset) + ", expected " + Num(expect);
    if (f.raw_size == 0 || f.raw_size > h.frame_size)
      return where + "uncompressed size " + Num(f.raw_size) + " out of range";
    if (f.reserved != 0) return where + "reserved field is not zero";
    switch (static_cast<Codec>(f.codec)) {
      case Codec::kRaw:
        if (f.stored_size != f.raw_size) return where + "raw frame with stored != raw size";
        break;
      case Codec::kZstd:
        if (f.stored_size == 0 || f.stored_size > ZSTD_compressBound(f.raw_size))
          return where + "compressed size " + Num(f.stored_size) + " out of range";
        break;
      case Codec::kZero:
        if (f.stored_size != 0) return where + "zero frame with stored bytes";
        break;
      default:
        return where + "unknown codec " + Num(f.codec);
    }
    expect += f.stored_size;
  }
  if (expect != t.record_table_offset)
    return "frames end at " + Num(expect) + " but the record table starts at " +
           Num(t.record_table_offset);
  return "";
}

std::string ValidateRecord(const Header& h, const RecordEntry& r, uint64_t next_frame,
                           std::span<const FrameEntry> frames, uint64_t data_end) {
  if (r.va + r.size < r.va) return "VA range wraps around";
  if (r.device < 0) return "negative device " + std::to_string(r.device);
  if (r.reserved != 0) return "reserved field is not zero";
  if (r.first_frame != next_frame)
    return "first frame " + Num(r.first_frame) + ", expected " + Num(next_frame);
  const uint64_t n = FramesFor(r.size, h.frame_size);
  if (r.frame_count != n) return "frame count " + Num(r.frame_count) + ", expected " + Num(n);
  if (n > frames.size() - next_frame) return "frames past the end of the frame table";
  // A record without frames points where its data would have started.
  const uint64_t data_offset = next_frame < frames.size() ? frames[next_frame].offset : data_end;
  if (r.data_offset != data_offset)
    return "data offset " + Num(r.data_offset) + ", expected " + Num(data_offset);
  for (uint64_t k = 0; k < n; ++k) {
    const uint64_t want = k + 1 < n ? h.frame_size : r.size - k * h.frame_size;
    if (frames[next_frame + k].raw_size != want)
      return "frame " + Num(k) + " holds " + Num(frames[next_frame + k].raw_size) +
             " bytes, expected " + Num(want);
  }
  return "";
}

std::string ValidateOverlaps(std::span<const RecordEntry> records) {
  std::vector<size_t> order;
  for (size_t i = 0; i < records.size(); ++i)
    if (records[i].size != 0) order.push_back(i);
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return records[a].va < records[b].va; });
  for (size_t k = 1; k < order.size(); ++k) {
    const RecordEntry& prev = records[order[k - 1]];
    if (prev.va + prev.size > records[order[k]].va)
      return "records " + Num(order[k - 1]) + " and " + Num(order[k]) + " overlap in VA";
  }
  return "";
}

}  // namespace

void EncodeHeader(const Header& h, std::vector<uint8_t>* out) {
  out->insert(out->end(), kMagic, kMagic + 8);
  Put32(out, h.version);
  Put32(out, h.header_bytes);
  Put32(out, h.flags);
  Put32(out, h.frame_size);
  Put64(out, h.creation_time_ns);
  Put32(out, h.pid);
  Put32(out, static_cast<uint32_t>(h.hostname.size()));
  Put32(out, static_cast<uint32_t>(h.writer_version.size()));
  Put32(out, static_cast<uint32_t>(h.device_metadata.size()));
  out->resize(out->size() + 16, 0);  // reserved
  for (const std::string* s : {&h.hostname, &h.writer_version, &h.device_metadata})
    out->insert(out->end(), s->begin(), s->end());
}

void EncodeRecord(const RecordEntry& r, std::vector<uint8_t>* out) {
  Put64(out, r.va);
  Put64(out, r.size);
  Put64(out, r.data_offset);
  Put64(out, r.first_frame);
  Put32(out, r.flags);
  Put32(out, static_cast<uint32_t>(r.device));
  Put32(out, r.frame_count);
  Put32(out, r.reserved);
}

void EncodeFrame(const FrameEntry& f, std::vector<uint8_t>* out) {
  Put64(out, f.offset);
  Put64(out, f.checksum);
  Put32(out, f.stored_size);
  Put32(out, f.raw_size);
  Put32(out, f.codec);
  Put32(out, f.reserved);
}

void EncodeTrailer(const Trailer& t, std::vector<uint8_t>* out) {
  Put64(out, t.record_table_offset);
  Put64(out, t.record_count);
  Put64(out, t.frame_table_offset);
  Put64(out, t.frame_count);
  Put64(out, t.data_bytes);
  Put64(out, t.digest);
  Put32(out, t.version);
  Put32(out, t.reserved);
  out->insert(out->end(), kEndMagic, kEndMagic + 8);
}

std::string DecodeHeaderFixed(std::span<const uint8_t> b, Header* h, uint32_t lengths[3]) {
  if (b.size() < kHeaderFixedBytes) return "truncated header";
  if (std::memcmp(b.data(), kMagic, 8) != 0) {
    const std::string what = DescribeForeign(b);
    return "not a vgpu checkpoint image (bad magic" + (what.empty() ? "" : "; " + what) + ")";
  }
  const uint8_t* p = b.data();
  h->version = Get32(p + 8);
  if (h->version == 0) return "invalid format version 0";
  if (h->version > kFormatVersion)
    return "format version " + Num(h->version) + " is newer than this vgpu supports (" +
           Num(kFormatVersion) + "); restore it with a newer vgpu";
  h->header_bytes = Get32(p + 12);
  h->flags = Get32(p + 16);
  if (h->flags & ~kKnownHeaderFlags)
    return "unsupported header flags 0x" + [&] {
      char buf[16];
      std::snprintf(buf, sizeof buf, "%x", h->flags & ~kKnownHeaderFlags);
      return std::string(buf);
    }() + " (written by a newer vgpu?)";
  h->frame_size = Get32(p + 20);
  if (h->frame_size < kMinFrameSize || h->frame_size > kMaxFrameSize ||
      (h->frame_size & (h->frame_size - 1)) != 0)
    return "invalid frame size " + Num(h->frame_size);
  h->creation_time_ns = Get64(p + 24);
  h->pid = Get32(p + 32);
  for (int i = 0; i < 3; ++i) lengths[i] = Get32(p + 36 + 4 * i);
  if (!AllZero(p + 48, 16)) return "reserved header bytes are not zero";
  if (lengths[0] > kMaxHostnameBytes || lengths[1] > kMaxWriterVersionBytes ||
      lengths[2] > kMaxDeviceMetadataBytes)
    return "header string too long";
  const uint64_t total = kHeaderFixedBytes + uint64_t{lengths[0]} + lengths[1] + lengths[2];
  if (total != h->header_bytes)
    return "header size " + Num(h->header_bytes) + " does not match its contents (" + Num(total) +
           ")";
  return "";
}

std::string DecodeHeaderStrings(std::span<const uint8_t> b, const uint32_t lengths[3], Header* h) {
  const char* p = reinterpret_cast<const char*>(b.data()) + kHeaderFixedBytes;
  h->hostname.assign(p, lengths[0]);
  h->writer_version.assign(p + lengths[0], lengths[1]);
  h->device_metadata.assign(p + lengths[0] + lengths[1], lengths[2]);
  return "";
}

std::string DecodeTrailer(std::span<const uint8_t> b, Trailer* t) {
  if (b.size() < kTrailerBytes) return "truncated trailer";
  const uint8_t* p = b.data();
  if (std::memcmp(p + 56, kEndMagic, 8) != 0)
    return "no end marker (truncated, or the writer did not finish)";
  t->record_table_offset = Get64(p);
  t->record_count = Get64(p + 8);
  t->frame_table_offset = Get64(p + 16);
  t->frame_count = Get64(p + 24);
  t->data_bytes = Get64(p + 32);
  t->digest = Get64(p + 40);
  t->version = Get32(p + 48);
  t->reserved = Get32(p + 52);
  return "";
}

RecordEntry DecodeRecord(const uint8_t* p) {
  RecordEntry r;
  r.va = Get64(p);
  r.size = Get64(p + 8);
  r.data_offset = Get64(p + 16);
  r.first_frame = Get64(p + 24);
  r.flags = Get32(p + 32);
  r.device = static_cast<int32_t>(Get32(p + 36));
  r.frame_count = Get32(p + 40);
  r.reserved = Get32(p + 44);
  return r;
}

FrameEntry DecodeFrame(const uint8_t* p) {
  FrameEntry f;
  f.offset = Get64(p);
  f.checksum = Get64(p + 8);
  f.stored_size = Get32(p + 16);
  f.raw_size = Get32(p + 20);
  f.codec = Get32(p + 24);
  f.reserved = Get32(p + 28);
  return f;
}

std::string ValidateLayout(const Header& h, const Trailer& t, uint64_t file_size) {
  if (t.version != h.version)
    return "trailer version " + Num(t.version) + " differs from header version " + Num(h.version);
  if (t.reserved != 0) return "reserved trailer field is not zero";
  const uint64_t trailer_at = file_size - kTrailerBytes;  // caller checked file_size
  // Bound the counts by the file size first so the products cannot overflow.
  if (t.record_count > file_size / kRecordBytes || t.frame_count > file_size / kFrameEntryBytes)
    return "table sizes exceed the file size (corrupt trailer)";
  if (t.record_table_offset < h.header_bytes || t.record_table_offset > trailer_at)
    return "record table offset " + Num(t.record_table_offset) + " out of bounds";
  if (t.frame_table_offset != t.record_table_offset + t.record_count * kRecordBytes)
    return "frame table offset " + Num(t.frame_table_offset) + " inconsistent with record table";
  if (t.frame_table_offset + t.frame_count * kFrameEntryBytes != trailer_at)
    return "tables end at " + Num(t.frame_table_offset + t.frame_count * kFrameEntryBytes) +
           " but the trailer starts at " + Num(trailer_at) + " (truncated or extended file?)";
  return "";
}

std::string ValidateTables(const Header& h, const Trailer& t, std::span<const RecordEntry> records,
                           std::span<const FrameEntry> frames) {
  if (std::string e = ValidateFrames(h, t, frames); !e.empty()) return e;
  uint64_t next_frame = 0, data_bytes = 0;
  for (size_t i = 0; i < records.size(); ++i) {
    if (std::string e = ValidateRecord(h, records[i], next_frame, frames, t.record_table_offset);
        !e.empty())
      return "record " + Num(i) + ": " + e;
    next_frame += records[i].frame_count;
    data_bytes += records[i].size;  // cannot overflow: bounded by frames * frame_size
  }
  if (next_frame != frames.size())
    return Num(frames.size() - next_frame) + " frames belong to no record";
  if (data_bytes != t.data_bytes)
    return "records hold " + Num(data_bytes) + " bytes, trailer says " + Num(t.data_bytes);
  return ValidateOverlaps(records);
}

uint64_t ComputeDigest(std::span<const uint8_t> header, std::span<const uint8_t> tables,
                       std::span<const uint8_t> trailer_prefix) {
  // Chained one-shot hashes (each seeded with the previous result): avoids
  // concatenating a possibly large metadata blob with the tables.
  uint64_t d = XXH64(header.data(), header.size(), 0);
  d = XXH64(tables.data(), tables.size(), d);
  return XXH64(trailer_prefix.data(), trailer_prefix.size(), d);
}

std::string DescribeForeign(std::span<const uint8_t> b) {
  auto starts = [&](const char* m, size_t n) {
    return b.size() >= n && std::memcmp(b.data(), m, n) == 0;
  };
  if (starts("\x7f"
             "ELF",
             4))
    return "looks like an ELF file";
  if (starts("\x28\xb5\x2f\xfd", 4)) return "looks like a bare zstd stream";
  if (starts("\x1f\x8b", 2)) return "looks like a gzip file";
  if (starts("PK\x03\x04", 4)) return "looks like a zip file";
  if (starts("VGPU", 4)) return "a different vgpu file type";
  if (!b.empty() && (b[0] == '{' || b[0] == '[')) return "looks like JSON text";
  if (AllZero(b.data(), b.size())) return "all zero bytes";
  return "";
}

}  // namespace vgpu::checkpoint
