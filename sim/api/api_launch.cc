// Kernel launches: every form queues one kernel op on a stream.
#include "sim/api/api_common.h"
#include "sim/engine/context.h"
#include "sim/engine/module.h"
#include "sim/engine/stream.h"

using namespace vgpu::sim;  // NOLINT: entry points below are the C ABI

namespace {

CUresult Launch(CUfunction f, const LaunchDims& dims, CUstream h, void** params, void** extra,
                bool ptds) {
  Stream* s = nullptr;
  if (CUresult r = ResolveStream(h, ptds, &s); r != CUDA_SUCCESS) return r;
  if (CUresult r = StickyError(s->ctx()); r != CUDA_SUCCESS) return r;
  if (CUresult r = CheckLaunchDims(f, dims); r != CUDA_SUCCESS) return r;
  Op* op = s->Begin();
  CUresult r = PackKernelParams(f, params, extra, &op->params);
  if (r != CUDA_SUCCESS) op->kind = OpKind::kNop;  // the slot is published as a no-op
  if (r == CUDA_SUCCESS) {
    op->kind = OpKind::kKernel;
    op->fn = f;
    op->dims = dims;
  }
  s->Commit();
  return r;
}

CUresult LaunchClassic(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                       unsigned by, unsigned bz, unsigned shmem, CUstream h, void** params,
                       void** extra, bool ptds) {
  LaunchDims dims{{gx, gy, gz}, {bx, by, bz}, shmem};
  return Launch(f, dims, h, params, extra, ptds);
}

CUresult LaunchEx(const CUlaunchConfig* c, CUfunction f, void** params, void** extra, bool ptds) {
  if (c == nullptr || (c->numAttrs > 0 && c->attrs == nullptr)) return CUDA_ERROR_INVALID_VALUE;
  LaunchDims dims{{c->gridDimX, c->gridDimY, c->gridDimZ},
                  {c->blockDimX, c->blockDimY, c->blockDimZ},
                  c->sharedMemBytes};
  return Launch(f, dims, c->hStream, params, extra, ptds);
}

}  // namespace

SIM_EXPORT CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream, void** kernelParams, void** extra) {
  SIM_ENTER("cuLaunchKernel");
  return LaunchClassic(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                       sharedMemBytes, hStream, kernelParams, extra, false);
}

SIM_EXPORT CUresult CUDAAPI cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream, void** kernelParams, void** extra) {
  SIM_ENTER("cuLaunchKernel_ptsz");
  return LaunchClassic(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                       sharedMemBytes, hStream, kernelParams, extra, true);
}

SIM_EXPORT CUresult CUDAAPI cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** kernelParams, void** extra) {
  SIM_ENTER("cuLaunchKernelEx");
  return LaunchEx(config, f, kernelParams, extra, false);
}

SIM_EXPORT CUresult CUDAAPI cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f, void** kernelParams, void** extra) {
  SIM_ENTER("cuLaunchKernelEx_ptsz");
  return LaunchEx(config, f, kernelParams, extra, true);
}

SIM_EXPORT CUresult CUDAAPI cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream, void** kernelParams) {
  SIM_ENTER("cuLaunchCooperativeKernel");
  return LaunchClassic(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                       sharedMemBytes, hStream, kernelParams, nullptr, false);
}

SIM_EXPORT CUresult CUDAAPI cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream, void** kernelParams) {
  SIM_ENTER("cuLaunchCooperativeKernel_ptsz");
  return LaunchClassic(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                       sharedMemBytes, hStream, kernelParams, nullptr, true);
}
