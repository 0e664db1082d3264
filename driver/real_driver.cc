#include "driver/real_driver.h"

#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <cstring>

namespace vgpu::driver {
namespace {

using DlsymFn = void* (*)(void*, const char*);

// Not instrumented: under ASan, the runtime's own start-up resolves functions
// through dlsym (ours, when libvgpu is preloaded after it) before shadow
// memory exists, so these must not touch it.
__attribute__((no_sanitize("address", "undefined"))) DlsymFn LibcDlsym() {
  // dlvsym is not overridden, so it reaches libc's dlsym under any of its versions.
  static DlsymFn fn = [] {
    auto f = reinterpret_cast<DlsymFn>(dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34"));
    if (f == nullptr) f = reinterpret_cast<DlsymFn>(dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5"));
    return f;
  }();
  return fn;
}

void* OpenLibrary(const std::string& configured, const char* soname) {
  const char* name = configured.empty() ? soname : configured.c_str();
  void* h = dlopen(name, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (h == nullptr) h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  return h;
}

template <typename T>
void Resolve(void* handle, const char* name, T* out) {
  *out = handle != nullptr ? reinterpret_cast<T>(RealDlsym(handle, name)) : nullptr;
}

// Set by the process's owner before any table loads (libvgpu: from a
// constructor, before the Runtime exists: a hook may run from another
// library's constructor first). The tables themselves are function-local
// statics for the same reason: the loader decides when the first call comes.
std::atomic<LibraryPathsFn> g_paths{nullptr};

LibraryPaths Paths() {
  LibraryPathsFn f = g_paths.load(std::memory_order_acquire);
  return f != nullptr ? f() : LibraryPaths{};
}

}  // namespace

__attribute__((no_sanitize("address", "undefined"))) void* RealDlsym(void* handle,
                                                                      const char* name) {
  DlsymFn f = LibcDlsym();
  return f != nullptr ? f(handle, name) : nullptr;
}

void SetLibraryPaths(LibraryPathsFn paths) { g_paths.store(paths, std::memory_order_release); }

bool LoadCuda(const std::string& path, RealCuda* t) {
  t->handle = OpenLibrary(path, "libcuda.so.1");
#define VGPU_RESOLVE(sym) Resolve(t->handle, #sym, &t->sym##_);
  VGPU_CU_HOOKS(VGPU_RESOLVE)
  VGPU_CU_INTERNAL(VGPU_RESOLVE)
  return t->handle != nullptr;
}

bool LoadNvml(const std::string& path, RealNvml* t) {
  t->handle = OpenLibrary(path, "libnvidia-ml.so.1");
  VGPU_NVML_HOOKS(VGPU_RESOLVE)
  VGPU_NVML_INTERNAL(VGPU_RESOLVE)
#undef VGPU_RESOLVE
  return t->handle != nullptr;
}

// Never destroyed: hooks may run during exit.
const RealCuda& Cuda() {
  static const RealCuda* t = [] {
    auto* table = new RealCuda();
    LoadCuda(Paths().libcuda, table);
    return table;
  }();
  return *t;
}

const RealNvml& Nvml() {
  static const RealNvml* t = [] {
    auto* table = new RealNvml();
    LoadNvml(Paths().libnvml, table);
    return table;
  }();
  return *t;
}

bool DefinedIn(const void* symbol, const char* soname_prefix) {
  Dl_info info{};
  link_map* map = nullptr;
  if (symbol == nullptr ||
      dladdr1(symbol, &info, reinterpret_cast<void**>(&map), RTLD_DL_LINKMAP) == 0 ||
      map == nullptr || map->l_name == nullptr) {
    return false;
  }
  const char* base = std::strrchr(map->l_name, '/');
  base = base != nullptr ? base + 1 : map->l_name;
  return std::strncmp(base, soname_prefix, std::strlen(soname_prefix)) == 0;
}

}  // namespace vgpu::driver
