#include "checkpoint/fuzz_seeds.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <random>
#include <vector>

#include "checkpoint/image_parts.h"
#include "checkpoint/image_writer.h"
#include "checkpoint/xxh64.h"

namespace vgpu::checkpoint {
namespace {

// Each valid seed: record sizes with a data pattern (0 zero, 1 text, 2 random,
// 3 other text).
struct Seed {
  const char* name;
  std::vector<std::pair<size_t, int>> records;
};

// The records of valid-codecs.img, the base of most damaged seeds, and the
// codecs the writer picks for them (checked by CheckBases).
enum : size_t {
  kText2 = 0,    // 5000 text bytes: two zstd frames
  kEmpty = 1,    // 0 bytes: no frame
  kZeros = 2,    // 8192 zero bytes: two zero frames
  kRandom3 = 3,  // 8209 random bytes: three raw frames
  kText = 4,     // 700 text bytes: one zstd frame
  kRandom = 5,   // 700 random bytes: one raw frame
};

const Seed kValidSeeds[] = {
    {"valid-empty.img", {}},
    {"valid-zero-size.img", {{0, 1}}},
    {"valid-one-byte.img", {{1, 1}}},
    {"valid-mixed.img", {{5000, 1}, {0, 0}, {8192, 0}, {700, 2}, {9000, 1}}},
    {"valid-random.img", {{4096 * 2 + 17, 2}}},
    {"valid-codecs.img", {{5000, 1}, {0, 0}, {8192, 0}, {4096 * 2 + 17, 2}, {700, 1}, {700, 2}}},
    {"valid-small.img", {{700, 1}, {1000, 2}}},
    // Frames the damaged seeds swap in: another 700-byte text, and 699 bytes.
    {"valid-donor.img", {{700, 3}, {699, 1}}},
};

uint8_t PatternByte(int pattern, size_t i, std::mt19937_64* rng) {
  switch (pattern) {
    case 0:
      return 0;
    case 1:
      return "vgpu checkpoint "[i % 16];
    case 3:
      return "fuzz seed, text "[i % 16];
    default:
      return (*rng)() & 0xff;
  }
}

bool WriteValid(const std::string& path, const Seed& seed) {
  WriterOptions o;
  o.frame_size = kMinFrameSize;  // small frames: many frames in few bytes
  o.threads = 1;
  o.sync = false;
  ImageMetadata m;
  m.hostname = "seed";
  m.device_metadata = R"({"devices":[{"index":0,"uuid":"GPU-seed"}]})";
  m.creation_time_ns = 1;
  m.pid = 1;  // deterministic seeds
  std::unique_ptr<ImageWriter> w;
  Status s = ImageWriter::Create(path, m, o, &w);
  std::mt19937_64 rng(42);
  uint64_t va = 0x7f0000000000;
  for (const auto& [size, pattern] : seed.records) {
    std::vector<uint8_t> data(size);
    for (size_t i = 0; i < size; ++i) data[i] = PatternByte(pattern, i, &rng);
    if (s.ok()) s = w->BeginRecord(va, size, 1, 0);
    if (s.ok()) s = w->Append(data.data(), data.size());
    if (s.ok()) s = w->EndRecord();
    va += ((size + 4095) & ~size_t{4095}) + 4096;
  }
  if (s.ok()) s = w->Finish();
  if (!s.ok()) std::fprintf(stderr, "%s\n", s.message.c_str());
  return s.ok();
}

bool WriteBytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  return static_cast<bool>(out);
}

// Splits a valid seed and checks that the parts encode back to the very same
// bytes: otherwise ImageParts no longer matches the format, and damaged seeds
// built from it would test something else.
bool LoadBase(const std::string& path, ImageParts* out) {
  std::ifstream in(path, std::ios::binary);
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), {});
  ImageParts p;
  if (!SplitImage(bytes, &p)) {
    std::fprintf(stderr, "make-seeds: %s does not split into parts\n", path.c_str());
    return false;
  }
  ImageParts again = p;
  Normalize(&again);
  if (JoinImage(again) != bytes) {
    std::fprintf(stderr, "make-seeds: %s changes when re-encoded from its parts\n", path.c_str());
    return false;
  }
  *out = std::move(p);
  return true;
}

struct Bases {
  ImageParts codecs, small, empty, donor;
};

size_t FrameOf(const ImageParts& p, size_t record, uint64_t k = 0) {
  return p.records[record].first_frame + k;
}

Codec CodecOf(const ImageParts& p, size_t record, uint64_t k = 0) {
  return static_cast<Codec>(p.frames[FrameOf(p, record, k)].codec);
}

