// Kernels of the portable conformance tests. Built with nvcc into a cubin and a
// fatbin; on the simulator they run through conformance_kernels_host.cc.

extern "C" __global__ void conf_fill_u32(unsigned int* p, unsigned int value,
                                         unsigned long long count) {
  for (unsigned long long i = blockIdx.x * static_cast<unsigned long long>(blockDim.x) + threadIdx.x;
       i < count; i += static_cast<unsigned long long>(gridDim.x) * blockDim.x)
    p[i] = value;
}

extern "C" __global__ void conf_add_u32(unsigned int* p, unsigned int value,
                                        unsigned long long count) {
  for (unsigned long long i = blockIdx.x * static_cast<unsigned long long>(blockDim.x) + threadIdx.x;
       i < count; i += static_cast<unsigned long long>(gridDim.x) * blockDim.x)
    p[i] += value;
}

// Busy for at least `ns` of device time (global timer).
extern "C" __global__ void conf_sleep_ns(unsigned long long ns) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    __nanosleep(1000);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}

// Deliberately has no host implementation in conformance_kernels_host.
extern "C" __global__ void conf_no_host_impl(unsigned int* p) { p[threadIdx.x] = 42; }

__device__ unsigned int conf_global[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

// dst[i] += src[i]: the reduction step of the IPC all-reduce tests.
extern "C" __global__ void conf_addv_u32(unsigned int* dst, const unsigned int* src,
                                         unsigned long long count) {
  for (unsigned long long i =
           blockIdx.x * static_cast<unsigned long long>(blockDim.x) + threadIdx.x;
       i < count; i += static_cast<unsigned long long>(gridDim.x) * blockDim.x)
    dst[i] += src[i];
}
