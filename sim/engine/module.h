// Modules, libraries and kernels of the simulated driver.
//
// CUfunction and CUkernel handles both point at a Kernel. A kernel runs through
// a host implementation: built-in kernels (module "@builtin") are part of the
// simulator; kernels of nvcc-built cubins, fatbins or PTX are looked up by name
// as "vgpu_sim_kernel_<name>" in the libraries listed in VGPU_SIM_KERNELS.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace vgpu::sim {

struct LaunchDims {
  uint32_t grid[3];
  uint32_t block[3];
  uint32_t shared_mem_bytes;
};

// Kernel arguments captured at launch time (the caller may reuse its buffers as
// soon as cuLaunchKernel returns). Small argument lists stay inline.
class ParamBuffer {
 public:
  static constexpr size_t kInline = 256;
  uint8_t* Resize(size_t bytes) {
    size_ = bytes;
    if (bytes <= kInline) return inline_;
    heap_ = std::make_unique<uint8_t[]>(bytes);
    return heap_.get();
  }
  const uint8_t* data() const { return size_ <= kInline ? inline_ : heap_.get(); }
  size_t size() const { return size_; }

 private:
  alignas(16) uint8_t inline_[kInline];
  std::unique_ptr<uint8_t[]> heap_;
  size_t size_ = 0;
};

// f may be a CUfunction or a CUkernel (cuLaunchKernel accepts both; a CUkernel
// is loaded into the current context here).
// Validates f for the launching context and packs kernelParams (or the
// CU_LAUNCH_PARAM_BUFFER_POINTER form of `extra`) into *out using the kernel's
// parameter layout. Errors: CUDA_ERROR_INVALID_HANDLE (bad f),
// CUDA_ERROR_INVALID_VALUE (both or neither of params/extra when params exist),
// CUDA_ERROR_NOT_FOUND (no host implementation: the message names the kernel
// and the symbol that was looked for).
CUresult PackKernelParams(CUfunction f, void** kernel_params, void** extra, ParamBuffer* out);
// The byte offset of each of f's parameters in a packed ParamBuffer; false if
// f is not a live function or kernel handle.
bool KernelParamOffsets(CUfunction f, std::vector<uint32_t>* offsets);

// Validates launch dimensions against the kernel and device limits
// (CUDA_ERROR_INVALID_VALUE for a zero dimension or > 1024 threads per block,
// or more dynamic shared memory than CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
// CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES beyond the kernel's launch bounds or
// register budget; CUDA_ERROR_INVALID_CLUSTER_SIZE for a grid that is not a
// multiple of the kernel's required cluster dimensions).
CUresult CheckLaunchDims(CUfunction f, const LaunchDims& dims);

// Runs the kernel's host implementation on the calling (stream worker) thread.
// *device_time_ns receives the modelled device time (0: use the host time):
// what the implementation set, else the bytes it touched at the device's
// configured memory bandwidth. Returns CUDA_ERROR_ILLEGAL_ADDRESS if the
// implementation reports a fault, CUDA_ERROR_INVALID_HANDLE if f was unloaded
// after the launch was queued. A CUkernel is loaded into ctx on first use.
CUresult ExecuteKernel(CUfunction f, CUcontext ctx, const LaunchDims& dims,
                       const ParamBuffer& params, uint64_t* device_time_ns);

// Name of a kernel for diagnostics ("?" for an invalid handle).
const char* KernelName(CUfunction f);

// Frees the modules of a context being destroyed.
void DestroyModulesOfContext(CUcontext ctx);

}  // namespace vgpu::sim
