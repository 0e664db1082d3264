#include "residency/staging.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "driver/cu_status.h"
#include "driver/real_driver.h"

namespace vgpu::residency {
namespace {

std::string CuErr(CUresult r) { return driver::CuErrorText(r); }

// Pinned when the driver gives it (the caller's context is current), else
// pageable: a DMA from pageable memory is staged by the driver, still correct.
class HostBuffer {
 public:
  HostBuffer(const driver::RealCuda& cuda, size_t n) : cuda_(cuda) {
    void* p = nullptr;
    if (TABLE_CALL(cuda_, cuMemHostAlloc, &p, n, CU_MEMHOSTALLOC_PORTABLE) == CUDA_SUCCESS &&
        p != nullptr) {
      data_ = static_cast<uint8_t*>(p);
      pinned_ = true;
    } else {
      heap_.reset(new (std::nothrow) uint8_t[n]);
      data_ = heap_.get();
    }
  }
  ~HostBuffer() {
    if (pinned_) TABLE_CALL(cuda_, cuMemFreeHost, data_);
  }
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  uint8_t* data() const { return data_; }
  bool pinned() const { return pinned_; }

 private:
  const driver::RealCuda& cuda_;
  uint8_t* data_ = nullptr;
  bool pinned_ = false;
  std::unique_ptr<uint8_t[]> heap_;
};

// A stream with two events, in the current context; waits for its copies
// before it goes away, so no DMA outlives the buffers it targets.
struct StreamPair {
  const driver::RealCuda* cuda;
  CUstream stream = nullptr;
  CUevent done[2] = {nullptr, nullptr};
  CUresult Create() {
    CUresult r = TABLE_CALL(*cuda, cuStreamCreate, &stream, CU_STREAM_NON_BLOCKING);
    for (CUevent& e : done) {
      if (r == CUDA_SUCCESS) r = TABLE_CALL(*cuda, cuEventCreate, &e, CU_EVENT_DISABLE_TIMING);
    }
    return r;
  }
  CUresult Destroy() {
    CUresult r = stream != nullptr ? TABLE_CALL(*cuda, cuStreamSynchronize, stream) : CUDA_SUCCESS;
    for (CUevent& e : done) {
      if (e != nullptr) TABLE_CALL(*cuda, cuEventDestroy_v2, e);
      e = nullptr;
    }
    if (stream != nullptr) TABLE_CALL(*cuda, cuStreamDestroy_v2, stream);
    stream = nullptr;
    return r;
  }
};

struct FrameItem {
  const RestoreTarget* target;
  uint64_t k;
};

// Shared state of one RestoreFrames call.
struct RestoreRun {
  const StagingPorts& ports;
  const checkpoint::ImageReader& reader;
  uint32_t frame_size;
  const std::function<void(uint64_t, uint64_t)>& progress;
  uint64_t total = 0;
  std::atomic<bool> failed{false};
  std::mutex mu;
  uint64_t done = 0;
  std::string error;

