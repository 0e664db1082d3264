// Host implementations of device kernels from the shared libraries named in
// VGPU_SIM_KERNELS (colon-separated paths). Kernel "k" is implemented by the
// symbol "vgpu_sim_kernel_k" (vgpu/sim_kernel.h), looked up in each library's
// own handle in list order, never in the global namespace.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "vgpu/sim_kernel.h"

namespace vgpu::sim {

class KernelLibraries {
 public:
  // Opens each path (RTLD_NOW | RTLD_LOCAL). One that cannot be opened is
  // skipped, with a one-line reason appended to *errors.
  KernelLibraries(const std::vector<std::string>& paths, std::vector<std::string>* errors);
  ~KernelLibraries();
  KernelLibraries(const KernelLibraries&) = delete;
  KernelLibraries& operator=(const KernelLibraries&) = delete;

  // The implementation of `kernel`, nullptr if no library exports it.
  vgpu_sim_kernel_fn Find(std::string_view kernel) const;

  size_t size() const { return handles_.size(); }

 private:
  std::vector<void*> handles_;
};

// The symbol that implements `kernel`: "vgpu_sim_kernel_" + kernel.
std::string KernelSymbol(std::string_view kernel);

}  // namespace vgpu::sim
