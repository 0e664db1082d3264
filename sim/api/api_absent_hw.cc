// Entry points for hardware features the simulated H100-like device does not
// have. Each answers as a driver does on a GPU without the feature: the
// arguments are checked, then the documented error for missing hardware.
//  - Decompression engine: CU_DEVICE_ATTRIBUTE_MEM_DECOMPRESS_ALGORITHM_MASK
//    reads 0 (Blackwell has one, Hopper not).
//  - NvSci: Linux x86 drivers ship no NvSciSync.
//  - dma-buf export: CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED reads 0.
//  - Sparse arrays: CU_DEVICE_ATTRIBUTE_SPARSE_CUDA_ARRAY_SUPPORTED reads 0.
//  - Multi-device cooperative launch: deprecated in CUDA 11.3 and gone from
//    CUDA 13's cuda.h; COOPERATIVE_MULTI_DEVICE_LAUNCH reads 0.
#include <cstdint>

#include "sim/api/api_common.h"
#include "sim/engine/context.h"
#include "sim/engine/sim_state.h"
#include "sim/engine/stream.h"

using namespace vgpu::sim;  // NOLINT: entry points below are the C ABI

namespace {

CUresult Decompress(const CUmemDecompressParams* params, size_t count, unsigned flags,
                    size_t* error_index, CUstream h, bool ptsz) {
  if (error_index != nullptr) *error_index = SIZE_MAX;  // about the batch, not one entry
  if (params == nullptr || count == 0 || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  Stream* s = nullptr;
  if (CUresult r = ResolveStream(h, ptsz, &s); r != CUDA_SUCCESS) return r;
  return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult MapArray(const CUarrayMapInfo* infos, unsigned count, CUstream h, bool ptsz) {
  if (infos == nullptr || count == 0) return CUDA_ERROR_INVALID_VALUE;
  Stream* s = nullptr;
  if (CUresult r = ResolveStream(h, ptsz, &s); r != CUDA_SUCCESS) return r;
  return CUDA_ERROR_NOT_SUPPORTED;
}

}  // namespace

SIM_EXPORT CUresult CUDAAPI cuMemBatchDecompressAsync(CUmemDecompressParams* paramsArray,
                                                      size_t count, unsigned int flags,
                                                      size_t* errorIndex, CUstream stream) {
  SIM_ENTER("cuMemBatchDecompressAsync");
  return Decompress(paramsArray, count, flags, errorIndex, stream, false);
}

SIM_EXPORT CUresult CUDAAPI cuMemBatchDecompressAsync_ptsz(CUmemDecompressParams* paramsArray,
                                                           size_t count, unsigned int flags,
                                                           size_t* errorIndex, CUstream stream) {
  SIM_ENTER("cuMemBatchDecompressAsync_ptsz");
  return Decompress(paramsArray, count, flags, errorIndex, stream, true);
}

SIM_EXPORT CUresult CUDAAPI cuDeviceGetNvSciSyncAttributes(void* nvSciSyncAttrList, CUdevice dev,
                                                           int flags) {
  SIM_ENTER("cuDeviceGetNvSciSyncAttributes");
  if (!ValidDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  if (nvSciSyncAttrList == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (flags != CUDA_NVSCISYNC_ATTR_SIGNAL && flags != CUDA_NVSCISYNC_ATTR_WAIT)
    return CUDA_ERROR_INVALID_VALUE;
  return CUDA_ERROR_NOT_SUPPORTED;
}

SIM_EXPORT CUresult CUDAAPI cuMemGetHandleForAddressRange(void* handle, CUdeviceptr dptr,
                                                          size_t size,
                                                          CUmemRangeHandleType handleType,
                                                          unsigned long long flags) {
  SIM_ENTER("cuMemGetHandleForAddressRange");
  if (handle == nullptr || dptr == 0 || size == 0) return CUDA_ERROR_INVALID_VALUE;
  if (RawEnum(handleType) != CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD) return CUDA_ERROR_INVALID_VALUE;
  if ((flags & ~static_cast<unsigned long long>(CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE)) !=
      0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_ERROR_NOT_SUPPORTED;
}

SIM_EXPORT CUresult CUDAAPI cuMemMapArrayAsync(CUarrayMapInfo* mapInfoList, unsigned int count,
                                               CUstream hStream) {
  SIM_ENTER("cuMemMapArrayAsync");
  return MapArray(mapInfoList, count, hStream, false);
}

SIM_EXPORT CUresult CUDAAPI cuMemMapArrayAsync_ptsz(CUarrayMapInfo* mapInfoList, unsigned int count,
                                                    CUstream hStream) {
  SIM_ENTER("cuMemMapArrayAsync_ptsz");
  return MapArray(mapInfoList, count, hStream, true);
}

// Declared by cuda.h up to CUDA 12 only; the symbol stays exported.
extern "C" CUresult CUDAAPI cuLaunchCooperativeKernelMultiDevice(
    CUDA_LAUNCH_PARAMS* launchParamsList, unsigned int numDevices, unsigned int flags);

SIM_EXPORT CUresult CUDAAPI cuLaunchCooperativeKernelMultiDevice(
    CUDA_LAUNCH_PARAMS* launchParamsList, unsigned int numDevices, unsigned int flags) {
  SIM_ENTER("cuLaunchCooperativeKernelMultiDevice");
  constexpr unsigned kKnown = CUDA_COOPERATIVE_LAUNCH_MULTI_DEVICE_NO_PRE_LAUNCH_SYNC |
                              CUDA_COOPERATIVE_LAUNCH_MULTI_DEVICE_NO_POST_LAUNCH_SYNC;
  if (launchParamsList == nullptr || numDevices == 0 || (flags & ~kKnown) != 0)
    return CUDA_ERROR_INVALID_VALUE;
  return CUDA_ERROR_NOT_SUPPORTED;
}
