// Shared by every exported driver entry point of the simulated libcuda.
#pragma once

#include <cuda.h>

#include "sim/engine/sim_log.h"

#define SIM_EXPORT extern "C" __attribute__((visibility("default")))

namespace vgpu::sim {

// Called first by every entry point: applies fault injection (VGPU_SIM_FAULTS)
// and returns CUDA_ERROR_NOT_INITIALIZED before cuInit succeeded (or the
// sticky cuInit error). `name` is the exported symbol, e.g. "cuMemAlloc_v2".
CUresult ApiEnter(const char* name);
// Same, for the few entry points valid before cuInit (cuDriverGetVersion,
// cuGetErrorString, ...): fault injection only.
CUresult ApiEnterNoInit(const char* name);

// The integer an application passed for an enum argument. Read through
// memcpy: loading an enum object that holds no enumerator's value is undefined
// (UBSan reports it), and validating such arguments is exactly the sim's job.
template <typename E>
int RawEnum(const E& e) {
  static_assert(sizeof(E) == sizeof(int));
  int v = 0;
  __builtin_memcpy(&v, &e, sizeof v);
  return v;
}


}  // namespace vgpu::sim

namespace vgpu::sim {
// An entry point's stay in the driver: ApiEnter's checks, then the calling
// thread counts as inside the driver until the scope ends (only the outermost
// entry point of a thread counts). While a checkpoint lock holds the process
// (cuCheckpointProcessLock), a thread entering waits here, and the lock waits
// until no thread is inside (sim/api/checkpoint_process.h).
class ApiScope {
 public:
  explicit ApiScope(const char* name);
  ~ApiScope();
  ApiScope(const ApiScope&) = delete;
  ApiScope& operator=(const ApiScope&) = delete;
  CUresult result() const { return result_; }

 private:
  CUresult result_;
  bool counted_ = false;
};
}  // namespace vgpu::sim

// Declares the scope in the entry point's body, so it must be a statement of
// the function's outermost block.
#define SIM_ENTER(name)                       \
  ::vgpu::sim::ApiScope sim_scope_{name};     \
  if (sim_scope_.result() != CUDA_SUCCESS) return sim_scope_.result()

#define SIM_ENTER_NOINIT(name)                                                   \
  do {                                                                           \
    if (CUresult sim_r_ = ::vgpu::sim::ApiEnterNoInit(name); sim_r_ != CUDA_SUCCESS) \
      return sim_r_;                                                             \
  } while (0)
