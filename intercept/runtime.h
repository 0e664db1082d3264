// Process-wide state of libvgpu. Built in two lazy phases so that a process
// that never touches CUDA pays nothing: the configuration on the first hooked
// call, the device map and quota ledger right after the real cuInit succeeds.
#pragma once

#include <cuda.h>

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "common/call_sites.h"
#include "common/config/config.h"
#include "ctl/control/agent_server.h"
#include "ctl/control/run_dir.h"
#include "intercept/coordination.h"
#include "intercept/device_ledger.h"
#include "intercept/device_map.h"
#include "intercept/graph_memory.h"
#include "intercept/migration_host.h"
#include "intercept/non_migratable.h"
#include "intercept/nvml_view.h"
#include "intercept/runtime_settings.h"
#include "quota/allocation_accounting.h"
#include "quota/mapped_handles.h"
#include "quota/quota_ledger.h"
#include "residency/engine.h"
#include "residency/ipc_sharing.h"
#include "share/compute_share.h"
#include "vmm/imported_memory.h"
#include "vmm/vmm.h"

namespace vgpu {

class Runtime {
 public:
  // Inline: every launch and copy reads share() through it, so the guard
  // check is inlined there rather than a call away.
  static Runtime& Get() {
    static Runtime* rt = new Runtime();  // never destroyed: hooks may run during exit
    return *rt;
  }

  const Config& config() const { return config_; }
  bool config_ok() const { return config_error_.empty(); }

  // Phase two; the result is sticky. Fails closed (an error, never an
  // unlimited process) when the configuration cannot be honoured.
  CUresult OnCuInit();
  bool ready() const { return ready_.load(std::memory_order_acquire); }

  const DeviceMap& devices() const { return devices_; }
  DeviceMap& mutable_devices() { return devices_; }
  // nullptr when no quota applies (no limit and no group): pure pass-through.
  // Addressed by driver ordinal (intercept/device_ledger.h).
  DeviceLedger* ledger() const { return ledger_view_.get(); }
  // Charges against that ledger (quota/allocation_accounting.h); charges
  // nothing while ledger() is nullptr.
  AllocationAccounting& accounting() { return accounting_; }
  // The quota's charge for the driver's graph pools.
  GraphMemoryCharge& graph_memory() { return graph_memory_; }
  // Allocation call sites; enabled (phase two) with VGPU_TRACE_ALLOCATIONS.
  CallSites& call_sites() { return call_sites_; }
  // Compute share, weight and priority as `vgpuctl set` leaves them (from the
  // configuration until then).
  RuntimeSettings& settings() { return settings_; }
  NonMigratableBook& non_migratable() { return non_migratable_; }
  // cuMemCreate handles released while mapped: their charge waits for the unmap.
  MappedHandles& mapped_handles() { return mapped_handles_; }
  // The compute share; nullptr when the policy is native, before phase two
  // and in a fork child (which has no accountant thread and holds no lease).
  // Read on every launch: one acquire load.
  ComputeShare* share() const { return share_.load(std::memory_order_acquire); }
  // What NVML answers with for each visible device (hooks_nvml.cc).
  NvmlView& nvml_view() { return nvml_view_; }
  // libvgpu's side of vgpud: asking for room, parking and the watchdog.
  Coordination& coordination() { return *coordination_; }
  // The process's half of a migration (docs/migration.md).
  Migration& migration() { return migration_; }
  // The primary context of each physical device (up to kPrimaryContexts), to
  // know what its last release frees.
  static constexpr int kPrimaryContexts = 64;
  std::atomic<CUcontext>& primary_context(int device) { return primary_[device]; }
  // The process's VMM-backed memory (docs/vmm.md) on the real driver's table,
  // and the residency engine that moves it. Built at first use: the driver
  // table loads then, never while the configuration is being read.
  vmm::Manager& vmm();
  residency::Engine& residency();
  // CUDA IPC of VMM-served memory (intercept/hooks_ipc.cc): other processes'
  // memory opened here, and who shares memory with this process.
  vmm::ImportedMemory& imported();
  residency::IpcSharing& ipc_sharing() { return ipc_sharing_; }
  // residency::SharedMemoryRefusal for the live peers; "" if none.
  std::string SharingRefusal();

  // The process's one exit and fork handlers (registered by the constructor).
  void OnExit();
  void OnForkPrepare();
  void OnForkParent();
  void OnForkChild();

 private:
  Runtime();
  struct DriverMechanisms;
  DriverMechanisms& Mechanisms();
  CUresult BuildPhaseTwo();
  // Starts the control agent with libvgpu's handler (defined with the
  // handler, in agent_handler.cc); a failure is logged, never fatal.
  void StartAgent() noexcept;
  // VGPU_SUSPEND_ON_SIGTSTP: installs the SIGTSTP/SIGCONT handlers once
  // (agent_handler.cc); a failure is logged, never fatal.
  void StartSuspendOnSigtstp() noexcept;
  void ReportRefusal(int device, uint64_t bytes);
  // Frees an exported allocation whose free waited for its importers.
  void FreeDeferred(uint64_t buffer_id, uint64_t base);

  Config config_;
  std::string config_error_;
  DeviceMap devices_;
  std::unique_ptr<QuotaLedger> ledger_;
  std::unique_ptr<DeviceLedger> ledger_view_;
  AllocationAccounting accounting_;
  graph_memory::DriverGraphPools graph_pools_;
  GraphMemoryCharge graph_memory_;
  CallSites call_sites_;
  RuntimeSettings settings_;
  NonMigratableBook non_migratable_;
  MappedHandles mapped_handles_;
  residency::IpcSharing ipc_sharing_{
      [](int64_t pid) { return !ctl::ProcessIsDead(static_cast<pid_t>(pid)); },
      [this](uint64_t buffer_id, uint64_t base) { FreeDeferred(buffer_id, base); }};
  NvmlView nvml_view_;
  std::unique_ptr<Coordination> coordination_;
  DriverMigrationHost migration_host_{
      &devices_, [this] { return ledger_.get(); }, [this] { return share(); },
      [this] { return residency().state() == residency::State::kRunning; },
      [this] { return SharingRefusal(); }};
  Migration migration_{&migration_host_};
  std::array<std::atomic<CUcontext>, kPrimaryContexts>
      primary_{};                                // built once the configuration is read
  std::unique_ptr<ctl::Handler> agent_handler_;  // serves the agent; outlives it
  ctl::Agent agent_;                             // started lazily (StartAgent)
  std::atomic<ComputeShare*> share_{nullptr};    // never deleted: see compute_share_host.h
  // Built once (mechanisms_mu_), then read with one acquire load: every
  // VMM allocation and free reaches the manager through it.
  std::mutex mechanisms_mu_;
  std::atomic<DriverMechanisms*> mechanisms_{nullptr};  // never destroyed
  std::atomic<bool> ready_{false};
  std::mutex init_mu_;  // phase two, once
  bool init_attempted_ = false;
  CUresult init_result_ = CUDA_ERROR_NOT_INITIALIZED;
};

// Reports a configuration error once on stderr: a job that would otherwise
// run without its quota must say why it does not run at all.
void ReportFatal(const std::string& message);

}  // namespace vgpu

