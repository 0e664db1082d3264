// Module and function entry points: cuModule*, cuFunc*.
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "sim/api/api_common.h"
#include "sim/engine/context.h"
#include "sim/engine/function_attributes.h"
#include "sim/api/module_api_util.h"
#include "sim/engine/module_registry.h"

namespace vgpu::sim {
namespace {

// Loads into the current context; explains a failure on stderr and in the
// JIT error log, if the caller gave one.
CUresult LoadIntoCurrent(const char* api, const void* image, size_t size, CUmodule* out,
                         JitLogs* logs) {
  CUcontext ctx = nullptr;
  if (CurrentContext(&ctx) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_CONTEXT;
  std::string error;
  const CUresult r = LoadModule(ctx, image, size, out, &error);
  if (r != CUDA_SUCCESS && !error.empty()) SimLog("%s: %s", api, error.c_str());
  if (logs != nullptr) logs->Write(r == CUDA_SUCCESS ? std::string() : error);
  return r;
}

CUresult LoadData(const char* api, CUmodule* module, const void* image, JitLogs* logs) {
  if (module == nullptr || image == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return LoadIntoCurrent(api, image, 0, module, logs);
}

}  // namespace
}  // namespace vgpu::sim

using vgpu::sim::CurrentContext;
using vgpu::sim::GetFunctionAttribute;
using vgpu::sim::HandleKind;
using vgpu::sim::HandleRef;
using vgpu::sim::JitLogs;
using vgpu::sim::KernelInfo;
using vgpu::sim::LoadData;
using vgpu::sim::LoadIntoCurrent;
using vgpu::sim::ModuleFunctions;
using vgpu::sim::ModuleGetFunction;
using vgpu::sim::ModuleGetGlobal;
using vgpu::sim::NoThrow;
using vgpu::sim::ReadImageFile;
using vgpu::sim::SetFunctionAttribute;
using vgpu::sim::UnloadModule;

SIM_EXPORT CUresult CUDAAPI cuModuleLoad(CUmodule* module, const char* fname) {
  SIM_ENTER("cuModuleLoad");
  return NoThrow([&] {
    if (module == nullptr || fname == nullptr) return CUDA_ERROR_INVALID_VALUE;
    CUcontext ctx = nullptr;
    if (CurrentContext(&ctx) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_CONTEXT;
    std::vector<uint8_t> bytes;
    if (CUresult r = ReadImageFile(fname, &bytes); r != CUDA_SUCCESS) return r;
    return LoadIntoCurrent("cuModuleLoad", bytes.data(), bytes.size(), module, nullptr);
  });
}

SIM_EXPORT CUresult CUDAAPI cuModuleLoadData(CUmodule* module, const void* image) {
  SIM_ENTER("cuModuleLoadData");
  return NoThrow([&] { return LoadData("cuModuleLoadData", module, image, nullptr); });
}

SIM_EXPORT CUresult CUDAAPI cuModuleLoadDataEx(CUmodule* module, const void* image, unsigned int numOptions, CUjit_option* options, void** optionValues) {
  SIM_ENTER("cuModuleLoadDataEx");
  return NoThrow([&] {
    JitLogs logs;
    if (CUresult r = logs.Parse(numOptions, options, optionValues); r != CUDA_SUCCESS) return r;
    return LoadData("cuModuleLoadDataEx", module, image, &logs);
  });
}

SIM_EXPORT CUresult CUDAAPI cuModuleLoadFatBinary(CUmodule* module, const void* fatCubin) {
  SIM_ENTER("cuModuleLoadFatBinary");
  return NoThrow([&] { return LoadData("cuModuleLoadFatBinary", module, fatCubin, nullptr); });
}

SIM_EXPORT CUresult CUDAAPI cuModuleUnload(CUmodule hmod) {
  SIM_ENTER("cuModuleUnload");
  return NoThrow([&] { return hmod ? UnloadModule(hmod) : CUDA_ERROR_INVALID_HANDLE; });
}

SIM_EXPORT CUresult CUDAAPI cuModuleGetLoadingMode(CUmoduleLoadingMode* mode) {
  SIM_ENTER("cuModuleGetLoadingMode");
  if (mode == nullptr) return CUDA_ERROR_INVALID_VALUE;
  // Like the driver: lazy unless CUDA_MODULE_LOADING=EAGER.
  const char* env = std::getenv("CUDA_MODULE_LOADING");
  *mode = env && strcmp(env, "EAGER") == 0 ? CU_MODULE_EAGER_LOADING : CU_MODULE_LAZY_LOADING;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuModuleGetFunction(CUfunction* hfunc, CUmodule hmod, const char* name) {
  SIM_ENTER("cuModuleGetFunction");
  return NoThrow([&] {
    if (hfunc == nullptr || name == nullptr) return CUDA_ERROR_INVALID_VALUE;
    return ModuleGetFunction(hmod, name, hfunc);
  });
}

SIM_EXPORT CUresult CUDAAPI cuModuleGetFunctionCount(unsigned int* count, CUmodule mod) {
  SIM_ENTER("cuModuleGetFunctionCount");
  return NoThrow([&] {
    if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
    std::vector<CUfunction> fns;
    if (CUresult r = ModuleFunctions(mod, &fns); r != CUDA_SUCCESS) return r;
    *count = static_cast<unsigned int>(fns.size());
    return CUDA_SUCCESS;
  });
}

SIM_EXPORT CUresult CUDAAPI cuModuleEnumerateFunctions(CUfunction* functions, unsigned int numFunctions, CUmodule mod) {
  SIM_ENTER("cuModuleEnumerateFunctions");
  return NoThrow([&] {
    if (functions == nullptr && numFunctions != 0) return CUDA_ERROR_INVALID_VALUE;
    std::vector<CUfunction> fns;
    if (CUresult r = ModuleFunctions(mod, &fns); r != CUDA_SUCCESS) return r;
    for (size_t i = 0; i < fns.size() && i < numFunctions; ++i) functions[i] = fns[i];
    return CUDA_SUCCESS;
  });
}

SIM_EXPORT CUresult CUDAAPI cuModuleGetGlobal_v2(CUdeviceptr* dptr, size_t* bytes, CUmodule hmod, const char* name) {
  SIM_ENTER("cuModuleGetGlobal_v2");
  return NoThrow([&] {
    if (name == nullptr) return CUDA_ERROR_INVALID_VALUE;
    return ModuleGetGlobal(hmod, name, dptr, bytes);
  });
}

SIM_EXPORT CUresult CUDAAPI cuFuncGetAttribute(int* pi, CUfunction_attribute attrib, CUfunction hfunc) {
  SIM_ENTER("cuFuncGetAttribute");
  if (pi == nullptr) return CUDA_ERROR_INVALID_VALUE;
  HandleRef h(hfunc);
  if (!h) return CUDA_ERROR_INVALID_HANDLE;
  return GetFunctionAttribute(h.get(), attrib, pi);
}

SIM_EXPORT CUresult CUDAAPI cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib, int value) {
  SIM_ENTER("cuFuncSetAttribute");
  HandleRef h(hfunc);
  if (!h) return CUDA_ERROR_INVALID_HANDLE;
  return SetFunctionAttribute(h.get(), attrib, value);
}

SIM_EXPORT CUresult CUDAAPI cuFuncSetCacheConfig(CUfunction hfunc, CUfunc_cache config) {
  SIM_ENTER("cuFuncSetCacheConfig");
  HandleRef h(hfunc);
  if (!h) return CUDA_ERROR_INVALID_HANDLE;
  if (config < CU_FUNC_CACHE_PREFER_NONE || config > CU_FUNC_CACHE_PREFER_EQUAL) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  h->attributes().cache_config.store(config);
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuFuncSetSharedMemConfig(CUfunction hfunc, CUsharedconfig config) {
  SIM_ENTER("cuFuncSetSharedMemConfig");
  HandleRef h(hfunc);
  if (!h) return CUDA_ERROR_INVALID_HANDLE;
  if (config < CU_SHARED_MEM_CONFIG_DEFAULT_BANK_SIZE ||
      config > CU_SHARED_MEM_CONFIG_EIGHT_BYTE_BANK_SIZE) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;  // bank size is fixed on the modelled architecture
}

SIM_EXPORT CUresult CUDAAPI cuFuncGetModule(CUmodule* hmod, CUfunction hfunc) {
  SIM_ENTER("cuFuncGetModule");
  if (hmod == nullptr) return CUDA_ERROR_INVALID_VALUE;
  HandleRef h(hfunc);
  if (!h || h->kind != HandleKind::kFunction) return CUDA_ERROR_INVALID_HANDLE;
  *hmod = reinterpret_cast<CUmodule>(h->module);
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuFuncGetName(const char** name, CUfunction hfunc) {
  SIM_ENTER("cuFuncGetName");
  if (name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  HandleRef h(hfunc);
  if (!h) return CUDA_ERROR_INVALID_HANDLE;
  *name = h->kernel->name;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuFuncGetParamInfo(CUfunction func, size_t paramIndex, size_t* paramOffset, size_t* paramSize) {
  SIM_ENTER("cuFuncGetParamInfo");
  HandleRef h(func);
  if (!h) return CUDA_ERROR_INVALID_HANDLE;
  const KernelInfo& k = h->kernel->info;
  if (paramIndex >= k.param_sizes.size()) return CUDA_ERROR_INVALID_VALUE;
  if (paramOffset) *paramOffset = k.param_offsets[paramIndex];
  if (paramSize) *paramSize = k.param_sizes[paramIndex];
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuFuncIsLoaded(CUfunctionLoadingState* state, CUfunction function) {
  SIM_ENTER("cuFuncIsLoaded");
  if (state == nullptr) return CUDA_ERROR_INVALID_VALUE;
  HandleRef h(function);
  if (!h) return CUDA_ERROR_INVALID_HANDLE;
  *state = CU_FUNCTION_LOADING_STATE_LOADED;  // loading is immediate in the simulator
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuFuncLoad(CUfunction function) {
  SIM_ENTER("cuFuncLoad");
  HandleRef h(function);
  return h ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

// The CUDA 2.0 ABI with 32-bit device pointers and sizes: simulated device
// addresses lie above 4 GiB, so a variable's address can never be returned.
#undef cuModuleGetGlobal
extern "C" CUresult CUDAAPI cuModuleGetGlobal(unsigned int* dptr, unsigned int* bytes, CUmodule hmod, const char* name);
SIM_EXPORT CUresult CUDAAPI cuModuleGetGlobal(unsigned int* dptr, unsigned int* bytes, CUmodule hmod, const char* name) {
  SIM_ENTER("cuModuleGetGlobal");
  return NoThrow([&] {
    if (name == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (CUresult r = ModuleGetGlobal(hmod, name, nullptr, nullptr); r != CUDA_SUCCESS) return r;
    return CUDA_ERROR_NOT_SUPPORTED;
  });
}

// Texture and surface references: nvcc of CUDA 12 and later emits none, and
// the module readers know no such symbols, so a valid module has none to find
// (the answer a driver gives for a name the module lacks).
SIM_EXPORT CUresult CUDAAPI cuModuleGetTexRef(CUtexref* pTexRef, CUmodule hmod, const char* name) {
  SIM_ENTER("cuModuleGetTexRef");
  return NoThrow([&] {
    if (pTexRef == nullptr || name == nullptr) return CUDA_ERROR_INVALID_VALUE;
    std::vector<CUfunction> fns;
    if (CUresult r = ModuleFunctions(hmod, &fns); r != CUDA_SUCCESS) return r;
    return CUDA_ERROR_NOT_FOUND;
  });
}

SIM_EXPORT CUresult CUDAAPI cuModuleGetSurfRef(CUsurfref* pSurfRef, CUmodule hmod, const char* name) {
  SIM_ENTER("cuModuleGetSurfRef");
  return NoThrow([&] {
    if (pSurfRef == nullptr || name == nullptr) return CUDA_ERROR_INVALID_VALUE;
    std::vector<CUfunction> fns;
    if (CUresult r = ModuleFunctions(hmod, &fns); r != CUDA_SUCCESS) return r;
    return CUDA_ERROR_NOT_FOUND;
  });
}
