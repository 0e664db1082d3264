#include "sim/modules/builtin_kernels.h"

#include <time.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

namespace vgpu::sim {
namespace {

constexpr int kFault = 1;

template <typename T>
T Arg(const vgpu_sim_launch* l, uint32_t i) {
  T v;
  memcpy(&v, l->params[i], sizeof v);
  return v;
}

// Host view of count elements of T at device address p, nullptr (a fault) if
// the range is unmapped, overflows or is misaligned for T.
template <typename T>
T* View(const vgpu_sim_launch* l, uint64_t p, uint64_t count) {
  if (p % alignof(T) != 0 || count > std::numeric_limits<uint64_t>::max() / sizeof(T)) {
    return nullptr;
  }
  return static_cast<T*>(l->translate(l, p, count * sizeof(T)));
}

uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + ts.tv_nsec;
}

int Sleep(vgpu_sim_launch* l) {
  l->device_time_ns = Arg<uint64_t>(l, 0);
  return 0;
}

int Spin(vgpu_sim_launch* l) {
  const uint64_t until = NowNs() + Arg<uint64_t>(l, 0);
  while (NowNs() < until) {
  }
  return 0;
}

template <typename T>
int Fill(vgpu_sim_launch* l) {
  const uint64_t count = Arg<uint64_t>(l, 2);
  if (count == 0) return 0;
  T* p = View<T>(l, Arg<uint64_t>(l, 0), count);
  if (p == nullptr) return kFault;
  std::fill_n(p, count, Arg<T>(l, 1));
  l->bytes_touched = count * sizeof(T);
  return 0;
}

int AddU32(vgpu_sim_launch* l) {
  const uint64_t count = Arg<uint64_t>(l, 2);
  if (count == 0) return 0;
  uint32_t* p = View<uint32_t>(l, Arg<uint64_t>(l, 0), count);
  if (p == nullptr) return kFault;
  const uint32_t v = Arg<uint32_t>(l, 1);
  for (uint64_t i = 0; i < count; ++i) p[i] += v;
  l->bytes_touched = 2 * count * sizeof(uint32_t);  // read and write
  return 0;
}

int Copy(vgpu_sim_launch* l) {
  const uint64_t bytes = Arg<uint64_t>(l, 2);
  if (bytes == 0) return 0;
  uint8_t* dst = View<uint8_t>(l, Arg<uint64_t>(l, 0), bytes);
  const uint8_t* src = View<uint8_t>(l, Arg<uint64_t>(l, 1), bytes);
  if (dst == nullptr || src == nullptr) return kFault;
  memmove(dst, src, bytes);
  l->bytes_touched = 2 * bytes;
  return 0;
}

int Saxpy(vgpu_sim_launch* l) {
  const uint64_t n = Arg<uint64_t>(l, 3);
  if (n == 0) return 0;
  const float a = Arg<float>(l, 0);
  const float* x = View<float>(l, Arg<uint64_t>(l, 1), n);
  float* y = View<float>(l, Arg<uint64_t>(l, 2), n);
  if (x == nullptr || y == nullptr) return kFault;
  for (uint64_t i = 0; i < n; ++i) y[i] = a * x[i] + y[i];
  l->bytes_touched = 3 * n * sizeof(float);
  return 0;
}

int Checksum(vgpu_sim_launch* l) {
  const uint64_t count = Arg<uint64_t>(l, 1);
  const uint32_t* p = count ? View<uint32_t>(l, Arg<uint64_t>(l, 0), count) : nullptr;
  uint64_t* out = View<uint64_t>(l, Arg<uint64_t>(l, 2), 1);
  if ((count && p == nullptr) || out == nullptr) return kFault;
  *out = ChecksumU32Words(p, count);
  l->bytes_touched = count * sizeof(uint32_t) + sizeof(uint64_t);
  return 0;
}

int Trap(vgpu_sim_launch*) { return kFault; }

struct Builtin {
  const char* name;
  vgpu_sim_kernel_fn fn;
  std::vector<uint32_t> param_sizes;  // aligned naturally
};

const std::vector<Builtin>& Builtins() {
  static const std::vector<Builtin> kBuiltins = {
      {"vgpu_sim_sleep", Sleep, {8}},
      {"vgpu_sim_spin", Spin, {8}},
      {"vgpu_sim_fill_u8", Fill<uint8_t>, {8, 1, 8}},
      {"vgpu_sim_fill_u32", Fill<uint32_t>, {8, 4, 8}},
      {"vgpu_sim_add_u32", AddU32, {8, 4, 8}},
      {"vgpu_sim_copy", Copy, {8, 8, 8}},
      {"vgpu_sim_saxpy", Saxpy, {4, 8, 8, 8}},
      {"vgpu_sim_checksum", Checksum, {8, 8, 8}},
      {"vgpu_sim_trap", Trap, {}},
  };
  return kBuiltins;
}

ModuleImage MakeBuiltinImage() {
  ModuleImage image;
  image.format = ImageFormat::kBuiltin;
  image.arch = 0;  // runs on any device
  for (const Builtin& b : Builtins()) {
    KernelInfo k;
    k.name = b.name;
    k.param_sizes = b.param_sizes;
    LayOutParams(b.param_sizes, &k);  // natural alignment: align == size
    image.kernels.push_back(std::move(k));
  }
  return image;
}

}  // namespace

const ModuleImage& BuiltinModuleImage() {
  static const ModuleImage image = MakeBuiltinImage();
  return image;
}

vgpu_sim_kernel_fn FindBuiltinKernel(std::string_view name) {
  for (const Builtin& b : Builtins()) {
    if (name == b.name) return b.fn;
  }
  return nullptr;
}

uint64_t ChecksumU32Words(const uint32_t* words, uint64_t count) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (uint64_t i = 0; i < count; ++i) h = (h ^ words[i]) * 0x100000001b3ull;
  return h;
}

}  // namespace vgpu::sim
