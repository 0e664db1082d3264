// The writer's compression pipeline: the caller fills frame buffers, a pool of
// threads compresses and checksums them out of order, one I/O thread writes
// them in order. A ring of slots bounds the memory and gives back-pressure:
// Acquire() blocks until the slot written `slots` frames ago is free.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/direct_io.h"
#include "checkpoint/image_format.h"

namespace vgpu::checkpoint {

// Where the frame buffers the caller fills come from. A CUDA caller passes
// pinned host memory here so that device-to-host copies can go straight into
// the frames (NextFrame) by DMA. alloc may return null: the heap is used.
struct FrameBufferAllocator {
  std::function<void*(size_t bytes)> alloc;
  std::function<void(void* p, size_t bytes)> free;
};

struct PipelineOptions {
  int threads = 1;
  int slots = 3;
  int level = 1;
  uint32_t frame_size = kDefaultFrameSize;
  bool start_writeback = true;  // sync_file_range as data accumulates
  int min_saving_pct = 10;      // see WriterOptions::min_saving_pct
  FrameBufferAllocator buffers;  // input buffers; empty or failing: heap
};

class FramePipeline {
 public:
  // Frames are appended to `out` (the file `fd`), the first at file offset
  // `data_start`. `on_written(raw_bytes)` runs on the I/O thread after each
  // frame.
  FramePipeline(int fd, AlignedAppender* out, uint64_t data_start, const PipelineOptions& options,
                std::function<void(uint64_t)> on_written);
  ~FramePipeline();  // Stop()

  std::string Start();       // "" or what failed
  uint8_t* Acquire();        // a frame_size buffer; nullptr after an error
  void Submit(size_t size);  // hands the acquired buffer over, size in (0, frame_size]
  // Waits until every submitted frame is written; joins the threads.
  // Returns "" or the first error.
  std::string Drain();
  void Stop();  // abandons queued frames; joins the threads
  std::string error();
  std::vector<FrameEntry> TakeFrames() { return std::move(frames_); }
  uint64_t data_end() const { return offset_; }

 private:
  enum class State { kFree, kFilling, kQueued, kDone };
  struct Slot {
    uint8_t* in = nullptr;         // frame_size bytes: from opt_.buffers or in_heap
    std::vector<uint8_t> in_heap, out;
    bool in_custom = false;
    size_t in_len = 0;
    const uint8_t* stored = nullptr;
    size_t stored_len = 0;
    Codec codec = Codec::kRaw;
    uint64_t checksum = 0;
    State state = State::kFree;
  };

  void AllocateInput(Slot& slot);
  void FreeInputs();
  void CompressLoop();
  void IoLoop();
  std::string WriteFrame(Slot& slot);

  const int fd_;
  AlignedAppender* const out_;  // I/O thread only until joined
  const PipelineOptions opt_;
  const std::function<void(uint64_t)> on_written_;
  uint64_t offset_;  // I/O thread only until joined
  uint64_t writeback_from_;  // start of the range not yet handed to writeback
  uint64_t dropped_to_;      // [data_start, dropped_to_) is on disk and out of the cache
  std::vector<FrameEntry> frames_;  // I/O thread only until joined

  std::mutex mu_;
  std::condition_variable work_cv_, io_cv_, free_cv_;
  std::vector<Slot> slots_;
  std::deque<size_t> queue_;  // slot indexes to compress
  uint64_t acquired_ = 0, submitted_ = 0, written_ = 0;
  bool draining_ = false, stop_ = false, abort_ = false;
  std::string error_;
  std::vector<std::thread> workers_;
  std::thread io_;
};

}  // namespace vgpu::checkpoint
