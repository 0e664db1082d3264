// On-disk layout of a vgpu checkpoint image (docs/checkpoint-format.md has the
// tables). This file is the single source of truth for offsets and limits: the
// writer encodes with it, the reader decodes and validates with it. Pure
// functions over bytes, no I/O, so that every check is unit-testable and the
// fuzzer reaches all of them.
//
//   [header][frame 0][frame 1]...[record table][frame table][trailer]
//
// The tables follow the data because the writer streams: it learns the
// compressed size of a frame only after compressing it, and it never seeks
// back. The reader finds them through the fixed-size trailer at the end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace vgpu::checkpoint {

inline constexpr char kMagic[8] = {'V', 'G', 'P', 'U', 'C', 'K', 'P', 'T'};
inline constexpr char kEndMagic[8] = {'V', 'G', 'P', 'U', 'E', 'N', 'D', '.'};
// Bumped on any change a version-1 reader would misread. See "Versioning".
inline constexpr uint32_t kFormatVersion = 1;
// Header flags understood by this reader; an image with any other bit set is
// refused (a future writer sets a bit for a feature old readers must not skip).
inline constexpr uint32_t kKnownHeaderFlags = 0;

inline constexpr size_t kHeaderFixedBytes = 64;
inline constexpr size_t kRecordBytes = 48;
inline constexpr size_t kFrameEntryBytes = 32;
inline constexpr size_t kTrailerBytes = 64;
// The digest covers the trailer up to (not including) the digest field.
inline constexpr size_t kTrailerDigestOffset = 40;

inline constexpr uint32_t kMinFrameSize = 4096;
inline constexpr uint32_t kMaxFrameSize = 64u << 20;
inline constexpr uint32_t kDefaultFrameSize = 4u << 20;
inline constexpr uint32_t kMaxHostnameBytes = 255;
inline constexpr uint32_t kMaxWriterVersionBytes = 255;
inline constexpr uint32_t kMaxDeviceMetadataBytes = 16u << 20;

// How a frame's bytes are stored.
enum class Codec : uint32_t {
  kRaw = 0,   // stored as is (incompressible data)
  kZstd = 1,  // one zstd frame, content checksum on, content size set
  kZero = 2,  // all zero bytes; nothing stored
};

struct Header {
  uint32_t version = kFormatVersion;
  uint32_t header_bytes = 0;  // fixed part + the three strings
  uint32_t flags = 0;
  uint32_t frame_size = kDefaultFrameSize;
  uint64_t creation_time_ns = 0;  // Unix epoch, nanoseconds
  uint32_t pid = 0;
  std::string hostname;
  std::string writer_version;
  std::string device_metadata;  // opaque to the format; JSON by convention
};

struct RecordEntry {
  uint64_t va = 0;
  uint64_t size = 0;
  uint64_t data_offset = 0;  // file offset of the record's first frame
  uint64_t first_frame = 0;  // index into the frame table
  uint32_t flags = 0;        // caller-defined
  int32_t device = 0;
  uint32_t frame_count = 0;
  uint32_t reserved = 0;
};

struct FrameEntry {
  uint64_t offset = 0;    // file offset of the stored bytes
  uint64_t checksum = 0;  // XXH64 (seed 0) of the stored bytes
  uint32_t stored_size = 0;
  uint32_t raw_size = 0;
  uint32_t codec = 0;  // Codec
  uint32_t reserved = 0;
};

struct Trailer {
  uint64_t record_table_offset = 0;
  uint64_t record_count = 0;
  uint64_t frame_table_offset = 0;
  uint64_t frame_count = 0;
  uint64_t data_bytes = 0;  // sum of record sizes (uncompressed)
  uint64_t digest = 0;
  uint32_t version = kFormatVersion;
  uint32_t reserved = 0;
};

// Encoders append to `out`.
void EncodeHeader(const Header& h, std::vector<uint8_t>* out);
void EncodeRecord(const RecordEntry& r, std::vector<uint8_t>* out);
void EncodeFrame(const FrameEntry& f, std::vector<uint8_t>* out);
void EncodeTrailer(const Trailer& t, std::vector<uint8_t>* out);

// Decoders return "" on success, else what is wrong (one line, no prefix).
// DecodeHeaderFixed reads the first kHeaderFixedBytes and fills everything
// but the strings; `string_bytes` gets the three string lengths.
std::string DecodeHeaderFixed(std::span<const uint8_t> bytes, Header* h, uint32_t lengths[3]);
std::string DecodeHeaderStrings(std::span<const uint8_t> bytes, const uint32_t lengths[3],
                                Header* h);
std::string DecodeTrailer(std::span<const uint8_t> bytes, Trailer* t);
RecordEntry DecodeRecord(const uint8_t* p);
FrameEntry DecodeFrame(const uint8_t* p);

// Where the tables and trailer must lie, given the header, the trailer and the
// file size. Overflow-safe; run before reading the tables.
std::string ValidateLayout(const Header& h, const Trailer& t, uint64_t file_size);
// Semantic checks of decoded tables: frames contiguous and well-formed,
// records matching their frames, VA ranges in bounds and not overlapping.
std::string ValidateTables(const Header& h, const Trailer& t, std::span<const RecordEntry> records,
                           std::span<const FrameEntry> frames);

// XXH64 over header bytes, both tables and the trailer's first 40 bytes.
uint64_t ComputeDigest(std::span<const uint8_t> header, std::span<const uint8_t> tables,
                       std::span<const uint8_t> trailer_prefix);

// A best-effort guess of what a non-image file is ("an ELF file", "a zstd
// stream", ...), for error messages; "" when unknown.
std::string DescribeForeign(std::span<const uint8_t> first_bytes);

// Number of frames a record of `size` bytes is split into.
inline uint64_t FramesFor(uint64_t size, uint32_t frame_size) {
  return size / frame_size + (size % frame_size != 0);
}

}  // namespace vgpu::checkpoint
