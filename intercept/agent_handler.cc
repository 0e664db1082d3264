#include "intercept/agent_handler.h"

#include <unistd.h>

#include <cstdlib>
#include <exception>
#include <fstream>
#include <map>
#include <string>

#include "ctl/agent.h"
#include "ctl/protocol.h"
#include "ctl/run_dir.h"
#include "driver/real_driver.h"
#include "intercept/log.h"
#include "intercept/residency.h"
#include "intercept/runtime.h"
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

ErrorCode CodeOf(const std::string& name) { return ctl::ErrorCodeFromName(name); }

std::string Comm() {
  std::ifstream f("/proc/self/comm");
  std::string s;
  std::getline(f, s);
  return s;
}

class ResidencyHandler : public ctl::Handler {
 public:
  Response Handle(const ctl::Request& req, ctl::ProgressSink* sink) override {
    auto progress = [sink](const char* phase, uint64_t done, uint64_t total) {
      if (sink == nullptr) return;
      ctl::Progress p;
      p.done = done;
      p.total = total;
      p.phase = phase;
      sink->Report(p);
    };
    if (req.cmd == "info" || req.cmd == "ps") return Info();
    residency::Result r;
    if (req.cmd == "suspend") {
      r = residency::Suspend(progress);
    } else if (req.cmd == "resume") {
      r = residency::Resume(progress);
    } else if (req.cmd == "checkpoint") {
      ctl::CheckpointArgs a;
      if (auto s = ctl::ParseCheckpointArgs(req.args, &a); !s.ok()) return Response::Error(s);
      std::string dir = a.dir;
      if (dir.empty()) {
        if (auto s = DefaultCheckpointDir(&dir); !s.ok()) return Response::Error(s);
      }
      r = residency::Checkpoint(dir, a.leave_running, progress);
    } else if (req.cmd == "restore") {
      ctl::RestoreArgs a;
      if (auto s = ctl::ParseRestoreArgs(req.args, &a); !s.ok()) return Response::Error(s);
      r = residency::Restore(a.from, progress);
    } else {
      return Response::Error(ErrorCode::kNoSys, "'" + req.cmd + "' is not supported by this agent");
    }
    if (!r.ok) return Response::Error(CodeOf(r.code), r.message);
    nlohmann::json j = {{"bytes", r.bytes},
                        {"seconds", r.seconds},
                        {"state", residency::StateName(residency::CurrentState())}};
    if (!r.path.empty()) j["path"] = r.path;
    if (!r.phases.empty()) {
      nlohmann::json phases = nlohmann::json::object();
      for (const auto& [name, seconds] : r.phases) phases[name] = seconds;
      j["phases"] = phases;
    }
    return Response::Ok(j);
  }

 private:
  Response Info() {
    Runtime& rt = Runtime::Get();
    ctl::InfoResult info;
    info.pid = getpid();
    info.uid = getuid();
    info.version = VGPU_VERSION;
    info.group = rt.config().group;
    info.state = residency::StateName(residency::CurrentState());
    info.command = Comm();
    std::map<int, uint64_t> vmm_used;
    for (const auto& a : Vmm().Allocations()) vmm_used[a.device] += a.size;
    for (int v = 0; v < rt.devices().count(); ++v) {
      int p = rt.devices().ToPhysical(v);
      ctl::DeviceInfo d;
      d.index = v;
      d.uuid = rt.devices().uuid(v);  // formatted once, when the device map was built
      if (QuotaLedger* l = rt.ledger(); l != nullptr) {
        if (l->Limit(p) != kUnlimited) d.quota = l->Limit(p);
        d.used = l->SelfUsed(p);
      } else {
        d.used = vmm_used[p];
      }
      info.devices.push_back(d);
    }
    return Response::Ok(ctl::ToJson(info));
  }
};

}  // namespace

void StartAgent() noexcept {
  // cuInit must not fail because the agent could not start (out of memory,
  // no thread): the job runs, it only cannot be checkpointed by hand.
  try {
    static ResidencyHandler* handler = new ResidencyHandler();  // outlives the agent
    ctl::AgentOptions options;
    options.run_dir = Runtime::Get().config().run_dir;  // empty: ctl::RunDir()
    ctl::Status s = ctl::Agent::Start(handler, options);
    if (!s.ok()) {
      VGPU_LOG(kWarn, "control agent not started: %s", s.message.c_str());
    } else {
      VGPU_LOG(kInfo, "control agent listening on %s", ctl::Agent::SocketPath().c_str());
    }
  } catch (const std::exception& e) {
    VGPU_LOG(kWarn, "control agent not started: %s", e.what());
  }
}

}  // namespace vgpu
