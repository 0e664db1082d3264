// CUDA arrays: opaque, backed by linear device memory in row-major order.
#include <mutex>
#include <unordered_set>

#include "sim/api_common.h"
#include "sim/context.h"
#include "sim/copy_engine.h"
#include "sim/device_memory.h"

using namespace vgpu::sim;  // NOLINT: entry points below are the C ABI

namespace {

std::mutex g_mu;
auto* g_arrays = new std::unordered_set<ArrayObject*>();

CUresult CreateArray(CUarray* out, const CUDA_ARRAY3D_DESCRIPTOR& d) {
  if (out == nullptr || d.Width == 0 || FormatBytes(d.Format) == 0 ||
      (d.NumChannels != 1 && d.NumChannels != 2 && d.NumChannels != 4)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  Context* ctx = CurrentContextOrNull();
  if (ctx == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  auto* a = new ArrayObject();
  a->desc = d;
  a->device = ctx->device;
  a->row_bytes = d.Width * FormatBytes(d.Format) * d.NumChannels;
  size_t bytes = a->row_bytes * (d.Height == 0 ? 1 : d.Height) * (d.Depth == 0 ? 1 : d.Depth);
  if (CUresult r = AllocDeviceMemory(ctx->device, AsHandle(ctx), bytes, &a->mem); r != CUDA_SUCCESS) {
    delete a;
    return r;
  }
  std::lock_guard<std::mutex> lock(g_mu);
  g_arrays->insert(a);
  *out = reinterpret_cast<CUarray>(a);
  return CUDA_SUCCESS;
}

}  // namespace

namespace vgpu::sim {

bool IsLiveArray(ArrayObject* a) {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_arrays->count(a) != 0;
}

size_t FormatBytes(CUarray_format f) {
  switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8: case CU_AD_FORMAT_SIGNED_INT8: return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16: case CU_AD_FORMAT_SIGNED_INT16: case CU_AD_FORMAT_HALF: return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32: case CU_AD_FORMAT_SIGNED_INT32: case CU_AD_FORMAT_FLOAT: return 4;
    default: return 0;
  }
}

}  // namespace vgpu::sim

SIM_EXPORT CUresult CUDAAPI cuArrayCreate_v2(CUarray* pHandle, const CUDA_ARRAY_DESCRIPTOR* d) {
  SIM_ENTER("cuArrayCreate_v2");
  if (d == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUDA_ARRAY3D_DESCRIPTOR d3{d->Width, d->Height, 0, d->Format, d->NumChannels, 0};
  return CreateArray(pHandle, d3);
}

SIM_EXPORT CUresult CUDAAPI cuArray3DCreate_v2(CUarray* pHandle, const CUDA_ARRAY3D_DESCRIPTOR* d) {
  SIM_ENTER("cuArray3DCreate_v2");
  if (d == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return CreateArray(pHandle, *d);
}

SIM_EXPORT CUresult CUDAAPI cuArrayGetDescriptor_v2(CUDA_ARRAY_DESCRIPTOR* out, CUarray h) {
  SIM_ENTER("cuArrayGetDescriptor_v2");
  auto* a = reinterpret_cast<ArrayObject*>(h);
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!IsLiveArray(a)) return CUDA_ERROR_INVALID_HANDLE;
  *out = {a->desc.Width, a->desc.Height, a->desc.Format, a->desc.NumChannels};
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuArray3DGetDescriptor_v2(CUDA_ARRAY3D_DESCRIPTOR* out, CUarray h) {
  SIM_ENTER("cuArray3DGetDescriptor_v2");
  auto* a = reinterpret_cast<ArrayObject*>(h);
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!IsLiveArray(a)) return CUDA_ERROR_INVALID_HANDLE;
  *out = a->desc;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuArrayDestroy(CUarray h) {
  SIM_ENTER("cuArrayDestroy");
  auto* a = reinterpret_cast<ArrayObject*>(h);
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (g_arrays->erase(a) == 0) return CUDA_ERROR_INVALID_HANDLE;
  }
  FreeDeviceMemory(a->mem);
  delete a;
  return CUDA_SUCCESS;
}
