// vgpud's use of migration (docs/migration.md, docs/vgpud.md): moving a job to
// another GPU with room instead of time-slicing an oversubscribed one, drain
// and undrain, and vgpuctl migrate through the daemon.
#include <algorithm>
#include <chrono>

#include "common/log.h"
#include "common/process_info.h"
#include "ctl/migrate/migrator.h"
#include "ctl/vgpud/coordinator.h"

namespace vgpu::vgpud {
bool Coordinator::ResolveDevice(const std::string& name, GpuMemory* out) const {
  for (const GpuMemory& g : gpus_->Read()) {
    if (g.uuid == name || std::to_string(g.index) == name) return *out = g, true;
  }
  return false;
}

std::vector<std::string> Coordinator::Drained() const {
  std::lock_guard<std::mutex> lock(drain_mu_);
  return drained_;
}

Status Coordinator::MoveJob(Job* job, const GpuMemory& from, const GpuMemory& to,
                            const std::string& why, pid_t for_pid, double* stopped_ms) {
  migrate::GpuPair pair{from, to, job->FootprintOn(from.uuid)};
  ctl::ClientOptions o;
  o.run_dir = config_.run_dir;
  const auto t0 = Clock::now();
  if (ProcessStopped(job->pid)) {  // stopped since the last refresh: it would not answer
    std::lock_guard<std::mutex> lock(mu_);
    job->stopped = true;
    return Status::Error(ErrorCode::kBusy, "job is stopped");
  }
  migrate::Outcome m = migrate::MigrateJob(job->pid, {pair}, o);
  if (stopped_ms != nullptr) *stopped_ms = m.stopped_ms;
  if (!m.status.ok()) {
    events_->Add({0, "refuse", job->pid, for_pid, from.uuid, 0, Since(t0),
                  "migrate to " + to.uuid + ": " + m.status.message +
                      (m.stranded ? " (left CHECKPOINTED)" : "")});
    std::lock_guard<std::mutex> lock(mu_);
    job->refused_until = Clock::now() + policy::kRefusedBackoff;
    return m.status;
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (JobDevice& d : job->devices) {
    if (d.uuid == from.uuid) d.uuid = to.uuid;
  }
  job->migrations++;
  job->bytes_moved += pair.bytes;
  job->reason = "migrated from " + std::to_string(from.index) + " (" + why + ")";
  events_->Add({0, "migrate", job->pid, for_pid, from.uuid, pair.bytes, Since(t0),
                "to " + to.uuid + ", stopped " + std::to_string(static_cast<int>(m.stopped_ms)) +
                    " ms: " + why});
  return Status::Ok();
}

bool Coordinator::Carry(const policy::Move& move, const std::string& why, pid_t for_pid) {
  GpuMemory from, to;
  auto it = jobs_.find(move.pid);
  if (it == jobs_.end() || !ResolveDevice(move.from, &from) || !ResolveDevice(move.to, &to)) {
    return false;
  }
  return MoveJob(&it->second, from, to, why, for_pid, nullptr).ok();
}

void Coordinator::MoveOffDrained() {
  for (const policy::Move& m : policy::PlanDrain(jobs_, RoomNow(), Drained(), Clock::now())) {
    if (!m.to.empty()) {
      Carry(m, "device drained", 0);
      continue;
    }
    Job& j = jobs_.at(m.pid);
    std::lock_guard<std::mutex> lock(mu_);
    if (j.reason.rfind("drain:", 0) != 0) {
      j.reason = "drain: no GPU has room";
      events_->Add({0, "refuse", m.pid, 0, m.from, m.bytes, 0, "drain: no GPU has room"});
    }
  }
}

ctl::Response Coordinator::Drain(const std::string& device, bool on) {
  GpuMemory g;
  if (!ResolveDevice(device, &g)) return ctl::Response::Error(ErrorCode::kNoEnt, "no GPU " + device);
  {
    std::lock_guard<std::mutex> lock(drain_mu_);
    auto it = std::find(drained_.begin(), drained_.end(), g.uuid);
    if (on && it == drained_.end()) drained_.push_back(g.uuid);
    if (!on && it != drained_.end()) drained_.erase(it);
  }
  events_->Add({0, on ? "drain" : "undrain", 0, 0, g.uuid, 0, 0,
                on ? "jobs move off; new ones are kept off" : "open to jobs again"});
  std::lock_guard<std::mutex> decide(decide_mu_);
  if (on) {
    Refresh();
    MoveOffDrained();
  }
  nlohmann::json left = nlohmann::json::array();
  for (const auto& [pid, j] : jobs_) {
    if (on && j.FootprintOn(g.uuid) != 0) left.push_back(pid);
  }
  SaveState();
  return ctl::Response::Ok({{"device", g.uuid}, {"drained", on}, {"jobs_left", left}});
}

ctl::Response Coordinator::Migrate(pid_t pid,
                                   const std::vector<std::pair<std::string, std::string>>& pairs) {
  std::lock_guard<std::mutex> decide(decide_mu_);
  Refresh();
  auto it = jobs_.find(pid);
  if (it == jobs_.end()) return ctl::Response::Error(ErrorCode::kNoEnt, "no job " + std::to_string(pid));
  if (it->second.stopped) {
    return ctl::Response::Error(ErrorCode::kBusy, "job " + std::to_string(pid) +
                                                      " is stopped (SIGSTOP); continue it first");
  }
  if (pairs.size() != 1) {
    return ctl::Response::Error(ErrorCode::kNoSys, "vgpud moves one GPU of a job at a time");
  }
  GpuMemory from, to;
  if (!ResolveDevice(pairs[0].first, &from) || !ResolveDevice(pairs[0].second, &to)) {
    return ctl::Response::Error(ErrorCode::kNoEnt, "unknown GPU in the pair");
  }
  const std::vector<std::string> drained = Drained();
  if (std::count(drained.begin(), drained.end(), to.uuid) != 0) {
    return ctl::Response::Error(ErrorCode::kBusy, to.uuid + " is drained");
  }
  if (it->second.state != JobState::kRunning) {
    return ctl::Response::Error(ErrorCode::kBusy, "the job is not running");
  }
  if (FreeFor(to) < it->second.FootprintOn(from.uuid)) {
    return ctl::Response::Error(ErrorCode::kBusy, to.uuid + " has no room for the job");
  }
  double stopped = 0;
  Status s = MoveJob(&it->second, from, to, "by request", 0, &stopped);
  SaveState();
  if (!s.ok()) return ctl::Response::Error(s);
  return ctl::Response::Ok({{"stopped_ms", stopped}});
}

}  // namespace vgpu::vgpud
