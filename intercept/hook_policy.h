// Which policies each hook's body composes, declared once per hook and
// checked, so that a hook that forgets one is caught rather than silently
// breaking suspend (the gate), the quota or the compute share.
//
// Policies:
//   kGate      runs inside residency::GateGuard: it touches device memory or
//              queues device work, so a suspend must wait for it and hold it
//   kQuota     charges or releases (or reports) the group's memory quota
//   kVmm       may be served by vmm::Manager (VGPU_VMM) instead of the driver
//   kShare     passes the compute-share gate (Govern) before the residency gate
//   kDeviceMap translates virtual device ordinals to physical and back
//   kUngated   none of the above that blocks: the third column says why it
//              may run during a suspend
//
// Checked:
//   - at compile time (below): every hook of driver/hook_list.h has exactly
//     one entry, and every entry is a hook;
//   - tests/intercept/hook_policy_test.cc walks the whole list in a suspended
//     process: every hook declared kGate must block until resume, every
//     other hook must return;
//   - the quota, VMM and share paths by the per-path integration tests
//     (tests/intercept: EveryAllocationPathCounts, ContextShareTest, ...).
//
// How to add a hook:
//   1. Name the symbol in driver/hook_list.h. If its body is nothing but the
//      real call inside the gate (a copy, a memset), put it in
//      VGPU_CU_GATED_PASSTHROUGH and stop: the body is generated
//      (intercept/hooks_gated.cc) and its policy is kGate.
//   2. If its body is nothing but the real call with its device argument(s)
//      translated (a device query), put it in VGPU_DEVICE_MAPPED_PASSTHROUGH
//      with the positions of those arguments and stop: the body is generated
//      (intercept/hooks_device_mapped.cc) and its policy is kDeviceMap.
//   3. Otherwise declare its policies below (the build fails until you do),
//      then write the body in the intercept/hooks_*.cc of its purpose with
//      VGPU_HOOK(sym), composing exactly those policies in this order:
//      Govern (kShare), then residency::GateGuard (kGate), then the quota /
//      VMM bookkeeping, around REAL_CALL(sym, ...). Hooks that name a device
//      translate it with MapToOrdinal() (kDeviceMap).
//   4. If it can change the calling thread's current context, forget the
//      launch path's cache (intercept/current_context.h).
#pragma once

#include <cstddef>
#include <iterator>
#include <string_view>

#include "driver/hook_list.h"

namespace vgpu::hook_policy {

enum : unsigned {
  kUngated = 0,
  kGate = 1u << 0,
  kQuota = 1u << 1,
  kVmm = 1u << 2,
  kShare = 1u << 3,
  kDeviceMap = 1u << 4,
};

}  // namespace vgpu::hook_policy

