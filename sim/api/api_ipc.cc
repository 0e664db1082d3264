// Interprocess memory and event handles: not available on the simulated
// device, which says so (CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED is 0), and
// the calls answer as a real driver on a platform without CUDA IPC (WSL,
// Tegra): arguments are checked as cuda.h documents, then the operation
// itself is CUDA_ERROR_NOT_SUPPORTED.
//
// Why not modelled: cuMemAlloc memory is private anonymous memory of the
// allocating process (AddressSpace::BackAnonymous), which no other process
// can map. Sharing it needs every allocation to be a memfd and a way for the
// opener to get that fd from a 64-byte handle (pidfd_getfd needs ptrace
// rights over the exporter, so a broker): an allocator redesign. Processes
// that need shared device memory in the sim can use the VMM API's POSIX file
// descriptors, which are modelled.
#include "sim/api/api_common.h"
#include "sim/engine/context.h"
#include "sim/engine/device_memory.h"
#include "sim/engine/event.h"

using namespace vgpu::sim;  // NOLINT: entry points below are the C ABI

namespace {

constexpr unsigned kIpcEventFlags = CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING;

CUresult OpenMemHandle(CUdeviceptr* pdptr, unsigned int flags) {
  if (pdptr == nullptr || (flags & ~unsigned{CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS}) != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (CurrentContextOrNull() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  return CUDA_ERROR_NOT_SUPPORTED;
}

}  // namespace

// Only the base of a cuMemAlloc allocation can be exported (cuda.h); other
// pointers are CUDA_ERROR_INVALID_VALUE on any device.
SIM_EXPORT CUresult CUDAAPI cuIpcGetMemHandle(CUipcMemHandle* pHandle, CUdeviceptr dptr) {
  SIM_ENTER("cuIpcGetMemHandle");
  if (pHandle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CurrentContextOrNull() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  AllocInfo info;
  if (!LookupAllocation(dptr, &info) || info.base != dptr || info.kind != AllocKind::kDevice) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_ERROR_NOT_SUPPORTED;
}

SIM_EXPORT CUresult CUDAAPI cuIpcOpenMemHandle_v2(CUdeviceptr* pdptr, CUipcMemHandle handle, unsigned int Flags) {
  SIM_ENTER("cuIpcOpenMemHandle_v2");
  return OpenMemHandle(pdptr, Flags);
}

#undef cuIpcOpenMemHandle

// The CUDA 4.1 symbol: the same arguments as _v2.
SIM_EXPORT CUresult CUDAAPI cuIpcOpenMemHandle(CUdeviceptr* pdptr, CUipcMemHandle handle, unsigned int Flags) {
  SIM_ENTER("cuIpcOpenMemHandle");
  return OpenMemHandle(pdptr, Flags);
}

// Nothing can have been opened, so no pointer is one cuIpcOpenMemHandle returned.
SIM_EXPORT CUresult CUDAAPI cuIpcCloseMemHandle(CUdeviceptr dptr) {
  SIM_ENTER("cuIpcCloseMemHandle");
  if (CurrentContextOrNull() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  return CUDA_ERROR_INVALID_VALUE;
}

// cuda.h: the event must have been created with CU_EVENT_INTERPROCESS and
// CU_EVENT_DISABLE_TIMING.
SIM_EXPORT CUresult CUDAAPI cuIpcGetEventHandle(CUipcEventHandle* pHandle, CUevent event) {
  SIM_ENTER("cuIpcGetEventHandle");
  auto* e = reinterpret_cast<Event*>(event);
  if (pHandle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!IsLiveEvent(e)) return CUDA_ERROR_INVALID_HANDLE;
  if ((e->flags & kIpcEventFlags) != kIpcEventFlags) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_ERROR_NOT_SUPPORTED;
}

SIM_EXPORT CUresult CUDAAPI cuIpcOpenEventHandle(CUevent* phEvent, CUipcEventHandle handle) {
  SIM_ENTER("cuIpcOpenEventHandle");
  if (phEvent == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CurrentContextOrNull() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  return CUDA_ERROR_NOT_SUPPORTED;
}
