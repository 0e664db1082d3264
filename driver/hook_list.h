// Every driver entry point libvgpu intercepts, declared once. The exported
// symbol name is the macro argument; its type comes from cuda.h (the compiler
// checks each hook's signature against it), and the same list builds the table
// of real entry points, the dlsym map and the cuGetProcAddress map.
//
// X(symbol) — CUDA driver API. Keep groups sorted by purpose. Every hook's
// policies (gate, quota, vmm, share) are declared in intercept/hook_policy.h,
// which says how to add one.
#pragma once

// The lists are laid out by hand, one group per comment:
// clang-format off
#define VGPU_CU_HOOKS(X)                                                          \
  /* init and lookup */                                                          \
  X(cuInit) X(cuGetProcAddress) X(cuGetProcAddress_v2)                           \
  /* devices: virtual ordinals in, physical out */                               \
  X(cuDeviceGetCount) X(cuDeviceGet) X(cuDeviceGetName) X(cuDeviceGetUuid)       \
  X(cuDeviceGetUuid_v2) X(cuDeviceGetLuid) X(cuDeviceTotalMem_v2)                \
  X(cuDeviceGetAttribute) X(cuDeviceGetProperties) X(cuDeviceComputeCapability)  \
  X(cuDeviceGetPCIBusId) X(cuDeviceGetByPCIBusId) X(cuDeviceCanAccessPeer)       \
  X(cuDeviceGetP2PAttribute) X(cuDeviceGetDefaultMemPool) X(cuDeviceGetMemPool)  \
  X(cuDeviceSetMemPool) X(cuDeviceGetTexture1DLinearMaxWidth)                    \
  X(cuDeviceGetExecAffinitySupport)                                              \
  X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease_v2)                    \
  X(cuDevicePrimaryCtxReset_v2) X(cuDevicePrimaryCtxGetState)                    \
  X(cuDevicePrimaryCtxSetFlags_v2)                                               \
  X(cuCtxCreate_v2) X(cuCtxCreate_v3) X(cuCtxCreate_v4) X(cuCtxDestroy_v2)       \
  X(cuGreenCtxCreate) X(cuGreenCtxDestroy)                                       \
  X(cuCtxSetCurrent) X(cuCtxPushCurrent_v2) X(cuCtxPopCurrent_v2)                \
  /* the CUDA 3.x context stack: old binaries, old-version cuGetProcAddress */   \
  X(cuCtxDestroy) X(cuCtxPushCurrent) X(cuCtxPopCurrent)                         \
  X(cuCtxGetDevice) X(cuCtxGetDevice_v2) X(cuMemGetDefaultMemPool) X(cuMemGetMemPool) \
  X(cuMemSetMemPool)                                                            \
  /* memory: every path that takes device memory counts against the quota */     \
  X(cuMemAlloc_v2) X(cuMemAllocPitch_v2) X(cuMemFree_v2) X(cuMemAllocManaged)    \
  X(cuMemAllocAsync) X(cuMemAllocAsync_ptsz) X(cuMemAllocFromPoolAsync)          \
  X(cuMemAllocFromPoolAsync_ptsz) X(cuMemFreeAsync) X(cuMemFreeAsync_ptsz)       \
  X(cuMemCreate) X(cuMemRelease) X(cuMemMap) X(cuMemUnmap)                      \
  X(cuArrayCreate_v2) X(cuArray3DCreate_v2)                                      \
  X(cuArrayDestroy) X(cuMipmappedArrayCreate) X(cuMipmappedArrayDestroy)         \
  X(cuMemGetInfo_v2) X(cuMemPoolCreate) X(cuMemGetAllocationGranularity)         \
  /* graph memory: charged for the driver's graph pool (intercept/graph_memory.h) */ \
  X(cuGraphAddNode) X(cuGraphAddNode_v2) X(cuGraphAddMemAllocNode)               \
  X(cuGraphInstantiateWithFlags) X(cuGraphInstantiateWithParams)                 \
  X(cuGraphInstantiateWithParams_ptsz) X(cuGraphInstantiate) X(cuGraphInstantiate_v2) \
  X(cuGraphExecDestroy) X(cuDeviceGraphMemTrim)                                  \
  X(cuMemSetAccess) X(cuMemGetAccess) X(cuMemGetAllocationPropertiesFromHandle)  \
  X(cuPointerGetAttribute) X(cuPointerGetAttributes)                             \
  /* launches: governed by the compute share, inside the quiesce gate */          \
  X(cuLaunchKernel) X(cuLaunchKernel_ptsz) X(cuLaunchKernelEx)                   \
  X(cuLaunchKernelEx_ptsz) X(cuLaunchCooperativeKernel)                          \
  X(cuLaunchCooperativeKernel_ptsz) X(cuGraphLaunch) X(cuGraphLaunch_ptsz)       \
  X(cuMemGetAddressRange_v2)                                                     \
  /* CUDA IPC: legacy handles of VMM-served memory (intercept/hooks_ipc.cc) */    \
  X(cuIpcGetMemHandle) X(cuIpcOpenMemHandle_v2) X(cuIpcOpenMemHandle)            \
  X(cuIpcCloseMemHandle)                                                         \
  /* copies, memsets: bodies from one template (below) */                        \
  VGPU_CU_GATED_PASSTHROUGH(X)

