// The compute share bound to this process: the real driver, CLOCK_MONOTONIC,
// the configuration and a thread of its own (compute_share.cc holds the
// mechanism, which knows none of these).
#include "intercept/compute_share_host.h"

#include <time.h>
#include <unistd.h>

#include <exception>
#include <thread>

#include "common/clock.h"
#include "common/log.h"
#include "common/process_info.h"
#include "driver/real_driver.h"
#include "intercept/node_devices.h"
#include "share/compute_share.h"

namespace vgpu {
namespace {

class RealShareHost final : public ShareHost {
 public:
  RealShareHost(const Config& cfg, const DeviceMap& devices, RuntimeSettings& settings)
      : cfg_(cfg), devices_(devices), settings_(settings) {}
  uint64_t NowNs() override { return MonotonicNs(); }
  void SleepNs(uint64_t ns) override {
    timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
    nanosleep(&ts, nullptr);
  }
  CUresult EventCreate(CUevent* event) override {
    return REAL_CALL(cuEventCreate, event, CU_EVENT_DISABLE_TIMING);
  }
  CUresult EventRecord(CUevent event, CUstream stream) override {
    return REAL_CALL(cuEventRecord, event, stream);
  }
  CUresult EventSynchronize(CUevent event) override { return REAL_CALL(cuEventSynchronize, event); }
  CUresult CtxSynchronize() override { return REAL_CALL(cuCtxSynchronize); }
  CUresult CtxSetCurrent(CUcontext ctx) override { return REAL_CALL(cuCtxSetCurrent, ctx); }
  bool ParamsFor(int device, GroupParams* params) override {
    const int v = devices_.ToVisible(OrdinalOfNodeDevice(NodeIndex(device))).value();
    if (cfg_.EffectivePolicyFor(v) == Config::ComputePolicy::kNative) return false;
    // The settings in force now: `vgpuctl set` may have changed them.
    *params = settings_.ParamsFor(cfg_.EffectivePolicyFor(v), v);
    return true;
  }
  bool StartThread(std::function<void()> loop) override {
    try {
      std::thread(std::move(loop)).detach();  // lives as long as the process
      return true;
    } catch (const std::exception& e) {
      VGPU_LOG(kError, "compute share: cannot start the accountant thread ({})", e.what());
      return false;
    }
  }
  void Warn(const std::string& message) override { VGPU_LOG(kWarn, "{}", message.c_str()); }

 private:
  const Config& cfg_;
  const DeviceMap& devices_;
  RuntimeSettings& settings_;
};

// The group of a process without VGPU_GROUP: itself. Pids repeat across
// containers (each has its pid 1), the region does not: outside the host's
// pid namespace the name carries the namespace's inode.
std::string OwnGroupName() {
  std::string name = "pid-" + std::to_string(getpid());
  const uint64_t ns = PidNamespaceId();
  if (ns != kInitPidNamespace && ns != 0) name += "@" + std::to_string(ns);
  return name;
}

}  // namespace

Result<ComputeShare*> StartComputeShare(const Config& cfg, const DeviceMap& devices,
                                        RuntimeSettings& settings) {
  if (cfg.EffectivePolicy() == Config::ComputePolicy::kNative) return nullptr;
  Result<std::unique_ptr<SchedRegion>> opened = SchedRegion::Open(cfg.sched_region);
  if (!opened.ok()) return opened.status();
  std::shared_ptr<SchedRegion> region = std::move(opened.value());
  region->ReapDead();  // our image before an exec() among them: it holds no lock now
  Result<int> registered = region->RegisterClient(getpid());
  if (!registered.ok()) {
    const Status& s = registered.status();
    return Status::Error(ErrorCode::kBusy,
                         s.code != ErrorCode::kBusy
                             ? "the compute scheduler: " + s.message
                             : "the compute scheduler's client table is full (" +
                                   std::to_string(kSchedClients) +
                                   " processes with a compute policy, the limit per node)");
  }
  const int client = registered.value();
  std::string group =
      SchedRegion::TenantGroupName(cfg.group.empty() ? OwnGroupName() : cfg.group, geteuid());
  auto* cs = new ComputeShare(region, client, group, new RealShareHost(cfg, devices, settings));
  // Every visible device's group slot is taken now: a process that cannot
  // be governed must not start (it would run uncapped).
  for (int v = 0; v < devices.count(); ++v) {
    Status joined = cs->Join(NodeDevice(devices.ToOrdinal(VisibleIndex(v))).value());
    if (!joined.ok()) {
      region->Unregister(client);  // the object is left behind: its accountant may run
      return Status::Error(ErrorCode::kBusy, std::move(joined.message));
    }
  }
  GroupParams p = settings.ParamsFor(cfg.EffectivePolicyFor(0), 0);
  VGPU_LOG(
      kInfo, "compute share: group '{}' policy {} share {}% weight {}{}{}", group.c_str(),
      p.policy == SchedPolicy::kFixed ? "fixed" : "weighted", p.share_permille / 10, p.weight,
      p.high_priority ? " high-priority" : "",
      cfg.compute_share_by_index.empty() ? "" : " (device 0; others per CUDA_DEVICE_SM_LIMIT_<i>)");
  return cs;
}

}  // namespace vgpu
