#include "intercept/runtime.h"

#include <pthread.h>
#include <unistd.h>

#include <cstdlib>
#include <mutex>

#include "common/byte_size.h"
#include "common/log.h"
#include "ctl/control/agent_server.h"
#include "driver/real_driver.h"
#include "intercept/compute_share_host.h"
#include "intercept/current_context.h"
#include "residency/quiesce_gate.h"

namespace vgpu {
namespace {

// The process's one exit and fork handlers reach the root's members
// (Runtime::OnExit, OnFork*), in one visible order.
void AtExit() { Runtime::Get().OnExit(); }
void AtForkPrepare() { Runtime::Get().OnForkPrepare(); }
void AtForkParent() { Runtime::Get().OnForkParent(); }
void AtForkChild() { Runtime::Get().OnForkChild(); }

driver::LibraryPaths ConfiguredLibraries() {
  const Config& c = Runtime::Get().config();
  return {c.real_libcuda, c.real_libnvml};
}

// The driver layer learns where the real libraries are before any hook can
// load its table (a hook called from another library's constructor that ran
// before ours would find the sonames).
__attribute__((constructor)) void InstallLibraryPaths() {
  driver::SetLibraryPaths(&ConfiguredLibraries);
}

}  // namespace

void ReportFatal(const std::string& message) {
  static std::once_flag once;
  std::call_once(once, [&] {
    std::string line = "vgpu: " + message + " (refusing to run without the configured limits)\n";
    ssize_t w = write(STDERR_FILENO, line.data(), line.size());
    (void)w;
  });
  VGPU_LOG(kError, "{}", message.c_str());
}

struct Runtime::DriverMechanisms {
  explicit DriverMechanisms(Runtime* rt)
      : vmm(driver::Cuda()),
        imported(driver::Cuda()),
        residency(residency::EnginePorts{
            .cuda = &driver::Cuda(),
            .vmm = &vmm,
            .non_migratable_bytes =
                [rt] {
                  rt->graph_memory().TrimUnused();  // a pool's cache need not stop a suspend
                  return rt->non_migratable().Bytes();
                },
            .sharing_refusal = [rt] { return rt->SharingRefusal(); },
        }) {}
  vmm::Manager vmm;
  vmm::ImportedMemory imported;
  residency::Engine residency;
};

Runtime::DriverMechanisms& Runtime::Mechanisms() {
  if (DriverMechanisms* m = mechanisms_.load(std::memory_order_acquire)) return *m;
  std::lock_guard<std::mutex> lock(mechanisms_mu_);
  if (mechanisms_.load(std::memory_order_relaxed) == nullptr) {
    // Hooks may run during exit: never destroyed.
    mechanisms_.store(new DriverMechanisms(this), std::memory_order_release);
  }
  return *mechanisms_.load(std::memory_order_relaxed);
}

vmm::Manager& Runtime::vmm() { return Mechanisms().vmm; }
residency::Engine& Runtime::residency() { return Mechanisms().residency; }
vmm::ImportedMemory& Runtime::imported() { return Mechanisms().imported; }

void Runtime::FreeDeferred(uint64_t buffer_id, uint64_t base) {
  vmm::AllocationInfo info;
  if (vmm().Find(base, &info) && info.va == base && info.buffer_id == buffer_id) {
    vmm().Free(base, nullptr);
  }
}

std::string Runtime::SharingRefusal() {
  return residency::SharedMemoryRefusal(ipc_sharing_.SharedWith(imported().Exporters()));
}

Runtime::Runtime()
    : accounting_(AccountingObservers{
          .refused = [this](int device, uint64_t bytes) { ReportRefusal(device, bytes); },
          .allocated =
              [this](uint64_t key, uint64_t bytes) {
                if (call_sites_.enabled()) call_sites_.OnAlloc(key, bytes, call_sites_.Capture());
              },
          .freed = [this](uint64_t key) { call_sites_.OnFree(key); },
      }),
      graph_memory_(&graph_pools_, &accounting_, [this](int device, uint64_t charged) {
        const uint64_t key = graph_memory::NonMigratableKey(device);
        if (charged == 0) {
          non_migratable_.Forget(key);
        } else {
          non_migratable_.Note(key, charged, nullptr);
        }
      }) {
  if (Status s = LoadConfig([](const char* n) { return std::getenv(n); }, &config_); !s.ok()) {
    config_error_ = s.message.empty() ? "invalid configuration" : s.message;
  }
  InitLog("vgpu", config_.log_level, config_.log_file);  // off unless VGPU_LOG_FILE is set
  // A tenant asked for more than the admin allows: it runs at the ceiling, and
  // says so once (the one place libvgpu writes to stderr besides a fatal error).
  for (const std::string& refusal : config_.refusals) {
    const std::string line = "vgpu: " + refusal + "\n";
    ssize_t w = write(STDERR_FILENO, line.data(), line.size());
    (void)w;
    VGPU_LOG(kWarn, "{}", refusal.c_str());
  }
  coordination_ = std::make_unique<Coordination>(CoordinationPorts{
      .run_dir = config_.run_dir,
      .uuid_of =
          [this](int device) { return devices_.uuid(devices_.ToVisible(DriverOrdinal(device))); },
      .live_bytes = [this] { return vmm().LiveBytesByDevice(); },
      .residency = [this]() -> residency::Engine& { return residency(); },
  });
  pthread_atfork(AtForkPrepare, AtForkParent, AtForkChild);
  std::atexit(AtExit);
}

CUresult Runtime::OnCuInit() {
  std::lock_guard<std::mutex> lock(init_mu_);
  if (init_attempted_) return init_result_;
  init_attempted_ = true;
  init_result_ = BuildPhaseTwo();
  if (init_result_ == CUDA_SUCCESS) {
    ready_.store(true, std::memory_order_release);
    StartAgent();  // logs a failure; never fails the application
    if (config_.suspend_on_sigtstp) StartSuspendOnSigtstp();
  }
  return init_result_;
}

CUresult Runtime::BuildPhaseTwo() {
  if (!config_ok()) {
    ReportFatal(config_error_);
    return CUDA_ERROR_NOT_INITIALIZED;
  }
  std::vector<std::string> node_uuids;
  if (CUresult r = ReadDriverUuids(&node_uuids); r != CUDA_SUCCESS) {
    ReportFatal("cannot enumerate devices");
    return r;
  }
  if (Status s = devices_.Build(node_uuids, config_.visible_devices, config_.visible_devices_set);
      !s.ok()) {
    ReportFatal(s.message);
    return CUDA_ERROR_INVALID_DEVICE;
  }
  if (Status s = config_.ValidateAgainstDeviceCount(devices_.count()); !s.ok()) {
    ReportFatal(s.message);
    return CUDA_ERROR_NOT_INITIALIZED;
  }
  // Frames inside libvgpu (this function's module) are not call sites.
  if (config_.trace_allocations) {
    if (Status s = call_sites_.Enable(reinterpret_cast<const void*>(&ReportFatal)); !s.ok()) {
      VGPU_LOG(kWarn, "VGPU_TRACE_ALLOCATIONS: {}; allocations are not traced", s.message);
    }
  }
  bool any_limit = false;
  std::vector<uint64_t> limits(kLedgerDevices, kUnlimited);
  for (int v = 0; v < devices_.count(); ++v) {
    uint64_t l = config_.LimitFor(v);
    int p = devices_.ToOrdinal(VisibleIndex(v)).value();
    if (l != Config::kNoLimit && p < kLedgerDevices) {
      limits[static_cast<size_t>(p)] = l;
      any_limit = true;
    }
  }
  if (any_limit || !config_.group.empty()) {
    Result<std::unique_ptr<QuotaLedger>> opened = QuotaLedger::Open(config_.group, limits);
    if (!opened.ok()) {
      ReportFatal(opened.status().message);
      return CUDA_ERROR_NOT_INITIALIZED;
    }
    ledger_ = std::move(opened.value());
    if (!ledger_->Join()) {  // full: the process would get no allocation at all
      ReportFatal("quota group '" + config_.group + "' is full: " + std::to_string(kLedgerSlots) +
                  " live member processes, the limit per group");
      ledger_.reset();
      return CUDA_ERROR_NOT_INITIALIZED;
    }
    ledger_view_ = std::make_unique<DeviceLedger>(ledger_.get());
    accounting_.SetQuota(ledger_view_.get());
  }
  settings_.InitFrom(config_);
  Result<ComputeShare*> share = StartComputeShare(config_, devices_, settings_);
  if (!share.ok()) {
    ReportFatal(share.status().message);
    return CUDA_ERROR_NOT_INITIALIZED;
  }
  share_.store(share.value(), std::memory_order_release);
  VGPU_LOG(kInfo, "ready: {} visible device(s), quota {}, group '{}'", devices_.count(),
           ledger_ != nullptr ? "on" : "off", config_.group.c_str());
  return CUDA_SUCCESS;
}

// With VGPU_TRACE_ALLOCATIONS the line names the allocation's call site.
void Runtime::ReportRefusal(int device, uint64_t bytes) {
  if (ledger_view_ == nullptr) return;
  const std::string site = call_sites_.Describe(call_sites_.Capture());
  VGPU_LOG(kWarn, "out of device memory quota on device {}: quota {}, used {}, requested {}{}{}",
           devices_.ToVisible(DriverOrdinal(device)).value(),
           FormatByteSize(ledger_view_->Limit(device)).c_str(),
           FormatByteSize(ledger_view_->Used(device)).c_str(), FormatByteSize(bytes).c_str(),
           site.empty() ? "" : " at ", site);
}

// At exit: the agent stops before the process's state goes away.
void Runtime::OnExit() { agent_.Stop(); }

void Runtime::OnForkPrepare() { agent_.ForkPrepare(); }
void Runtime::OnForkParent() { agent_.ForkParent(); }

void Runtime::OnForkChild() {
  agent_.ForkChild();
  residency::AfterForkInChild();  // the quiesce gate
  migration_.AfterForkInChild();
  // The parent's CUDA context does not survive fork; neither do its charges.
  accounting_.Clear();
  if (ledger_ != nullptr) ledger_->OnForkChild();
  // The driver refuses a forked child's calls; so do the hooks that would
  // otherwise answer from state of the parent's (device count, mapping).
  ready_.store(false, std::memory_order_release);
  share_.store(nullptr, std::memory_order_release);
  ForgetAllCurrentContexts();  // the child's thread asks the driver afresh
}

}  // namespace vgpu
