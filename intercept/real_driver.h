// The one typed table of real driver entry points. Every call libvgpu makes
// into the driver goes through it, so the same code runs on the real driver
// and on the simulated node. The libraries are found by soname (or the paths
// in VGPU_REAL_LIBCUDA / VGPU_REAL_LIBNVML) and are never linked.
#pragma once

#include <cuda.h>

#include "intercept/hook_list.h"
#include "driver/nvml_abi.h"

namespace vgpu {

struct RealCuda {
#define VGPU_REAL_FIELD(sym) decltype(&::sym) sym##_ = nullptr;
  VGPU_CU_HOOKS(VGPU_REAL_FIELD)
  VGPU_CU_INTERNAL(VGPU_REAL_FIELD)
  void* handle = nullptr;
};

struct RealNvml {
  VGPU_NVML_HOOKS(VGPU_REAL_FIELD)
  VGPU_NVML_INTERNAL(VGPU_REAL_FIELD)
#undef VGPU_REAL_FIELD
  void* handle = nullptr;
};

// Loaded on first use (never at library load: a process that does not use
// CUDA pays nothing). `handle` is null if the library could not be opened.
const RealCuda& Cuda();
const RealNvml& Nvml();

// dlsym of the C library, bypassing libvgpu's own dlsym override.
void* RealDlsym(void* handle, const char* name);

// True if `symbol` is defined by a library whose file name starts with
// `soname_prefix` ("libcuda.so", "libnvidia-ml.so"). Does not load anything.
bool DefinedIn(const void* symbol, const char* soname_prefix);

}  // namespace vgpu

#define REAL(sym) (::vgpu::Cuda().sym##_)
#define REAL_NVML(sym) (::vgpu::Nvml().sym##_)
// A call into the real driver; an entry point this driver lacks answers like
// the driver's own stub for it would, instead of a null call.
#define REAL_CALL(sym, ...) \
  (REAL(sym) != nullptr ? REAL(sym)(__VA_ARGS__) : CUDA_ERROR_NOT_SUPPORTED)
#define REAL_NVML_CALL(sym, ...) \
  (REAL_NVML(sym) != nullptr ? REAL_NVML(sym)(__VA_ARGS__) : NVML_ERROR_FUNCTION_NOT_FOUND)
