// Shared by every exported driver entry point of the simulated libcuda.
#pragma once

#include <cuda.h>

#define SIM_EXPORT extern "C" __attribute__((visibility("default")))

namespace vgpu::sim {

// Called first by every entry point: applies fault injection (VGPU_SIM_FAULTS)
// and returns CUDA_ERROR_NOT_INITIALIZED before cuInit succeeded (or the
// sticky cuInit error). `name` is the exported symbol, e.g. "cuMemAlloc_v2".
CUresult ApiEnter(const char* name);
// Same, for the few entry points valid before cuInit (cuDriverGetVersion,
// cuGetErrorString, ...): fault injection only.
CUresult ApiEnterNoInit(const char* name);

// Writes a one-line diagnostic to stderr (prefixed "vgpu-sim: "). Used for
// errors the issue wants explained (bad config, unknown kernel), never on a
// success path.
void SimLog(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace vgpu::sim

#define SIM_ENTER(name)                                                   \
  do {                                                                    \
    if (CUresult sim_r_ = ::vgpu::sim::ApiEnter(name); sim_r_ != CUDA_SUCCESS) \
      return sim_r_;                                                      \
  } while (0)

#define SIM_ENTER_NOINIT(name)                                                   \
  do {                                                                           \
    if (CUresult sim_r_ = ::vgpu::sim::ApiEnterNoInit(name); sim_r_ != CUDA_SUCCESS) \
      return sim_r_;                                                             \
  } while (0)
