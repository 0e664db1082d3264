// What the simulator needs to know about a module image: its kernels (names,
// parameter layouts, resource usage) and its __device__/__constant__ variables.
//
// ParseModuleImage accepts every form the driver's module loaders accept: an
// ELF cubin, a fatbin (or the __fatBinC_Wrapper_t that points at one), PTX
// text, and the simulator's own "@builtin" module.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace vgpu::sim {

enum class ImageFormat : uint8_t { kCubin, kFatbin, kPtx, kBuiltin };

struct KernelInfo {
  std::string name;  // symbol name (mangled for C++ kernels)
  // Parallel arrays in argument order: byte offset and size of each argument
  // in the packed parameter buffer (the CUDA ABI layout).
  std::vector<uint32_t> param_offsets;
  std::vector<uint32_t> param_sizes;
  uint32_t param_bytes = 0;  // size of the packed parameter buffer
  int num_regs = 0;
  uint32_t static_shared_bytes = 0;
  uint32_t local_bytes = 0;                  // per-thread stack frame
  uint32_t launch_bound_threads = 0;         // __launch_bounds__ / .maxntid; 0: none
  uint32_t required_cluster[3] = {0, 0, 0};  // __cluster_dims__; 0: none
};

struct GlobalInfo {
  std::string name;
  uint64_t size = 0;
  uint32_t align = 1;
  std::vector<uint8_t> init;  // initial bytes; shorter than size: rest is zero
  bool is_constant = false;   // __constant__ (.nv.constant* / PTX .const)
};

struct ModuleImage {
  ImageFormat format = ImageFormat::kCubin;
  int arch = 0;  // SASS or PTX target: major * 10 + minor (90 for sm_90)
  std::vector<KernelInfo> kernels;
  std::vector<GlobalInfo> globals;
};

// Compute capability of the device a module is loaded for: selects the fatbin
// entry and rejects cubins that cannot run there.
struct ImageTarget {
  int cc_major = 9;
  int cc_minor = 0;
};

inline constexpr char kBuiltinModuleName[] = "@builtin";

// Size in bytes of the image at `data`, derived from its own headers (ELF
// section and program header tables, fatbin header, PTX text length); for a
// fatbin wrapper, the size of the wrapper struct. 0 if the format is not
// recognized. Used when the caller gives no size (cuModuleLoadData).
size_t ImageExtent(const void* data);

// Parses `size` bytes at `data`. Errors: CUDA_ERROR_INVALID_IMAGE (unknown or
// corrupt image), CUDA_ERROR_INVALID_PTX, CUDA_ERROR_UNSUPPORTED_PTX_VERSION,
// CUDA_ERROR_NO_BINARY_FOR_GPU (nothing in it runs on `target`),
// CUDA_ERROR_NOT_SUPPORTED (a fatbin compression this build cannot decode).
// *error receives a one-line explanation on failure. Never throws.
CUresult ParseModuleImage(const void* data, size_t size, const ImageTarget& target,
                          ModuleImage* out, std::string* error);

// Whether SASS built for `arch` (e.g. 86) runs on a device of `target`: same
// major version, minor not above the device's.
bool SassRunsOn(int arch, const ImageTarget& target);

// Fills param_offsets and param_bytes from param_sizes and per-argument
// alignments (the CUDA ABI: each argument at its natural alignment).
void LayOutParams(const std::vector<uint32_t>& aligns, KernelInfo* kernel);

}  // namespace vgpu::sim
