// Memory pools for stream-ordered allocation (cuMemAllocAsync and friends).
#pragma once

#include <cuda.h>

namespace vgpu::sim {

// Frees a pool allocation when its cuMemFreeAsync is reached in stream order.
void ReleaseStreamOrdered(CUdeviceptr ptr);

}  // namespace vgpu::sim
