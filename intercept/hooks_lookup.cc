// The three ways programs reach the driver: linked symbols (the exported hooks
// themselves), dlopen + dlsym, and cuGetProcAddress (cudart's way).
#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "common/log.h"
#include "driver/proc_table.h"
#include "driver/real_driver.h"
#include "intercept/hook_policy.h"  // checks that every hook declares its policies
#include "intercept/hooks.h"
#include "intercept/runtime.h"

// The same table the simulated driver answers from, derived from the
// toolkit headers; libvgpu needs only its (name, version, variant) -> symbol.
#define VGPU_PROC_FN(sym) nullptr
#include "proc_table.inc"

namespace vgpu {
namespace {

using driver::kProcTable;

struct HookEntry {
  const char* name;
  void* fn;
  void* (*real)();  // the real entry point; a hook never replaces a missing one
};

const std::vector<HookEntry>& Hooks() {
  static const auto* hooks = [] {
    auto* v = new std::vector<HookEntry>{
#define VGPU_ENTRY(sym)                             \
  {#sym, reinterpret_cast<void*>(&vgpu_hook_##sym), \
   [] { return reinterpret_cast<void*>(REAL(sym)); }},
#define VGPU_NVML_ENTRY(sym)                        \
  {#sym, reinterpret_cast<void*>(&vgpu_hook_##sym), \
   [] { return reinterpret_cast<void*>(REAL_NVML(sym)); }},
        VGPU_CU_HOOKS(VGPU_ENTRY) VGPU_NVML_HOOKS(VGPU_NVML_ENTRY)
#undef VGPU_ENTRY
#undef VGPU_NVML_ENTRY
    };
    std::sort(v->begin(), v->end(), [](const HookEntry& a, const HookEntry& b) {
      return std::strcmp(a.name, b.name) < 0;
    });
    return v;
  }();
  return *hooks;
}

// The exported symbol the driver returns for (name, version, flags).
const char* SymbolFor(const char* name, int version, cuuint64_t flags) {
  bool per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
  driver::ProcLookup l = driver::LookupProc(kProcTable, sizeof kProcTable / sizeof kProcTable[0],
                                            name, version, per_thread);
  return l.entry != nullptr ? l.entry->symbol : nullptr;
}

// What a refused entry point answers, whatever its arguments.
CUresult CUDAAPI Refuse() { return CUDA_ERROR_NOT_SUPPORTED; }

#define VGPU_NAME(sym) #sym,
constexpr const char* kAlwaysRefused[] = {VGPU_CU_LEGACY_REFUSED(VGPU_NAME)};
constexpr const char* kRefusedWhenRemapped[] = {VGPU_CU_DEVICE_REFUSED(VGPU_NAME)};
#undef VGPU_NAME

template <size_t N>
bool Listed(const char* const (&names)[N], const char* symbol) {
  for (const char* n : names) {
    if (std::strcmp(n, symbol) == 0) return true;
  }
  return false;
}

// The replacement for a real entry point, or nullptr to keep it.
void* Replacement(const char* symbol) {
  if (void* hook = HookFor(symbol); hook != nullptr) return hook;
  if (Listed(kAlwaysRefused, symbol)) return reinterpret_cast<void*>(&Refuse);
  Runtime& rt = Runtime::Get();
  bool remapped = !rt.config().visible_devices.empty() || rt.config().visible_devices_set;
  if (remapped && Listed(kRefusedWhenRemapped, symbol)) return reinterpret_cast<void*>(&Refuse);
  return nullptr;
}

void SubstituteHook(const char* name, int version, cuuint64_t flags, void** pfn) {
  const char* sym = SymbolFor(name, version, flags);
  if (sym == nullptr) return;
  if (void* r = Replacement(sym); r != nullptr) *pfn = r;
}

}  // namespace

void* HookFor(const char* symbol) {
  const auto& hooks = Hooks();
  auto it = std::lower_bound(
      hooks.begin(), hooks.end(), symbol,
      [](const HookEntry& e, const char* s) { return std::strcmp(e.name, s) < 0; });
  if (it == hooks.end() || std::strcmp(it->name, symbol) != 0) return nullptr;
  return it->real() != nullptr ? it->fn : nullptr;
}

}  // namespace vgpu

