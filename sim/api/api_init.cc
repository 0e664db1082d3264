// cuInit, versions, error strings and the entry checks every API shares.
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

#include "sim/api/api_common.h"
#include "sim/api/checkpoint_process.h"
#include "sim/engine/fault_injection.h"
#include "sim/engine/sim_state.h"

namespace vgpu::sim {
namespace {

std::atomic<SimState*> g_state{nullptr};
std::mutex g_init_mu;
CUresult g_init_result = CUDA_ERROR_NOT_INITIALIZED;  // sticky after the first cuInit
bool g_init_attempted = false;
std::atomic<bool> g_forked_child{false};
std::once_flag g_faults_once;
std::string g_fault_error;

void LoadFaultsOnce() {
  std::call_once(g_faults_once, [] {
    const char* spec = std::getenv("VGPU_SIM_FAULTS");
    if (spec != nullptr && !ConfigureFaults(spec, &g_fault_error)) {
      ConfigureFaults("", &g_fault_error);
      SimLog("%s", g_fault_error.c_str());
    }
  });
}

// A CUDA context does not survive fork: the child of an initialized process
// gets CUDA_ERROR_NOT_INITIALIZED from every call, as with the real driver.
void AtForkChild() {
  if (g_state.load() != nullptr) g_forked_child.store(true);
}

void AtExit() {
  SimState* s = g_state.load();
  if (s != nullptr && !g_forked_child.load()) s->node->Unregister();
}

}  // namespace

SimState* State() { return g_state.load(std::memory_order_acquire); }

CUresult ApiEnterNoInit(const char* name) {
  LoadFaultsOnce();
  if (FaultsConfigured()) return InjectedFault(name);
  return CUDA_SUCCESS;
}

CUresult ApiEnter(const char* name) {
  if (CUresult r = ApiEnterNoInit(name); r != CUDA_SUCCESS) return r;
  if (g_state.load(std::memory_order_acquire) == nullptr || g_forked_child.load()) {
    return CUDA_ERROR_NOT_INITIALIZED;
  }
  return CUDA_SUCCESS;
}

CUresult InitOnce(unsigned int flags) {
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (g_forked_child.load()) return CUDA_ERROR_NOT_INITIALIZED;
  std::lock_guard<std::mutex> lock(g_init_mu);
  if (g_init_attempted) return g_init_result;
  g_init_attempted = true;
  LoadFaultsOnce();
  if (!g_fault_error.empty()) {
    SimLog("cuInit: %s", g_fault_error.c_str());
    return g_init_result = CUDA_ERROR_INVALID_VALUE;
  }
  auto* state = new SimState();
  std::string error;
  if (!LoadSimConfig(&state->config, &error)) {
    SimLog("cuInit: %s", error.c_str());
    delete state;
    return g_init_result = CUDA_ERROR_INVALID_VALUE;
  }
  state->node = NodeRegion::Open(state->config, &error);
  if (state->node == nullptr) {
    SimLog("cuInit: %s", error.c_str());
    delete state;
    return g_init_result = CUDA_ERROR_INVALID_VALUE;
  }
  pthread_atfork(nullptr, nullptr, AtForkChild);
  std::atexit(AtExit);
  g_state.store(state, std::memory_order_release);
  StartRestoreThread(state->node->self());
  return g_init_result = CUDA_SUCCESS;
}

}  // namespace vgpu::sim

using vgpu::sim::InitOnce;

SIM_EXPORT CUresult CUDAAPI cuInit(unsigned int Flags) {
  SIM_ENTER_NOINIT("cuInit");
  return InitOnce(Flags);
}

SIM_EXPORT CUresult CUDAAPI cuDriverGetVersion(int* driverVersion) {
  SIM_ENTER_NOINIT("cuDriverGetVersion");
  if (driverVersion == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *driverVersion = CUDA_VERSION;
  return CUDA_SUCCESS;
}