  void Fail(const std::string& e) {
    std::lock_guard<std::mutex> lock(mu);
    if (error.empty()) error = e;
    failed = true;
  }
  void Done(uint64_t n) {
    std::lock_guard<std::mutex> lock(mu);
    done += n;
    if (progress) progress(done, total);
  }
};

// One worker, its context current: decode into one buffer while the copy
// from the other runs. Each slot has its own decoder whose direct reads land
// in pinned memory, so a stored (incompressible) frame is checked and copied
// to the device from where the disk put it. Returns "" or what failed.
std::string RestoreWorker(RestoreRun& run, const std::vector<FrameItem>& items,
                          std::atomic<size_t>& next) {
  checkpoint::FrameDecoder decoders[2] = {checkpoint::FrameDecoder(run.reader),
                                          checkpoint::FrameDecoder(run.reader)};
  const size_t read_bytes = decoders[0].ReadBufferBytes();
  const driver::RealCuda& cuda = *run.ports.cuda;
  HostBuffer bufs[2] = {HostBuffer(cuda, run.frame_size), HostBuffer(cuda, run.frame_size)};
  HostBuffer reads[2] = {HostBuffer(cuda, read_bytes), HostBuffer(cuda, read_bytes)};
  for (int i = 0; i < 2; ++i) {
    if (bufs[i].data() == nullptr || reads[i].data() == nullptr) return "out of host memory";
    // Pinned memory is page-aligned as O_DIRECT needs; the heap fallback is
    // not, and the decoder then reads into an aligned buffer of its own.
    if (reads[i].pinned()) decoders[i].AdoptReadBuffer(reads[i].data(), read_bytes);
  }
  StreamPair sp{&cuda};  // destroyed (synchronized) before the buffers
  struct Guard {
    StreamPair& sp;
    ~Guard() { sp.Destroy(); }
  } guard{sp};
  if (CUresult r = sp.Create(); r != CUDA_SUCCESS)
    return "cannot create a copy stream: " + CuErr(r);
  bool pending[2] = {false, false};
  int slot = 0;
  for (size_t i; !run.failed && (i = next++) < items.size(); slot ^= 1) {
    if (pending[slot]) {
      if (CUresult r = TABLE_CALL(cuda, cuEventSynchronize, sp.done[slot]); r != CUDA_SUCCESS)
        return "copy to device: " + CuErr(r);
      pending[slot] = false;
    }
    const FrameItem& it = items[i];
    size_t raw = 0;
    const void* data = nullptr;
    if (auto s = decoders[slot].DecodeView(it.target->record, it.k, bufs[slot].data(),
                                           run.frame_size, &data, &raw);
        !s.ok())
      return s.message;
    CUdeviceptr dst = it.target->alloc.va + it.k * run.frame_size;
    CUresult r = TABLE_CALL(cuda, cuMemcpyHtoDAsync_v2, dst, data, raw, sp.stream);
    if (r == CUDA_SUCCESS) r = TABLE_CALL(cuda, cuEventRecord, sp.done[slot], sp.stream);
    if (r != CUDA_SUCCESS) return "copy to device: " + CuErr(r);
    pending[slot] = true;
    run.Done(raw);
  }
  if (CUresult r = sp.Destroy(); r != CUDA_SUCCESS) return "copy to device: " + CuErr(r);
  return "";
}

}  // namespace

checkpoint::FrameBufferAllocator PinnedFrameBuffers(const StagingPorts& ports, CUcontext ctx) {
  checkpoint::FrameBufferAllocator a;
  a.alloc = [ports, ctx](size_t n) -> void* {
    void* p = nullptr;
    // Portable: pinned for every context, not only the one that allocates it.
    CUresult r = ports.vmm->WithContext(ctx, [&] {
      return TABLE_CALL(*ports.cuda, cuMemHostAlloc, &p, n, CU_MEMHOSTALLOC_PORTABLE);
    });
    return r == CUDA_SUCCESS ? p : nullptr;
  };
  // Freed by the agent thread, which has no current context of its own.
  a.free = [ports, ctx](void* p, size_t) {
    ports.vmm->WithContext(ctx, [&] { return TABLE_CALL(*ports.cuda, cuMemFreeHost, p); });
  };
  return a;
}

CopyStreams::~CopyStreams() {
  for (PerContext& pc : contexts_) {
    ports_.vmm->WithContext(pc.ctx, [&] {
      StreamPair sp{ports_.cuda, pc.stream, {pc.done[0], pc.done[1]}};
      return sp.Destroy();
    });
  }
}

CUresult CopyStreams::For(CUcontext ctx, PerContext** out) {
  for (PerContext& pc : contexts_) {
    if (pc.ctx == ctx) {
      *out = &pc;
      return CUDA_SUCCESS;
    }
  }
  StreamPair sp{ports_.cuda};
  CUresult r = ports_.vmm->WithContext(ctx, [&] { return sp.Create(); });
  contexts_.push_back({ctx, sp.stream, {sp.done[0], sp.done[1]}});  // destroyed with the rest
  *out = &contexts_.back();
  return r;
}

std::string CopyStreams::CopyOut(const vmm::AllocationInfo& a, checkpoint::ImageWriter* w) {
  PerContext* pc = nullptr;
  if (CUresult r = For(a.ctx, &pc); r != CUDA_SUCCESS)
    return "cannot create a copy stream: " + CuErr(r);
  std::string err;
  uint64_t issued = 0;
  int open = 0;  // frames copying, not yet committed; frame k uses event k % 2
  auto commit_oldest = [&]() -> bool {
    if (CUresult r = TABLE_CALL(*ports_.cuda, cuEventSynchronize, pc->done[(issued - open) % 2]);
        r != CUDA_SUCCESS) {
      err = "copy from device: " + CuErr(r);
      return false;
    }
    --open;
    if (auto s = w->CommitFrame(); !s.ok()) err = s.message;
    return err.empty();
  };
  CUresult ctx_r = ports_.vmm->WithContext(a.ctx, [&] {
    for (size_t o = 0; o < a.size;) {
      uint8_t* buf = nullptr;
      size_t n = 0;
      if (auto s = w->NextFrame(&buf, &n); !s.ok()) {
        err = s.message;
        return CUDA_SUCCESS;
      }
      CUresult r = TABLE_CALL(*ports_.cuda, cuMemcpyDtoHAsync_v2, buf, a.va + o, n, pc->stream);
      if (r == CUDA_SUCCESS)
        r = TABLE_CALL(*ports_.cuda, cuEventRecord, pc->done[issued % 2], pc->stream);
      if (r != CUDA_SUCCESS) {
        err = "copy from device: " + CuErr(r);
        return CUDA_SUCCESS;
      }
      ++issued;
      ++open;
      o += n;
      if (open == checkpoint::ImageWriter::kMaxOpenFrames && !commit_oldest()) return CUDA_SUCCESS;
    }
    while (open > 0 && commit_oldest()) {
    }
    return CUDA_SUCCESS;
  });
  if (ctx_r != CUDA_SUCCESS && err.empty()) {
    err = "cannot make the allocation's context current: " + CuErr(ctx_r);
  }
  return err;
}

std::string RestoreFrames(const StagingPorts& ports, const checkpoint::ImageReader& reader,
                          const std::vector<RestoreTarget>& targets, int threads,
                          const std::function<void(uint64_t, uint64_t)>& progress) {
  RestoreRun run{ports, reader, reader.info().header.frame_size, progress};
  // Streams belong to a context: one pass of the workers per context.
  std::map<CUcontext, std::vector<FrameItem>> by_ctx;
  try {
    for (const RestoreTarget& t : targets) {
      const uint32_t frames = reader.records()[t.record].frame_count;
      for (uint64_t k = 0; k < frames; ++k) by_ctx[t.alloc.ctx].push_back({&t, k});
      run.total += t.alloc.size;
    }
    for (const auto& [ctx, items] : by_ctx) {
      std::atomic<size_t> next{0};
      auto work = [&, ctx = ctx] {
        std::string e;
        try {
          CUresult r = ports.vmm->WithContext(ctx, [&] {
            e = RestoreWorker(run, items, next);
            return CUDA_SUCCESS;
          });
          if (r != CUDA_SUCCESS) e = "cannot make the allocation's context current: " + CuErr(r);
        } catch (const std::exception& ex) {  // a worker thread must not terminate the process
          e = std::string("internal error: ") + ex.what();
        }
        if (!e.empty()) run.Fail(e);
      };
      std::vector<std::thread> pool;
      const size_t want = std::clamp<size_t>(static_cast<size_t>(threads), 1, items.size());
      try {
        for (size_t t = 1; t < want; ++t) pool.emplace_back(work);
      } catch (const std::exception&) {
        // Fewer threads than asked for: the ones running (and this one) do the work.
      }
      work();
      for (std::thread& t : pool) t.join();
      if (run.failed) break;
    }
  } catch (const std::exception& e) {
    run.Fail(std::string("internal error: ") + e.what());
  }
  if (run.error.empty() && run.done != run.total) {
    return "restored " + std::to_string(run.done) + " of " + std::to_string(run.total) + " bytes";
  }
  return run.error;
}

}  // namespace vgpu::residency
