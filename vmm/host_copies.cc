#include "vmm/host_copies.h"

#include <sys/mman.h>

#include <algorithm>

namespace vgpu::vmm {
namespace {

constexpr size_t kPage = 4096;
size_t Pages(size_t n) { return (n + kPage - 1) / kPage * kPage; }

}  // namespace

HostBuf HostPool::Take(size_t size) {
  for (size_t i = kept_.size(); i-- > 0;) {  // newest first
    if (kept_[i].size != size) continue;
    HostBuf b = kept_[i];
    kept_.erase(kept_.begin() + static_cast<std::ptrdiff_t>(i));
    kept_bytes_ -= b.size;
    return b;
  }
  // Populated now: a copy into fresh memory would fault every page in during
  // the DMA, at a fraction of the copy's bandwidth.
  void* p = mmap(nullptr, Pages(size), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (p == MAP_FAILED) return {};
  return {static_cast<uint8_t*>(p), size};
}

bool HostPool::Pin(const HostBuf& b) {
  CUresult r =
      TABLE_CALL(cuda_, cuMemHostRegister_v2, b.p, Pages(b.size), CU_MEMHOSTREGISTER_PORTABLE);
  return r == CUDA_SUCCESS || r == CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
}

void HostPool::Give(HostBuf b) {
  if (b.p == nullptr) return;
  if (kept_bytes_ + b.size > keep_max_) return Free(b);
  kept_bytes_ += b.size;
  kept_.push_back(b);
}

void HostPool::FreeKept() {
  for (const HostBuf& b : kept_) Free(b);
  kept_.clear();
  kept_bytes_ = 0;
}

void HostPool::Free(HostBuf b) {
  // Unregistered first: a registration left on an unmapped range would
  // make the driver take a later mapping at that address for this one. One
  // that is gone (its context was destroyed) says NOT_REGISTERED.
  CUresult r = TABLE_CALL(cuda_, cuMemHostUnregister, b.p);
  if (r == CUDA_SUCCESS || r == CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED ||
      r == CUDA_ERROR_NOT_SUPPORTED) {
    munmap(b.p, Pages(b.size));
  }
  // Else (no context to ask, say) the memory stays mapped: a leak, never a
  // stale registration.
}

CopyQueue::CopyQueue(
    const driver::RealCuda& cuda,
    std::function<CUresult(CUcontext, const std::function<CUresult()>&)> with_context,
    uint64_t total, const std::function<void(uint64_t, uint64_t)>& progress)
    : cuda_(cuda), with_context_(std::move(with_context)), total_(total), progress_(progress) {}

CopyQueue::~CopyQueue() {
  Finish();
  for (Lane& l : lanes_) {
    with_context_(l.ctx, [&] {
      for (CUstream s : l.streams) {
        if (s != nullptr) TABLE_CALL(cuda_, cuStreamDestroy_v2, s);
      }
      return CUDA_SUCCESS;
    });
  }
}

CUresult CopyQueue::LaneFor(CUcontext ctx, Lane** out) {
  for (Lane& l : lanes_) {
    if (l.ctx == ctx) {
      *out = &l;
      return CUDA_SUCCESS;
    }
  }
  Lane& l = lanes_.emplace_back();
  l.ctx = ctx;
  *out = &l;
  // Non-blocking: the application's legacy default stream (drained, but not
  // ours) must not serialize with the copies.
  return with_context_(ctx, [&] {
    for (CUstream& s : l.streams) {
      if (CUresult r = TABLE_CALL(cuda_, cuStreamCreate, &s, CU_STREAM_NON_BLOCKING);
          r != CUDA_SUCCESS) {
        s = nullptr;
        return r;
      }
    }
    return CUDA_SUCCESS;
  });
}

CUresult CopyQueue::Fail(CUresult r) {
  if (error_ == CUDA_SUCCESS) error_ = r;
  return error_;
}

CUresult CopyQueue::Add(CUcontext ctx, bool to_host, uint8_t* host, CUdeviceptr dev, size_t n,
                        const void* tag) {
  if (error_ != CUDA_SUCCESS) {
    failed_tags_.push_back(tag);
    return error_;
  }
  Lane* lane = nullptr;
  if (CUresult r = LaneFor(ctx, &lane); r != CUDA_SUCCESS) {
    failed_tags_.push_back(tag);
    return Fail(r);
  }
  for (size_t o = 0; o < n; o += kPiece) {
    while (flight_.size() >= kWindow) {
      if (CUresult r = Retire(); r != CUDA_SUCCESS) {
        failed_tags_.push_back(tag);
        return r;
      }
    }
    size_t len = std::min(kPiece, n - o);
    Piece piece{lane, nullptr, len, tag};
    CUstream s = lane->streams[lane->next];
    lane->next = (lane->next + 1) % kStreams;
    CUresult r = with_context_(ctx, [&] {
      CUresult q = to_host ? TABLE_CALL(cuda_, cuMemcpyDtoHAsync_v2, host + o, dev + o, len, s)
                           : TABLE_CALL(cuda_, cuMemcpyHtoDAsync_v2, dev + o, host + o, len, s);
      if (q == CUDA_SUCCESS)
        q = TABLE_CALL(cuda_, cuEventCreate, &piece.done, CU_EVENT_DISABLE_TIMING);
      if (q == CUDA_SUCCESS) q = TABLE_CALL(cuda_, cuEventRecord, piece.done, s);
      return q;
    });
    if (r != CUDA_SUCCESS) {
      if (piece.done != nullptr) TABLE_CALL(cuda_, cuEventDestroy_v2, piece.done);
      failed_tags_.push_back(tag);
      return Fail(r);
    }
    flight_.push_back(piece);
  }
  return CUDA_SUCCESS;
}

CUresult CopyQueue::Retire() {
  Piece p = flight_.front();
  flight_.erase(flight_.begin());
  CUresult r = TABLE_CALL(cuda_, cuEventSynchronize, p.done);
  TABLE_CALL(cuda_, cuEventDestroy_v2, p.done);
  if (r != CUDA_SUCCESS) {
    failed_tags_.push_back(p.tag);
    return Fail(r);
  }
  if (error_ != CUDA_SUCCESS) return error_;
  done_ += p.bytes;
  if (progress_) progress_(done_, total_);
  return CUDA_SUCCESS;
}

CUresult CopyQueue::Finish() {
  while (!flight_.empty()) Retire();  // every piece is waited for, failed or not
  for (Lane& l : lanes_) {
    with_context_(l.ctx, [&] {
      for (CUstream s : l.streams) {
        if (s != nullptr) TABLE_CALL(cuda_, cuStreamSynchronize, s);
      }
      return CUDA_SUCCESS;
    });
  }
  return error_;
}

bool CopyQueue::Completed(const void* tag) const {
  return std::find(failed_tags_.begin(), failed_tags_.end(), tag) == failed_tags_.end();
}

}  // namespace vgpu::vmm