// P(symbol, policies, why): every hook outside VGPU_CU_GATED_PASSTHROUGH and
// VGPU_DEVICE_MAPPED_PASSTHROUGH (below).
#define VGPU_HOOK_POLICIES(P)                                                                   \
  /* init and lookup */                                                                         \
  P(cuInit, kUngated, "initialization")                                                         \
  P(cuGetProcAddress, kUngated, "lookup")                                                       \
  P(cuGetProcAddress_v2, kUngated, "lookup")                                                    \
  /* device queries: no device memory, no work */                                               \
  P(cuDeviceGetCount, kDeviceMap, "query")                                                      \
  P(cuDeviceGet, kDeviceMap, "query")                                                           \
  P(cuDeviceTotalMem_v2, kDeviceMap | kQuota, "query (the quota view)")                         \
  P(cuDeviceGetByPCIBusId, kDeviceMap, "query")                                                 \
  P(cuMemGetDefaultMemPool, kDeviceMap, "query")                                                \
  P(cuMemGetMemPool, kDeviceMap, "query")                                                       \
  P(cuMemSetMemPool, kDeviceMap, "selects a pool; allocates nothing")                           \
  P(cuMemGetAllocationGranularity, kDeviceMap, "query")                                         \
  P(cuGraphAddNode, kDeviceMap, "builds a graph (an allocation node's devices translated)")     \
  P(cuGraphAddNode_v2, kDeviceMap, "builds a graph (an allocation node's devices translated)")  \
  P(cuGraphAddMemAllocNode, kDeviceMap, "an address only: a launch takes the memory")           \
  P(cuGraphInstantiateWithFlags, kUngated, "notes the allocation nodes; takes no memory")       \
  P(cuGraphInstantiateWithParams, kUngated, "notes the allocation nodes; takes no memory")      \
  P(cuGraphInstantiateWithParams_ptsz, kUngated, "notes the allocation nodes; takes no memory") \
  P(cuGraphInstantiate, kUngated, "notes the allocation nodes; takes no memory")                \
  P(cuGraphInstantiate_v2, kUngated, "notes the allocation nodes; takes no memory")             \
  P(cuGraphExecDestroy, kQuota, "settles the graph pool's charge")                              \
  P(cuDeviceGraphMemTrim, kDeviceMap | kQuota, "gives cached graph memory back")                \
  P(cuMemPoolCreate, kDeviceMap, "a pool reserves nothing until an allocation (gated)")         \
  P(cuMemSetAccess, kDeviceMap, "mapping rights; VMM memory of the application is refused")     \
  P(cuMemGetAccess, kDeviceMap, "query")                                                        \
  P(cuMemGetAllocationPropertiesFromHandle, kDeviceMap, "query")                                \
  P(cuMemGetAddressRange_v2, kVmm, "reads bookkeeping, which a suspend keeps")                  \
  P(cuIpcGetMemHandle, kGate | kVmm, "")                                                        \
  P(cuIpcOpenMemHandle_v2, kGate | kVmm, "")                                                    \
  P(cuIpcOpenMemHandle, kGate | kVmm, "")                                                       \
  P(cuIpcCloseMemHandle, kGate | kVmm, "")                                                      \
  /* contexts */                                                                                \
  P(cuDevicePrimaryCtxRetain, kDeviceMap, "a context holds no memory until it allocates")       \
  P(cuDevicePrimaryCtxRelease_v2, kGate | kDeviceMap | kQuota, "")                              \
  P(cuDevicePrimaryCtxReset_v2, kGate | kDeviceMap | kQuota, "")                                \
  P(cuCtxCreate_v2, kDeviceMap, "a context holds no memory until it allocates")                 \
  P(cuCtxCreate_v3, kDeviceMap, "a context holds no memory until it allocates")                 \
  P(cuCtxCreate_v4, kDeviceMap, "a context holds no memory until it allocates")                 \
  P(cuGreenCtxCreate, kDeviceMap, "a context holds no memory until it allocates")               \
  P(cuGreenCtxDestroy, kGate, "")                                                               \
  P(cuCtxDestroy_v2, kGate | kQuota | kVmm, "")                                                 \
  P(cuCtxSetCurrent, kUngated, "the calling thread's current context only")                     \
  P(cuCtxPushCurrent_v2, kUngated, "the calling thread's current context only")                 \
  P(cuCtxPopCurrent_v2, kUngated, "the calling thread's current context only")                  \
  P(cuCtxDestroy, kGate | kQuota | kVmm, "")                                                    \
  P(cuCtxPushCurrent, kUngated, "the calling thread's current context only")                    \
  P(cuCtxPopCurrent, kUngated, "the calling thread's current context only")                     \
  P(cuCtxGetDevice, kDeviceMap, "query")                                                        \
  P(cuCtxGetDevice_v2, kDeviceMap, "query")                                                     \
  P(cuPointerGetAttribute, kGate | kVmm, "")                                                    \
  P(cuPointerGetAttributes, kGate | kVmm, "")                                                   \
  /* memory: every path that takes device memory counts against the quota */                    \
  P(cuMemAlloc_v2, kGate | kQuota | kVmm, "")                                                   \
  P(cuMemAllocPitch_v2, kGate | kQuota | kVmm, "")                                              \
  P(cuMemFree_v2, kGate | kQuota | kVmm, "")                                                    \
  P(cuMemAllocManaged, kGate | kQuota, "")                                                      \
  P(cuMemAllocAsync, kGate | kQuota | kVmm, "")                                                 \
  P(cuMemAllocAsync_ptsz, kGate | kQuota | kVmm, "")                                            \
  P(cuMemAllocFromPoolAsync, kGate | kQuota | kVmm, "")                                         \
  P(cuMemAllocFromPoolAsync_ptsz, kGate | kQuota | kVmm, "")                                    \
  P(cuMemFreeAsync, kGate | kQuota | kVmm, "")                                                  \
  P(cuMemFreeAsync_ptsz, kGate | kQuota | kVmm, "")                                             \
  P(cuMemCreate, kGate | kQuota, "")                                                            \
  P(cuMemRelease, kGate | kQuota, "")                                                           \
  P(cuMemMap, kGate | kQuota, "")                                                               \
  P(cuMemUnmap, kGate | kQuota, "")                                                             \
  P(cuArrayCreate_v2, kGate | kQuota, "")                                                       \
  P(cuArray3DCreate_v2, kGate | kQuota, "")                                                     \
  P(cuArrayDestroy, kGate | kQuota, "")                                                         \
  P(cuMipmappedArrayCreate, kGate | kQuota, "")                                                 \
  P(cuMipmappedArrayDestroy, kGate | kQuota, "")                                                \
  P(cuMemGetInfo_v2, kGate | kQuota | kVmm, "")                                                 \
  /* launches */                                                                                \
  P(cuLaunchKernel, kShare | kGate, "")                                                         \
  P(cuLaunchKernel_ptsz, kShare | kGate, "")                                                    \
  P(cuLaunchKernelEx, kShare | kGate, "")                                                       \
  P(cuLaunchKernelEx_ptsz, kShare | kGate, "")                                                  \
  P(cuLaunchCooperativeKernel, kShare | kGate, "")                                              \
  P(cuLaunchCooperativeKernel_ptsz, kShare | kGate, "")                                         \
  P(cuGraphLaunch, kShare | kGate | kQuota, "")                                                 \
  P(cuGraphLaunch_ptsz, kShare | kGate | kQuota, "")                                            \
  /* NVML: no CUDA device memory, no work */                                                    \
  P(nvmlShutdown, kUngated, "NVML")                                                             \
  P(nvmlInit, kUngated, "NVML")                                                                 \
  P(nvmlInit_v2, kUngated, "NVML")                                                              \
  P(nvmlInitWithFlags, kUngated, "NVML")                                                        \
  P(nvmlDeviceGetCount, kDeviceMap, "NVML")                                                     \
  P(nvmlDeviceGetCount_v2, kDeviceMap, "NVML")                                                  \
  P(nvmlDeviceGetHandleByIndex, kDeviceMap, "NVML")                                             \
  P(nvmlDeviceGetHandleByIndex_v2, kDeviceMap, "NVML")                                          \
  P(nvmlDeviceGetHandleByUUID, kDeviceMap, "NVML")                                              \
  P(nvmlDeviceGetHandleByPciBusId, kDeviceMap, "NVML")                                          \
  P(nvmlDeviceGetHandleByPciBusId_v2, kDeviceMap, "NVML")                                       \
  P(nvmlDeviceGetIndex, kDeviceMap, "NVML")                                                     \
  P(nvmlDeviceGetMemoryInfo, kDeviceMap | kQuota, "NVML (the quota view)")                      \
  P(nvmlDeviceGetMemoryInfo_v2, kDeviceMap | kQuota, "NVML (the quota view)")

