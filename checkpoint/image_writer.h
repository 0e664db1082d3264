// Streaming writer of vgpu checkpoint images (format: docs/checkpoint-format.md).
//
//   std::unique_ptr<ImageWriter> w;
//   Status s = ImageWriter::Create(path, metadata, options, &w);
//   for each allocation:
//     s = w->BeginRecord(va, size, flags, device);
//     s = w->Append(chunk, n);   // any chunking, total == size
//     s = w->EndRecord();
//   s = w->Finish();             // durable and visible under `path` only now
//
// Data is cut into frames of options.frame_size bytes (a record starts a new
// frame), compressed by a small pool of threads while the caller produces the
// next chunks, and written in order by an I/O thread. At most
// frames_in_flight frames are buffered: Append blocks when the pipeline is
// full, which bounds memory at about frames_in_flight * 2 * frame_size.
//
// Atomicity: everything goes to "<path>.tmp.<pid>.<random>" in the same
// directory; Finish() fsyncs it, renames it over `path` (or, with
// options.replace false, only where nothing is there) and fsyncs the
// directory. On any error, on destruction without Finish(), or on Abort(), the
// temp file is removed and a previous image at `path` is untouched. A writer
// killed outright leaves its temp file behind; the next Create() for the same
// path removes temp files whose writer process is gone, and readers never look
// at them.
//
// One thread drives a writer. After the first error every call returns that
// error. Nothing throws.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "checkpoint/direct_io.h"       // LogFn
#include "checkpoint/frame_pipeline.h"  // FrameBufferAllocator
#include "checkpoint/image_format.h"
#include "common/status.h"

namespace vgpu::checkpoint {

// Called with (bytes done, bytes total) of uncompressed data. Calls are
// serialized but may come from an internal thread; keep it quick.
using ProgressFn = std::function<void(uint64_t done, uint64_t total)>;

struct ImageMetadata {
  uint32_t pid = 0;               // 0: getpid()
  std::string hostname;           // empty: gethostname()
  std::string writer_version;     // empty: "vgpu <version>"
  std::string device_metadata;    // opaque blob (JSON by convention), <= 16 MiB
  uint64_t creation_time_ns = 0;  // 0: now (CLOCK_REALTIME)
};

struct WriterOptions {
  int threads = 0;                          // compression threads; 0: min(4, hardware threads)
  int compression_level = 1;                // zstd level (1 = fast)
  uint32_t frame_size = kDefaultFrameSize;  // power of two in [4 KiB, 64 MiB]
  int frames_in_flight = 0;                 // 0: threads + 2
  uint64_t total_bytes = 0;                 // for progress; 0: sum of the records begun so far
  // Frames of >= 256 KiB whose two 64 KiB samples shrink by less than this
  // many percent are stored uncompressed without trying the whole frame
  // (fp32 weights save ~8% at level 1 at a fraction of disk speed). 0: always
  // try zstd on the whole frame.
  int min_saving_pct = 10;
  ProgressFn progress;
  FrameBufferAllocator frame_buffers;  // empty: heap
  bool sync = true;  // fsync file and directory; false only for tests
  // false: Finish() fails (and removes the temp file) if something appeared
  // at `path` meanwhile, instead of replacing it: the rename is atomic and
  // never overwrites (RENAME_NOREPLACE, or link() where the file system
  // lacks it). For callers that must not destroy another writer's image.
  bool replace = true;
  // Write with O_DIRECT (no page cache) unless this is false or the file
  // system refuses it.
  bool direct_io = true;
  LogFn log;  // one-line debug notes, e.g. the fallback to buffered writes
};

class ImageWriter {
 public:
  static Status Create(const std::string& path, const ImageMetadata& metadata,
                       const WriterOptions& options, std::unique_ptr<ImageWriter>* out);
  ~ImageWriter();  // without a successful Finish(): same as Abort()
  ImageWriter(const ImageWriter&) = delete;
  ImageWriter& operator=(const ImageWriter&) = delete;

  // Declares the next record. VA ranges of non-empty records must not overlap;
  // device >= 0; flags are stored as given.
  Status BeginRecord(uint64_t va, uint64_t size, uint32_t flags, int device);
  // Adds bytes to the open record; never more than its declared size.
  Status Append(const void* data, size_t n);
  // Zero-copy alternative to Append for producers that fill frames
  // asynchronously (a device-to-host DMA): hands out the buffer of the open
  // record's next frame and the bytes to put into it (*n <= frame_size). Up
  // to kMaxOpenFrames frames may be handed out before the oldest is
  // committed, so the next copy can run while the previous one completes.
  // Not to be mixed with Append within a frame. Blocks while the pipeline is
  // full. The buffers stay allocated until the writer is destroyed, even
  // after an error, so a copy still running into one never hits freed memory.
  static constexpr int kMaxOpenFrames = 2;
  Status NextFrame(uint8_t** data, size_t* n);
  // Submits the oldest frame handed out by NextFrame: its bytes are final.
  Status CommitFrame();
  // Closes the open record; it must have received exactly its size.
  Status EndRecord();
  // Writes the tables and the trailer, makes the image durable, renames it to
  // its final path. The writer is unusable afterwards.
  Status Finish();
  // Stops, removes the temp file; a previous image stays. Idempotent.
  void Abort();

  const std::string& path() const;
  const std::string& temp_path() const;

 private:
  struct Impl;
  explicit ImageWriter(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace vgpu::checkpoint
