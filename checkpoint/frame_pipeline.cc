#include "checkpoint/frame_pipeline.h"

#include <fcntl.h>
#include <zstd.h>

#include <cstring>
#include <exception>

#include "checkpoint/file_util.h"
#include "checkpoint/xxh64.h"

namespace vgpu::checkpoint {
namespace {

// Device memory is often largely zero (fresh allocations, padding); detecting
// it costs one pass at memory speed and saves the compressor the work.
bool IsZero(const uint8_t* p, size_t n) {
  return n == 0 || (p[0] == 0 && std::memcmp(p, p + 1, n - 1) == 0);
}

// Two samples of this size decide whether a frame is worth compressing.
constexpr size_t kSampleBytes = 64 << 10;

// True when samples at 1/4 and 3/4 of the frame both shrink by less than
// `min_saving_pct` percent. Such data (fp32 weights, encrypted or already
// compressed buffers) costs full compression time for little disk saved;
// storing it raw keeps the writer at disk speed. Costs ~3% on other frames.
bool LooksIncompressible(ZSTD_CCtx* cctx, const uint8_t* p, size_t n, uint8_t* scratch,
                         int min_saving_pct) {
  if (min_saving_pct <= 0 || n < 4 * kSampleBytes) return false;
  const size_t limit = kSampleBytes - kSampleBytes * static_cast<size_t>(min_saving_pct) / 100;
  for (size_t at : {n / 4, 3 * n / 4 - kSampleBytes}) {
    const size_t r = ZSTD_compress2(cctx, scratch, kSampleBytes, p + at, kSampleBytes);
    if (!ZSTD_isError(r) && r < limit) return false;
  }
  return true;
}

// Kick off writeback every this many bytes, so that the final fsync() finds
// little left to do and disk I/O overlaps compression.
constexpr uint64_t kWritebackChunk = 64ull << 20;

}  // namespace

FramePipeline::FramePipeline(int fd, AlignedAppender* out, uint64_t data_start,
                             const PipelineOptions& options,
                             std::function<void(uint64_t)> on_written)
    : fd_(fd),
      out_(out),
      opt_(options),
      on_written_(std::move(on_written)),
      offset_(data_start),
      writeback_from_(data_start),
      dropped_to_(data_start) {}

FramePipeline::~FramePipeline() {
  Stop();
  FreeInputs();
}

void FramePipeline::AllocateInput(Slot& s) {
  if (opt_.buffers.alloc) {
    s.in = static_cast<uint8_t*>(opt_.buffers.alloc(opt_.frame_size));
    s.in_custom = s.in != nullptr;
  }
  if (s.in == nullptr) {
    s.in_heap.resize(opt_.frame_size);
    s.in = s.in_heap.data();
  }
}

void FramePipeline::FreeInputs() {
  for (Slot& s : slots_) {
    if (s.in_custom && opt_.buffers.free) opt_.buffers.free(s.in, opt_.frame_size);
    s.in = nullptr;
    s.in_custom = false;
  }
}

std::string FramePipeline::Start() {
  try {
    slots_.resize(static_cast<size_t>(opt_.slots));
    for (Slot& s : slots_) {
      AllocateInput(s);
      s.out.resize(opt_.frame_size);
    }
    io_ = std::thread([this] { IoLoop(); });
    for (int i = 0; i < opt_.threads; ++i) workers_.emplace_back([this] { CompressLoop(); });
  } catch (const std::exception& e) {
    Stop();
    return std::string("cannot start the compression pipeline: ") + e.what();
  }
  return "";
}

uint8_t* FramePipeline::Acquire() {
  std::unique_lock lock(mu_);
  Slot& s = slots_[acquired_ % slots_.size()];
  free_cv_.wait(lock, [&] { return s.state == State::kFree || !error_.empty(); });
  if (!error_.empty()) return nullptr;
  s.state = State::kFilling;
  ++acquired_;
  return s.in;
}

void FramePipeline::Submit(size_t size) {
  std::lock_guard lock(mu_);
  const size_t index = submitted_ % slots_.size();
  slots_[index].in_len = size;
  slots_[index].state = State::kQueued;
  queue_.push_back(index);
  ++submitted_;
  work_cv_.notify_one();
}

void FramePipeline::CompressLoop() {
  // Without a context (out of memory) frames are stored raw: still correct.
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  if (cctx != nullptr) {
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, opt_.level);
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
  }
  for (;;) {
    std::unique_lock lock(mu_);
    work_cv_.wait(lock, [&] { return abort_ || stop_ || !queue_.empty(); });
    if (abort_ || queue_.empty()) break;
    Slot& s = slots_[queue_.front()];
    queue_.pop_front();
    lock.unlock();
    const uint8_t* in = s.in;
    if (IsZero(in, s.in_len)) {
      s.codec = Codec::kZero;
      s.stored = in;
      s.stored_len = 0;
    } else {
      // Output capacity == input size: data that does not shrink is stored raw.
      const bool skip =
          !cctx || LooksIncompressible(cctx, in, s.in_len, s.out.data(), opt_.min_saving_pct);
      const size_t r = skip ? s.in_len : ZSTD_compress2(cctx, s.out.data(), s.in_len, in, s.in_len);
      const bool packed = !ZSTD_isError(r) && r < s.in_len;
      s.codec = packed ? Codec::kZstd : Codec::kRaw;
      s.stored = packed ? s.out.data() : in;
      s.stored_len = packed ? r : s.in_len;
    }
    s.checksum = XXH64(s.stored, s.stored_len, 0);
    lock.lock();
    s.state = State::kDone;
    io_cv_.notify_one();
  }
  ZSTD_freeCCtx(cctx);
}

