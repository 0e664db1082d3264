// Device queries (intercept/hook_policy.h, VGPU_DEVICE_MAPPED_PASSTHROUGH):
// the real call with the CUdevice argument(s) translated from the process's
// virtual ordinals to physical ones; a hidden or unknown device is
// CUDA_ERROR_INVALID_DEVICE, as the driver answers for an ordinal it lacks.
// No body is written per symbol: each hook is one instantiation of
// DeviceMapped, with the parameter list cuda.h gives the real entry point,
// exported under the symbol's own name (as intercept/hooks_gated.cc does).
#include <cstddef>
#include <tuple>
#include <type_traits>

#include "driver/real_driver.h"
#include "intercept/hook_body.h"
#include "intercept/hook_policy.h"
#include "intercept/hooks.h"
#include "intercept/runtime.h"

namespace vgpu {
namespace {

template <auto Field, typename Fn, size_t... Devices>
struct DeviceMapped;

template <auto Field, size_t... Devices, typename... A>
struct DeviceMapped<Field, CUresult(CUDAAPI*)(A...), Devices...> {
  static_assert(sizeof...(Devices) > 0, "a device-mapped hook names a device argument");
  static_assert((std::is_same_v<std::tuple_element_t<Devices, std::tuple<A...>>, CUdevice> && ...),
                "VGPU_DEVICE_MAPPED_PASSTHROUGH: that position is not a CUdevice argument");

  static CUresult CUDAAPI Call(A... args) noexcept {
    return WhenReady([&]() -> CUresult {
      std::tuple<A...> call{args...};
      const DeviceMap& map = Runtime::Get().devices();
      bool known = true;
      ((std::get<Devices>(call) = map.ToOrdinal(VisibleIndex(std::get<Devices>(call))).value(),
        known = known && std::get<Devices>(call) >= 0),
       ...);
      if (!known) return CUDA_ERROR_INVALID_DEVICE;
      auto real = driver::Cuda().*Field;
      return real != nullptr ? std::apply(real, call) : CUDA_ERROR_NOT_SUPPORTED;
    });
  }
};

}  // namespace
}  // namespace vgpu

// Exports `sym` as an alias of its instantiation (hooks_gated.cc says how).
#define VGPU_EXPORT_DEVICE_MAPPED(sym, why, ...)                                                   \
  [[gnu::used]] static void vgpu_export_device_mapped_##sym() {                                    \
    asm(".globl " #sym "\n\t.type " #sym ", STT_FUNC\n\t.set " #sym ", %c0" ::"i"(                   \
        &vgpu::DeviceMapped<&vgpu::driver::RealCuda::sym##_, decltype(&::sym), __VA_ARGS__>::Call)); \
  }
VGPU_DEVICE_MAPPED_PASSTHROUGH(VGPU_EXPORT_DEVICE_MAPPED)
#undef VGPU_EXPORT_DEVICE_MAPPED
