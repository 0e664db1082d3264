// nvmlDevice*RunningProcesses of the simulated libnvidia-ml.so.1: the
// processes of the node with a context on, or memory of, a device; and
// nvmlDeviceGetProcessUtilization, their share of the device's engine.
#include <time.h>

#include <algorithm>
#include <cstdint>

#include "driver/nvml_abi.h"
#include "sim/node/node_region.h"
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
                           bool graphics_or_mps) {
  int d = 0;
  if (nvmlReturn_t r = Resolve(device, &d); r != NVML_SUCCESS) return r;
  if (infoCount == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  ProcessUse found[kMaxProcesses];
  // The simulated devices run compute work only, and no MPS server.
  unsigned int n = graphics_or_mps ? 0 : ComputeProcesses(d, found);
  if (*infoCount < n) {
    *infoCount = n;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  if (infos == nullptr && n > 0) return NVML_ERROR_INVALID_ARGUMENT;
  for (unsigned int i = 0; i < n; ++i) Fill(found[i], &infos[i]);
  *infoCount = n;
  return NVML_SUCCESS;
}

// NVML's sample timestamps are CPU time in microseconds since the epoch; the
// engine keeps CLOCK_MONOTONIC. Returns realtime minus monotonic, in ns.
int64_t RealtimeOffsetNs() {
  timespec rt{};
  clock_gettime(CLOCK_REALTIME, &rt);
  int64_t real = static_cast<int64_t>(rt.tv_sec) * 1'000'000'000 + rt.tv_nsec;
  return real - static_cast<int64_t>(NowNs());
}

// The processes that used device `device`'s engine after lastSeenTimeStamp,
// one sample each: smUtil is their engine time over the window since then
// (since the oldest sample kept, for 0); memory, encoder and decoder are not
// modelled and read 0. The count protocol is NVML's: no buffer or too small
// a one returns NVML_ERROR_INSUFFICIENT_SIZE with the count needed; no
// process newer than lastSeenTimeStamp is NVML_ERROR_NOT_FOUND.
nvmlReturn_t ProcessUtilization(nvmlDevice_t device, nvmlProcessUtilizationSample_t* out,
                                unsigned int* count, unsigned long long last_seen_us) {
  int d = 0;
  if (nvmlReturn_t r = Resolve(device, &d); r != NVML_SUCCESS) return r;
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  NodeRegion* node = Node();
  uint64_t now = NowNs();
  int64_t offset = RealtimeOffsetNs();
  // A process qualifies when its sample's timestamp (in whole us) is newer
  // than last_seen_us, i.e. its last activity is at or after last_seen_us + 1.
  auto first_us =
      static_cast<int64_t>(std::min<unsigned long long>(last_seen_us, INT64_MAX / 1000 - 1) + 1);
  int64_t since = first_us * 1000 - 1 - offset;
  // Before the node existed is the same as "everything kept".
  uint64_t since_ns = last_seen_us == 0 || since <= static_cast<int64_t>(node->header()->created_ns)
                          ? 0
                          : static_cast<uint64_t>(since);
  ProcessBusy found[kMaxProcesses];
  int n = node->ProcessUtilization(d, since_ns, now, found, kMaxProcesses);
  if (n == 0) {
    *count = 0;
    return NVML_ERROR_NOT_FOUND;
  }
  if (out == nullptr || *count < static_cast<unsigned int>(n)) {
    *count = static_cast<unsigned int>(n);
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  for (int i = 0; i < n; ++i) {
    const ProcessBusy& p = found[i];
    out[i] = {};
    out[i].pid = static_cast<unsigned int>(p.pid);
    out[i].timeStamp =
        static_cast<unsigned long long>(static_cast<int64_t>(p.last_active_ns) + offset) / 1000;
    double pct = 100.0 * static_cast<double>(p.busy_ns) / static_cast<double>(p.window_ns);
    out[i].smUtil = static_cast<unsigned int>(std::min(100.0, pct + 0.5));
  }
  *count = static_cast<unsigned int>(n);
  return NVML_SUCCESS;
}

}  // namespace
}  // namespace vgpu::sim::nvml

using vgpu::sim::nvml::ListProcesses;

NVML_EXPORT nvmlReturn_t nvmlDeviceGetProcessUtilization(
    nvmlDevice_t device, nvmlProcessUtilizationSample_t* utilization,
    unsigned int* processSamplesCount, unsigned long long lastSeenTimeStamp) {
  return vgpu::sim::nvml::ProcessUtilization(device, utilization, processSamplesCount,
                                             lastSeenTimeStamp);
}

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

// No MPS server runs on the simulated node (its devices time-share contexts
// without one), so nvidia-smi's MPS query finds nobody.
NVML_EXPORT nvmlReturn_t nvmlDeviceGetMPSComputeRunningProcesses_v3(nvmlDevice_t device,
                                                                    unsigned int* infoCount,
                                                                    nvmlProcessInfo_t* infos) {
  return ListProcesses(device, infoCount, infos, true);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetMPSComputeRunningProcesses_v2(nvmlDevice_t device,
                                                                    unsigned int* infoCount,
                                                                    nvmlProcessInfo_v2_t* infos) {
  return ListProcesses(device, infoCount, infos, true);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetMPSComputeRunningProcesses(nvmlDevice_t device,
                                                                 unsigned int* infoCount,
                                                                 nvmlProcessInfo_v1_t* infos) {
  return ListProcesses(device, infoCount, infos, true);
}