std::string FramePipeline::WriteFrame(Slot& s) {
  if (int err = out_->Append(s.stored, s.stored_len); err != 0)
    return "write failed: " + ErrnoText(err);
  frames_.push_back({offset_, s.checksum, static_cast<uint32_t>(s.stored_len),
                     static_cast<uint32_t>(s.in_len), static_cast<uint32_t>(s.codec), 0});
  offset_ += s.stored_len;
  // Direct writes leave nothing in the page cache to hurry or drop.
  if (opt_.start_writeback && !out_->direct() && offset_ - writeback_from_ >= kWritebackChunk) {
    // Only hints: errors surface at fsync() time.
    sync_file_range(fd_, static_cast<off_t>(writeback_from_),
                    static_cast<off_t>(offset_ - writeback_from_), SYNC_FILE_RANGE_WRITE);
    // The chunk before has had a chunk's time to reach the disk: wait for it
    // and drop it from the page cache. An image is written once and read
    // back rarely; without this a checkpoint of many GiB fills the page
    // cache with dirty pages, evicts everything else and then stalls the
    // writer (and the whole machine) in reclaim.
    if (dropped_to_ < writeback_from_) {
      const auto from = static_cast<off_t>(dropped_to_);
      const auto len = static_cast<off_t>(writeback_from_ - dropped_to_);
      sync_file_range(fd_, from, len,
                      SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
                          SYNC_FILE_RANGE_WAIT_AFTER);
      posix_fadvise(fd_, from, len, POSIX_FADV_DONTNEED);
      dropped_to_ = writeback_from_;
    }
    writeback_from_ = offset_;
  }
  if (on_written_) on_written_(s.in_len);
  return "";
}

void FramePipeline::IoLoop() {
  for (;;) {
    std::unique_lock lock(mu_);
    Slot& s = slots_[written_ % slots_.size()];
    io_cv_.wait(lock, [&] {
      return abort_ || s.state == State::kDone || (draining_ && written_ == submitted_);
    });
    if (abort_ || s.state != State::kDone) return;
    const bool failed = !error_.empty();
    lock.unlock();
    std::string e;
    if (!failed) {  // after an error, frames are only recycled to unblock Acquire()
      try {
        e = WriteFrame(s);
      } catch (const std::exception& ex) {
        e = std::string("internal error: ") + ex.what();
      }
    }
    lock.lock();
    if (!e.empty() && error_.empty()) error_ = e;
    s.state = State::kFree;
    ++written_;
    free_cv_.notify_all();
  }
}

std::string FramePipeline::Drain() {
  {
    std::lock_guard lock(mu_);
    draining_ = true;
    io_cv_.notify_all();
  }
  if (io_.joinable()) io_.join();
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    work_cv_.notify_all();
  }
  for (std::thread& t : workers_) t.join();
  workers_.clear();
  return error();
}

void FramePipeline::Stop() {
  {
    std::lock_guard lock(mu_);
    abort_ = stop_ = true;
    if (error_.empty()) error_ = "aborted";
    work_cv_.notify_all();
    io_cv_.notify_all();
    free_cv_.notify_all();
  }
  if (io_.joinable()) io_.join();
  for (std::thread& t : workers_) t.join();
  workers_.clear();
}

std::string FramePipeline::error() {
  std::lock_guard lock(mu_);
  return error_;
}

}  // namespace vgpu::checkpoint
