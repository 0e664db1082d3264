/* Host implementations of data/module_fixture.cu kernels, loaded through
 * VGPU_SIM_KERNELS by the module tests. */
#include <stdint.h>
#include <string.h>

#include "vgpu/sim_kernel.h"

/* grad(const float* x, double* y, int n, char c): y[0] = x[0] + c + g_counter. */
int vgpu_sim_kernel_grad(vgpu_sim_launch* l) {
  uint64_t x, y, counter_bytes = 0;
  int32_t n;
  char c;
  memcpy(&x, l->params[0], 8);
  memcpy(&y, l->params[1], 8);
  memcpy(&n, l->params[2], 4);
  memcpy(&c, l->params[3], 1);
  const float* hx = (const float*)l->translate(l, x, sizeof(float));
  double* hy = (double*)l->translate(l, y, sizeof(double));
  const uint64_t counter = l->get_global(l, "g_counter", &counter_bytes);
  const int32_t* hc = (const int32_t*)l->translate(l, counter, sizeof(int32_t));
  if (hx == NULL || hy == NULL || hc == NULL || counter_bytes != 4) return 1;
  if (n) *hy = *hx + c + *hc;
  l->bytes_touched = 16;
  return 0;
}

/* noparams(): models 42 ns of device time. */
int vgpu_sim_kernel_noparams(vgpu_sim_launch* l) {
  l->device_time_ns = 42;
  return 0;
}
