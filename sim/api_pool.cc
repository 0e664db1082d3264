// Stream-ordered allocation and memory pools. Memory is taken from the device
// when cuMemAllocAsync is called (so later work in the stream can use it) and
// returned when the matching cuMemFreeAsync is reached in stream order. Pools
// do not cache freed blocks: reserved memory always equals used memory, which
// is what a pool with release threshold 0 shows after each synchronization.
#include <algorithm>
#include <atomic>
#include <mutex>
#include <unordered_set>

#include "sim/address_space.h"
#include "sim/api_common.h"
#include "sim/context.h"
#include "sim/mem_pool.h"
#include "sim/sim_state.h"
#include "sim/stream.h"

using namespace vgpu::sim;  // NOLINT: entry points below are the C ABI

namespace {

struct Pool {
  int device = 0;
  CUmemPoolProps props{};
  uint64_t release_threshold = 0;
  int reuse[3] = {1, 1, 1};
  std::atomic<uint64_t> used{0};
  std::atomic<uint64_t> high{0};
};

std::mutex g_mu;
auto* g_pools = new std::unordered_set<Pool*>();
Pool* g_default[kMaxDevices] = {};
Pool* g_current[kMaxDevices] = {};

Pool* DefaultPool(int device) {  // g_mu held
  if (g_default[device] == nullptr) {
    auto* p = new Pool();
    p->device = device;
    p->props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    p->props.location = {CU_MEM_LOCATION_TYPE_DEVICE, device};
    g_pools->insert(p);
    g_default[device] = p;
  }
  return g_current[device] != nullptr ? g_current[device] : g_default[device];
}

Pool* LivePool(CUmemoryPool h) {  // g_mu held
  auto* p = reinterpret_cast<Pool*>(h);
  return g_pools->count(p) != 0 ? p : nullptr;
}

CUresult AllocFromPool(CUdeviceptr* dptr, size_t bytes, Pool* pool, CUstream h, bool ptds) {
  if (dptr == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  Stream* s = nullptr;
  if (CUresult r = ResolveStream(h, ptds, &s); r != CUDA_SUCCESS) return r;
  if (s->capture_graph() != nullptr) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  if (pool == nullptr) {
    std::lock_guard<std::mutex> lock(g_mu);
    pool = DefaultPool(s->ctx()->device);
  }
  CUresult r = AllocDeviceMemory(pool->device, AsHandle(s->ctx()), bytes, dptr);
  if (r != CUDA_SUCCESS) return r;
  AllocInfo info;
  AddressSpace& as = AddressSpace::Get();
  as.RemoveAllocation(*dptr, &info);
  info.pool = reinterpret_cast<CUmemoryPool>(pool);
  as.AddAllocation(info);
  uint64_t used = pool->used.fetch_add(RoundUp(bytes, kPageSize)) + RoundUp(bytes, kPageSize);
  uint64_t high = pool->high.load();
  while (used > high && !pool->high.compare_exchange_weak(high, used)) {
  }
  return CUDA_SUCCESS;
}

CUresult FreeAsync(CUdeviceptr dptr, CUstream h, bool ptds) {
  AllocInfo info;
  if (!LookupAllocation(dptr, &info) || info.base != dptr || info.kind != AllocKind::kDevice) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  Stream* s = nullptr;
  if (CUresult r = ResolveStream(h, ptds, &s); r != CUDA_SUCCESS) return r;
  if (s->capture_graph() != nullptr) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  Op* op = s->Begin();
  op->kind = OpKind::kFreeAsync;
  op->free_ptr = dptr;
  s->Commit();
  return CUDA_SUCCESS;
}

CUresult GetAttr(Pool* p, CUmemPool_attribute attr, void* value) {
  switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
      *static_cast<int*>(value) = p->reuse[attr - 1];
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
      *static_cast<cuuint64_t*>(value) = p->release_threshold;
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT:
      *static_cast<cuuint64_t*>(value) = p->used.load();
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
      *static_cast<cuuint64_t*>(value) = p->high.load();
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult SetAttr(Pool* p, CUmemPool_attribute attr, void* value) {
  switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
      p->reuse[attr - 1] = *static_cast<int*>(value);
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
      p->release_threshold = *static_cast<cuuint64_t*>(value);
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
      if (*static_cast<cuuint64_t*>(value) != 0) return CUDA_ERROR_INVALID_VALUE;
      p->high.store(p->used.load());  // only a reset to 0 is allowed
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

}  // namespace

namespace vgpu::sim {

void ReleaseStreamOrdered(CUdeviceptr ptr) {
  AllocInfo info;
  if (!LookupAllocation(ptr, &info) || info.base != ptr) return;
  if (info.pool != nullptr) {
    std::lock_guard<std::mutex> lock(g_mu);
    if (Pool* p = LivePool(info.pool); p != nullptr) p->used.fetch_sub(RoundUp(info.size, kPageSize));
  }
  FreeDeviceMemory(ptr);
}

}  // namespace vgpu::sim

SIM_EXPORT CUresult CUDAAPI cuMemAllocAsync(CUdeviceptr* dptr, size_t bytesize, CUstream hStream) {
  SIM_ENTER("cuMemAllocAsync");
  return AllocFromPool(dptr, bytesize, nullptr, hStream, false);
}
SIM_EXPORT CUresult CUDAAPI cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUstream hStream) {
  SIM_ENTER("cuMemAllocAsync_ptsz");
  return AllocFromPool(dptr, bytesize, nullptr, hStream, true);
}

SIM_EXPORT CUresult CUDAAPI cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream) {
  SIM_ENTER("cuMemAllocFromPoolAsync");
  Pool* p = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    p = LivePool(pool);
  }
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return AllocFromPool(dptr, bytesize, p, hStream, false);
}
SIM_EXPORT CUresult CUDAAPI cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream) {
  SIM_ENTER("cuMemAllocFromPoolAsync_ptsz");
  Pool* p = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    p = LivePool(pool);
  }
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return AllocFromPool(dptr, bytesize, p, hStream, true);
}

