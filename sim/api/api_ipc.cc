// Interprocess memory and event handles between processes of the simulated
// node (mechanism and wire format: sim/engine/ipc.h). What a real driver
// additionally restricts is kept: only the base of a cuMemAlloc allocation
// exports, only an event created with CU_EVENT_INTERPROCESS and
// CU_EVENT_DISABLE_TIMING, and a process does not open its own handles.
// Exporter and importer must be the same user (the importer opens the
// exporter's descriptor through /proc), which a real driver does not require.
#include "sim/api/api_common.h"
#include "sim/engine/context.h"
#include "sim/engine/device_memory.h"
#include "sim/engine/event.h"
#include "sim/engine/ipc.h"

using namespace vgpu::sim;  // NOLINT: entry points below are the C ABI

namespace {

CUresult OpenMemHandle(CUdeviceptr* pdptr, const CUipcMemHandle& handle, unsigned int flags) {
  if (pdptr == nullptr || (flags & ~unsigned{CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS}) != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  Context* ctx = CurrentContextOrNull();
  if (ctx == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  // Peer access is not a condition of the sim's copies and kernels
  // (sim/api/api_peer.cc), so the lazy flag has nothing to enable.
  return OpenIpcMemory(AsHandle(ctx), handle, pdptr);
}

}  // namespace

SIM_EXPORT CUresult CUDAAPI cuIpcGetMemHandle(CUipcMemHandle* pHandle, CUdeviceptr dptr) {
  SIM_ENTER("cuIpcGetMemHandle");
  if (pHandle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CurrentContextOrNull() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  // The first export moves the pages (ipc.h): work queued on them must not
  // write the old ones meanwhile.
  AllocInfo info;
  if (LookupAllocation(dptr, &info) && info.ipc_fd < 0 && info.ctx != nullptr &&
      IsValidContext(info.ctx)) {
    SynchronizeContext(AsContext(info.ctx));
  }
  return ExportIpcMemory(dptr, pHandle);
}

SIM_EXPORT CUresult CUDAAPI cuIpcOpenMemHandle_v2(CUdeviceptr* pdptr, CUipcMemHandle handle, unsigned int Flags) {
  SIM_ENTER("cuIpcOpenMemHandle_v2");
  return OpenMemHandle(pdptr, handle, Flags);
}

#undef cuIpcOpenMemHandle

// The CUDA 4.1 symbol: the same arguments as _v2.
SIM_EXPORT CUresult CUDAAPI cuIpcOpenMemHandle(CUdeviceptr* pdptr, CUipcMemHandle handle, unsigned int Flags) {
  SIM_ENTER("cuIpcOpenMemHandle");
  return OpenMemHandle(pdptr, handle, Flags);
}

SIM_EXPORT CUresult CUDAAPI cuIpcCloseMemHandle(CUdeviceptr dptr) {
  SIM_ENTER("cuIpcCloseMemHandle");
  if (CurrentContextOrNull() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  return CloseIpcMemory(dptr);
}

SIM_EXPORT CUresult CUDAAPI cuIpcGetEventHandle(CUipcEventHandle* pHandle, CUevent event) {
  SIM_ENTER("cuIpcGetEventHandle");
  auto* e = reinterpret_cast<Event*>(event);
  if (pHandle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!IsLiveEvent(e)) return CUDA_ERROR_INVALID_HANDLE;
  if ((e->flags & kIpcEventFlags) != kIpcEventFlags || e->ipc == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return ExportIpcEvent(e->ipc, pHandle);
}

// The opened event belongs to the calling context and may be waited on,
// queried, synchronized and recorded like the exporter's.
SIM_EXPORT CUresult CUDAAPI cuIpcOpenEventHandle(CUevent* phEvent, CUipcEventHandle handle) {
  SIM_ENTER("cuIpcOpenEventHandle");
  if (phEvent == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Context* ctx = CurrentContextOrNull();
  if (ctx == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  IpcEventSlot* slot = nullptr;
  if (CUresult r = ImportIpcEvent(handle, &slot); r != CUDA_SUCCESS) return r;
  auto* e = new Event();
  e->ctx = ctx;
  e->flags = kIpcEventFlags;
  e->ipc = slot;
  RegisterEvent(e);
  *phEvent = reinterpret_cast<CUevent>(e);
  return CUDA_SUCCESS;
}
