// Context-independent loading: cuLibrary*, cuKernel*.
#include <string>
#include <vector>

#include "sim/api/api_common.h"
#include "sim/engine/context.h"
#include "sim/engine/function_attributes.h"
#include "sim/api/module_api_util.h"
#include "sim/engine/module_registry.h"
#include "sim/engine/sim_state.h"

namespace vgpu::sim {
namespace {

// Libraries are read for the current context's device, else device 0; a
// context on a device of another architecture re-reads the image.
ImageTarget LibraryTarget() {
  CUcontext ctx = nullptr;
  const int device = CurrentContext(&ctx) == CUDA_SUCCESS ? ContextDevice(ctx) : 0;
  return TargetOfDevice(device < 0 ? 0 : device);
}

CUresult CheckLibraryOptions(unsigned int n, const CUlibraryOption* options, void** values) {
  if (n == 0) return CUDA_SUCCESS;
  if (options == nullptr || values == nullptr) return CUDA_ERROR_INVALID_VALUE;
  for (unsigned int i = 0; i < n; ++i) {
    if (options[i] < 0 || options[i] >= CU_LIBRARY_NUM_OPTIONS) return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

CUresult LoadLibraryImage(const char* api, CUlibrary* library, const void* code, size_t size,
              unsigned int num_jit, CUjit_option* jit_options, void** jit_values,
              unsigned int num_lib, CUlibraryOption* lib_options, void** lib_values) {
  JitLogs logs;
  if (CUresult r = logs.Parse(num_jit, jit_options, jit_values); r != CUDA_SUCCESS) return r;
  if (CUresult r = CheckLibraryOptions(num_lib, lib_options, lib_values); r != CUDA_SUCCESS) {
    return r;
  }
  std::string error;
  const CUresult r = LoadLibrary(code, size, LibraryTarget(), library, &error);
  if (r != CUDA_SUCCESS && !error.empty()) SimLog("%s: %s", api, error.c_str());
  logs.Write(r == CUDA_SUCCESS ? std::string() : error);
  return r;
}

// A pinned CUkernel handle, or an invalid one.
struct KernelRef : HandleRef {
  explicit KernelRef(CUkernel k) : HandleRef(k) {}
  bool ok() const { return get() != nullptr && get()->kind == HandleKind::kKernel; }
};

}  // namespace
}  // namespace vgpu::sim

using vgpu::sim::CurrentContext;
using vgpu::sim::GetFunctionAttribute;
using vgpu::sim::KernelFunction;
using vgpu::sim::KernelInfo;
using vgpu::sim::KernelRef;
using vgpu::sim::LibraryGetKernel;
using vgpu::sim::LibraryKernels;
using vgpu::sim::LibraryModule;
using vgpu::sim::ModuleGetGlobal;
using vgpu::sim::NoThrow;
using vgpu::sim::ReadImageFile;
using vgpu::sim::SetFunctionAttribute;
using vgpu::sim::UnloadLibrary;
using vgpu::sim::ValidDevice;

SIM_EXPORT CUresult CUDAAPI cuLibraryLoadData(CUlibrary* library, const void* code, CUjit_option* jitOptions, void** jitOptionsValues, unsigned int numJitOptions, CUlibraryOption* libraryOptions, void** libraryOptionValues, unsigned int numLibraryOptions) {
  SIM_ENTER("cuLibraryLoadData");
  return NoThrow([&] {
    if (library == nullptr || code == nullptr) return CUDA_ERROR_INVALID_VALUE;
    return vgpu::sim::LoadLibraryImage("cuLibraryLoadData", library, code, 0, numJitOptions, jitOptions,
                           jitOptionsValues, numLibraryOptions, libraryOptions,
                           libraryOptionValues);
  });
}

SIM_EXPORT CUresult CUDAAPI cuLibraryLoadFromFile(CUlibrary* library, const char* fileName, CUjit_option* jitOptions, void** jitOptionsValues, unsigned int numJitOptions, CUlibraryOption* libraryOptions, void** libraryOptionValues, unsigned int numLibraryOptions) {
  SIM_ENTER("cuLibraryLoadFromFile");
  return NoThrow([&] {
    if (library == nullptr || fileName == nullptr) return CUDA_ERROR_INVALID_VALUE;
    std::vector<uint8_t> bytes;
    if (CUresult r = ReadImageFile(fileName, &bytes); r != CUDA_SUCCESS) return r;
    return vgpu::sim::LoadLibraryImage("cuLibraryLoadFromFile", library, bytes.data(), bytes.size(),
                           numJitOptions, jitOptions, jitOptionsValues, numLibraryOptions,
                           libraryOptions, libraryOptionValues);
  });
}

SIM_EXPORT CUresult CUDAAPI cuLibraryUnload(CUlibrary library) {
  SIM_ENTER("cuLibraryUnload");
  return NoThrow([&] { return library ? UnloadLibrary(library) : CUDA_ERROR_INVALID_HANDLE; });
}

SIM_EXPORT CUresult CUDAAPI cuLibraryGetKernel(CUkernel* pKernel, CUlibrary library, const char* name) {
  SIM_ENTER("cuLibraryGetKernel");
  return NoThrow([&] {
    if (pKernel == nullptr || name == nullptr) return CUDA_ERROR_INVALID_VALUE;
    return LibraryGetKernel(library, name, pKernel);
  });
}

SIM_EXPORT CUresult CUDAAPI cuLibraryGetKernelCount(unsigned int* count, CUlibrary lib) {
  SIM_ENTER("cuLibraryGetKernelCount");
  return NoThrow([&] {
    if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
    std::vector<CUkernel> kernels;
    if (CUresult r = LibraryKernels(lib, &kernels); r != CUDA_SUCCESS) return r;
    *count = static_cast<unsigned int>(kernels.size());
    return CUDA_SUCCESS;
  });
}

SIM_EXPORT CUresult CUDAAPI cuLibraryEnumerateKernels(CUkernel* kernels, unsigned int numKernels, CUlibrary lib) {
  SIM_ENTER("cuLibraryEnumerateKernels");
  return NoThrow([&] {
    if (kernels == nullptr && numKernels != 0) return CUDA_ERROR_INVALID_VALUE;
    std::vector<CUkernel> all;
    if (CUresult r = LibraryKernels(lib, &all); r != CUDA_SUCCESS) return r;
    for (size_t i = 0; i < all.size() && i < numKernels; ++i) kernels[i] = all[i];
    return CUDA_SUCCESS;
  });
}

SIM_EXPORT CUresult CUDAAPI cuLibraryGetModule(CUmodule* pMod, CUlibrary library) {
  SIM_ENTER("cuLibraryGetModule");
  return NoThrow([&] {
    if (pMod == nullptr) return CUDA_ERROR_INVALID_VALUE;
    CUcontext ctx = nullptr;
    if (CurrentContext(&ctx) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_CONTEXT;
    return LibraryModule(library, ctx, pMod);
  });
}

SIM_EXPORT CUresult CUDAAPI cuKernelGetFunction(CUfunction* pFunc, CUkernel kernel) {
  SIM_ENTER("cuKernelGetFunction");
  return NoThrow([&] {
    if (pFunc == nullptr) return CUDA_ERROR_INVALID_VALUE;
    CUcontext ctx = nullptr;
    if (CurrentContext(&ctx) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_CONTEXT;
    return KernelFunction(kernel, ctx, pFunc);
  });
}

SIM_EXPORT CUresult CUDAAPI cuKernelGetLibrary(CUlibrary* pLib, CUkernel kernel) {
  SIM_ENTER("cuKernelGetLibrary");
  if (pLib == nullptr) return CUDA_ERROR_INVALID_VALUE;
  KernelRef k(kernel);
  if (!k.ok()) return CUDA_ERROR_INVALID_HANDLE;
  *pLib = reinterpret_cast<CUlibrary>(k->library);
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuLibraryGetGlobal(CUdeviceptr* dptr, size_t* bytes, CUlibrary library, const char* name) {
  SIM_ENTER("cuLibraryGetGlobal");
  return NoThrow([&] {
    if (name == nullptr) return CUDA_ERROR_INVALID_VALUE;
    CUcontext ctx = nullptr;
    if (CurrentContext(&ctx) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_CONTEXT;
    CUmodule mod = nullptr;
    if (CUresult r = LibraryModule(library, ctx, &mod); r != CUDA_SUCCESS) return r;
    return ModuleGetGlobal(mod, name, dptr, bytes);
  });
}

SIM_EXPORT CUresult CUDAAPI cuLibraryGetManaged(CUdeviceptr* dptr, size_t* bytes, CUlibrary library, const char* name) {
  SIM_ENTER("cuLibraryGetManaged");
  return NoThrow([&] {
    if (name == nullptr) return CUDA_ERROR_INVALID_VALUE;
    std::vector<CUkernel> unused;
    if (CUresult r = LibraryKernels(library, &unused); r != CUDA_SUCCESS) return r;
    return CUDA_ERROR_NOT_FOUND;  // __managed__ variables are not modelled
  });
}

SIM_EXPORT CUresult CUDAAPI cuLibraryGetUnifiedFunction(void** fptr, CUlibrary library, const char* symbol) {
  SIM_ENTER("cuLibraryGetUnifiedFunction");
  return NoThrow([&] {
    if (fptr == nullptr || symbol == nullptr) return CUDA_ERROR_INVALID_VALUE;
    std::vector<CUkernel> unused;
    if (CUresult r = LibraryKernels(library, &unused); r != CUDA_SUCCESS) return r;
    return CUDA_ERROR_NOT_FOUND;  // no unified (host-callable) functions
  });
}

SIM_EXPORT CUresult CUDAAPI cuKernelGetAttribute(int* pi, CUfunction_attribute attrib, CUkernel kernel, CUdevice dev) {
  SIM_ENTER("cuKernelGetAttribute");
  if (pi == nullptr) return CUDA_ERROR_INVALID_VALUE;
  KernelRef k(kernel);
  if (!k.ok()) return CUDA_ERROR_INVALID_HANDLE;
  if (!ValidDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  return GetFunctionAttribute(k.get(), attrib, pi);
}

SIM_EXPORT CUresult CUDAAPI cuKernelSetAttribute(CUfunction_attribute attrib, int val, CUkernel kernel, CUdevice dev) {
  SIM_ENTER("cuKernelSetAttribute");
  KernelRef k(kernel);
  if (!k.ok()) return CUDA_ERROR_INVALID_HANDLE;
  if (!ValidDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  return SetFunctionAttribute(k.get(), attrib, val);
}

SIM_EXPORT CUresult CUDAAPI cuKernelSetCacheConfig(CUkernel kernel, CUfunc_cache config, CUdevice dev) {
  SIM_ENTER("cuKernelSetCacheConfig");
  KernelRef k(kernel);
  if (!k.ok()) return CUDA_ERROR_INVALID_HANDLE;
  if (!ValidDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  if (config < CU_FUNC_CACHE_PREFER_NONE || config > CU_FUNC_CACHE_PREFER_EQUAL) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  k->attributes().cache_config.store(config);
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuKernelGetName(const char** name, CUkernel hfunc) {
  SIM_ENTER("cuKernelGetName");
  if (name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  KernelRef k(hfunc);
  if (!k.ok()) return CUDA_ERROR_INVALID_HANDLE;
  *name = k->kernel->name;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuKernelGetParamInfo(CUkernel kernel, size_t paramIndex, size_t* paramOffset, size_t* paramSize) {
  SIM_ENTER("cuKernelGetParamInfo");
  KernelRef k(kernel);
  if (!k.ok()) return CUDA_ERROR_INVALID_HANDLE;
  const KernelInfo& info = k->kernel->info;
  if (paramIndex >= info.param_sizes.size()) return CUDA_ERROR_INVALID_VALUE;
  if (paramOffset) *paramOffset = info.param_offsets[paramIndex];
  if (paramSize) *paramSize = info.param_sizes[paramIndex];
  return CUDA_SUCCESS;
}
