// Reads the kernels and variables of an nvcc-built ELF cubin (sm_XX SASS).
//
// Kernels are FUNC symbols marked as entries that live in their own
// ".text.<name>" section; their parameter layout comes from the
// EIATTR_KPARAM_INFO records of ".nv.info.<name>". Variables are OBJECT
// symbols in .nv.global (zero-initialized), .nv.global.init or .nv.constant*.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <string>

#include "sim/modules/module_image.h"

namespace vgpu::sim {

// Parses `size` bytes of cubin at `data` into *out (format kCubin, arch from
// the ELF header). CUDA_ERROR_INVALID_IMAGE with a message in *error if the
// image is not a well-formed CUDA ELF; never reads outside [data, data+size).
CUresult ReadCubin(const void* data, size_t size, ModuleImage* out, std::string* error);

// Size of the cubin at `data` computed from its ELF header and section table,
// 0 if `data` does not start with a 64-bit ELF header. Reads the headers only.
size_t CubinExtent(const void* data);

}  // namespace vgpu::sim
