// Reader of vgpu checkpoint images (format: docs/checkpoint-format.md).
//
// Open() reads and validates everything but the frame data before it
// succeeds: magic, version, flags, layout, the trailer digest over header and
// tables, and the consistency of records and frames (bounds, VA overlaps,
// sizes). A restore can therefore refuse a damaged or foreign image before it
// changes anything. Frame data is checked as it is read: every frame's XXH64
// over its stored bytes, and zstd's own content checksum. VerifyData() does
// that for the whole image without a destination, for callers that must know
// the data is intact before they overwrite anything.
//
// Every failure is a Status whose message is one line naming the image and
// what is wrong, e.g. "checkpoint image /x/y: frame 17 of record 3 fails its
// checksum (corrupt)". No input makes the reader crash, throw or read out of
// bounds. The const methods may be called from several threads at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "checkpoint/direct_io.h"
#include "checkpoint/image_format.h"
#include "checkpoint/image_writer.h"  // ProgressFn
#include "common/status.h"

namespace vgpu::checkpoint {

struct ReaderOptions {
  int threads = 0;      // decompression threads per call; 0: min(4, hardware threads)
  ProgressFn progress;  // (bytes done, bytes total) of each Read*/Verify call
  // Frame data of an image file is read with O_DIRECT (no page cache: a
  // restore reads each byte once) unless this is false or the file system
  // refuses it; header and tables are always read through the cache.
  bool direct_io = true;
  LogFn log;  // one-line debug notes, e.g. the fallback to buffered reads
};

struct ImageInfo {
  Header header;  // version, flags, frame size, time, pid, hostname, ...
  uint64_t file_bytes = 0;
  uint64_t data_bytes = 0;    // uncompressed, all records
  uint64_t stored_bytes = 0;  // frame bytes in the file
};

// One destination of ReadRecords: record `record` into dst[0, size), where
// size must equal the record's size.
struct ReadTarget {
  size_t record = 0;
  void* dst = nullptr;
  size_t size = 0;
};

class ImageReader {
 public:
  static Status Open(const std::string& path, const ReaderOptions& options,
                     std::unique_ptr<ImageReader>* out);
  // An image held in memory; `data` must outlive the reader. `name` is used
  // in messages.
  static Status OpenMemory(const void* data, size_t size, const ReaderOptions& options,
                           std::unique_ptr<ImageReader>* out, const std::string& name = "<memory>");
  ~ImageReader();
  ImageReader(const ImageReader&) = delete;
  ImageReader& operator=(const ImageReader&) = delete;

  const ImageInfo& info() const;
  std::span<const RecordEntry> records() const;
  std::span<const FrameEntry> frames() const;
  // Whether frame data is read with O_DIRECT (false for OpenMemory, after a
  // fallback, or with ReaderOptions::direct_io off).
  bool direct_io() const;

  // Decompresses record i into dst (n == its size) with several threads.
  // On failure dst's contents are unspecified.
  Status ReadRecord(size_t i, void* dst, size_t n) const;
  // Several records in one parallel pass (better for many small records).
  Status ReadRecords(std::span<const ReadTarget> targets) const;
  // Reads, checksums and decompresses every frame, writing nothing.
  Status VerifyData() const;

 private:
  friend class FrameDecoder;
  struct Impl;
  explicit ImageReader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Decodes single frames, for a caller that runs its own pipeline (a restore
// decoding into pinned buffers that feed device copies, verifying each frame
// as it goes). One decoder per thread, any number per reader; the reader must
// outlive them.
class FrameDecoder {
 public:
  explicit FrameDecoder(const ImageReader& reader);
  ~FrameDecoder();
  FrameDecoder(const FrameDecoder&) = delete;
  FrameDecoder& operator=(const FrameDecoder&) = delete;

  // Reads frame k of record `record`, checks its checksum (and zstd's and the
  // exact size) and decodes it into dst, which holds `capacity` bytes; the
  // frame's size is frame_size except for a record's last frame. On failure
  // dst's contents are unspecified.
  Status Decode(size_t record, uint64_t k, void* dst, size_t capacity, size_t* raw_size);
  // Like Decode, but a raw (stored) frame that a direct read left in the
  // decoder's read buffer is checked there and not copied: *data points at
  // it, valid until this decoder's next call. Otherwise *data == dst.
  Status DecodeView(size_t record, uint64_t k, void* dst, size_t capacity, const void** data,
                    size_t* raw_size);
  // Direct reads land in the caller's memory (see AlignedBuffer::Adopt) when
  // a frame's aligned range fits in it: with pinned memory, DecodeView's
  // result can be copied to the device without an extra host copy.
  void AdoptReadBuffer(uint8_t* data, size_t capacity) { in_.Adopt(data, capacity); }
  // Bytes a read buffer needs for any frame of this image.
  size_t ReadBufferBytes() const;

 private:
  Status DecodeImpl(size_t record, uint64_t k, void* dst, size_t capacity, const uint8_t** view,
                    size_t* raw_size);
  const ImageReader& reader_;
  void* dctx_;  // ZSTD_DCtx
  AlignedBuffer in_;
  std::vector<uint8_t> scratch_;
};

}  // namespace vgpu::checkpoint
