// Copies and memsets (driver/hook_list.h, VGPU_CU_GATED_PASSTHROUGH): the
// real call inside the quiesce gate, so that no copy touches device memory
// while the process is suspended (docs/vmm.md). No body is written per
// symbol: each hook is one instantiation of GatedPassthrough, whose parameter
// list is the real entry point's type from cuda.h (decltype(&::sym)), and is
// exported under the symbol's own name. Adding a symbol to the list is all it
// takes; a hook that must do more than pass through belongs in another group.
#include "driver/real_driver.h"
#include "intercept/hooks.h"
#include "residency/engine.h"

namespace vgpu {
namespace {

template <auto Field, typename Fn>
struct GatedPassthrough;

template <auto Field, typename... A>
struct GatedPassthrough<Field, CUresult(CUDAAPI*)(A...)> {
  // Never throws: the gate cannot, and the driver is C.
  static CUresult CUDAAPI Call(A... args) noexcept {
    residency::GateGuard gate;
    auto real = driver::Cuda().*Field;
    return real != nullptr ? real(args...) : CUDA_ERROR_NOT_SUPPORTED;
  }
};

}  // namespace
}  // namespace vgpu

// Exports `sym` as an alias of its instantiation (same code, no trampoline).
// C++ cannot define a function from a function type without spelling its
// parameters, so the alias is made by the assembler: "i" hands it the
// instantiation's (local) symbol. intercept/hooks.h declares `sym` with
// cuda.h's type, which is the instantiation's type by construction.
#define VGPU_EXPORT_GATED(sym)                                                                   \
  [[gnu::used]] static void vgpu_export_gated_##sym() {                                         \
    asm(".globl " #sym "\n\t.type " #sym ", STT_FUNC\n\t.set " #sym ", %c0" ::"i"(                \
        &vgpu::GatedPassthrough<&vgpu::driver::RealCuda::sym##_, decltype(&::sym)>::Call)); \
  }
VGPU_CU_GATED_PASSTHROUGH(VGPU_EXPORT_GATED)
#undef VGPU_EXPORT_GATED
