// The one typed table of real driver entry points, generated from the one
// hook list (driver/hook_list.h). Every call the product makes into the driver
// goes through it, so the same code runs on the real driver and on the
// simulated node, and a module can be given another table (a test's fakes).
// The libraries are found by soname, or by the paths their owner passes in
// (libvgpu passes VGPU_REAL_LIBCUDA / VGPU_REAL_LIBNVML), and are never linked.
// This layer knows nothing of libvgpu's runtime or configuration.
#pragma once

#include <cuda.h>

#include <string>

#include "driver/hook_list.h"
#include "driver/nvml_abi.h"

namespace vgpu::driver {

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

// Where the real libraries are; an empty path means the soname.
struct LibraryPaths {
  std::string libcuda;
  std::string libnvml;
};
using LibraryPathsFn = LibraryPaths (*)();

// Installs the function that says where the libraries are. Called by the
// process's owner before the first driver call (libvgpu: when it is loaded);
// the function runs once, at the first Cuda()/Nvml(). Without one, sonames.
void SetLibraryPaths(LibraryPathsFn paths);

// The process's tables, loaded on first use (never at library load: a
// process that does not use CUDA pays nothing). `handle` is null if the
// library could not be opened.
const RealCuda& Cuda();
const RealNvml& Nvml();

// Fills `t` from the library at `path` (dlopen'ed RTLD_LOCAL; the soname if
// empty); false if it cannot be opened.
bool LoadCuda(const std::string& path, RealCuda* t);
bool LoadNvml(const std::string& path, RealNvml* t);

// dlsym of the C library, bypassing libvgpu's own dlsym override.
void* RealDlsym(void* handle, const char* name);

// True if `symbol` is defined by a library whose file name starts with
// `soname_prefix` ("libcuda.so", "libnvidia-ml.so"). Does not load anything.
bool DefinedIn(const void* symbol, const char* soname_prefix);

}  // namespace vgpu::driver

#define REAL(sym) (::vgpu::driver::Cuda().sym##_)
#define REAL_NVML(sym) (::vgpu::driver::Nvml().sym##_)
// A call into the real driver; an entry point this driver lacks answers like
// the driver's own stub for it would, instead of a null call.
// The name is pasted here, not passed on to REAL(): an argument passed on is
// macro-expanded first, and cuda.h #defines many legacy names to their _v2
// (REAL_CALL(cuDeviceGetUuid, ...) called the real cuDeviceGetUuid_v2).
#define REAL_CALL(sym, ...)                                                             \
  (::vgpu::driver::Cuda().sym##_ != nullptr ? ::vgpu::driver::Cuda().sym##_(__VA_ARGS__) \
                                            : CUDA_ERROR_NOT_SUPPORTED)
#define REAL_NVML_CALL(sym, ...)                                                        \
  (::vgpu::driver::Nvml().sym##_ != nullptr ? ::vgpu::driver::Nvml().sym##_(__VA_ARGS__) \
                                            : NVML_ERROR_FUNCTION_NOT_FOUND)
// The same call through a table a module was given (vmm::Manager, tests).
#define TABLE_CALL(table, sym, ...) \
  ((table).sym##_ != nullptr ? (table).sym##_(__VA_ARGS__) : CUDA_ERROR_NOT_SUPPORTED)