// The damaged seeds assume these codecs (the writer picks them per frame).
bool CheckBases(const Bases& b) {
  const ImageParts& c = b.codecs;
  const bool ok = c.records.size() == 6 && CodecOf(c, kText2) == Codec::kZstd &&
                  CodecOf(c, kZeros) == Codec::kZero && CodecOf(c, kRandom3, 1) == Codec::kRaw &&
                  CodecOf(c, kRandom3, 2) == Codec::kRaw && CodecOf(c, kText) == Codec::kZstd &&
                  CodecOf(c, kRandom) == Codec::kRaw && CodecOf(b.donor, 0) == Codec::kZstd &&
                  CodecOf(b.donor, 1) == Codec::kZstd;
  if (!ok) std::fprintf(stderr, "make-seeds: the base images no longer have the expected frames\n");
  return ok;
}

// A zstd skippable frame (magic 0x184D2A50, little-endian length, payload):
// decoders skip it, so it pads a zstd frame without changing what it decodes to.
std::vector<uint8_t> SkippableFrame(uint32_t payload) {
  std::vector<uint8_t> f = {0x50, 0x2a, 0x4d, 0x18};
  for (int i = 0; i < 4; ++i) f.push_back(static_cast<uint8_t>(payload >> (8 * i)));
  f.resize(f.size() + payload, 0);
  return f;
}

using Damage = std::function<ImageParts(const Bases&)>;
struct Damaged {
  const char* check;  // bad-only-<check>[.variant].img
  Damage damage;
};

// Header and trailer: each seed changes one field and lets Join recompute
// the digest, so only the field's own check can refuse it.
std::vector<Damaged> HeaderSeeds() {
  return {
      {"magic",
       [](const Bases& b) {
         ImageParts p = b.codecs;
         p.patch_header = [](std::vector<uint8_t>* h) { (*h)[0] ^= 0x20; };  // "vGPUCKPT"
         return p;
       }},
      {"version-zero",
       [](const Bases& b) {
         ImageParts p = b.codecs;
         p.header.version = p.trailer.version = 0;
         return p;
       }},
      {"version-newer",
       [](const Bases& b) {
         ImageParts p = b.codecs;
         p.header.version = p.trailer.version = kFormatVersion + 1;
         return p;
       }},
      {"header-flags",
       [](const Bases& b) {
         ImageParts p = b.codecs;
         p.header.flags = ~kKnownHeaderFlags & (kKnownHeaderFlags + 1);  // lowest unknown bit
         return p;
       }},
      // Records of valid-small.img fit in one frame of any of these sizes.
      {"frame-size.not-pow2",
       [](const Bases& b) {
         ImageParts p = b.small;
         p.header.frame_size = 6000;
         return p;
       }},
      {"frame-size.too-small",
       [](const Bases& b) {
         ImageParts p = b.small;
         p.header.frame_size = kMinFrameSize / 2;
         return p;
       }},
      {"frame-size.too-big",
       [](const Bases& b) {
         ImageParts p = b.small;
         p.header.frame_size = kMaxFrameSize * 2;
         return p;
       }},
      {"header-reserved",
       [](const Bases& b) {
         ImageParts p = b.codecs;
         p.patch_header = [](std::vector<uint8_t>* h) { (*h)[kHeaderFixedBytes - 1] = 1; };
         return p;
       }},
      {"header-string-length",
       [](const Bases& b) {
         ImageParts p = b.codecs;
         p.header.hostname.assign(kMaxHostnameBytes + 1, 'h');
         Normalize(&p);
         return p;
       }},
      {"header-size",
       [](const Bases& b) {
         ImageParts p = b.codecs;
         p.header.header_bytes += 8;  // zero padding after the strings
         Relayout(&p);
         return p;
       }},
      {"header-truncated",
       [](const Bases& b) {
         ImageParts p = b.codecs;
         p.header.device_metadata.assign(8192, 'm');
         Normalize(&p);
         p.patch_image = [](std::vector<uint8_t>* image) { image->resize(2048); };
         return p;
       }},
      {"min-size",
       [](const Bases& b) {
         ImageParts p = b.codecs;
         p.patch_image = [](std::vector<uint8_t>* image) {
           image->resize(kHeaderFixedBytes + kTrailerBytes - 1);
         };
         return p;
       }},
      {"empty",
       [](const Bases& b) {
         ImageParts p = b.empty;
         p.patch_image = [](std::vector<uint8_t>* image) { image->clear(); };
         return p;
       }},
      {"end-magic",
       [](const Bases& b) {
         ImageParts p = b.codecs;
         p.patch_image = [](std::vector<uint8_t>* image) { image->back() ^= 1; };
         return p;
       }},
      {"trailer-version",
       [](const Bases& b) {
         ImageParts p = b.codecs;
         p.trailer.version = kFormatVersion + 1;
         return p;
       }},
      {"trailer-reserved",
       [](const Bases& b) {
         ImageParts p = b.codecs;
         p.trailer.reserved = 1;
         return p;
       }},
  };
}

