// Host copies of released chunks (suspend / resume, docs/vmm.md).
//
// Suspend and resume are the switch of time-slicing, so their copies must run
// at the device's DMA bandwidth. That needs two things the plain way (a fresh
// `new[]` per chunk and one synchronous copy at a time) does not have:
//   - page-locked host memory: a copy from or to pageable memory is staged by
//     the driver through a bounce buffer, and fresh memory is faulted in page
//     by page during the copy. HostPool hands out buffers that are populated
//     once and registered page-locked (cuMemHostRegister, portable), and keeps
//     them between suspend cycles, so a later suspend reuses them as they are.
//     They are our own memory (not cuMemHostAlloc's), so a context that goes
//     away takes at most the registration with it, never the memory: the next
//     Pin registers it again, or the copy runs pageable, slower but correct.
//   - several copies in flight: CopyQueue queues pieces on a few streams per
//     context and waits only when its window is full, so the device is never
//     idle between pieces and the mapping of the next chunk overlaps the copy.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <vector>

#include "driver/real_driver.h"

namespace vgpu::vmm {

struct HostBuf {
  uint8_t* p = nullptr;
  size_t size = 0;  // what was asked for; the mapping is rounded up to pages
};

class HostPool {
 public:
  // `keep_max`: at most this many bytes stay allocated between suspends.
  HostPool(const driver::RealCuda& cuda, uint64_t keep_max) : cuda_(cuda), keep_max_(keep_max) {}
  HostPool(const HostPool&) = delete;
  HostPool& operator=(const HostPool&) = delete;

  // A kept buffer of exactly `size` bytes, else a new one, its pages
  // populated; p == nullptr when the host is out of memory.
  HostBuf Take(size_t size);
  // Registers b page-locked (portable) unless it still is; the caller's
  // current context names the device. False: it stays pageable.
  bool Pin(const HostBuf& b);
  // Kept for the next suspend (freed at once beyond keep_max).
  void Give(HostBuf b);
  // Frees every kept buffer, unregistering it first (current context).
  void FreeKept();
  uint64_t kept_bytes() const { return kept_bytes_; }

 private:
  void Free(HostBuf b);
  const driver::RealCuda& cuda_;
  uint64_t keep_max_;
  std::vector<HostBuf> kept_;
  uint64_t kept_bytes_ = 0;
};

// Copies between device and host memory, pieces queued on kStreams streams
// per context with at most kWindow in flight. Not thread-safe. The
// destructor waits for every queued copy, so no DMA outlives its buffers.
class CopyQueue {
 public:
  static constexpr int kStreams = 2;
  static constexpr size_t kWindow = 8;
  static constexpr size_t kPiece = 32ull << 20;

  // `with_context`: runs f with the context current (Manager::WithContext).
  // progress(done, total) after each completed piece, in queue order.
  CopyQueue(const driver::RealCuda& cuda,
            std::function<CUresult(CUcontext, const std::function<CUresult()>&)> with_context,
            uint64_t total, const std::function<void(uint64_t, uint64_t)>& progress);
  ~CopyQueue();
  CopyQueue(const CopyQueue&) = delete;
  CopyQueue& operator=(const CopyQueue&) = delete;

  // Queues the copy of [dev, dev+n) to host (to_host) or back, in pieces;
  // `tag` names what it belongs to (completed() reports it). Waits for the
  // oldest pieces while the window is full. The first error stops the queue:
  // every later call returns it.
  CUresult Add(CUcontext ctx, bool to_host, uint8_t* host, CUdeviceptr dev, size_t n,
               const void* tag);
  // Waits for every queued piece; the first error, if any.
  CUresult Finish();
  // Whether every piece queued with `tag` completed without error.
  bool Completed(const void* tag) const;

 private:
  struct Lane {
    CUcontext ctx = nullptr;
    CUstream streams[kStreams] = {};
    int next = 0;
  };
  struct Piece {
    Lane* lane = nullptr;
    CUevent done = nullptr;
    size_t bytes = 0;
    const void* tag = nullptr;
  };
  CUresult LaneFor(CUcontext ctx, Lane** out);
  CUresult Retire();  // waits for the oldest piece in flight
  CUresult Fail(CUresult r);

  const driver::RealCuda& cuda_;
  std::function<CUresult(CUcontext, const std::function<CUresult()>&)> with_context_;
  uint64_t total_;
  std::function<void(uint64_t, uint64_t)> progress_;
  std::deque<Lane> lanes_;     // stable addresses: pieces point at their lane
  std::vector<Piece> flight_;  // oldest first
  std::vector<const void*> failed_tags_;
  uint64_t done_ = 0;
  CUresult error_ = CUDA_SUCCESS;
};

}  // namespace vgpu::vmm
