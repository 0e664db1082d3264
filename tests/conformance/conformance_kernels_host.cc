// Host implementations of conformance_kernels.cu for the simulated node (ABI:
// sim/include/vgpu/sim_kernel.h). Each checks the parameter layout the
// simulator extracted from the cubin, so a wrong layout fails the launch.
#include <time.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "vgpu/sim_kernel.h"

#define CONF_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

template <typename T>
bool Param(const vgpu_sim_launch* l, uint32_t i, T* out) {
  if (i >= l->num_params || l->param_sizes[i] != sizeof(T)) return false;
  memcpy(out, l->params[i], sizeof(T));
  return true;
}

// (uint32_t* p, uint32_t value, uint64_t count) -> host view of p.
uint32_t* ArrayArgs(vgpu_sim_launch* l, uint32_t* value, uint64_t* count) {
  uint64_t dptr;
  if (l->abi_version != VGPU_SIM_KERNEL_ABI_VERSION || l->num_params != 3 || !Param(l, 0, &dptr) ||
      !Param(l, 1, value) || !Param(l, 2, count))
    return nullptr;
  if (*count == 0) return reinterpret_cast<uint32_t*>(8);  // nothing to touch
  l->bytes_touched = *count * sizeof(uint32_t);
  return static_cast<uint32_t*>(l->translate(l, dptr, *count * sizeof(uint32_t)));
}

}  // namespace

CONF_EXPORT int vgpu_sim_kernel_conf_fill_u32(vgpu_sim_launch* l) {
  uint32_t value;
  uint64_t count;
  uint32_t* p = ArrayArgs(l, &value, &count);
  if (p == nullptr) return 1;
  for (uint64_t i = 0; i < count; ++i) p[i] = value;
  return 0;
}

CONF_EXPORT int vgpu_sim_kernel_conf_add_u32(vgpu_sim_launch* l) {
  uint32_t value;
  uint64_t count;
  uint32_t* p = ArrayArgs(l, &value, &count);
  if (p == nullptr) return 1;
  for (uint64_t i = 0; i < count; ++i) p[i] += value;
  return 0;
}

CONF_EXPORT int vgpu_sim_kernel_conf_addv_u32(vgpu_sim_launch* l) {
  uint64_t dptr, sptr, count;
  if (l->abi_version != VGPU_SIM_KERNEL_ABI_VERSION || l->num_params != 3 || !Param(l, 0, &dptr) ||
      !Param(l, 1, &sptr) || !Param(l, 2, &count))
    return 1;
  if (count == 0) return 0;
  l->bytes_touched = 2 * count * sizeof(uint32_t);
  auto* dst = static_cast<uint32_t*>(l->translate(l, dptr, count * sizeof(uint32_t)));
  auto* src = static_cast<const uint32_t*>(l->translate(l, sptr, count * sizeof(uint32_t)));
  if (dst == nullptr || src == nullptr) return 1;
  for (uint64_t i = 0; i < count; ++i) dst[i] += src[i];
  return 0;
}

// Sleeps on the host; the simulator charges the host time as device time.
CONF_EXPORT int vgpu_sim_kernel_conf_sleep_ns(vgpu_sim_launch* l) {
  uint64_t ns;
  if (l->num_params != 1 || !Param(l, 0, &ns)) return 1;
  timespec ts{static_cast<time_t>(ns / 1000000000ull), static_cast<long>(ns % 1000000000ull)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
  return 0;
}
