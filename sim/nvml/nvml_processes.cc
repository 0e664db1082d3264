// nvmlDevice*RunningProcesses of the simulated libnvidia-ml.so.1: the
// processes of the node with a context on, or memory of, a device.
#include <cstdint>

#include "sim/node_region.h"
#include "sim/nvml/nvml_abi.h"
#include "sim/nvml/nvml_state.h"

#define NVML_EXPORT extern "C" __attribute__((visibility("default")))

namespace vgpu::sim::nvml {
namespace {

constexpr unsigned int kNoMigInstance = 0xFFFFFFFFu;

struct ProcessUse {
  unsigned int pid;
  unsigned long long used_bytes;
};

// The compute processes of device d, one entry per pid. Slots of processes
// that died are reaped first, as the real driver forgets a process at exit.
unsigned int ComputeProcesses(int d, ProcessUse (&out)[kMaxProcesses]) {
  NodeRegion* node = Node();
  node->ReapDead();
  unsigned int n = 0;
  for (const ProcessSlot& slot : node->header()->processes) {
    int32_t pid = slot.pid.load(std::memory_order_acquire);
    if (pid <= 0) continue;  // free, or being claimed or reaped
    uint64_t used = slot.used_bytes[d].load(std::memory_order_relaxed);
    bool has_context = (slot.context_mask.load(std::memory_order_relaxed) >> d) & 1u;
    if (!has_context && used == 0) continue;
    unsigned int i = 0;
    while (i < n && out[i].pid != static_cast<unsigned int>(pid)) ++i;
    if (i == n) out[n++] = {static_cast<unsigned int>(pid), 0};
    out[i].used_bytes += used;
  }
  return n;
}

void Fill(const ProcessUse& p, nvmlProcessInfo_v1_t* info) {
  info->pid = p.pid;
  info->usedGpuMemory = p.used_bytes;
}

void Fill(const ProcessUse& p, nvmlProcessInfo_v2_t* info) {
  info->pid = p.pid;
  info->usedGpuMemory = p.used_bytes;
  info->gpuInstanceId = kNoMigInstance;
  info->computeInstanceId = kNoMigInstance;
}

// The infoCount protocol: in, the capacity of infos; out, the number of
// processes. Too small (including 0 to ask for the count) returns
// NVML_ERROR_INSUFFICIENT_SIZE with the count; no process at all succeeds.
template <typename Info>
nvmlReturn_t ListProcesses(nvmlDevice_t device, unsigned int* infoCount, Info* infos,
                           bool graphics) {
  int d = 0;
  if (nvmlReturn_t r = Resolve(device, &d); r != NVML_SUCCESS) return r;
  if (infoCount == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  ProcessUse found[kMaxProcesses];
  // The simulated devices run compute work only.
  unsigned int n = graphics ? 0 : ComputeProcesses(d, found);
  if (*infoCount < n) {
    *infoCount = n;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  if (infos == nullptr && n > 0) return NVML_ERROR_INVALID_ARGUMENT;
  for (unsigned int i = 0; i < n; ++i) Fill(found[i], &infos[i]);
  *infoCount = n;
  return NVML_SUCCESS;
}

}  // namespace
}  // namespace vgpu::sim::nvml

using vgpu::sim::nvml::ListProcesses;

NVML_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device,
                                                                 unsigned int* infoCount,
                                                                 nvmlProcessInfo_t* infos) {
  return ListProcesses(device, infoCount, infos, false);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device,
                                                                 unsigned int* infoCount,
                                                                 nvmlProcessInfo_v2_t* infos) {
  return ListProcesses(device, infoCount, infos, false);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device,
                                                              unsigned int* infoCount,
                                                              nvmlProcessInfo_v1_t* infos) {
  return ListProcesses(device, infoCount, infos, false);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t device,
                                                                  unsigned int* infoCount,
                                                                  nvmlProcessInfo_t* infos) {
  return ListProcesses(device, infoCount, infos, true);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v2(nvmlDevice_t device,
                                                                  unsigned int* infoCount,
                                                                  nvmlProcessInfo_v2_t* infos) {
  return ListProcesses(device, infoCount, infos, true);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses(nvmlDevice_t device,
                                                               unsigned int* infoCount,
                                                               nvmlProcessInfo_v1_t* infos) {
  return ListProcesses(device, infoCount, infos, true);
}
