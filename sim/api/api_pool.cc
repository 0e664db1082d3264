// Stream-ordered allocation and memory pools. Memory is taken from the device
// when cuMemAllocAsync is called (so later work in the stream can use it) and
// given back to the pool when the matching cuMemFreeAsync is reached in stream
// order. The pool keeps freed memory reserved up to its release threshold
// (CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, 0 by default) and releases the rest to the
// device at once; cuMemPoolTrimTo releases what is kept. Reserved bytes stay
// charged to the process on the node (cuMemGetInfo, NVML and vgpud see them
// as used, as a GPU's pool holds them), and the pool's next allocations are
// taken from them first. The pool keeps an amount, not the blocks: a reused
// allocation gets a fresh address.
#include <algorithm>
#include <atomic>
#include <mutex>
#include <unordered_set>

#include "sim/engine/address_space.h"
#include "sim/api/api_common.h"
#include "sim/engine/context.h"
#include "sim/api/graph_api.h"
#include "sim/engine/graph_memory.h"
#include "sim/engine/mem_pool.h"
#include "sim/engine/sim_state.h"
#include "sim/engine/stream.h"

using namespace vgpu::sim;  // NOLINT: entry points below are the C ABI

namespace {

struct Pool {
  int device = 0;
  CUmemPoolProps props{};
  uint64_t release_threshold = 0;
  int reuse[3] = {1, 1, 1};
  std::atomic<uint64_t> used{0};
  std::atomic<uint64_t> high{0};
  // Freed bytes kept reserved (charged on the node, not in use); g_mu guards
  // kept and reserved_high.
  uint64_t kept = 0;
  uint64_t reserved_high = 0;
  // cuMemPoolSetAccess grants per peer device (g_mu); the pool's own device
  // always has read-write access.
  CUmemAccess_flags peer[kMaxDevices] = {};
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

void NoteReserved(Pool* p) {  // g_mu held
  p->reserved_high = std::max(p->reserved_high, p->used.load() + p->kept);
}

// Gives back kept bytes until the pool reserves at most `keep` (g_mu held).
void ReleaseKept(Pool* p, uint64_t keep) {
  uint64_t reserved = p->used.load() + p->kept;
  if (reserved <= keep) return;
  uint64_t n = std::min(p->kept, reserved - keep);
  p->kept -= n;
  Node().Unreserve(p->device, n);
}

// Takes `size` bytes of the pool's kept reservation for a new allocation: the
// charge moves from the pool to the allocation (unreserved here, reserved again
// by AllocDeviceMemory). Returns what was taken, 0 if not enough is kept.
uint64_t TakeKept(Pool* p, uint64_t size) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (LivePool(reinterpret_cast<CUmemoryPool>(p)) == nullptr || p->kept < size) return 0;
  p->kept -= size;
  Node().Unreserve(p->device, size);
  return size;
}

CUresult AllocFromPool(CUdeviceptr* dptr, size_t bytes, Pool* pool, CUstream h, bool ptds) {
  if (dptr == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  Stream* s = nullptr;
  if (CUresult r = ResolveStream(h, ptds, &s); r != CUDA_SUCCESS) return r;
  if (s->capture_graph() != nullptr) {
    // Captured: a memory allocation node (graph memory, not the pool's).
    if (pool != nullptr) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    return CaptureMemAlloc(s, bytes, dptr);
  }
  if (pool == nullptr) {
    std::lock_guard<std::mutex> lock(g_mu);
    pool = DefaultPool(s->ctx()->device);
  }
  const uint64_t size = RoundUp(bytes, kPageSize);
  uint64_t taken = TakeKept(pool, size);
  CUresult r = AllocDeviceMemory(pool->device, AsHandle(s->ctx()), bytes, dptr);
  if (r != CUDA_SUCCESS) {
    if (taken != 0) {  // put the reservation back (another process may have taken it)
      std::lock_guard<std::mutex> lock(g_mu);
      if (Node().Reserve(pool->device, taken)) pool->kept += taken;
    }
    return r;
  }
  AllocInfo info;
  AddressSpace& as = AddressSpace::Get();
  as.RemoveAllocation(*dptr, &info);
  info.pool = reinterpret_cast<CUmemoryPool>(pool);
  as.AddAllocation(info);
  uint64_t used = pool->used.fetch_add(size) + size;
  uint64_t high = pool->high.load();
  while (used > high && !pool->high.compare_exchange_weak(high, used)) {
  }
  std::lock_guard<std::mutex> lock(g_mu);
  NoteReserved(pool);
  return CUDA_SUCCESS;
}

CUresult FreeAsync(CUdeviceptr dptr, CUstream h, bool ptds) {
  AllocInfo info;
  if (!LookupAllocation(dptr, &info) || info.base != dptr || info.kind != AllocKind::kDevice) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  Stream* s = nullptr;
  if (CUresult r = ResolveStream(h, ptds, &s); r != CUDA_SUCCESS) return r;
  if (s->capture_graph() != nullptr) return CaptureMemFree(s, dptr);
  // A graph allocation is freed at the call, as launches allocate at theirs
  // (graph_memory.h): a launch queued after this free may allocate it again.
  if (IsGraphAllocation(dptr)) return GraphMemFree(dptr, false);
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
      *static_cast<cuuint64_t*>(value) = p->used.load() + p->kept;
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT:
      *static_cast<cuuint64_t*>(value) = p->used.load();
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
      *static_cast<cuuint64_t*>(value) = p->reserved_high;
      return CUDA_SUCCESS;
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
      ReleaseKept(p, p->release_threshold);  // the driver would at the next synchronization
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:  // only a reset to 0 is allowed: to the current value
      if (*static_cast<cuuint64_t*>(value) != 0) return CUDA_ERROR_INVALID_VALUE;
      p->reserved_high = p->used.load() + p->kept;
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
      if (*static_cast<cuuint64_t*>(value) != 0) return CUDA_ERROR_INVALID_VALUE;
      p->high.store(p->used.load());
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
  const uint64_t size = RoundUp(info.size, kPageSize);
  std::lock_guard<std::mutex> lock(g_mu);
  Pool* p = info.pool != nullptr ? LivePool(info.pool) : nullptr;
  if (p != nullptr) p->used.fetch_sub(size);
  if (FreeDeviceMemory(ptr) != CUDA_SUCCESS || p == nullptr) return;
  // Keep the freed bytes reserved while the pool stays within its threshold;
  // the charge passes from the allocation to the pool.
  uint64_t reserved = p->used.load() + p->kept;
  if (reserved < p->release_threshold) {
    uint64_t keep = std::min<uint64_t>(size, p->release_threshold - reserved);
    if (Node().Reserve(p->device, keep)) p->kept += keep;
  }
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
  // IPC-capable pools are not modelled (MEMPOOL_SUPPORTED_HANDLE_TYPES reads
  // 0): refused as a driver refuses a handle type the device lacks.
  if (poolProps->handleTypes != CU_MEM_HANDLE_TYPE_NONE) return CUDA_ERROR_NOT_SUPPORTED;
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
  ReleaseKept(p, 0);
  g_pools->erase(p);  // kept allocated: its blocks may still be freed later
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep) {
  SIM_ENTER("cuMemPoolTrimTo");
  std::lock_guard<std::mutex> lock(g_mu);
  Pool* p = LivePool(pool);
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  ReleaseKept(p, minBytesToKeep);  // memory in use is never released
  return CUDA_SUCCESS;
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

// ---- CUDA 13's location-based pool queries and pool access ----

namespace {

// The sim's pools are device pools of pinned memory; host (HOST, HOST_NUMA)
// and managed pools are not modelled (CUDA_ERROR_NOT_SUPPORTED, a documented
// answer of these calls). Other combinations are CUDA_ERROR_INVALID_VALUE.
CUresult DevicePoolLocation(const CUmemLocation* location, CUmemAllocationType type, int* device) {
  if (location == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const CUmemLocationType t = location->type;
  if (type == CU_MEM_ALLOCATION_TYPE_PINNED) {
    if (t == CU_MEM_LOCATION_TYPE_DEVICE) {
      if (!ValidDevice(location->id)) return CUDA_ERROR_INVALID_DEVICE;
      *device = location->id;
      return CUDA_SUCCESS;
    }
    if (t == CU_MEM_LOCATION_TYPE_HOST || t == CU_MEM_LOCATION_TYPE_HOST_NUMA) return CUDA_ERROR_NOT_SUPPORTED;
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (type == CU_MEM_ALLOCATION_TYPE_MANAGED) {
    if (t == CU_MEM_LOCATION_TYPE_DEVICE || t == CU_MEM_LOCATION_TYPE_HOST ||
        t == CU_MEM_LOCATION_TYPE_HOST_NUMA || t == CU_MEM_LOCATION_TYPE_NONE) {
      return CUDA_ERROR_NOT_SUPPORTED;
    }
  }
  return CUDA_ERROR_INVALID_VALUE;
}

}  // namespace

SIM_EXPORT CUresult CUDAAPI cuMemGetDefaultMemPool(CUmemoryPool* pool_out, CUmemLocation* location, CUmemAllocationType type) {
  SIM_ENTER("cuMemGetDefaultMemPool");
  if (pool_out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  int dev = 0;
  if (CUresult r = DevicePoolLocation(location, type, &dev); r != CUDA_SUCCESS) return r;
  std::lock_guard<std::mutex> lock(g_mu);
  DefaultPool(dev);
  *pool_out = reinterpret_cast<CUmemoryPool>(g_default[dev]);
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuMemGetMemPool(CUmemoryPool* pool, CUmemLocation* location, CUmemAllocationType type) {
  SIM_ENTER("cuMemGetMemPool");
  if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  int dev = 0;
  if (CUresult r = DevicePoolLocation(location, type, &dev); r != CUDA_SUCCESS) return r;
  std::lock_guard<std::mutex> lock(g_mu);
  *pool = reinterpret_cast<CUmemoryPool>(DefaultPool(dev));
  return CUDA_SUCCESS;
}

// A pool's memory is read-write from its own device; other devices have what
// cuMemPoolSetAccess granted (none by default).
SIM_EXPORT CUresult CUDAAPI cuMemPoolGetAccess(CUmemAccess_flags* flags, CUmemoryPool memPool, CUmemLocation* location) {
  SIM_ENTER("cuMemPoolGetAccess");
  if (flags == nullptr || location == nullptr || location->type != CU_MEM_LOCATION_TYPE_DEVICE) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (!ValidDevice(location->id)) return CUDA_ERROR_INVALID_DEVICE;
  std::lock_guard<std::mutex> lock(g_mu);
  Pool* p = LivePool(memPool);
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *flags = p->device == location->id ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE : p->peer[location->id];
  return CUDA_SUCCESS;
}

namespace vgpu::sim {

CUresult CheckPoolAccess(int device, const CUmemAccessDesc& d) {
  if (RawEnum(d.location.type) != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
  if (!ValidDevice(d.location.id)) return CUDA_ERROR_INVALID_DEVICE;
  const int f = RawEnum(d.flags);
  if (f != CU_MEM_ACCESS_FLAGS_PROT_NONE && f != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
    return CUDA_ERROR_INVALID_VALUE;
  if (d.location.id == device) {
    return f == CU_MEM_ACCESS_FLAGS_PROT_READWRITE ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
  }
  if (f != CU_MEM_ACCESS_FLAGS_PROT_NONE && !State()->config.PeerAccess(device, d.location.id)) {
    return CUDA_ERROR_INVALID_DEVICE;  // no peer path, as cuCtxEnablePeerAccess would refuse
  }
  return CUDA_SUCCESS;
}

}  // namespace vgpu::sim

SIM_EXPORT CUresult CUDAAPI cuMemPoolSetAccess(CUmemoryPool pool, const CUmemAccessDesc* map,
                                               size_t count) {
  SIM_ENTER("cuMemPoolSetAccess");
  if (map == nullptr && count != 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(g_mu);
  Pool* p = LivePool(pool);
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < count; ++i) {  // all or nothing
    if (CUresult r = CheckPoolAccess(p->device, map[i]); r != CUDA_SUCCESS) return r;
  }
  for (size_t i = 0; i < count; ++i) {
    if (map[i].location.id != p->device) p->peer[map[i].location.id] = map[i].flags;
  }
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuMemSetMemPool(CUmemLocation* location, CUmemAllocationType type,
                                            CUmemoryPool pool) {
  SIM_ENTER("cuMemSetMemPool");
  int dev = 0;
  if (CUresult r = DevicePoolLocation(location, type, &dev); r != CUDA_SUCCESS) return r;
  std::lock_guard<std::mutex> lock(g_mu);
  Pool* p = LivePool(pool);
  if (p == nullptr || p->device != dev) return CUDA_ERROR_INVALID_VALUE;
  g_current[dev] = p;
  return CUDA_SUCCESS;
}

// IPC of pools: no pool is IPC-capable (cuMemPoolCreate refuses handle
// types), so every pool answers as a CU_MEM_HANDLE_TYPE_NONE pool does on a
// GPU: CUDA_ERROR_INVALID_VALUE; no handle or export data can name a pool.
SIM_EXPORT CUresult CUDAAPI cuMemPoolExportToShareableHandle(void* handle_out, CUmemoryPool pool,
                                                             CUmemAllocationHandleType handleType,
                                                             unsigned long long flags) {
  SIM_ENTER("cuMemPoolExportToShareableHandle");
  (void)handleType;
  (void)pool;
  (void)flags;
  (void)handle_out;
  return CUDA_ERROR_INVALID_VALUE;  // live or not, the pool is not IPC-capable
}

SIM_EXPORT CUresult CUDAAPI cuMemPoolImportFromShareableHandle(CUmemoryPool* pool_out, void* handle,
                                                               CUmemAllocationHandleType handleType,
                                                               unsigned long long flags) {
  SIM_ENTER("cuMemPoolImportFromShareableHandle");
  (void)handle;
  (void)handleType;
  (void)flags;
  if (pool_out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_ERROR_INVALID_VALUE;
}

SIM_EXPORT CUresult CUDAAPI cuMemPoolExportPointer(CUmemPoolPtrExportData* shareData_out,
                                                   CUdeviceptr ptr) {
  SIM_ENTER("cuMemPoolExportPointer");
  (void)ptr;
  if (shareData_out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_ERROR_INVALID_VALUE;  // no allocation comes from an IPC-capable pool
}

SIM_EXPORT CUresult CUDAAPI cuMemPoolImportPointer(CUdeviceptr* ptr_out, CUmemoryPool pool,
                                                   CUmemPoolPtrExportData* shareData) {
  SIM_ENTER("cuMemPoolImportPointer");
  (void)pool;
  if (ptr_out == nullptr || shareData == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_ERROR_INVALID_VALUE;  // only an imported pool could hold it
}
