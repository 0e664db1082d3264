// The frames a hand-written hook body runs in, one per policy set of
// intercept/hook_policy.h that needs libvgpu initialized: the body is a
// lambda, never a macro argument, so it reads, formats and debugs like code.
#pragma once

#include <cuda.h>

#include "intercept/hooks.h"
#include "intercept/runtime.h"
#include "residency/engine.h"

namespace vgpu {

// Needs the device map or the quota: before cuInit succeeded it answers
// CUDA_ERROR_NOT_INITIALIZED, as the driver does. Never throws.
template <typename F>
CUresult WhenReady(F&& body) noexcept {
  return NoThrow(CUDA_ERROR_UNKNOWN, [&]() -> CUresult {
    if (!Runtime::Get().ready()) return CUDA_ERROR_NOT_INITIALIZED;
    return body();
  });
}

// The same, and touches device memory: inside the quiesce gate (kGate).
template <typename F>
CUresult WhenReadyGated(F&& body) noexcept {
  return WhenReady([&]() -> CUresult {
    residency::GateGuard gate;
    return body();
  });
}

}  // namespace vgpu
