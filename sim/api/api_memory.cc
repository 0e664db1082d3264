// Linear, pitched, managed and host-pinned memory; queries on pointers.
#include <sys/mman.h>

#include <cstring>

#include "sim/api/api_common.h"
#include "sim/engine/address_space.h"
#include "sim/engine/context.h"
#include "sim/engine/graph_memory.h"
#include "sim/engine/ipc.h"
#include "sim/engine/sim_state.h"

using namespace vgpu::sim;  // NOLINT: entry points below are the C ABI

namespace {

constexpr size_t kPitchAlignment = 512;

CUresult RequireContext(Context** out) {
  *out = CurrentContextOrNull();
  return *out == nullptr ? CUDA_ERROR_INVALID_CONTEXT : CUDA_SUCCESS;
}

// Host memory the device can address at the same pointer (UVA).
CUresult AllocHostVisible(size_t bytes, AllocKind kind, int device, unsigned flags, void** out) {
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  size_t size = RoundUp(bytes, kPageSize);
  // Page-locked memory is resident from the allocation on (the driver pins
  // every page then): its first copy does not fault pages in. Managed memory
  // stays lazy, as the driver's migrates on touch.
  int populate = kind == AllocKind::kHostPinned ? MAP_POPULATE : 0;
  void* p =
      mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | populate, -1, 0);
  if (p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  AllocInfo info;
  info.base = reinterpret_cast<CUdeviceptr>(p);
  info.size = bytes;
  info.kind = kind;
  info.device = device;
  info.ctx = AsHandle(CurrentContextOrNull());
  info.host = p;
  info.flags = flags;
  AddressSpace::Get().AddAllocation(info);
  AddressSpace::Get().AddMapping(info.base, size, p, device, true);
  *out = p;
  return CUDA_SUCCESS;
}

// Registering page-locks the range: the driver faults every page in then, so
// copies from and to it never do. Best effort (kernels before 5.14 lack the
// advice; the pages then come in on first touch).
void PinPages(void* p, size_t bytes, bool read_only) {
  constexpr int kPopulateRead = 22, kPopulateWrite = 23;  // MADV_POPULATE_*
  auto page = reinterpret_cast<uintptr_t>(p) & ~(uintptr_t{kPageSize} - 1);
  size_t len = RoundUp(reinterpret_cast<uintptr_t>(p) + bytes - page, kPageSize);
  madvise(reinterpret_cast<void*>(page), len, read_only ? kPopulateRead : kPopulateWrite);
}

CUresult FreeHostVisible(void* p, AllocKind kind) {
  AddressSpace& as = AddressSpace::Get();
  AllocInfo info;
  auto base = reinterpret_cast<CUdeviceptr>(p);
  if (!as.FindAllocation(base, &info) || info.base != base || info.kind != kind) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (Context* c = AsContext(info.ctx); c != nullptr && IsValidContext(info.ctx)) {
    SynchronizeContext(c);
  }
  as.RemoveAllocation(base, nullptr);
  as.RemoveMapping(base);
  if (kind == AllocKind::kManaged) ForgetManagedRange(base, info.size);
  munmap(p, RoundUp(info.size, kPageSize));
  return CUDA_SUCCESS;
}

template <typename T>
void Put(void* data, T value) {
  std::memcpy(data, &value, sizeof(T));
}

// One pointer attribute; false if it does not apply to this pointer.
bool PointerAttribute(CUpointer_attribute a, const AllocInfo& info, CUdeviceptr p,
                      CUdeviceptr range_base, size_t range_size, void* data) {
  bool host_visible = info.kind == AllocKind::kHostPinned || info.kind == AllocKind::kManaged;
  switch (a) {
    case CU_POINTER_ATTRIBUTE_CONTEXT: Put(data, info.ctx); return true;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      Put<unsigned>(data, info.kind == AllocKind::kHostPinned ? CU_MEMORYTYPE_HOST
                                                              : CU_MEMORYTYPE_DEVICE);
      return true;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER: Put(data, p); return true;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
      if (!host_visible) return false;
      Put(data, reinterpret_cast<void*>(p));
      return true;
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS: Put<int>(data, info.sync_memops ? 1 : 0); return true;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID: Put<unsigned long long>(data, info.buffer_id); return true;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED: Put<int>(data, info.kind == AllocKind::kManaged); return true;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: Put<int>(data, info.device < 0 ? 0 : info.device); return true;
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
      Put<int>(data, LegacyIpcCapable(info));
      return true;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: Put(data, range_base); return true;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE: Put(data, range_size); return true;
    case CU_POINTER_ATTRIBUTE_MAPPED: Put<int>(data, 1); return true;
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
      Put<unsigned long long>(data, info.kind == AllocKind::kVmmReserved
                                        ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
                                        : CU_MEM_HANDLE_TYPE_NONE);
      return true;
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE: Put<int>(data, 0); return true;
    case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
      Put<int>(data, CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE);
      return true;
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE: Put(data, info.pool); return true;
    case CU_POINTER_ATTRIBUTE_MAPPING_SIZE: Put(data, range_size); return true;
    case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR: Put(data, reinterpret_cast<void*>(range_base)); return true;
    case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID: Put<unsigned long long>(data, info.buffer_id); return true;
    default: return false;
  }
}

// The allocation (or VMM mapping) that p belongs to, and its range.
bool DescribePointer(CUdeviceptr p, AllocInfo* info, CUdeviceptr* base, size_t* size) {
  AddressSpace& as = AddressSpace::Get();
  if (!as.FindAllocation(p, info)) return false;
  *base = info->base;
  *size = info->size;
  if (info->kind == AllocKind::kVmmReserved) {
    int device = -1;
    if (!as.FindMapping(p, base, size, &device)) return false;
    info->device = device;
  }
  return true;
}

}  // namespace

