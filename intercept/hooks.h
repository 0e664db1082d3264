// Declarations of every hook, with the type cuda.h gives the real entry point
// and the real symbol name as assembler name (cuda.h's #defines cannot rename
// them). A definition whose signature differs from cuda.h does not compile.
#pragma once

#include <cuda.h>

#include "driver/hook_list.h"
#include "driver/nvml_abi.h"

#define VGPU_DECLARE_HOOK(sym) \
  extern "C" __attribute__((visibility("default"))) decltype(::sym) vgpu_hook_##sym __asm__(#sym);
VGPU_CU_HOOKS(VGPU_DECLARE_HOOK)
VGPU_NVML_HOOKS(VGPU_DECLARE_HOOK)
#undef VGPU_DECLARE_HOOK

#define VGPU_HOOK(sym) extern "C" __attribute__((visibility("default")))

namespace vgpu {

// Our hook for an exported symbol name, nullptr if it is not hooked.
void* HookFor(const char* symbol);

// Exported C functions never throw: hook bodies run inside this.
template <typename R, typename F>
R NoThrow(R on_error, F&& f) noexcept {
  try {
    return f();
  } catch (...) {
    return on_error;
  }
}

}  // namespace vgpu