// D(symbol, why, position of each CUdevice argument...): hooks whose whole body is
// the real call with those arguments translated from virtual to physical
// ordinals (kDeviceMap; CUDA_ERROR_INVALID_DEVICE for a hidden or unknown
// one), which need no gate (why: as for P below). intercept/hooks_device_mapped.cc generates each from this line; a
// position that is not a CUdevice does not compile.
#define VGPU_DEVICE_MAPPED_PASSTHROUGH(D) \
  D(cuDeviceGetName, "query", 2) \
  D(cuDeviceGetUuid, "query", 1) \
  D(cuDeviceGetUuid_v2, "query", 1) \
  D(cuDeviceGetLuid, "query", 2) \
  D(cuDeviceGetAttribute, "query", 2) \
  D(cuDeviceGetProperties, "query", 1) \
  D(cuDeviceComputeCapability, "query", 2) \
  D(cuDeviceGetPCIBusId, "query", 2) \
  D(cuDeviceCanAccessPeer, "query", 1, 2) \
  D(cuDeviceGetP2PAttribute, "query", 2, 3) \
  D(cuDeviceGetDefaultMemPool, "query", 1) \
  D(cuDeviceGetMemPool, "query", 1) \
  D(cuDeviceSetMemPool, "selects a pool; allocates nothing", 0) \
  D(cuDeviceGetTexture1DLinearMaxWidth, "query", 3) \
  D(cuDeviceGetExecAffinitySupport, "query", 2) \
  D(cuDevicePrimaryCtxGetState, "query", 0) \
  D(cuDevicePrimaryCtxSetFlags_v2, "flags of an inactive context", 0)

