// The launch-path side of modules: argument packing, launch checks and
// running a kernel's host implementation on a stream worker.
#include "sim/engine/module.h"

#include <cstring>
#include <memory>
#include <string>

#include "sim/engine/sim_log.h"
#include "sim/engine/context.h"
#include "sim/engine/device_memory.h"
#include "sim/engine/function_attributes.h"
#include "sim/modules/kernel_libraries.h"
#include "sim/engine/module_registry.h"
#include "sim/engine/sim_state.h"

namespace vgpu::sim {
namespace {

constexpr uint32_t kInlineParams = 64;  // params pointers kept on the stack
constexpr size_t kMaxExtraEntries = 64;

void ReportMissingImplementation(const ProgramKernel& k) {
  std::string libs;
  if (const SimState* s = State()) {
    for (const std::string& p : s->config.kernel_libraries) libs += (libs.empty() ? "" : ":") + p;
  }
  SimLog("kernel '%s' has no host implementation: no library in VGPU_SIM_KERNELS (%s) exports %s",
         k.name, libs.empty() ? "unset" : libs.c_str(), KernelSymbol(k.name).c_str());
}

// The CU_LAUNCH_PARAM_BUFFER_POINTER / _SIZE form of cuLaunchKernel's `extra`.
CUresult PackExtra(void** extra, uint32_t param_bytes, uint8_t* dst) {
  const void* buffer = nullptr;
  const size_t* size = nullptr;
  size_t i = 0;
  for (; i < kMaxExtraEntries && extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
    if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) {
      buffer = extra[i + 1];
    } else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE) {
      size = static_cast<const size_t*>(extra[i + 1]);
    } else {
      return CUDA_ERROR_INVALID_VALUE;
    }
  }
  if (i >= kMaxExtraEntries || buffer == nullptr || size == nullptr || *size < param_bytes) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  memcpy(dst, buffer, param_bytes);
  return CUDA_SUCCESS;
}

// A CUkernel launched directly is loaded into the launching (current) context
// here, so that a load failure is reported by cuLaunchKernel. Cached per
// handle: the common case costs a compare.
CUresult PreloadInCurrentContext(KernelHandle* h) {
  CUcontext ctx = nullptr;
  if (CurrentContext(&ctx) != CUDA_SUCCESS) return CUDA_SUCCESS;  // the caller reports it
  if (h->last_ctx.load(std::memory_order_relaxed) == ctx) return CUDA_SUCCESS;
  CUresult r = CUDA_SUCCESS;
  if (ModuleForLaunch(h, ctx, &r) == nullptr) return r;
  h->last_ctx.store(ctx, std::memory_order_relaxed);
  return CUDA_SUCCESS;
}

void* TranslateForKernel(const vgpu_sim_launch*, uint64_t dptr, uint64_t bytes) {
  return Translate(static_cast<CUdeviceptr>(dptr), static_cast<size_t>(bytes));
}

uint64_t GlobalForKernel(const vgpu_sim_launch* self, const char* name, uint64_t* bytes) {
  if (name == nullptr) return 0;
  return ModuleGlobalAddress(static_cast<const Module*>(self->sim_private), name, bytes);
}

uint64_t TransferNs(uint64_t bytes, int device) {
  const SimState* s = State();
  if (bytes == 0 || s == nullptr || device < 0 ||
      static_cast<size_t>(device) >= s->config.devices.size()) {
    return 0;
  }
  const uint64_t bw = s->config.devices[device].mem_bandwidth_bytes_per_s;
  if (bw == 0) return 0;
  const unsigned __int128 ns =
      (static_cast<unsigned __int128>(bytes) * 1'000'000'000u + bw - 1) / bw;
  return static_cast<uint64_t>(ns);
}

int RunHostKernel(const ProgramKernel& k, vgpu_sim_launch* l) {
  try {
    return k.fn(l);
  } catch (const std::exception& e) {
    SimLog("kernel '%s' threw an exception: %s", k.name, e.what());
  } catch (...) {
    SimLog("kernel '%s' threw an exception", k.name);
  }
  return -1;
}

}  // namespace

