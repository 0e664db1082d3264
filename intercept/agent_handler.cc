// The control agent inside libvgpu: serves vgpuctl's info, suspend, resume,
// checkpoint and restore (docs/control-protocol.md) with the residency engine
// (residency/engine.h), migrate_prepare/migrate_finish (residency/migration.h)
// and set (intercept/agent_set.h). Started lazily after cuInit succeeds
// (Runtime::StartAgent, defined here with the handler it starts); a failed
// start is logged and never fails the application.
#include <unistd.h>

#include <cstdlib>
#include <exception>
#include <fstream>
#include <map>
#include <string>

#include "common/counters.h"
#include "common/log.h"
#include "ctl/control/agent_server.h"
#include "ctl/control/protocol.h"
#include "ctl/control/run_dir.h"
#include "driver/real_driver.h"
#include "intercept/agent_set.h"
#include "intercept/coordination.h"
#include "intercept/ipc_handles.h"
#include "intercept/runtime.h"
#include "residency/engine.h"
#include "residency/migration.h"
#include "residency/stop_signals.h"
#include "vmm/vmm.h"

namespace vgpu {
namespace {

// VGPU_CHECKPOINT_DIR (the option table), else $TMPDIR (/tmp)/vgpu-checkpoints-<uid>/<pid>. The
// base under a world-writable directory is created 0700, or checked like the run directory
// (ours, no symlink, not writable by others) when it exists: another user who
// pre-created it could otherwise delete, swap or read our images.
ctl::Status DefaultCheckpointDir(std::string* dir) {
  if (const std::string& configured = Runtime::Get().config().checkpoint_dir; !configured.empty()) {
    *dir = configured;
    return ctl::Status::Ok();
  }
  const char* tmp = std::getenv("TMPDIR");
  std::string base = std::string(tmp != nullptr && tmp[0] == '/' ? tmp : "/tmp") +
                     "/vgpu-checkpoints-" + std::to_string(geteuid());
  if (auto s = ctl::EnsureRunDir(base); !s.ok()) return s;
  *dir = base + "/" + std::to_string(getpid());
  return ctl::Status::Ok();
}

using ctl::ErrorCode;
using ctl::Response;

std::string Comm() {
  std::ifstream f("/proc/self/comm");
  std::string s;
  std::getline(f, s);
  return s;
}

using residency::Progress;

Progress ProgressTo(ctl::ProgressSink* sink) {
  return [sink](const char* phase, uint64_t done, uint64_t total) {
    if (sink == nullptr) return;
    ctl::Progress p;
    p.done = done;
    p.total = total;
    p.phase = phase;
    sink->Report(p);
  };
}

Response ToResponse(const Result<nlohmann::json>& r) {
  return r.ok() ? Response::Ok(r.value()) : Response::Error(r.status());
}

// A residency operation's outcome as the protocol's result (bytes, seconds,
// state; path and phases when there are).
Response ToResponse(const residency::Result& r) {
  if (!r.ok()) return Response::Error(r.status());
  nlohmann::json j = {{"bytes", r->bytes},
                      {"seconds", r->seconds},
                      {"state", residency::StateName(Runtime::Get().residency().state())}};
  if (!r->path.empty()) j["path"] = r->path;
  if (!r->phases.empty()) {
    nlohmann::json phases = nlohmann::json::object();
    for (const auto& [name, seconds] : r->phases) phases[name] = seconds;
    j["phases"] = phases;
  }
  return Response::Ok(j);
}

Response Checkpoint(const ctl::Request& req, const Progress& progress) {
  ctl::CheckpointArgs a;
  if (auto s = ctl::ParseCheckpointArgs(req.args, &a); !s.ok()) return Response::Error(s);
  std::string dir = a.dir;
  if (dir.empty()) {
    if (auto s = DefaultCheckpointDir(&dir); !s.ok()) return Response::Error(s);
  }
  return ToResponse(Runtime::Get().residency().Checkpoint(dir, a.leave_running, progress));
}

Response Restore(const ctl::Request& req, const Progress& progress) {
  ctl::RestoreArgs a;
  if (auto s = ctl::ParseRestoreArgs(req.args, &a); !s.ok()) return Response::Error(s);
  return ToResponse(Runtime::Get().residency().Restore(a.from, progress));
}

// libvgpu's agent commands, all of them: the server (ctl/control) has checked
// the envelope and the argument types and answered "ping"; nothing else
// handles a command.
constexpr size_t kTopCallSites = 20;

// A suspend or checkpoint asked by vgpud ("by": "vgpud") is remembered, so
// that the job resumes by itself if vgpud does not come back (coordination.h).
// Read without throwing: an exception here would report a completed suspend
// as failed and leave the job parked without its way back.
Response Parked(const ctl::Request& req, Response r) {
  const nlohmann::json& a = req.args;
  const bool by_vgpud = a.is_object() && a.contains("by") && a["by"] == "vgpud";
  if (r.ok && by_vgpud && Runtime::Get().residency().state() != residency::State::kRunning) {
    const bool has_grace = a.contains("grace_ms") && a["grace_ms"].is_number_integer();
    Runtime::Get().coordination().NoteParkedByCoordinator(has_grace ? a["grace_ms"].get<int64_t>()
                                                                    : 0);
  }
  return r;
}

Response Unparked(Response r) {
  if (r.ok) Runtime::Get().coordination().NoteUnparked();
  return r;
}

class ResidencyHandler : public ctl::Handler {
 public:
  Response Handle(const ctl::Request& req, ctl::ProgressSink* sink) override {
    Progress progress = ProgressTo(sink);
    if (req.cmd == "info") return Info();
    if (req.cmd == "ps") return ctl::ProcessListOf(Info());
    if (req.cmd == "suspend")
      return Parked(req, ToResponse(Runtime::Get().residency().Suspend(progress)));
    if (req.cmd == "resume")
      return Unparked(ToResponse(Runtime::Get().residency().Resume(progress)));
    if (req.cmd == "checkpoint") return Parked(req, Checkpoint(req, progress));
    if (req.cmd == "restore") return Unparked(Restore(req, progress));
    if (req.cmd == "set") return HandleSet(req);
    if (req.cmd == "migrate_prepare")
      return ToResponse(Runtime::Get().migration().Prepare(req.args));
    if (req.cmd == "migrate_finish") return ToResponse(Runtime::Get().migration().Finish());
    if (req.cmd == "ipc_export") return ServeIpcExport(req);
    if (req.cmd == "ipc_close") return ServeIpcClose(req);
    return Response::Error(ErrorCode::kNoSys, "'" + req.cmd + "' is not supported by this agent");
  }

