#include "sim/modules/kernel_libraries.h"

#include <dlfcn.h>

namespace vgpu::sim {

KernelLibraries::KernelLibraries(const std::vector<std::string>& paths,
                                 std::vector<std::string>* errors) {
  for (const std::string& path : paths) {
    if (void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      handles_.push_back(h);
    } else {
      const char* why = dlerror();
      errors->push_back("VGPU_SIM_KERNELS: cannot load " + path + ": " + (why ? why : "?"));
    }
  }
}

KernelLibraries::~KernelLibraries() {
  for (void* h : handles_) dlclose(h);
}

vgpu_sim_kernel_fn KernelLibraries::Find(std::string_view kernel) const {
  const std::string symbol = KernelSymbol(kernel);
  for (void* h : handles_) {
    if (void* fn = dlsym(h, symbol.c_str())) return reinterpret_cast<vgpu_sim_kernel_fn>(fn);
  }
  return nullptr;
}

std::string KernelSymbol(std::string_view kernel) {
  return std::string(VGPU_SIM_KERNEL_PREFIX) + std::string(kernel);
}

}  // namespace vgpu::sim