// Copies and memsets: nothing but the real call inside the quiesce gate, so
// that no copy touches device memory while the process is suspended
// (docs/vmm.md). No body is written for them: intercept/hooks_gated.cc
// defines each from one template, with the signature cuda.h gives the symbol.
#define VGPU_CU_GATED_PASSTHROUGH(X)                                              \
  X(cuMemcpyHtoDAsync_v2) X(cuMemcpyHtoDAsync_v2_ptsz) X(cuMemcpy)               \
  X(cuMemcpy_ptds) X(cuMemcpyAsync) X(cuMemcpyAsync_ptsz) X(cuMemcpyPeer)        \
  X(cuMemcpyPeer_ptds) X(cuMemcpyPeerAsync) X(cuMemcpyPeerAsync_ptsz)            \
  X(cuMemcpyHtoD_v2) X(cuMemcpyHtoD_v2_ptds) X(cuMemcpyDtoH_v2)                  \
  X(cuMemcpyDtoH_v2_ptds) X(cuMemcpyDtoD_v2) X(cuMemcpyDtoD_v2_ptds)             \
  X(cuMemcpyDtoHAsync_v2) X(cuMemcpyDtoHAsync_v2_ptsz) X(cuMemcpyDtoDAsync_v2)   \
  X(cuMemcpyDtoDAsync_v2_ptsz) X(cuMemcpy2D_v2) X(cuMemcpy2D_v2_ptds)            \
  X(cuMemcpy2DUnaligned_v2) X(cuMemcpy2DUnaligned_v2_ptds)                       \
  X(cuMemcpy2DAsync_v2) X(cuMemcpy2DAsync_v2_ptsz) X(cuMemcpy3D_v2)              \
  X(cuMemcpy3D_v2_ptds) X(cuMemcpy3DAsync_v2) X(cuMemcpy3DAsync_v2_ptsz)         \
  X(cuMemcpy3DPeer) X(cuMemcpy3DPeer_ptds) X(cuMemcpy3DPeerAsync)                \
  X(cuMemcpy3DPeerAsync_ptsz) X(cuMemcpyDtoA_v2) X(cuMemcpyDtoA_v2_ptds)         \
  X(cuMemcpyAtoD_v2) X(cuMemcpyAtoD_v2_ptds) X(cuMemsetD8_v2)                    \
  X(cuMemsetD8_v2_ptds) X(cuMemsetD16_v2) X(cuMemsetD16_v2_ptds)                 \
  X(cuMemsetD32_v2) X(cuMemsetD32_v2_ptds) X(cuMemsetD2D8_v2)                    \
  X(cuMemsetD2D8_v2_ptds) X(cuMemsetD2D16_v2) X(cuMemsetD2D16_v2_ptds)           \
  X(cuMemsetD2D32_v2) X(cuMemsetD2D32_v2_ptds) X(cuMemsetD8Async)                \
  X(cuMemsetD8Async_ptsz) X(cuMemsetD16Async) X(cuMemsetD16Async_ptsz)           \
  X(cuMemsetD32Async) X(cuMemsetD32Async_ptsz) X(cuMemsetD2D8Async)              \
  X(cuMemsetD2D8Async_ptsz) X(cuMemsetD2D16Async) X(cuMemsetD2D16Async_ptsz)     \
  X(cuMemsetD2D32Async) X(cuMemsetD2D32Async_ptsz)                              \
  /* batches: the CUDA 12.8 forms (with failIdx) and the CUDA 13 _v2 forms */    \
  X(cuMemcpyBatchAsync) X(cuMemcpyBatchAsync_ptsz) X(cuMemcpyBatchAsync_v2)      \
  X(cuMemcpyBatchAsync_v2_ptsz) X(cuMemcpy3DBatchAsync)                          \
  X(cuMemcpy3DBatchAsync_ptsz) X(cuMemcpy3DBatchAsync_v2)                        \
  X(cuMemcpy3DBatchAsync_v2_ptsz)