 private:
  Response Info() {
    Runtime& rt = Runtime::Get();
    ctl::InfoResult info;
    info.pid = getpid();
    info.uid = getuid();
    info.version = VGPU_VERSION;
    info.group = rt.config().group;
    info.claim = rt.config().claim;
    info.pod = rt.config().pod;
    info.slurm_job = rt.config().slurm_job;
    info.preemptible = rt.config().preemptible;
    for (const ConfigCeiling& c : rt.config().ceilings) {
      info.placed = info.placed || c.limits->visible_devices_set;
    }
    info.state = residency::StateName(Runtime::Get().residency().state());
    info.command = Comm();
    std::map<int, uint64_t> vmm_used = Runtime::Get().vmm().LiveBytesByDevice();
    for (int v = 0; v < rt.devices().count(); ++v) {
      const int p = rt.devices().ToOrdinal(VisibleIndex(v)).value();
      ctl::DeviceInfo d;
      d.index = v;
      d.uuid = rt.devices().uuid(VisibleIndex(v));  // formatted once, when the device map was built
      if (DeviceLedger* l = rt.ledger(); l != nullptr) {
        if (l->Limit(p) != kUnlimited) d.quota = l->Limit(p);
        d.used = l->SelfUsed(p);
      } else {
        d.used = vmm_used[p];
      }
      info.devices.push_back(d);
    }
    FillRuntimeSettings(&info);
    for (size_t i = 0; i < counters::kCount; ++i) {
      info.counters.emplace_back(counters::kInfo[i].name, counters::Get(i));
    }
    nlohmann::json j = ctl::ToJson(info);
    // What vgpud needs besides: who parked it, and each device's footprint
    // (live allocations: what a resume needs, also while suspended).
    if (info.state != "running" && Runtime::Get().coordination().ParkedByCoordinator()) {
      j["suspended_by"] = "vgpud";
    } else if (info.state != "running" && residency::SuspendedByStopSignal()) {
      j["suspended_by"] = "sigtstp";  // VGPU_SUSPEND_ON_SIGTSTP
    }
    // Processes it shares device memory with (CUDA IPC): vgpud never parks it alone.
    j["shared_with"] = rt.ipc_sharing().SharedWith(rt.imported().Exporters());
    for (size_t i = 0; i < info.devices.size(); ++i) {
      j["devices"][i]["footprint"] =
          vmm_used[rt.devices().ToOrdinal(VisibleIndex(static_cast<int>(i))).value()];
    }
    if (rt.call_sites().enabled()) {  // VGPU_TRACE_ALLOCATIONS: the top call sites
      nlohmann::json sites = nlohmann::json::array();
      for (const CallSiteStats& c : rt.call_sites().Top(kTopCallSites)) {
        sites.push_back({{"where", c.where},
                         {"live_bytes", c.live_bytes},
                         {"live_count", c.live_count},
                         {"total_count", c.total_count}});
      }
      j["allocations"] = std::move(sites);
    }
    return Response::Ok(j);
  }
};

// VGPU_SUSPEND_ON_SIGTSTP: a SIGTSTP suspends with the same engine as the
// agent's "suspend" (not marked parked: vgpud leaves it alone, as a suspend
// by hand), a SIGCONT resumes (residency/stop_signals.h).
class EngineSuspender final : public residency::Suspender {
 public:
  Status Suspend() override {
    residency::Result r = Runtime::Get().residency().Suspend({});
    return r.ok() ? Status::Ok() : r.status();
  }
  Status Resume() override {
    residency::Engine& engine = Runtime::Get().residency();
    // Resumed meanwhile by other means (vgpuctl resume): the memory is back.
    if (engine.state() == residency::State::kRunning) return Status::Ok();
    residency::Result r = engine.Resume({});
    return r.ok() || engine.state() == residency::State::kRunning ? Status::Ok() : r.status();
  }
};

}  // namespace

void Runtime::StartSuspendOnSigtstp() noexcept {
  try {
    static EngineSuspender* suspender = new EngineSuspender();  // the handlers outlive everything
    if (Status s = residency::InstallPosixStopSignals(suspender); !s.ok()) {
      VGPU_LOG(kWarn, "VGPU_SUSPEND_ON_SIGTSTP: handlers not installed: {}", s.message);
    } else {
      VGPU_LOG(kInfo, "VGPU_SUSPEND_ON_SIGTSTP: SIGTSTP suspends device memory, SIGCONT resumes");
    }
  } catch (const std::exception& e) {
    VGPU_LOG(kWarn, "VGPU_SUSPEND_ON_SIGTSTP: handlers not installed: {}", e.what());
  }
}

void Runtime::StartAgent() noexcept {
  // cuInit must not fail because the agent could not start (out of memory,
  // no thread): the job runs, it only cannot be checkpointed by hand.
  try {
    if (agent_handler_ == nullptr) agent_handler_ = std::make_unique<ResidencyHandler>();
    ctl::AgentOptions options;
    options.run_dir = config_.run_dir;  // empty: ctl::RunDir()
    ctl::Status s = agent_.Start(agent_handler_.get(), options);
    if (!s.ok()) {
      VGPU_LOG(kWarn, "control agent not started: {}", s.message.c_str());
    } else {
      VGPU_LOG(kInfo, "control agent listening on {}", agent_.SocketPath().c_str());
    }
  } catch (const std::exception& e) {
    VGPU_LOG(kWarn, "control agent not started: {}", e.what());
  }
}

}  // namespace vgpu