// Trailer layout, digest, and the frame table.
std::vector<Damaged> LayoutSeeds() {
  return {
      // 2^60 records of 48 bytes wrap to 0 bytes: without the bound on the
      // counts the offsets add up and the reader sizes a table by the count.
      {"table-count",
       [](const Bases& b) {
         ImageParts p = b.empty;
         p.trailer.record_count = uint64_t{1} << 60;
         return p;
       }},
      // A record table that starts inside the header.
      {"record-table-offset",
       [](const Bases& b) {
         ImageParts p = b.empty;
         p.trailer.record_table_offset -= kRecordBytes;
         p.trailer.record_count = 1;
         return p;
       }},
      {"frame-table-offset",
       [](const Bases& b) {
         ImageParts p = b.codecs;
         p.trailer.frame_table_offset += kFrameEntryBytes;
         p.trailer.frame_count -= 1;
         return p;
       }},
      {"tables-end",
       [](const Bases& b) {
         ImageParts p = b.codecs;
         p.after_tables.assign(kFrameEntryBytes, 0);
         return p;
       }},
      // Fields no other check covers, changed under the original digest.
      {"digest.header",
       [](const Bases& b) {
         ImageParts p = b.codecs;
         p.header.creation_time_ns += 1;
         p.keep_digest = true;
         return p;
       }},
      {"digest.metadata",
       [](const Bases& b) {
         ImageParts p = b.codecs;
         p.header.device_metadata[0] = '[';
         p.keep_digest = true;
         return p;
       }},
      {"digest.record-table",
       [](const Bases& b) {
         ImageParts p = b.codecs;
         p.records[kText].flags ^= 0x100;
         p.keep_digest = true;
         return p;
       }},
      // Frame 1 of a raw record read one byte late: its checksum is made to
      // match the bytes found there, so only the offset check notices.
      {"frame-offset",
       [](const Bases& b) {
         ImageParts p = b.codecs;
         const size_t k = FrameOf(p, kRandom3, 1);
         FrameEntry& f = p.frames[k];
         std::vector<uint8_t> shifted(p.frame_data[k].begin() + 1, p.frame_data[k].end());
         shifted.push_back(p.frame_data[k + 1][0]);
         f.offset += 1;
         f.checksum = XXH64(shifted.data(), shifted.size(), 0);
         return p;
       }},
      {"frame-raw-size",
       [](const Bases& b) {
         ImageParts p = b.codecs;
         p.frames[FrameOf(p, kZeros, 1)].raw_size = 0;
         return p;
       }},
      {"frame-reserved",
       [](const Bases& b) {
         ImageParts p = b.codecs;
         p.frames[0].reserved = 1;
         return p;
       }},
      // A raw frame one byte longer than its data: unchecked, the reader
      // would copy that byte past the record's destination.
      {"raw-frame-size",
       [](const Bases& b) {
         ImageParts p = b.codecs;
         p.frame_data[FrameOf(p, kRandom)].push_back(0);
         Relayout(&p);
         return p;
       }},
      // A zstd frame plus a skippable frame: decodes to the same bytes, but is
      // larger than zstd's bound for them.
      {"zstd-frame-size",
       [](const Bases& b) {
         ImageParts p = b.codecs;
         std::vector<uint8_t>& d = p.frame_data[FrameOf(p, kText)];
         const std::vector<uint8_t> pad = SkippableFrame(1024);
         d.insert(d.end(), pad.begin(), pad.end());
         Relayout(&p);
         return p;
       }},
      // Unchecked, the reader would hash stored bytes it never read.
      {"zero-frame-size",
       [](const Bases& b) {
         ImageParts p = b.codecs;
         p.frame_data[FrameOf(p, kZeros)].assign(16, 0);
         Relayout(&p);
         return p;
       }},
      {"codec",
       [](const Bases& b) {
         ImageParts p = b.codecs;
         p.frames[FrameOf(p, kRandom)].codec = 3;
         return p;
       }},
      {"frames-end",
       [](const Bases& b) {
         ImageParts p = b.codecs;
         p.after_frames.assign(16, 0);
         Relayout(&p);
         return p;
       }},
  };
}

