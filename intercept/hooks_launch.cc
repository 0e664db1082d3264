// Hot paths: every launch form, governed by the compute share. With tokens
// available they take no lock, make no syscall, allocate nothing and never
// log. (The async copies are gated pass-through: intercept/hooks_gated.cc.)
#include "driver/real_driver.h"
#include "intercept/current_context.h"
#include "intercept/hooks.h"
#include "intercept/node_devices.h"
#include "intercept/runtime.h"
#include "residency/engine.h"
#include "share/compute_share.h"

namespace {

// Every launch form passes the compute-share gate (a no-op when the policy is
// native) before the residency gate: a thread asleep waiting for its turn on
// the device must not hold up a suspend, and a suspended process's idle lease
// goes to the other tenants.
inline void Govern(CUstream stream, bool per_thread) {
  vgpu::ComputeShare* cs = vgpu::Runtime::Get().share();
  if (cs == nullptr) return;
  // The thread's current context is cached (intercept/current_context.h):
  // the driver is asked only after the thread's context changed.
  const vgpu::CurrentContext& c = vgpu::CurrentContextOfThread();
  cs->Gate(vgpu::NodeDevice(c.device).value(), c.ctx, stream, per_thread);
}

// A graph with memory allocation nodes takes memory at launch: the quota is
// charged around the real call (quota/graph_memory_charge.h). Other graphs
// pay one relaxed atomic load.
template <typename Real>
CUresult LaunchGraph(CUgraphExec exec, Real&& real) {
  vgpu::GraphMemoryCharge& graph_memory = vgpu::Runtime::Get().graph_memory();
  if (!graph_memory.Active()) return real();
  return vgpu::NoThrow(CUDA_ERROR_UNKNOWN, [&] {
    vgpu::GraphMemoryCharge::LaunchScope charge(graph_memory, exec);
    return charge.ok() ? real() : CUDA_ERROR_OUT_OF_MEMORY;
  });
}

}  // namespace

VGPU_HOOK(cuLaunchKernel) CUresult CUDAAPI vgpu_hook_cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream, void** kernelParams, void** extra) {
  Govern(hStream, false);
  vgpu::residency::GateGuard gate;
  return REAL_CALL(cuLaunchKernel, f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream, kernelParams, extra);
}

VGPU_HOOK(cuLaunchKernel_ptsz) CUresult CUDAAPI vgpu_hook_cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream, void** kernelParams, void** extra) {
  Govern(hStream, true);
  vgpu::residency::GateGuard gate;
  return REAL_CALL(cuLaunchKernel_ptsz, f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream, kernelParams, extra);
}

VGPU_HOOK(cuLaunchKernelEx) CUresult CUDAAPI vgpu_hook_cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** kernelParams, void** extra) {
  Govern(config != nullptr ? config->hStream : nullptr, false);
  vgpu::residency::GateGuard gate;
  return REAL_CALL(cuLaunchKernelEx, config, f, kernelParams, extra);
}

VGPU_HOOK(cuLaunchKernelEx_ptsz) CUresult CUDAAPI vgpu_hook_cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f, void** kernelParams, void** extra) {
  Govern(config != nullptr ? config->hStream : nullptr, true);
  vgpu::residency::GateGuard gate;
  return REAL_CALL(cuLaunchKernelEx_ptsz, config, f, kernelParams, extra);
}

VGPU_HOOK(cuLaunchCooperativeKernel) CUresult CUDAAPI vgpu_hook_cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream, void** kernelParams) {
  Govern(hStream, false);
  vgpu::residency::GateGuard gate;
  return REAL_CALL(cuLaunchCooperativeKernel, f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream, kernelParams);
}

VGPU_HOOK(cuLaunchCooperativeKernel_ptsz) CUresult CUDAAPI vgpu_hook_cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream, void** kernelParams) {
  Govern(hStream, true);
  vgpu::residency::GateGuard gate;
  return REAL_CALL(cuLaunchCooperativeKernel_ptsz, f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream, kernelParams);
}

VGPU_HOOK(cuGraphLaunch) CUresult CUDAAPI vgpu_hook_cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream) {
  Govern(hStream, false);
  vgpu::residency::GateGuard gate;
  return LaunchGraph(hGraphExec, [&] { return REAL_CALL(cuGraphLaunch, hGraphExec, hStream); });
}

VGPU_HOOK(cuGraphLaunch_ptsz) CUresult CUDAAPI vgpu_hook_cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream) {
  Govern(hStream, true);
  vgpu::residency::GateGuard gate;
  return LaunchGraph(hGraphExec, [&] { return REAL_CALL(cuGraphLaunch_ptsz, hGraphExec, hStream); });
}