CUresult PackKernelParams(CUfunction f, void** kernel_params, void** extra, ParamBuffer* out) {
  HandleRef h(f);
  if (!h) return CUDA_ERROR_INVALID_HANDLE;
  const ProgramKernel& k = *h->kernel;
  const KernelInfo& info = k.info;
  if (kernel_params != nullptr && extra != nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (k.fn == nullptr) {
    ReportMissingImplementation(k);
    return CUDA_ERROR_NOT_FOUND;
  }
  uint8_t* dst = out->Resize(info.param_bytes);
  if (!info.param_sizes.empty()) {
    memset(dst, 0, info.param_bytes);  // padding between arguments is deterministic
    if (kernel_params != nullptr) {
      for (size_t i = 0; i < info.param_sizes.size(); ++i) {
        if (kernel_params[i] == nullptr) return CUDA_ERROR_INVALID_VALUE;
        memcpy(dst + info.param_offsets[i], kernel_params[i], info.param_sizes[i]);
      }
    } else if (extra != nullptr) {
      if (CUresult r = PackExtra(extra, info.param_bytes, dst); r != CUDA_SUCCESS) return r;
    } else {
      return CUDA_ERROR_INVALID_VALUE;
    }
  }
  if (h->kind == HandleKind::kKernel) return PreloadInCurrentContext(h.get());
  return CUDA_SUCCESS;
}

bool KernelParamOffsets(CUfunction f, std::vector<uint32_t>* offsets) {
  HandleRef h(f);
  if (!h) return false;
  *offsets = h->kernel->info.param_offsets;
  return true;
}

CUresult CheckLaunchDims(CUfunction f, const LaunchDims& dims) {
  HandleRef h(f);
  if (!h) return CUDA_ERROR_INVALID_HANDLE;
  const uint32_t* b = dims.block;
  const uint32_t* g = dims.grid;
  for (int d = 0; d < 3; ++d) {
    if (b[d] == 0 || g[d] == 0) return CUDA_ERROR_INVALID_VALUE;
  }
  if (b[0] > 1024 || b[1] > 1024 || b[2] > 64 || g[0] > 0x7fffffffu || g[1] > 65535 ||
      g[2] > 65535) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const uint64_t threads = uint64_t{b[0]} * b[1] * b[2];
  if (threads > 1024) return CUDA_ERROR_INVALID_VALUE;
  // Within the device limit but beyond what the kernel's launch bounds or
  // register usage allow: the driver's "too many resources requested".
  if (threads > h->kernel->max_threads_per_block) return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
  if (dims.shared_mem_bytes > MaxDynamicShared(h.get())) return CUDA_ERROR_INVALID_VALUE;
  uint32_t cluster[3];
  RequiredClusterDims(h.get(), cluster);
  uint64_t cluster_size = 1;
  for (int d = 0; d < 3; ++d) {
    if (cluster[d] == 0) continue;
    if (g[d] % cluster[d] != 0) return CUDA_ERROR_INVALID_CLUSTER_SIZE;
    cluster_size *= cluster[d];
  }
  const bool non_portable = h->attributes().non_portable_cluster.load() != 0;
  if (cluster_size > (non_portable ? 16u : 8u)) return CUDA_ERROR_INVALID_CLUSTER_SIZE;
  return CUDA_SUCCESS;
}

CUresult ExecuteKernel(CUfunction f, CUcontext ctx, const LaunchDims& dims,
                       const ParamBuffer& params, uint64_t* device_time_ns) {
  *device_time_ns = 0;
  HandleRef h(f);
  if (!h) {
    SimLog("a queued launch names a kernel that has since been unloaded");
    return CUDA_ERROR_INVALID_HANDLE;
  }
  const ProgramKernel& k = *h->kernel;
  if (k.fn == nullptr) return CUDA_ERROR_NOT_FOUND;
  CUresult r = CUDA_SUCCESS;
  const Module* m = ModuleForLaunch(h.get(), ctx, &r);
  if (m == nullptr) return r;

  const uint32_t n = static_cast<uint32_t>(k.info.param_sizes.size());
  void* inline_ptrs[kInlineParams];
  std::unique_ptr<void*[]> heap_ptrs;
  void** ptrs = inline_ptrs;
  if (n > kInlineParams) {
    heap_ptrs = std::make_unique<void*[]>(n);
    ptrs = heap_ptrs.get();
  }
  // Implementations may treat their arguments as scratch, as device code can.
  auto* base = const_cast<uint8_t*>(params.data());
  for (uint32_t i = 0; i < n; ++i) ptrs[i] = base + k.info.param_offsets[i];

  vgpu_sim_launch l{};
  l.abi_version = VGPU_SIM_KERNEL_ABI_VERSION;
  memcpy(l.grid, dims.grid, sizeof l.grid);
  memcpy(l.block, dims.block, sizeof l.block);
  l.shared_mem_bytes = dims.shared_mem_bytes;
  l.num_params = n;
  l.params = ptrs;
  l.param_sizes = k.info.param_sizes.data();
  l.translate = TranslateForKernel;
  l.sim_private = const_cast<Module*>(m);
  l.kernel_name = k.name;
  l.device = m->device;
  l.get_global = GlobalForKernel;
  if (RunHostKernel(k, &l) != 0) return CUDA_ERROR_ILLEGAL_ADDRESS;
  *device_time_ns = l.device_time_ns ? l.device_time_ns : TransferNs(l.bytes_touched, m->device);
  return CUDA_SUCCESS;
}

const char* KernelName(CUfunction f) {
  HandleRef h(f);
  return h ? h->kernel->name : "?";  // interned: valid after unload too
}

void DestroyModulesOfContext(CUcontext ctx) { DestroyModulesIn(ctx); }

}  // namespace vgpu::sim