SIM_EXPORT CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) {
  SIM_ENTER("cuMemFreeAsync");
  return FreeAsync(dptr, hStream, false);
}
SIM_EXPORT CUresult CUDAAPI cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) {
  SIM_ENTER("cuMemFreeAsync_ptsz");
  return FreeAsync(dptr, hStream, true);
}

SIM_EXPORT CUresult CUDAAPI cuDeviceGetDefaultMemPool(CUmemoryPool* pool_out, CUdevice dev) {
  SIM_ENTER("cuDeviceGetDefaultMemPool");
  if (pool_out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (dev < 0 || dev >= Node().device_count()) return CUDA_ERROR_INVALID_DEVICE;
  std::lock_guard<std::mutex> lock(g_mu);
  DefaultPool(dev);
  *pool_out = reinterpret_cast<CUmemoryPool>(g_default[dev]);
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuDeviceGetMemPool(CUmemoryPool* pool, CUdevice dev) {
  SIM_ENTER("cuDeviceGetMemPool");
  if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (dev < 0 || dev >= Node().device_count()) return CUDA_ERROR_INVALID_DEVICE;
  std::lock_guard<std::mutex> lock(g_mu);
  *pool = reinterpret_cast<CUmemoryPool>(DefaultPool(dev));
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool) {
  SIM_ENTER("cuDeviceSetMemPool");
  if (dev < 0 || dev >= Node().device_count()) return CUDA_ERROR_INVALID_DEVICE;
  std::lock_guard<std::mutex> lock(g_mu);
  Pool* p = LivePool(pool);
  if (p == nullptr || p->device != dev) return CUDA_ERROR_INVALID_VALUE;
  g_current[dev] = p;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuMemPoolCreate(CUmemoryPool* pool, const CUmemPoolProps* poolProps) {
  SIM_ENTER("cuMemPoolCreate");
  if (pool == nullptr || poolProps == nullptr ||
      poolProps->allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
      poolProps->location.type != CU_MEM_LOCATION_TYPE_DEVICE || poolProps->location.id < 0 ||
      poolProps->location.id >= Node().device_count()) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  auto* p = new Pool();
  p->device = poolProps->location.id;
  p->props = *poolProps;
  std::lock_guard<std::mutex> lock(g_mu);
  g_pools->insert(p);
  *pool = reinterpret_cast<CUmemoryPool>(p);
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuMemPoolDestroy(CUmemoryPool pool) {
  SIM_ENTER("cuMemPoolDestroy");
  std::lock_guard<std::mutex> lock(g_mu);
  Pool* p = LivePool(pool);
  if (p == nullptr || p == g_default[p->device]) return CUDA_ERROR_INVALID_VALUE;
  if (g_current[p->device] == p) g_current[p->device] = nullptr;
  g_pools->erase(p);  // kept allocated: its blocks may still be freed later
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep) {
  SIM_ENTER("cuMemPoolTrimTo");
  std::lock_guard<std::mutex> lock(g_mu);
  return LivePool(pool) != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SIM_EXPORT CUresult CUDAAPI cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void* value) {
  SIM_ENTER("cuMemPoolGetAttribute");
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(g_mu);
  Pool* p = LivePool(pool);
  return p == nullptr ? CUDA_ERROR_INVALID_VALUE : GetAttr(p, attr, value);
}

SIM_EXPORT CUresult CUDAAPI cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void* value) {
  SIM_ENTER("cuMemPoolSetAttribute");
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(g_mu);
  Pool* p = LivePool(pool);
  return p == nullptr ? CUDA_ERROR_INVALID_VALUE : SetAttr(p, attr, value);
}