// The record table, then the frame data (checked only as frames are read).
std::vector<Damaged> RecordAndDataSeeds() {
  return {
      {"va-wrap",
       [](const Bases& b) {
         ImageParts p = b.codecs;
         p.records[kRandom].va = ~uint64_t{0} - 99;  // the highest VA: no overlap
         return p;
       }},
      {"device",
       [](const Bases& b) {
         ImageParts p = b.codecs;
         p.records[kRandom].device = -1;
         return p;
       }},
      {"record-reserved",
       [](const Bases& b) {
         ImageParts p = b.codecs;
         p.records[kRandom].reserved = 1;
         return p;
       }},
      // Both records hold 700 bytes in one frame: unchecked, the reader would
      // quietly restore the other record's bytes.
      {"first-frame",
       [](const Bases& b) {
         ImageParts p = b.codecs;
         p.records[kRandom].first_frame = p.records[kText].first_frame;
         return p;
       }},
      {"frame-count",
       [](const Bases& b) {
         ImageParts p = b.codecs;
         p.records[kRandom].frame_count += 1;
         return p;
       }},
      // The last record grows by a frame the frame table does not have.
      {"frames-past-end",
       [](const Bases& b) {
         ImageParts p = b.codecs;
         p.records[kRandom].size += p.header.frame_size;
         p.records[kRandom].frame_count += 1;
         Relayout(&p);
         return p;
       }},
      {"data-offset",
       [](const Bases& b) {
         ImageParts p = b.codecs;
         p.records[kRandom].data_offset += 1;
         return p;
       }},
      // Frames of 4096, 4000 and 113 bytes for 8209: unchecked, the reader
      // would write the last frame past the record's end.
      {"frame-sizes",
       [](const Bases& b) {
         ImageParts p = b.codecs;
         const size_t k = FrameOf(p, kRandom3, 1);
         std::vector<uint8_t>& mid = p.frame_data[k];
         std::vector<uint8_t>& last = p.frame_data[k + 1];
         last.insert(last.begin(), mid.end() - 96, mid.end());
         mid.resize(mid.size() - 96);
         p.frames[k].raw_size = static_cast<uint32_t>(mid.size());
         p.frames[k + 1].raw_size = static_cast<uint32_t>(last.size());
         Relayout(&p);
         return p;
       }},
      {"orphan-frame",
       [](const Bases& b) {
         ImageParts p = b.codecs;
         p.frames.push_back({.raw_size = 10, .codec = static_cast<uint32_t>(Codec::kRaw)});
         p.frame_data.emplace_back(10, 'o');
         Relayout(&p);
         return p;
       }},
      {"data-bytes",
       [](const Bases& b) {
         ImageParts p = b.codecs;
         p.trailer.data_bytes += 1;
         return p;
       }},
      {"va-overlap",
       [](const Bases& b) {
         ImageParts p = b.codecs;
         p.records[kRandom].va = p.records[kText].va + 100;
         return p;
       }},
      // Stored bytes changed under the old checksum. The zstd variant swaps in
      // another valid frame of the same size, so zstd itself finds nothing.
      {"frame-checksum.raw",
       [](const Bases& b) {
         ImageParts p = b.codecs;
         p.frame_data[FrameOf(p, kRandom)][0] ^= 1;
         return p;
       }},
      {"frame-checksum.zstd",
       [](const Bases& b) {
         ImageParts p = b.codecs;
         const size_t k = FrameOf(p, kText);
         const uint64_t checksum = p.frames[k].checksum;
         p.frame_data[k] = b.donor.frame_data[FrameOf(b.donor, 0)];
         Relayout(&p);
         p.frames[k].checksum = checksum;
         return p;
       }},
      // zstd's content checksum is the frame's last 4 bytes; the frame
      // checksum is recomputed over the damaged bytes.
      {"zstd-checksum",
       [](const Bases& b) {
         ImageParts p = b.codecs;
         p.frame_data[FrameOf(p, kText)].back() ^= 1;
         Relayout(&p);
         return p;
       }},
      // A valid zstd frame of 699 bytes where 700 are due.
      {"zstd-size",
       [](const Bases& b) {
         ImageParts p = b.codecs;
         p.frame_data[FrameOf(p, kText)] = b.donor.frame_data[FrameOf(b.donor, 1)];
         Relayout(&p);
         return p;
       }},
  };
}

bool WriteDamagedSeeds(const std::string& dir, const Bases& bases) {
  for (const auto& list : {HeaderSeeds(), LayoutSeeds(), RecordAndDataSeeds()}) {
    for (const Damaged& d : list) {
      const std::string path = dir + "/bad-only-" + d.check + ".img";
      if (!WriteBytes(path, JoinImage(d.damage(bases)))) {
        std::perror(path.c_str());
        return false;
      }
    }
  }
  return true;
}

}  // namespace

bool WriteFuzzSeeds(const std::string& dir) {
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    std::perror(dir.c_str());
    return false;
  }
  for (const Seed& s : kValidSeeds)
    if (!WriteValid(dir + "/" + s.name, s)) return false;
  Bases b;
  return LoadBase(dir + "/valid-codecs.img", &b.codecs) &&
         LoadBase(dir + "/valid-small.img", &b.small) &&
         LoadBase(dir + "/valid-empty.img", &b.empty) &&
         LoadBase(dir + "/valid-donor.img", &b.donor) && CheckBases(b) && WriteDamagedSeeds(dir, b);
}

}  // namespace vgpu::checkpoint