namespace vgpu::hook_policy {

struct Entry {
  std::string_view name;
  unsigned policies;
  std::string_view why;  // why an ungated hook may run during a suspend
};

inline constexpr Entry kTable[] = {
#define VGPU_POLICY_ENTRY(sym, p, why) {#sym, p, why},
#define VGPU_GATED_PASSTHROUGH_ENTRY(sym) {#sym, kGate, ""},
#define VGPU_DEVICE_MAPPED_ENTRY(sym, why, ...) {#sym, kDeviceMap, why},
    VGPU_HOOK_POLICIES(VGPU_POLICY_ENTRY) VGPU_CU_GATED_PASSTHROUGH(VGPU_GATED_PASSTHROUGH_ENTRY)
        VGPU_DEVICE_MAPPED_PASSTHROUGH(VGPU_DEVICE_MAPPED_ENTRY)
#undef VGPU_POLICY_ENTRY
#undef VGPU_GATED_PASSTHROUGH_ENTRY
#undef VGPU_DEVICE_MAPPED_ENTRY
};

constexpr int EntriesFor(std::string_view name) {
  int n = 0;
  for (const Entry& e : kTable) n += e.name == name ? 1 : 0;
  return n;
}

constexpr unsigned PoliciesOf(std::string_view name) {
  for (const Entry& e : kTable) {
    if (e.name == name) return e.policies;
  }
  return ~0u;
}

// Every hook has exactly one entry, and there are no more entries than hooks.
#define VGPU_CHECK_POLICY(sym)                      \
  static_assert(EntriesFor(#sym) == 1, "hook " #sym \
                " needs exactly one entry in VGPU_HOOK_POLICIES (intercept/hook_policy.h)");
VGPU_CU_HOOKS(VGPU_CHECK_POLICY)
VGPU_NVML_HOOKS(VGPU_CHECK_POLICY)
#undef VGPU_CHECK_POLICY
#define VGPU_COUNT_HOOK(sym) +1
static_assert(std::size(kTable) == 0 VGPU_CU_HOOKS(VGPU_COUNT_HOOK) VGPU_NVML_HOOKS(VGPU_COUNT_HOOK),
              "VGPU_HOOK_POLICIES names a symbol that is not a hook (driver/hook_list.h)");
#undef VGPU_COUNT_HOOK

}  // namespace vgpu::hook_policy
