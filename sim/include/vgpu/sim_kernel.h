/* Host implementations of device kernels for the simulated GPU node.
 *
 * A library named in VGPU_SIM_KERNELS (colon-separated paths) exports, for each
 * kernel it implements, a C function named "vgpu_sim_kernel_" followed by the
 * kernel's symbol name exactly as it appears in the cubin (the mangled C++ name
 * for non-extern "C" kernels), e.g.
 *
 *   extern "C" int vgpu_sim_kernel__Z5saxpyfPKfPfy(vgpu_sim_launch* l);
 *
 * The simulator calls it on the stream worker when the launch reaches the head
 * of its stream and the device's execution engine is free. This header is C so
 * that kernel libraries can be written in either language. */
#ifndef VGPU_SIM_KERNEL_H_
#define VGPU_SIM_KERNEL_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define VGPU_SIM_KERNEL_ABI_VERSION 1
#define VGPU_SIM_KERNEL_PREFIX "vgpu_sim_kernel_"

typedef struct vgpu_sim_launch {
  uint32_t abi_version;   /* VGPU_SIM_KERNEL_ABI_VERSION */
  uint32_t grid[3];       /* gridDimX/Y/Z */
  uint32_t block[3];      /* blockDimX/Y/Z */
  uint32_t shared_mem_bytes;
  uint32_t num_params;
  void* const* params;    /* params[i] points at the bytes of argument i */
  const uint32_t* param_sizes;
  /* Host address of [dptr, dptr + bytes) in device memory visible to the
   * launching context, or NULL if any byte of it is not accessible. */
  void* (*translate)(const struct vgpu_sim_launch* self, uint64_t dptr, uint64_t bytes);
  void* sim_private;
  /* Out: modelled device time in ns. Left at 0, the simulator charges the
   * host time the implementation took (and never less than that). */
  uint64_t device_time_ns;
  /* Out: number of bytes the kernel touched; used with the device's modelled
   * bandwidth when device_time_ns is 0. */
  uint64_t bytes_touched;
  /* Name of the kernel being run (its symbol name in the image). */
  const char* kernel_name;
  /* Ordinal of the device the launch runs on. */
  int32_t device;
  uint32_t reserved0;
  /* Device address of a __device__ or __constant__ variable of the kernel's
   * module in the launching context, or 0 if the module has none of that
   * name; *bytes (if not NULL) receives its size. Pass the result to
   * translate() to access it. */
  uint64_t (*get_global)(const struct vgpu_sim_launch* self, const char* name, uint64_t* bytes);
} vgpu_sim_launch;

/* Return 0 on success; non-zero makes the launch fail like a kernel fault
 * (CUDA_ERROR_ILLEGAL_ADDRESS, sticky for the context). */
typedef int (*vgpu_sim_kernel_fn)(vgpu_sim_launch* launch);

#ifdef __cplusplus
}
#endif
#endif /* VGPU_SIM_KERNEL_H_ */
