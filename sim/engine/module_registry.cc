#include "sim/engine/module_registry.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <unordered_set>

#include "sim/engine/sim_log.h"
#include "sim/modules/builtin_kernels.h"
#include "sim/engine/context.h"
#include "sim/engine/device_memory.h"
#include "sim/modules/fatbin_reader.h"
#include "sim/modules/kernel_libraries.h"
#include "sim/engine/sim_state.h"

namespace vgpu::sim {
namespace {

constexpr uint32_t kMaxThreadsPerBlock = 1024;
constexpr uint32_t kRegistersPerBlock = 65536;
constexpr uint32_t kRegisterAllocUnit = 256;  // registers are allocated per warp in 256s

struct Registry {
  std::mutex mu;
  std::unordered_set<Module*> modules;
  std::unordered_map<Library*, std::shared_ptr<Library>> libraries;
};

// Never destroyed: entry points and stream workers may run during exit.
Registry& Reg() {
  static Registry* r = new Registry();
  return *r;
}

// Kernel names outlive their modules so that KernelName and cuFuncGetName
// results stay valid for diagnostics.
const char* InternName(std::string_view s) {
  static std::mutex mu;
  static auto* names = new std::unordered_set<std::string>();
  std::lock_guard<std::mutex> lock(mu);
  return names->emplace(s).first->c_str();
}

const KernelLibraries& KernelLibs() {
  static const KernelLibraries* libs = [] {
    std::vector<std::string> errors;
    const SimState* s = State();
    auto* l =
        new KernelLibraries(s ? s->config.kernel_libraries : std::vector<std::string>{}, &errors);
    for (const std::string& e : errors) SimLog("%s", e.c_str());
    return l;
  }();
  return *libs;
}

// The block size limit: the device's, the kernel's launch bounds, and what its
// register usage allows (registers per warp round up to the allocation unit).
uint32_t MaxThreads(const KernelInfo& k) {
  uint32_t t = kMaxThreadsPerBlock;
  if (k.launch_bound_threads) t = std::min(t, k.launch_bound_threads);
  if (k.num_regs > 0) {
    const uint32_t per_warp = (static_cast<uint32_t>(k.num_regs) * 32 + kRegisterAllocUnit - 1) /
                              kRegisterAllocUnit * kRegisterAllocUnit;
    t = std::min(t, kRegistersPerBlock / per_warp * 32);
  }
  return t;
}

std::shared_ptr<const Program> BuildProgram(ModuleImage image, const ImageTarget& target) {
  auto p = std::make_shared<Program>();
  p->format = image.format;
  const int device_arch = target.cc_major * 10 + target.cc_minor;
  const bool builtin = image.format == ImageFormat::kBuiltin;
  for (KernelInfo& k : image.kernels) {
    ProgramKernel pk;
    pk.name = InternName(k.name);
    pk.fn = builtin ? FindBuiltinKernel(k.name) : KernelLibs().Find(k.name);
    pk.max_threads_per_block = MaxThreads(k);
    // PTX is compiled for the device; built-ins run anywhere.
    pk.binary_version = image.format == ImageFormat::kPtx || builtin ? device_arch : image.arch;
    pk.ptx_version = builtin ? device_arch : image.arch;
    pk.info = std::move(k);
    p->kernel_index.emplace(pk.name, static_cast<int>(p->kernels.size()));
    p->kernels.push_back(std::move(pk));
  }
  p->globals = std::move(image.globals);
  return p;
}

uint64_t AlignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// One device allocation for all variables, initialized from the image.
CUresult AllocateGlobals(Module* m) {
  const auto& globals = m->program->globals;
  std::vector<uint64_t> offsets;
  uint64_t total = 0;
  for (const GlobalInfo& g : globals) {
    total = AlignUp(total, std::max<uint32_t>(g.align, 1));
    offsets.push_back(total);
    total += g.size;
  }
  if (total == 0) return CUDA_SUCCESS;
  CUdeviceptr base = 0;
  if (CUresult r = AllocDeviceMemory(m->device, m->ctx, total, &base); r != CUDA_SUCCESS) return r;
  auto* host = static_cast<uint8_t*>(Translate(base, total));
  if (host == nullptr) {
    FreeDeviceMemory(base);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  memset(host, 0, total);
  for (size_t i = 0; i < globals.size(); ++i) {
    const GlobalInfo& g = globals[i];
    if (!g.init.empty()) {
      memcpy(host + offsets[i], g.init.data(), std::min<uint64_t>(g.init.size(), g.size));
    }
    m->global_addrs.push_back(base + offsets[i]);
  }
  m->globals_base = base;
  return CUDA_SUCCESS;
}

void FreeGlobals(Module* m) {
  if (m->globals_base == 0) return;
  // Context teardown may have freed the context's memory already; never free
  // an allocation that has since been handed to someone else.
  AllocInfo info;
  if (LookupAllocation(m->globals_base, &info) && info.base == m->globals_base &&
      info.ctx == m->ctx) {
    FreeDeviceMemory(m->globals_base);
  }
  m->globals_base = 0;
}

void DestroyModule(Module* m) {
  for (KernelHandle* h : m->functions) HandleTable::Get().Retire(h);
  FreeGlobals(m);
  delete m;
}

// Handles of a library kernel, for a per-context function to share attributes.
KernelHandle* LibraryKernelNamed(const Library* lib, std::string_view name) {
  const int i = lib->program->FindKernel(name);
  return i < 0 ? nullptr : lib->kernels[i];
}

CUresult CreateModule(CUcontext ctx, int device, std::shared_ptr<const Program> program,
                      Library* library, Module** out) {
  auto* m = new Module();
  m->ctx = ctx;
  m->device = device;
  m->program = std::move(program);
  m->library = library;
  if (CUresult r = AllocateGlobals(m); r != CUDA_SUCCESS) {
    delete m;
    return r;
  }
  for (const ProgramKernel& k : m->program->kernels) {
    KernelHandle* h = HandleTable::Get().Allocate();
    if (h == nullptr) {
      DestroyModule(m);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    h->kind = HandleKind::kFunction;
    h->kernel = &k;
    h->module = m;
    h->library = library;
    if (KernelHandle* owner = library ? LibraryKernelNamed(library, k.name) : nullptr) {
      h->attrs_owner = owner;
    }
    HandleTable::Get().Publish(h);
    m->functions.push_back(h);
  }
  *out = m;
  return CUDA_SUCCESS;
}

Module* FindModuleLocked(CUmodule mod) {
  auto* m = reinterpret_cast<Module*>(mod);
  return Reg().modules.count(m) ? m : nullptr;
}

std::shared_ptr<Library> FindLibrary(CUlibrary lib) {
  std::lock_guard<std::mutex> lock(Reg().mu);
  auto it = Reg().libraries.find(reinterpret_cast<Library*>(lib));
  return it == Reg().libraries.end() ? nullptr : it->second;
}

// The library's program for a device of `target` (re-read from the library's
// copy of the image when the device differs from the one it was loaded for).
CUresult ProgramFor(Library* lib, const ImageTarget& target, std::shared_ptr<const Program>* out) {
  if (target.cc_major == lib->target.cc_major && target.cc_minor == lib->target.cc_minor) {
    *out = lib->program;
    return CUDA_SUCCESS;
  }
  const int cc = target.cc_major * 10 + target.cc_minor;
  {
    std::lock_guard<std::mutex> lock(Reg().mu);
    if (auto it = lib->programs_by_cc.find(cc); it != lib->programs_by_cc.end()) {
      *out = it->second;
      return CUDA_SUCCESS;
    }
  }
  ModuleImage image;
  std::string error;
  if (CUresult r = ParseModuleImage(lib->image.data(), lib->image.size(), target, &image, &error);
      r != CUDA_SUCCESS) {
    SimLog("library load for compute capability %d.%d: %s", target.cc_major, target.cc_minor,
           error.c_str());
    return r;
  }
  *out = BuildProgram(std::move(image), target);
  std::lock_guard<std::mutex> lock(Reg().mu);
  lib->programs_by_cc.emplace(cc, *out);
  return CUDA_SUCCESS;
}

}  // namespace

int Program::FindKernel(std::string_view name) const {
  auto it = kernel_index.find(name);
  return it == kernel_index.end() ? -1 : it->second;
}

int Program::FindGlobal(std::string_view name) const {
  for (size_t i = 0; i < globals.size(); ++i) {
    if (name == globals[i].name) return static_cast<int>(i);
  }
  return -1;
}

ImageTarget TargetOfDevice(int device) {
  ImageTarget t;
  const SimState* s = State();
  if (s != nullptr && device >= 0 && static_cast<size_t>(device) < s->config.devices.size()) {
    t.cc_major = s->config.devices[device].cc_major;
    t.cc_minor = s->config.devices[device].cc_minor;
  }
  return t;
}

CUresult LoadModule(CUcontext ctx, const void* image, size_t size, CUmodule* out,
                    std::string* error) {
  const int device = ContextDevice(ctx);
  if (device < 0) return CUDA_ERROR_INVALID_CONTEXT;
  if (size == 0) size = ImageExtent(image);
  const ImageTarget target = TargetOfDevice(device);
  ModuleImage parsed;
  if (CUresult r = ParseModuleImage(image, size, target, &parsed, error); r != CUDA_SUCCESS) {
    return r;
  }
  Module* m = nullptr;
  if (CUresult r = CreateModule(ctx, device, BuildProgram(std::move(parsed), target), nullptr, &m);
      r != CUDA_SUCCESS) {
    return r;
  }
  std::lock_guard<std::mutex> lock(Reg().mu);
  Reg().modules.insert(m);
  *out = reinterpret_cast<CUmodule>(m);
  return CUDA_SUCCESS;
}

CUresult UnloadModule(CUmodule mod) {
  Module* m;
  {
    std::lock_guard<std::mutex> lock(Reg().mu);
    m = FindModuleLocked(mod);
    if (m == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    if (m->library != nullptr) return CUDA_ERROR_NOT_PERMITTED;
    Reg().modules.erase(m);
  }
  // Launches already queued from this module run to completion first.
  SynchronizeContext(AsContext(m->ctx));
  DestroyModule(m);
  return CUDA_SUCCESS;
}

CUresult ModuleGetFunction(CUmodule mod, const char* name, CUfunction* out) {
  std::lock_guard<std::mutex> lock(Reg().mu);
  const Module* m = FindModuleLocked(mod);
  if (m == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  const int i = m->program->FindKernel(name);
  if (i < 0) return CUDA_ERROR_NOT_FOUND;
  *out = reinterpret_cast<CUfunction>(m->functions[i]);
  return CUDA_SUCCESS;
}

CUresult ModuleGetGlobal(CUmodule mod, const char* name, CUdeviceptr* dptr, size_t* bytes) {
  std::lock_guard<std::mutex> lock(Reg().mu);
  const Module* m = FindModuleLocked(mod);
  if (m == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  const int i = m->program->FindGlobal(name);
  if (i < 0) return CUDA_ERROR_NOT_FOUND;
  if (dptr) *dptr = m->global_addrs[i];
  if (bytes) *bytes = m->program->globals[i].size;
  return CUDA_SUCCESS;
}

CUresult ModuleFunctions(CUmodule mod, std::vector<CUfunction>* out) {
  std::lock_guard<std::mutex> lock(Reg().mu);
  const Module* m = FindModuleLocked(mod);
  if (m == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  out->clear();
  for (KernelHandle* h : m->functions) out->push_back(reinterpret_cast<CUfunction>(h));
  return CUDA_SUCCESS;
}

CUresult LoadLibrary(const void* image, size_t size, const ImageTarget& target, CUlibrary* out,
                     std::string* error) {
  // Keep the fatbin itself, not a wrapper pointing at the caller's memory.
  const void* fatbin = size == 0 || size >= 24 ? UnwrapFatbin(image) : nullptr;
  if (fatbin != nullptr) {
    image = fatbin;
    size = FatbinExtent(fatbin);
  } else if (size == 0) {
    size = ImageExtent(image);
  }
  ModuleImage parsed;
  if (CUresult r = ParseModuleImage(image, size, target, &parsed, error); r != CUDA_SUCCESS) {
    return r;
  }
  auto lib = std::make_shared<Library>();
  lib->image.assign(static_cast<const uint8_t*>(image), static_cast<const uint8_t*>(image) + size);
  lib->target = target;
  lib->program = BuildProgram(std::move(parsed), target);
  for (const ProgramKernel& k : lib->program->kernels) {
    KernelHandle* h = HandleTable::Get().Allocate();
    if (h == nullptr) {
      for (KernelHandle* x : lib->kernels) HandleTable::Get().Retire(x);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    h->kind = HandleKind::kKernel;
    h->kernel = &k;
    h->library = lib.get();
    HandleTable::Get().Publish(h);
    lib->kernels.push_back(h);
  }
  std::lock_guard<std::mutex> lock(Reg().mu);
  Reg().libraries.emplace(lib.get(), lib);
  *out = reinterpret_cast<CUlibrary>(lib.get());
  return CUDA_SUCCESS;
}

CUresult UnloadLibrary(CUlibrary handle) {
  std::shared_ptr<Library> lib;
  std::vector<Module*> modules;
  {
    std::lock_guard<std::mutex> lock(Reg().mu);
    auto it = Reg().libraries.find(reinterpret_cast<Library*>(handle));
    if (it == Reg().libraries.end()) return CUDA_ERROR_INVALID_HANDLE;
    lib = std::move(it->second);
    Reg().libraries.erase(it);
    for (auto& [ctx, m] : lib->modules) {
      Reg().modules.erase(m);
      modules.push_back(m);
    }
    lib->modules.clear();
  }
  for (Module* m : modules) SynchronizeContext(AsContext(m->ctx));
  for (KernelHandle* h : lib->kernels) HandleTable::Get().Retire(h);
  for (Module* m : modules) DestroyModule(m);
  return CUDA_SUCCESS;
}

CUresult LibraryGetKernel(CUlibrary handle, const char* name, CUkernel* out) {
  std::shared_ptr<Library> lib = FindLibrary(handle);
  if (!lib) return CUDA_ERROR_INVALID_HANDLE;
  const int i = lib->program->FindKernel(name);
  if (i < 0) return CUDA_ERROR_NOT_FOUND;
  *out = reinterpret_cast<CUkernel>(lib->kernels[i]);
  return CUDA_SUCCESS;
}

CUresult LibraryKernels(CUlibrary handle, std::vector<CUkernel>* out) {
  std::shared_ptr<Library> lib = FindLibrary(handle);
  if (!lib) return CUDA_ERROR_INVALID_HANDLE;
  out->clear();
  for (KernelHandle* h : lib->kernels) out->push_back(reinterpret_cast<CUkernel>(h));
  return CUDA_SUCCESS;
}

CUresult LibraryModule(CUlibrary handle, CUcontext ctx, CUmodule* out) {
  std::shared_ptr<Library> lib = FindLibrary(handle);
  if (!lib) return CUDA_ERROR_INVALID_HANDLE;
  {
    std::lock_guard<std::mutex> lock(Reg().mu);
    if (auto it = lib->modules.find(ctx); it != lib->modules.end()) {
      *out = reinterpret_cast<CUmodule>(it->second);
      return CUDA_SUCCESS;
    }
  }
  const int device = ContextDevice(ctx);
  if (device < 0) return CUDA_ERROR_INVALID_CONTEXT;
  std::shared_ptr<const Program> program;
  if (CUresult r = ProgramFor(lib.get(), TargetOfDevice(device), &program); r != CUDA_SUCCESS) {
    return r;
  }
  Module* m = nullptr;
  if (CUresult r = CreateModule(ctx, device, std::move(program), lib.get(), &m);
      r != CUDA_SUCCESS) {
    return r;
  }
  Module* discard = nullptr;
  {
    std::lock_guard<std::mutex> lock(Reg().mu);
    if (!Reg().libraries.count(lib.get())) {  // unloaded meanwhile
      discard = m;
      m = nullptr;
    } else if (auto [it, inserted] = lib->modules.emplace(ctx, m); !inserted) {
      discard = m;  // another thread loaded it first: use that one
      m = it->second;
    } else {
      Reg().modules.insert(m);
    }
  }
  if (discard != nullptr) DestroyModule(discard);
  if (m == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  *out = reinterpret_cast<CUmodule>(m);
  return CUDA_SUCCESS;
}

CUresult KernelFunction(CUkernel kernel, CUcontext ctx, CUfunction* out) {
  HandleRef h(kernel);
  if (!h || h->kind != HandleKind::kKernel) return CUDA_ERROR_INVALID_HANDLE;
  CUmodule mod = nullptr;
  if (CUresult r = LibraryModule(reinterpret_cast<CUlibrary>(h->library), ctx, &mod);
      r != CUDA_SUCCESS) {
    return r;
  }
  return ModuleGetFunction(mod, h->kernel->name, out);
}

Module* ModuleForLaunch(KernelHandle* h, CUcontext ctx, CUresult* result) {
  *result = CUDA_SUCCESS;
  if (h->kind == HandleKind::kFunction) return h->module;
  CUmodule mod = nullptr;
  *result = LibraryModule(reinterpret_cast<CUlibrary>(h->library), ctx, &mod);
  return reinterpret_cast<Module*>(mod);
}

CUdeviceptr ModuleGlobalAddress(const Module* m, std::string_view name, uint64_t* bytes) {
  const int i = m->program->FindGlobal(name);
  if (i < 0) return 0;
  if (bytes) *bytes = m->program->globals[i].size;
  return m->global_addrs[i];
}

void DestroyModulesIn(CUcontext ctx) {
  std::vector<Module*> doomed;
  {
    std::lock_guard<std::mutex> lock(Reg().mu);
    for (Module* m : Reg().modules) {
      if (m->ctx == ctx) doomed.push_back(m);
    }
    for (Module* m : doomed) {
      Reg().modules.erase(m);
      if (m->library != nullptr) m->library->modules.erase(ctx);
    }
  }
  for (Module* m : doomed) DestroyModule(m);
}

}  // namespace vgpu::sim