// Entry points that name a device but are not translated above. When the
// process sees a remapped device set they are refused (CUDA_ERROR_NOT_SUPPORTED)
// through dlsym and cuGetProcAddress, so no path can reach a hidden device;
// with the identity mapping they pass through. Symbol names as exported.
#define VGPU_CU_DEVICE_REFUSED(X)                                                 \
  X(cuArrayGetMemoryRequirements) X(cuDeviceGetGraphMemAttribute)                \
  X(cuDeviceGetHostAtomicCapabilities) X(cuDeviceGetNvSciSyncAttributes)         \
  X(cuDeviceGetP2PAtomicCapabilities) X(cuGraphMemAllocNodeGetParams)            \
  X(cuDeviceSetGraphMemAttribute) X(cuKernelGetAttribute) X(cuKernelSetAttribute) \
  X(cuKernelSetCacheConfig) X(cuMemAdvise) X(cuMemAdvise_v2)                     \
  X(cuMemDiscardAndPrefetchBatchAsync) X(cuMemDiscardAndPrefetchBatchAsync_ptsz) \
  X(cuMemPoolGetAccess)                                                          \
  X(cuMemPoolSetAccess) X(cuMemPrefetchAsync) X(cuMemPrefetchAsync_ptsz)         \
  X(cuMemPrefetchAsync_v2) X(cuMemPrefetchAsync_v2_ptsz) X(cuMemPrefetchBatchAsync) \
  X(cuMemPrefetchBatchAsync_ptsz) X(cuMipmappedArrayGetMemoryRequirements)      \
  X(cuMulticastAddDevice) X(cuMulticastUnbind) X(cuStreamGetDevice)              \
  X(cuStreamGetDevice_ptsz) X(cuDeviceGetDevResource)

// Entry points of CUDA 3.x and before (32-bit pointers and sizes, the pre-4.0
// launch API) that would allocate device memory, launch work or report memory
// outside libvgpu's accounting (the quota, the compute share, the quiesce
// gate): always refused with CUDA_ERROR_NOT_SUPPORTED, under their exported
// names and through dlsym and cuGetProcAddress. A real driver serves them
// (the simulated node too); no current toolkit emits calls to them.
#define VGPU_CU_LEGACY_REFUSED(X)                                                 \
  X(cuMemAlloc) X(cuMemAllocPitch) X(cuArrayCreate) X(cuArray3DCreate)           \
  X(cuLaunch) X(cuLaunchGrid) X(cuLaunchGridAsync) X(cuMemGetInfo)               \
  X(cuDeviceTotalMem)

// Not hooked but reached internally (through the same typed table).
#define VGPU_CU_INTERNAL(X)                                                      \
  X(cuCtxGetCurrent) X(cuStreamIsCapturing) X(cuLaunchHostFunc)                  \
  X(cuDriverGetVersion) X(cuLaunchHostFunc_ptsz) X(cuCtxSynchronize)  \
  X(cuEventCreate) X(cuEventRecord) X(cuEventSynchronize) X(cuEventQuery) X(cuEventDestroy_v2) \
  X(cuMemAddressReserve) X(cuMemAddressFree) X(cuStreamSynchronize)            \
  X(cuStreamSynchronize_ptsz) X(cuMemHostAlloc) X(cuMemFreeHost) X(cuStreamCreate)         \
  X(cuStreamDestroy_v2) X(cuMemHostRegister_v2) X(cuMemHostUnregister)           \
  X(cuCtxFromGreenCtx)                                                           \
  /* CUDA IPC of VMM-served memory (intercept/hooks_ipc.cc) */                   \
  X(cuMemExportToShareableHandle) X(cuMemImportFromShareableHandle)              \
  /* graph memory accounting: a graph's allocation nodes, the device's graph pool */ \
  X(cuGraphGetNodes) X(cuGraphNodeGetType) X(cuGraphMemAllocNodeGetParams)        \
  X(cuGraphChildGraphNodeGetGraph) X(cuDeviceGetGraphMemAttribute)               \
  /* the driver checkpoint API, called by vgpuctl on a job's pid (migration) */  \
  X(cuCheckpointProcessGetState) X(cuCheckpointProcessLock)                      \
  X(cuCheckpointProcessCheckpoint) X(cuCheckpointProcessRestore)                 \
  X(cuCheckpointProcessUnlock)

// NVML entry points (types from driver/nvml_abi.h until a toolkit ships nvml.h).
#define VGPU_NVML_HOOKS(X)                                                        \
  X(nvmlShutdown)                                                                \
  X(nvmlInit) X(nvmlInit_v2) X(nvmlInitWithFlags) X(nvmlDeviceGetCount)          \
  X(nvmlDeviceGetCount_v2) X(nvmlDeviceGetHandleByIndex)                         \
  X(nvmlDeviceGetHandleByIndex_v2) X(nvmlDeviceGetHandleByUUID)                  \
  X(nvmlDeviceGetHandleByPciBusId) X(nvmlDeviceGetHandleByPciBusId_v2)           \
  X(nvmlDeviceGetIndex) X(nvmlDeviceGetMemoryInfo) X(nvmlDeviceGetMemoryInfo_v2)

#define VGPU_NVML_INTERNAL(X) X(nvmlDeviceGetUUID) X(nvmlDeviceGetName) X(nvmlDeviceGetCudaComputeCapability)
// clang-format on
