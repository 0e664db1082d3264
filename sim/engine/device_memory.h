// Device address space of the simulated GPU within one process.
//
// Device pointers live in a window reserved PROT_NONE in the host address
// space, so a host dereference of a device pointer faults instead of silently
// reading memory. Backing pages live in a shadow window at a fixed distance, so
// translating a device address is one range check and an add. cuMemAlloc
// memory is anonymous until exported through CUDA IPC (then a memfd, ipc.h);
// cuMemCreate memory is a memfd. Pages are allocated by the host kernel only
// when first touched.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>

namespace vgpu::sim {

enum class AllocKind : uint8_t {
  kDevice,       // cuMemAlloc / pitch / async / pool / module globals
  kVmmReserved,  // cuMemAddressReserve range (mapped piecewise)
  kHostPinned,   // cuMemAllocHost / cuMemHostAlloc / cuMemHostRegister (device ptr == host ptr)
  kManaged,      // cuMemAllocManaged (host-accessible)
  kExternal,     // cuExternalMemoryGetMappedBuffer: another allocation's memory, freed by cuMemFree
  kIpcImported,  // cuIpcOpenMemHandle: another process's allocation, closed by cuIpcCloseMemHandle
};

struct AllocInfo {
  CUdeviceptr base = 0;
  size_t size = 0;
  AllocKind kind = AllocKind::kDevice;
  int device = -1;
  CUcontext ctx = nullptr;
  void* host = nullptr;     // host address of base (host pinned / managed)
  uint64_t buffer_id = 0;
  CUmemoryPool pool = nullptr;
  unsigned flags = 0;  // cuMemHostAlloc / cuMemHostRegister flags
  bool sync_memops = false;  // CU_POINTER_ATTRIBUTE_SYNC_MEMOPS (cuPointerSetAttribute)
  // Exported through CUDA IPC (ipc.h): the memfd now backing it, kept open
  // until the allocation is freed, and its inode; -1 if never exported.
  int ipc_fd = -1;
  uint64_t ipc_inode = 0;
};

// Host address backing [dptr, dptr + bytes) if the whole range is accessible
// (mapped device memory, pinned host or managed memory); nullptr otherwise.
void* Translate(CUdeviceptr dptr, size_t bytes);

// Linear device allocation on device `device` (capacity accounted on the node).
CUresult AllocDeviceMemory(int device, CUcontext ctx, size_t bytes, CUdeviceptr* out);
CUresult FreeDeviceMemory(CUdeviceptr dptr);
// A graph allocation's address and backing, not charged on the node (its
// graph pool charges the bytes while a launch holds them: graph_memory.cc).
CUresult MapGraphMemory(int device, size_t bytes, CUdeviceptr* out);
void UnmapGraphMemory(CUdeviceptr dptr);
// Unmaps a cuExternalMemoryGetMappedBuffer buffer (api_external.cc).
CUresult FreeExternalBuffer(CUdeviceptr dptr);

// Drops the advice and prefetch records of a freed managed range (api_managed.cc).
void ForgetManagedRange(CUdeviceptr base, size_t size);

// The allocation containing dptr, if any.
bool LookupAllocation(CUdeviceptr dptr, AllocInfo* out);

}  // namespace vgpu::sim
