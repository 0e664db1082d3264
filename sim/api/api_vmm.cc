// The virtual memory management API. A physical allocation is a memfd (pages
// allocated on first touch), so the same memory can be mapped at several
// device addresses and exported to other processes as a POSIX fd.
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <exception>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "sim/engine/address_space.h"
#include "sim/api/api_common.h"
#include "sim/engine/context.h"
#include "sim/engine/sim_state.h"

using namespace vgpu::sim;  // NOLINT: entry points below are the C ABI

namespace {

struct PhysAlloc {
  int fd = -1;
  size_t size = 0;
  int device = 0;
  bool charged = false;  // imported memory is charged to its exporter
  CUmemAllocationProp prop{};
  int refs = 1;          // the handle itself plus one per mapping
};

std::mutex g_mu;
auto* g_handles = new std::unordered_map<CUmemGenericAllocationHandle, PhysAlloc*>();
auto* g_mapped = new std::map<CUdeviceptr, std::pair<size_t, PhysAlloc*>>();  // va -> (size, phys)

CUmemGenericAllocationHandle HandleOf(PhysAlloc* p) {
  return reinterpret_cast<CUmemGenericAllocationHandle>(p);
}

PhysAlloc* Lookup(CUmemGenericAllocationHandle h) {
  auto it = g_handles->find(h);
  return it == g_handles->end() ? nullptr : it->second;
}

// Closing the last reference to a memfd frees its pages: ~150 ms of host
// kernel time per GiB, which a GPU's cuMemRelease (a page-table update) does
// not cost. The device capacity is returned at once (Unreserve below); a big
// memfd is closed by a short-lived thread so that the caller does not wait
// for the host to free the pages.
constexpr size_t kAsyncCloseBytes = 64ull << 20;

void CloseMemfd(int fd, size_t size) {
  if (size >= kAsyncCloseBytes) {
    try {
      std::thread([fd] { close(fd); }).detach();
      return;
    } catch (const std::exception&) {
      // No thread: close it here.
    }
  }
  close(fd);
}

void Unref(PhysAlloc* p) {  // g_mu held
  if (--p->refs > 0) return;
  g_handles->erase(HandleOf(p));
  CloseMemfd(p->fd, p->size);
  if (p->charged) Node().Unreserve(p->device, p->size);
  delete p;
}

bool ValidProp(const CUmemAllocationProp* prop) {
  return prop != nullptr && prop->type == CU_MEM_ALLOCATION_TYPE_PINNED &&
         prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE && prop->location.id >= 0 &&
         prop->location.id < Node().device_count();
}

// The memfd's name carries its device so an importing process can tell.
int DeviceOfFd(int fd) {
  char link[64], target[256] = {};
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, target, sizeof target - 1);
  int device = 0;
  const char* tag = n > 0 ? std::strstr(target, "vgpu-sim-vmm-dev") : nullptr;
  if (tag != nullptr) device = std::atoi(tag + 16);
  return device >= 0 && device < Node().device_count() ? device : 0;
}

// Removes the mappings that exactly tile [va, va+size); false if they don't.
bool UnmapRange(CUdeviceptr va, size_t size) {  // g_mu held
  CUdeviceptr p = va;
  auto it = g_mapped->find(va);
  auto first = it;
  while (p < va + size) {
    if (it == g_mapped->end() || it->first != p) return false;
    p += it->second.first;
    ++it;
  }
  if (p != va + size) return false;
  AddressSpace& as = AddressSpace::Get();
  for (auto j = first; j != it;) {
    as.RemoveMapping(j->first);
    as.Unback(j->first, j->second.first);
    Unref(j->second.second);
    j = g_mapped->erase(j);
  }
  return true;
}

}  // namespace

