// CU_FUNC_ATTRIBUTE_* of kernels, shared by the CUfunction and CUkernel APIs,
// and the launch limits they imply.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "sim/modules/kernel_handles.h"

namespace vgpu::sim {

// Device limits the simulator models (those of an H100, as cuDeviceGetAttribute
// reports them).
inline constexpr uint32_t kSharedPerBlock = 49152;
inline constexpr uint32_t kSharedPerBlockOptin = 232448;

// CUDA_ERROR_INVALID_VALUE for an attribute that does not exist.
CUresult GetFunctionAttribute(KernelHandle* h, CUfunction_attribute attrib, int* value);
// CUDA_ERROR_INVALID_VALUE for a read-only attribute or a value out of range,
// CUDA_ERROR_NOT_PERMITTED for cluster dimensions fixed at compile time.
CUresult SetFunctionAttribute(KernelHandle* h, CUfunction_attribute attrib, int value);

// The dynamic shared memory a launch may request.
uint32_t MaxDynamicShared(KernelHandle* h);
// Cluster dimensions a launch must use (compile-time or set); {0,0,0}: none.
void RequiredClusterDims(KernelHandle* h, uint32_t out[3]);

}  // namespace vgpu::sim
