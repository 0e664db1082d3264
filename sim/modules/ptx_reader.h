// Reads the kernels and variables of PTX text as nvcc and NVRTC emit it:
// ".entry name(.param ...)" declarations with their parameter types, sizes and
// alignments, performance directives (.maxntid, .reqntid, .reqnctapercluster),
// static .shared/.local declarations in kernel bodies, and module-scope .global
// and .const variables with their initializers. Instructions are not parsed:
// the simulator runs kernels through host implementations.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <string>

#include "sim/modules/module_image.h"

namespace vgpu::sim {

// Highest PTX ISA version the simulated driver (CUDA 13.0) accepts, x10.
inline constexpr int kMaxPtxIsaVersion = 90;

// Parses `size` bytes of PTX text (stops early at a NUL). Errors:
// CUDA_ERROR_INVALID_PTX (no .version/.target, malformed entry or variable),
// CUDA_ERROR_UNSUPPORTED_PTX_VERSION (.version above kMaxPtxIsaVersion).
CUresult ReadPtx(const char* text, size_t size, ModuleImage* out, std::string* error);

// Whether `data` looks like PTX text (after whitespace, "//", "/*" or ".").
bool LooksLikePtx(const void* data, size_t size);

}  // namespace vgpu::sim
