// The simulator's built-in module, loaded with cuModuleLoad("@builtin") or
// cuModuleLoadData/cuLibraryLoadData of the string "@builtin". Its kernels use
// the same host ABI as external kernels (vgpu/sim_kernel.h). They ignore the
// grid and block: each launch processes all `count` elements, as a grid-stride
// loop would. Data kernels report the bytes they touch, so the simulator
// charges bytes / device bandwidth of device time.
//
//   vgpu_sim_sleep(uint64 ns)                     occupies the engine for ns of device time
//   vgpu_sim_spin(uint64 ns)                      busy-waits ns of host time (charged as is)
//   vgpu_sim_fill_u8(CUdeviceptr p, uint8 v, uint64 count)
//   vgpu_sim_fill_u32(CUdeviceptr p, uint32 v, uint64 count)
//   vgpu_sim_add_u32(CUdeviceptr p, uint32 v, uint64 count)   p[i] += v (mod 2^32)
//   vgpu_sim_copy(CUdeviceptr dst, CUdeviceptr src, uint64 bytes)   memmove semantics
//   vgpu_sim_saxpy(float a, CUdeviceptr x, CUdeviceptr y, uint64 n)  y[i] = a * x[i] + y[i]
//   vgpu_sim_checksum(CUdeviceptr p, uint64 count, CUdeviceptr out_u64)
//                                                 *out = ChecksumU32Words(p, count)
//   vgpu_sim_trap()                               faults (CUDA_ERROR_ILLEGAL_ADDRESS)
//
// Arguments are laid out as a C compiler would (natural alignment); a pointer
// that is unmapped, or misaligned for its element type, faults the launch.
#pragma once

#include <cstdint>
#include <string_view>

#include "sim/modules/module_image.h"
#include "vgpu/sim_kernel.h"

namespace vgpu::sim {

// The kernels of the built-in module (format kBuiltin).
const ModuleImage& BuiltinModuleImage();

// Host implementation of a built-in kernel, nullptr if there is none.
vgpu_sim_kernel_fn FindBuiltinKernel(std::string_view name);

// The checksum vgpu_sim_checksum computes: FNV-1a (64-bit) applied to 32-bit
// words instead of bytes: h = 0xcbf29ce484222325; for each word w:
// h = (h ^ w) * 0x100000001b3 (mod 2^64). Cheap to recompute on the host.
uint64_t ChecksumU32Words(const uint32_t* words, uint64_t count);

}  // namespace vgpu::sim