SIM_EXPORT CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize) {
  SIM_ENTER("cuMemAlloc_v2");
  if (dptr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Context* ctx = nullptr;
  if (CUresult r = RequireContext(&ctx); r != CUDA_SUCCESS) return r;
  return AllocDeviceMemory(ctx->device, AsHandle(ctx), bytesize, dptr);
}

SIM_EXPORT CUresult CUDAAPI cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pPitch,
                                               size_t WidthInBytes, size_t Height,
                                               unsigned int ElementSizeBytes) {
  SIM_ENTER("cuMemAllocPitch_v2");
  if (dptr == nullptr || pPitch == nullptr || WidthInBytes == 0 || Height == 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  Context* ctx = nullptr;
  if (CUresult r = RequireContext(&ctx); r != CUDA_SUCCESS) return r;
  size_t pitch = RoundUp(WidthInBytes, kPitchAlignment);
  if (Height > SIZE_MAX / pitch) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult r = AllocDeviceMemory(ctx->device, AsHandle(ctx), pitch * Height, dptr);
  if (r == CUDA_SUCCESS) *pPitch = pitch;
  return r;
}

SIM_EXPORT CUresult CUDAAPI cuMemFree_v2(CUdeviceptr dptr) {
  SIM_ENTER("cuMemFree_v2");
  if (dptr == 0) return CUDA_SUCCESS;
  AllocInfo info;
  if (!LookupAllocation(dptr, &info) || info.base != dptr) return CUDA_ERROR_INVALID_VALUE;
  if (info.kind == AllocKind::kManaged) return FreeHostVisible(reinterpret_cast<void*>(dptr), info.kind);
  if (info.kind != AllocKind::kDevice && info.kind != AllocKind::kExternal) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (IsGraphAllocation(dptr)) {  // its launches ran on the current context's streams
    if (CUresult r = GraphMemFree(dptr, true); r != CUDA_SUCCESS) return r;
    if (Context* c = CurrentContextOrNull()) SynchronizeContext(c);
    return GraphMemFree(dptr, false);
  }
  // Like the real driver, freeing waits for work that may still use the memory.
  if (IsValidContext(info.ctx)) SynchronizeContext(AsContext(info.ctx));
  return info.kind == AllocKind::kExternal ? FreeExternalBuffer(dptr) : FreeDeviceMemory(dptr);
}

SIM_EXPORT CUresult CUDAAPI cuMemAllocManaged(CUdeviceptr* dptr, size_t bytesize,
                                              unsigned int flags) {
  SIM_ENTER("cuMemAllocManaged");
  if (dptr == nullptr || (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  Context* ctx = nullptr;
  if (CUresult r = RequireContext(&ctx); r != CUDA_SUCCESS) return r;
  void* p = nullptr;
  CUresult r = AllocHostVisible(bytesize, AllocKind::kManaged, ctx->device, 0, &p);
  if (r == CUDA_SUCCESS) *dptr = reinterpret_cast<CUdeviceptr>(p);
  return r;
}

SIM_EXPORT CUresult CUDAAPI cuMemHostAlloc(void** pp, size_t bytesize, unsigned int Flags) {
  SIM_ENTER("cuMemHostAlloc");
  if (pp == nullptr || (Flags & ~0xfu) != 0) return CUDA_ERROR_INVALID_VALUE;
  Context* ctx = nullptr;
  if (CUresult r = RequireContext(&ctx); r != CUDA_SUCCESS) return r;
  return AllocHostVisible(bytesize, AllocKind::kHostPinned, ctx->device, Flags, pp);
}

SIM_EXPORT CUresult CUDAAPI cuMemAllocHost_v2(void** pp, size_t bytesize) {
  SIM_ENTER("cuMemAllocHost_v2");
  return cuMemHostAlloc(pp, bytesize, 0);
}

SIM_EXPORT CUresult CUDAAPI cuMemFreeHost(void* p) {
  SIM_ENTER("cuMemFreeHost");
  return FreeHostVisible(p, AllocKind::kHostPinned);
}

SIM_EXPORT CUresult CUDAAPI cuMemHostRegister_v2(void* p, size_t bytesize, unsigned int Flags) {
  SIM_ENTER("cuMemHostRegister_v2");
  if (p == nullptr || bytesize == 0 || (Flags & ~0xfu) != 0) return CUDA_ERROR_INVALID_VALUE;
  Context* ctx = nullptr;
  if (CUresult r = RequireContext(&ctx); r != CUDA_SUCCESS) return r;
  AddressSpace& as = AddressSpace::Get();
  auto base = reinterpret_cast<CUdeviceptr>(p);
  if (as.FindAllocation(base, nullptr) || as.AnyMapping(base, bytesize)) {
    return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  }
  PinPages(p, bytesize, (Flags & CU_MEMHOSTREGISTER_READ_ONLY) != 0);
  AllocInfo info;
  info.base = base;
  info.size = bytesize;
  info.kind = AllocKind::kHostPinned;
  info.device = ctx->device;
  info.ctx = AsHandle(ctx);
  info.host = p;
  info.flags = Flags;
  as.AddAllocation(info);
  as.AddMapping(base, bytesize, p, ctx->device, true);
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuMemHostUnregister(void* p) {
  SIM_ENTER("cuMemHostUnregister");
  AddressSpace& as = AddressSpace::Get();
  auto base = reinterpret_cast<CUdeviceptr>(p);
  AllocInfo info;
  if (p == nullptr || !as.FindAllocation(base, &info) || info.base != base ||
      info.kind != AllocKind::kHostPinned) {
    return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
  }
  as.RemoveAllocation(base, nullptr);
  as.RemoveMapping(base);
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuMemHostGetDevicePointer_v2(CUdeviceptr* pdptr, void* p,
                                                         unsigned int Flags) {
  SIM_ENTER("cuMemHostGetDevicePointer_v2");
  if (pdptr == nullptr || Flags != 0) return CUDA_ERROR_INVALID_VALUE;
  AllocInfo info;
  if (!LookupAllocation(reinterpret_cast<CUdeviceptr>(p), &info) ||
      info.kind != AllocKind::kHostPinned) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *pdptr = reinterpret_cast<CUdeviceptr>(p);
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuMemHostGetFlags(unsigned int* pFlags, void* p) {
  SIM_ENTER("cuMemHostGetFlags");
  AllocInfo info;
  if (pFlags == nullptr || !LookupAllocation(reinterpret_cast<CUdeviceptr>(p), &info) ||
      info.kind != AllocKind::kHostPinned) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *pFlags = info.flags | CU_MEMHOSTALLOC_DEVICEMAP;  // every allocation is mapped under UVA
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuMemGetInfo_v2(size_t* free, size_t* total) {
  SIM_ENTER("cuMemGetInfo_v2");
  if (free == nullptr || total == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Context* ctx = nullptr;
  if (CUresult r = RequireContext(&ctx); r != CUDA_SUCCESS) return r;
  const DeviceState& d = Node().device(ctx->device);
  uint64_t used = d.used_bytes.load();
  *total = d.total_bytes;
  *free = used >= d.total_bytes ? 0 : d.total_bytes - used;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuMemGetAddressRange_v2(CUdeviceptr* pbase, size_t* psize,
                                                    CUdeviceptr dptr) {
  SIM_ENTER("cuMemGetAddressRange_v2");
  AllocInfo info;
  CUdeviceptr base = 0;
  size_t size = 0;
  if (!DescribePointer(dptr, &info, &base, &size)) return CUDA_ERROR_NOT_FOUND;
  if (pbase != nullptr) *pbase = base;
  if (psize != nullptr) *psize = size;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuPointerGetAttribute(void* data, CUpointer_attribute attribute,
                                                  CUdeviceptr ptr) {
  SIM_ENTER("cuPointerGetAttribute");
  if (data == nullptr) return CUDA_ERROR_INVALID_VALUE;
  AllocInfo info;
  CUdeviceptr base = 0;
  size_t size = 0;
  if (!DescribePointer(ptr, &info, &base, &size)) return CUDA_ERROR_INVALID_VALUE;
  return PointerAttribute(attribute, info, ptr, base, size, data) ? CUDA_SUCCESS
                                                                  : CUDA_ERROR_INVALID_VALUE;
}

SIM_EXPORT CUresult CUDAAPI cuPointerGetAttributes(unsigned int numAttributes,
                                                   CUpointer_attribute* attributes, void** data,
                                                   CUdeviceptr ptr) {
  SIM_ENTER("cuPointerGetAttributes");
  if (numAttributes == 0 || attributes == nullptr || data == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  AllocInfo info;
  CUdeviceptr base = 0;
  size_t size = 0;
  bool known = DescribePointer(ptr, &info, &base, &size);
  for (unsigned i = 0; i < numAttributes; ++i) {
    if (data[i] == nullptr) return CUDA_ERROR_INVALID_VALUE;
    // Unknown pointers read as zero/null here, unlike cuPointerGetAttribute.
    unsigned char zero[16] = {};
    if (!known || !PointerAttribute(attributes[i], info, ptr, base, size, data[i])) {
      size_t n = attributes[i] == CU_POINTER_ATTRIBUTE_MEMORY_TYPE ||
                         attributes[i] == CU_POINTER_ATTRIBUTE_IS_MANAGED ||
                         attributes[i] == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL ||
                         attributes[i] == CU_POINTER_ATTRIBUTE_SYNC_MEMOPS ||
                         attributes[i] == CU_POINTER_ATTRIBUTE_MAPPED
                     ? sizeof(int)
                     : sizeof(void*);
      std::memcpy(data[i], zero, n);
      if (attributes[i] == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL) Put<int>(data[i], -2);
    }
  }
  return CUDA_SUCCESS;
}

// Only CU_POINTER_ATTRIBUTE_SYNC_MEMOPS can be set (cuda.h); it applies to the
// whole allocation containing ptr. Setting it waits for the synchronous memory
// operations still pending on the region: the memsets that run asynchronously
// on device memory, i.e. the allocation's context's work.
SIM_EXPORT CUresult CUDAAPI cuPointerSetAttribute(const void* value, CUpointer_attribute attribute,
                                                  CUdeviceptr ptr) {
  SIM_ENTER("cuPointerSetAttribute");
  if (value == nullptr || attribute != CU_POINTER_ATTRIBUTE_SYNC_MEMOPS) return CUDA_ERROR_INVALID_VALUE;
  AllocInfo info;
  CUdeviceptr base = 0;
  size_t size = 0;
  if (!DescribePointer(ptr, &info, &base, &size)) return CUDA_ERROR_INVALID_VALUE;
  // Memory mapped with cuMemCreate/cuMemMap: driver 580 answers NOT_SUPPORTED
  // (H100, 2026-11-26, seen through libvgpu's VMM-backed cuMemAlloc).
  if (info.kind == AllocKind::kVmmReserved) return CUDA_ERROR_NOT_SUPPORTED;
  unsigned v = 0;
  std::memcpy(&v, value, sizeof v);
  if (v != 0 && IsValidContext(info.ctx)) SynchronizeContext(AsContext(info.ctx));
  AddressSpace::Get().SetSyncMemops(ptr, v != 0);
  return CUDA_SUCCESS;
}

// The CUDA 2.0 ABI with 32-bit device pointers. Every simulated device address
// lies above 4 GiB (as on real 64-bit systems), so it can never be honoured.
// (CUdeviceptr_v1 is unsigned int; cuda.h declares it only for the driver.)
#undef cuMemAlloc
extern "C" CUresult CUDAAPI cuMemAlloc(unsigned int* dptr, unsigned int bytesize);
SIM_EXPORT CUresult CUDAAPI cuMemAlloc(unsigned int* dptr, unsigned int bytesize) {
  SIM_ENTER("cuMemAlloc");
  return dptr == nullptr ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_SUPPORTED;
}