SIM_EXPORT CUresult CUDAAPI cuMemGetAllocationGranularity(size_t* granularity, const CUmemAllocationProp* prop, CUmemAllocationGranularity_flags option) {
  SIM_ENTER("cuMemGetAllocationGranularity");
  // Nothing in prop is checked: driver 580 answers location.id 999, an
  // invalid allocation type and an invalid location type alike (H100 and
  // H200, 2026-11-26, docs/gpu-validation.md).
  if (granularity == nullptr || prop == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *granularity = kVmmGranularity;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment, CUdeviceptr addr, unsigned long long flags) {
  SIM_ENTER("cuMemAddressReserve");
  if (ptr == nullptr || size == 0 || size % kVmmGranularity != 0 || flags != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (alignment == 0) alignment = kVmmGranularity;
  if ((alignment & (alignment - 1)) != 0 || alignment % kVmmGranularity != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  AddressSpace& as = AddressSpace::Get();
  CUdeviceptr va = 0;
  if (!as.AllocVa(size, alignment, addr, &va)) return CUDA_ERROR_OUT_OF_MEMORY;
  AllocInfo info;
  info.base = va;
  info.size = size;
  info.kind = AllocKind::kVmmReserved;
  info.ctx = AsHandle(CurrentContextOrNull());
  as.AddAllocation(info);
  *ptr = va;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  SIM_ENTER("cuMemAddressFree");
  AddressSpace& as = AddressSpace::Get();
  AllocInfo info;
  if (!as.FindAllocation(ptr, &info) || info.base != ptr || info.size != size ||
      info.kind != AllocKind::kVmmReserved) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  {
    std::lock_guard<std::mutex> lock(g_mu);
    // Mappings left behind are dropped with the range.
    for (auto it = g_mapped->lower_bound(ptr); it != g_mapped->end() && it->first < ptr + size;) {
      CUdeviceptr va = it->first;
      ++it;
      UnmapRange(va, g_mapped->at(va).first);
    }
  }
  as.RemoveAllocation(ptr, nullptr);
  as.FreeVa(ptr, size);
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size, const CUmemAllocationProp* prop, unsigned long long flags) {
  SIM_ENTER("cuMemCreate");
  if (handle == nullptr || !ValidProp(prop) || flags != 0 || size == 0 ||
      size % kVmmGranularity != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  int device = prop->location.id;
  if (!Node().Reserve(device, size)) return CUDA_ERROR_OUT_OF_MEMORY;
  char name[48];
  std::snprintf(name, sizeof name, "vgpu-sim-vmm-dev%d", device);
  int fd = memfd_create(name, MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(size)) != 0) {
    if (fd >= 0) close(fd);
    Node().Unreserve(device, size);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  auto* p = new PhysAlloc{fd, size, device, true, *prop, 1};
  std::lock_guard<std::mutex> lock(g_mu);
  g_handles->emplace(HandleOf(p), p);
  *handle = HandleOf(p);
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle handle) {
  SIM_ENTER("cuMemRelease");
  std::lock_guard<std::mutex> lock(g_mu);
  PhysAlloc* p = Lookup(handle);
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Unref(p);  // memory stays while mapped, as documented
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle, unsigned long long flags) {
  SIM_ENTER("cuMemMap");
  if (flags != 0 || size == 0 || size % kVmmGranularity != 0 || offset % kVmmGranularity != 0 ||
      ptr % kVmmGranularity != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  AddressSpace& as = AddressSpace::Get();
  AllocInfo info;
  if (!as.FindAllocation(ptr, &info) || info.kind != AllocKind::kVmmReserved ||
      ptr + size > info.base + info.size) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  std::lock_guard<std::mutex> lock(g_mu);
  PhysAlloc* p = Lookup(handle);
  if (p == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (offset > p->size || size > p->size - offset) return CUDA_ERROR_INVALID_VALUE;
  if (as.AnyMapping(ptr, size)) return CUDA_ERROR_ALREADY_MAPPED;
  if (!as.BackFile(ptr, size, p->fd, offset)) return CUDA_ERROR_OUT_OF_MEMORY;
  // Mapped but not accessible until cuMemSetAccess, like the real driver.
  as.AddMapping(ptr, size, as.Shadow(ptr), p->device, false);
  ++p->refs;
  (*g_mapped)[ptr] = {size, p};
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuMemUnmap(CUdeviceptr ptr, size_t size) {
  SIM_ENTER("cuMemUnmap");
  if (size == 0) return CUDA_ERROR_INVALID_VALUE;
  // Work in flight may still read the range: let it finish first.
  if (Context* ctx = CurrentContextOrNull(); ctx != nullptr) SynchronizeContext(ctx);
  std::lock_guard<std::mutex> lock(g_mu);
  return UnmapRange(ptr, size) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SIM_EXPORT CUresult CUDAAPI cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc, size_t count) {
  SIM_ENTER("cuMemSetAccess");
  if (desc == nullptr || count == 0 || size == 0) return CUDA_ERROR_INVALID_VALUE;
  bool accessible = false;
  for (size_t i = 0; i < count; ++i) {
    if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE || desc[i].location.id < 0 ||
        desc[i].location.id >= Node().device_count() ||
        desc[i].flags > CU_MEM_ACCESS_FLAGS_PROT_READWRITE) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    accessible = accessible || desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE;
  }
  return AddressSpace::Get().SetMappingAccess(ptr, size, accessible) ? CUDA_SUCCESS
                                                                     : CUDA_ERROR_INVALID_VALUE;
}

SIM_EXPORT CUresult CUDAAPI cuMemGetAccess(unsigned long long* flags, const CUmemLocation* location, CUdeviceptr ptr) {
  SIM_ENTER("cuMemGetAccess");
  if (flags == nullptr || location == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUdeviceptr base = 0;
  size_t size = 0;
  int device = 0;
  AddressSpace& as = AddressSpace::Get();
  if (!as.FindMapping(ptr, &base, &size, &device)) return CUDA_ERROR_INVALID_VALUE;
  *flags = as.MappingAccessible(base, nullptr) ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE
                                                : CU_MEM_ACCESS_FLAGS_PROT_NONE;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle, void* addr) {
  SIM_ENTER("cuMemRetainAllocationHandle");
  if (handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto va = reinterpret_cast<CUdeviceptr>(addr);
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_mapped->upper_bound(va);
  if (it == g_mapped->begin()) return CUDA_ERROR_INVALID_VALUE;
  --it;
  if (va - it->first >= it->second.first) return CUDA_ERROR_INVALID_VALUE;
  ++it->second.second->refs;
  *handle = HandleOf(it->second.second);
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp* prop, CUmemGenericAllocationHandle handle) {
  SIM_ENTER("cuMemGetAllocationPropertiesFromHandle");
  if (prop == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(g_mu);
  PhysAlloc* p = Lookup(handle);
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *prop = p->prop;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuMemExportToShareableHandle(void* shareableHandle, CUmemGenericAllocationHandle handle, CUmemAllocationHandleType handleType, unsigned long long flags) {
  SIM_ENTER("cuMemExportToShareableHandle");
  if (shareableHandle == nullptr || flags != 0 ||
      handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  std::lock_guard<std::mutex> lock(g_mu);
  PhysAlloc* p = Lookup(handle);
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if ((p->prop.requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) == 0) {
    return CUDA_ERROR_NOT_PERMITTED;
  }
  int fd = dup(p->fd);
  if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
  *static_cast<int*>(shareableHandle) = fd;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuMemImportFromShareableHandle(CUmemGenericAllocationHandle* handle, void* osHandle, CUmemAllocationHandleType shHandleType) {
  SIM_ENTER("cuMemImportFromShareableHandle");
  if (handle == nullptr || shHandleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  int fd = static_cast<int>(reinterpret_cast<intptr_t>(osHandle));
  struct stat st{};
  if (fd < 0 || fstat(fd, &st) != 0 || st.st_size <= 0 ||
      static_cast<size_t>(st.st_size) % kVmmGranularity != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  int own = dup(fd);
  if (own < 0) return CUDA_ERROR_OUT_OF_MEMORY;
  auto* p = new PhysAlloc{own, static_cast<size_t>(st.st_size), DeviceOfFd(own), false, {}, 1};
  p->prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p->prop.location = {CU_MEM_LOCATION_TYPE_DEVICE, p->device};
  p->prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  std::lock_guard<std::mutex> lock(g_mu);
  g_handles->emplace(HandleOf(p), p);
  *handle = HandleOf(p);
  return CUDA_SUCCESS;
}
