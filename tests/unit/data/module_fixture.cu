// Kernels and variables whose layout the module reader tests check. Built at
// test build time with nvcc into a cubin, fatbins and PTX (see sim_module.cmake);
// never run: the simulator runs kernels through host implementations.
struct Pair {
  int a;
  double b;
};
struct Big {
  char bytes[20000];  // > 16 KiB: described by EIATTR_KPARAM_INFO_V2 records
};

__device__ int g_counter;                                  // zero-initialized
__device__ float g_table[4] = {1.0f, 2.0f, 3.0f, 4.0f};    // initialized
__constant__ int c_scale = 7;                              // constant bank

extern "C" __global__ void grad(const float* x, double* y, int n, char c) {
  if (n) y[0] = x[0] + c + g_counter;
}

__global__ void with_struct(Pair p, char c, short s, double* out) {
  __shared__ float tile[64];
  tile[threadIdx.x] = p.a;
  __syncthreads();
  out[0] = p.b + c + s + tile[0] + g_table[1] + c_scale;
}

extern "C" __global__ void noparams() {}

extern "C" __global__ void __launch_bounds__(256) bounded(int* out) {
  out[blockIdx.z * 100 + threadIdx.z] = 1;
}

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900  // clusters need sm_90
extern "C" __global__ void __cluster_dims__(2, 1, 1) clustered(int* out) { out[0] = 1; }
#endif

extern "C" __global__ void big_param(Big b, int* out, int3 v) { out[0] = b.bytes[19999] + v.z; }