using vgpu::Runtime;

VGPU_HOOK(cuInit) CUresult CUDAAPI vgpu_hook_cuInit(unsigned int flags) {
  return vgpu::NoThrow(CUDA_ERROR_UNKNOWN, [&] {
    Runtime& rt = Runtime::Get();
    if (!rt.config_ok()) return rt.OnCuInit();  // reports the error, fails closed
    if (REAL(cuInit) == nullptr) return CUDA_ERROR_NO_DEVICE;
    CUresult r = REAL(cuInit)(flags);
    return r != CUDA_SUCCESS ? r : rt.OnCuInit();
  });
}

VGPU_HOOK(cuGetProcAddress_v2)
CUresult CUDAAPI vgpu_hook_cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion,
                                               cuuint64_t flags,
                                               CUdriverProcAddressQueryResult* symbolStatus) {
  return vgpu::NoThrow(CUDA_ERROR_UNKNOWN, [&] {
    if (REAL(cuGetProcAddress_v2) == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = REAL(cuGetProcAddress_v2)(symbol, pfn, cudaVersion, flags, symbolStatus);
    if (r == CUDA_SUCCESS && pfn != nullptr && *pfn != nullptr) {
      vgpu::SubstituteHook(symbol, cudaVersion, flags, pfn);
    }
    return r;
  });
}

VGPU_HOOK(cuGetProcAddress)
CUresult CUDAAPI vgpu_hook_cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion,
                                            cuuint64_t flags) {
  return vgpu::NoThrow(CUDA_ERROR_UNKNOWN, [&] {
    if (REAL(cuGetProcAddress) == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = REAL(cuGetProcAddress)(symbol, pfn, cudaVersion, flags);
    if (r == CUDA_SUCCESS && pfn != nullptr && *pfn != nullptr) {
      vgpu::SubstituteHook(symbol, cudaVersion, flags, pfn);
    }
    return r;
  });
}

// dlsym is overridden narrowly: only names we hook, and only when the real
// lookup resolved them inside libcuda / libnvidia-ml. Everything else is
// libc's answer untouched.
// Not instrumented, for the reason given at RealDlsym.
extern "C" __attribute__((visibility("default"), no_sanitize("address", "undefined"))) void* dlsym(
    void* handle, const char* name) {
  // glibc declares `name` nonnull, so the compiler would drop a plain check;
  // an application passing NULL gets NULL, not a crash in our code.
  const char* checked = name;
  asm("" : "+r"(checked));
  if (checked == nullptr) return nullptr;
  void* real = vgpu::driver::RealDlsym(handle, name);
  if (real == nullptr) return real;
  bool cu = name[0] == 'c' && name[1] == 'u';
  bool nvml = std::strncmp(name, "nvml", 4) == 0;
  if (!cu && !nvml) return real;
  if (!vgpu::driver::DefinedIn(real, cu ? "libcuda.so" : "libnvidia-ml.so")) return real;
  void* replacement = vgpu::Replacement(name);
  return replacement != nullptr ? replacement : real;
}

// The always-refused entry points' exported names, for programs linked against them:
// the same refusal. Their arguments are never read, so one signature serves.
#define VGPU_LEGACY_EXPORT(sym)                       \
  extern "C" __attribute__((visibility("default")))   \
  CUresult CUDAAPI vgpu_legacy_##sym() __asm__(#sym); \
  extern "C" CUresult CUDAAPI vgpu_legacy_##sym() { return CUDA_ERROR_NOT_SUPPORTED; }
VGPU_CU_LEGACY_REFUSED(VGPU_LEGACY_EXPORT)
#undef VGPU_LEGACY_EXPORT
