// Host implementations of the kernels in sgd_kernels.cu for the simulated GPU
// node (see sim/include/vgpu/sim_kernel.h). Loaded by the sim through
// VGPU_SIM_KERNELS. Each computes what the CUDA kernel computes, summing in a
// fixed order so that results are bit-identical from run to run.
#include <vgpu/sim_kernel.h>

#include <cstdint>
#include <cstring>

namespace {

// Reads argument i as a T, checking its size. False on a layout mismatch.
template <typename T>
bool Arg(const vgpu_sim_launch* l, uint32_t i, T* out) {
  if (i >= l->num_params || l->param_sizes[i] != sizeof(T)) return false;
  std::memcpy(out, l->params[i], sizeof(T));
  return true;
}

// Host view of `count` floats at device address `dptr`, or nullptr.
float* Floats(const vgpu_sim_launch* l, uint64_t dptr, uint64_t count) {
  return static_cast<float*>(l->translate(l, dptr, count * sizeof(float)));
}

struct ForwardGradArgs {
  uint64_t x, y, w, grad, loss;
  int32_t n, d;
};

bool ReadForwardGradArgs(const vgpu_sim_launch* l, ForwardGradArgs* a) {
  return l->num_params == 7 && Arg(l, 0, &a->x) && Arg(l, 1, &a->y) && Arg(l, 2, &a->w) &&
         Arg(l, 3, &a->grad) && Arg(l, 4, &a->loss) && Arg(l, 5, &a->n) && Arg(l, 6, &a->d) &&
         a->n >= 0 && a->d >= 0;
}

// Accumulates into grad and *loss exactly as the kernel's atomics do, in row
// order.
void ForwardGrad(const float* x, const float* y, const float* w, float* grad, float* loss_out,
                 int n, int d) {
  const float inv_n = 1.0f / static_cast<float>(n);
  float loss = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float* row = x + static_cast<size_t>(i) * d;
    float pred = 0.0f;
    for (int j = 0; j < d; ++j) pred += row[j] * w[j];
    const float r = pred - y[i];
    loss += r * r;
    for (int j = 0; j < d; ++j) grad[j] += r * row[j] * inv_n;
  }
  *loss_out += loss * 0.5f * inv_n;
}

}  // namespace

extern "C" {

// sgd_forward_grad(const float* X, const float* y, const float* w,
//                  float* grad, float* loss_partial, int n, int d)
__attribute__((visibility("default"))) int vgpu_sim_kernel_sgd_forward_grad(vgpu_sim_launch* l) {
  ForwardGradArgs a;
  if (!ReadForwardGradArgs(l, &a)) return 1;
  const uint64_t n = a.n, d = a.d;
  const float* x = Floats(l, a.x, n * d);
  const float* y = Floats(l, a.y, n);
  const float* w = Floats(l, a.w, d);
  float* grad = Floats(l, a.grad, d);
  float* loss = Floats(l, a.loss, 1);
  if ((n * d != 0 && !x) || (n && !y) || (d && (!w || !grad)) || !loss) return 1;
  if (n > 0) ForwardGrad(x, y, w, grad, loss, a.n, a.d);
  l->bytes_touched = (n * d + n + 3 * d + 1) * sizeof(float);
  return 0;
}

// sgd_update(float* w, const float* grad, float lr, int d)
__attribute__((visibility("default"))) int vgpu_sim_kernel_sgd_update(vgpu_sim_launch* l) {
  uint64_t w_ptr, grad_ptr;
  float lr;
  int32_t d;
  if (l->num_params != 4 || !Arg(l, 0, &w_ptr) || !Arg(l, 1, &grad_ptr) || !Arg(l, 2, &lr) ||
      !Arg(l, 3, &d) || d < 0)
    return 1;
  if (d == 0) return 0;
  float* w = Floats(l, w_ptr, d);
  const float* grad = Floats(l, grad_ptr, d);
  if (!w || !grad) return 1;
  for (int j = 0; j < d; ++j) w[j] -= lr * grad[j];
  l->bytes_touched = 3ull * d * sizeof(float);
  return 0;
}

}  // extern "C"
