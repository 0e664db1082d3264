// Loaded modules and libraries of the simulated driver.
//
// A Program is a parsed image with each kernel's host implementation
// resolved; it is immutable and shared. A Module is a Program loaded into one
// context: CUfunction handles and device memory for its variables. A Library
// (cuLibraryLoad*) is context-independent: CUkernel handles plus one Module per
// context it is used in, created on first use.
//
// Module and library handles are validated against registries under one
// mutex; CUfunction/CUkernel handles through the lock-free HandleTable.
#pragma once

#include <cuda.h>

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sim/modules/kernel_handles.h"
#include "sim/modules/module_image.h"
#include "vgpu/sim_kernel.h"

namespace vgpu::sim {

struct ProgramKernel {
  KernelInfo info;
  const char* name = "";                  // interned: valid for the life of the process
  vgpu_sim_kernel_fn fn = nullptr;        // nullptr: no host implementation
  uint32_t max_threads_per_block = 1024;  // launch bounds and registers applied
  int binary_version = 0;                 // CU_FUNC_ATTRIBUTE_BINARY_VERSION
  int ptx_version = 0;                    // CU_FUNC_ATTRIBUTE_PTX_VERSION
};

struct Program {
  ImageFormat format = ImageFormat::kCubin;
  std::vector<ProgramKernel> kernels;
  std::vector<GlobalInfo> globals;
  std::unordered_map<std::string_view, int> kernel_index;  // views of the interned names
  // Index of a kernel or variable by name, -1 if none.
  int FindKernel(std::string_view name) const;
  int FindGlobal(std::string_view name) const;
};

struct Library;

struct Module {
  CUcontext ctx = nullptr;
  int device = 0;
  std::shared_ptr<const Program> program;
  std::vector<KernelHandle*> functions;   // parallel to program->kernels
  CUdeviceptr globals_base = 0;           // one allocation holds every variable
  std::vector<CUdeviceptr> global_addrs;  // parallel to program->globals
  Library* library = nullptr;             // set for a library's per-context module
};

struct Library {
  std::vector<uint8_t> image;  // private copy, re-read for devices of another architecture
  ImageTarget target;          // what `program` was read for
  std::shared_ptr<const Program> program;
  std::vector<KernelHandle*> kernels;  // parallel to program->kernels
  std::unordered_map<CUcontext, Module*> modules;
  std::unordered_map<int, std::shared_ptr<const Program>> programs_by_cc;  // other targets
};

// Compute capability of device `device` as the node configures it.
ImageTarget TargetOfDevice(int device);

// Modules. `size` may be 0 when unknown (cuModuleLoadData): the image's own
// headers then give it. *error explains a failure.
CUresult LoadModule(CUcontext ctx, const void* image, size_t size, CUmodule* out,
                    std::string* error);
CUresult UnloadModule(CUmodule mod);
CUresult ModuleGetFunction(CUmodule mod, const char* name, CUfunction* out);
CUresult ModuleGetGlobal(CUmodule mod, const char* name, CUdeviceptr* dptr, size_t* bytes);
CUresult ModuleFunctions(CUmodule mod, std::vector<CUfunction>* out);

// Libraries.
CUresult LoadLibrary(const void* image, size_t size, const ImageTarget& target, CUlibrary* out,
                     std::string* error);
CUresult UnloadLibrary(CUlibrary lib);
CUresult LibraryGetKernel(CUlibrary lib, const char* name, CUkernel* out);
CUresult LibraryKernels(CUlibrary lib, std::vector<CUkernel>* out);
// The library's module in ctx, loaded on first use.
CUresult LibraryModule(CUlibrary lib, CUcontext ctx, CUmodule* out);
// The function of a library kernel in ctx (loads the library there if needed).
CUresult KernelFunction(CUkernel kernel, CUcontext ctx, CUfunction* out);

// The module a pinned handle runs in for ctx: its own module for a CUfunction,
// the library's module in ctx for a CUkernel (loaded on first use); nullptr
// with *result set on failure.
Module* ModuleForLaunch(KernelHandle* h, CUcontext ctx, CUresult* result);

// Device address and size of a variable of a live module; 0 if none.
CUdeviceptr ModuleGlobalAddress(const Module* m, std::string_view name, uint64_t* bytes);

// Unloads every module of ctx (its libraries' per-context modules included).
void DestroyModulesIn(CUcontext ctx);

}  // namespace vgpu::sim
