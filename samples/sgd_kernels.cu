// Kernels of the linear-regression-by-SGD sample (samples/train.cc, train.py).
//
// Model: prediction = dot(x, w); loss = sum((dot(x_i, w) - y_i)^2) / (2 n);
// gradient = X^T (X w - y) / n. The same file runs on a real GPU and, through
// the host implementations in sgd_kernels_host.cc, on the simulated node.
//
// Every kernel uses grid-stride loops, so any launch configuration computes the
// whole result. On a GPU the float atomics make the summation order (and the
// last bits) vary between runs; the host implementations sum in a fixed order,
// which makes the sim bit-deterministic.

extern "C" __global__ void sgd_forward_grad(const float* X, const float* y, const float* w,
                                            float* grad, float* loss_partial, int n, int d) {
  // grad[0..d) and loss_partial[0] must be zero on entry (the caller memsets).
  const float inv_n = 1.0f / static_cast<float>(n);
  float loss = 0.0f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    const float* row = X + static_cast<size_t>(i) * d;
    float pred = 0.0f;
    for (int j = 0; j < d; ++j) pred += row[j] * w[j];
    const float r = pred - y[i];
    loss += r * r;
    for (int j = 0; j < d; ++j) atomicAdd(&grad[j], r * row[j] * inv_n);
  }
  // Warp reduction of the per-thread loss, one atomic per warp (blockDim.x
  // must be a multiple of 32; every thread reaches this point).
  for (int off = 16; off > 0; off >>= 1) loss += __shfl_down_sync(0xffffffffu, loss, off);
  if ((threadIdx.x & 31) == 0 && loss != 0.0f) atomicAdd(loss_partial, loss * 0.5f * inv_n);
}

extern "C" __global__ void sgd_update(float* w, const float* grad, float lr, int d) {
  for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < d; j += gridDim.x * blockDim.x) {
    w[j] -= lr * grad[j];
  }
}
