// Memory pools for stream-ordered allocation (cuMemAllocAsync and friends).
#pragma once

#include <cuda.h>

namespace vgpu::sim {

// One access descriptor of memory on `device` (cuMemPoolSetAccess, allocation
// nodes): a device with a peer path to it (VGPU_SIM_P2P), and NONE or
// READWRITE (such memory is not mapped read-only); its own device cannot lose
// its access.
CUresult CheckPoolAccess(int device, const CUmemAccessDesc& d);

// Frees a pool allocation when its cuMemFreeAsync is reached in stream order.
void ReleaseStreamOrdered(CUdeviceptr ptr);

}  // namespace vgpu::sim
