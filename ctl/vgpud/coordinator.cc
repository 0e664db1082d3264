#include "ctl/vgpud/coordinator.h"

#include <sys/sysinfo.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "common/log.h"
#include "common/process_info.h"
#include "ctl/control/client.h"

namespace vgpu::vgpud {
namespace {

constexpr int kInfoTimeoutMs = 2000;
constexpr int kInfoDeadlineMs = 5000;
// A suspend or resume reports progress; this bounds silence, not duration.
constexpr int kResidencyTimeoutMs = 60000;
// ... and this the whole call, so that an agent that keeps reporting progress
// cannot hold vgpud's decisions for ever: 2 minutes plus the job's bytes at
// 32 MiB/s (a slow disk; suspends run at GB/s). Past it vgpud gives up on the
// call; the agent's operation goes on, and the next refresh sees its outcome.
int ResidencyDeadlineMs(uint64_t bytes) {
  const uint64_t ms = 120'000 + bytes / (32ull << 20) * 1000;
  return static_cast<int>(std::min<uint64_t>(ms, 3'600'000));
}

// An allocation waiting for memory that only stopped jobs hold gets ENOMEM
// after this long: a stopped job gives nothing back until it is continued,
// which may be hours away (a Slurm suspend).
constexpr auto kStoppedHolderWait = std::chrono::seconds(30);

// A request to a stopped process would only time out: refused before sending.
Status RefuseIfStopped(pid_t pid, const std::string& cmd) {
  if (!ProcessStopped(pid)) return Status::Ok();
  return Status::Error(ErrorCode::kBusy, "pid " + std::to_string(pid) + " is stopped (SIGSTOP); " +
                                             cmd + " not sent");
}

int64_t UnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

uint64_t HostRam() {
  struct sysinfo si {};
  if (sysinfo(&si) != 0) return 0;
  return static_cast<uint64_t>(si.totalram) * si.mem_unit;
}

// The agent's view of itself (its "info") merged into vgpud's record.
void Merge(const nlohmann::json& info, Job* job) {
  ctl::InfoResult r;
  if (!ctl::ParseInfoResult(info, &r).ok()) return;
  job->uid = r.uid;
  job->command = r.command;
  job->group = r.group;
  job->claim = r.claim;
  job->pod = r.pod;
  job->slurm_job = r.slurm_job;
  job->preemptible = r.preemptible;
  job->placed = r.placed;
  Priority p;
  if (ParsePriority(info.value("priority", std::string("normal")), &p)) job->priority = p;
  job->weight = std::max(1, info.value("weight", 1));
  // The share is per device; the job's is the largest (0: not limited).
  job->compute_share = 0;
  if (info.contains("devices") && info["devices"].is_array()) {
    for (const auto& d : info["devices"]) {
      // A percentage with decimals (12.5): the agent reports it as a number.
      if (d.is_object() && d.contains("compute_share") && d["compute_share"].is_number()) {
        job->compute_share = std::max(job->compute_share, d["compute_share"].get<double>());
      }
    }
  }
  const bool ours = info.value("suspended_by", std::string()) == "vgpud";
  if (r.state == "running") {
    job->state = JobState::kRunning;
  } else if (ours) {
    job->state = JobState::kWaiting;
    // A job checkpointed and released may report "suspended": vgpud's own record counts.
    job->parked_on_disk = job->parked_on_disk || r.state == "checkpointed";
  } else {
    job->state = r.state == "checkpointed" ? JobState::kCheckpointed : JobState::kSuspended;
    // By its own SIGTSTP (VGPU_SUSPEND_ON_SIGTSTP: a Slurm suspend), else by hand.
    if (info.value("suspended_by", std::string()) == "sigtstp") job->reason = "SIGTSTP";
  }
  const nlohmann::json& devs = info.contains("devices") ? info["devices"] : nlohmann::json();
  job->devices.clear();
  for (size_t i = 0; i < r.devices.size(); ++i) {
    JobDevice d;
    d.uuid = r.devices[i].uuid;
    d.used = r.devices[i].used;
    d.quota = r.devices[i].quota.value_or(0);
    d.footprint = d.used;
    if (devs.is_array() && i < devs.size() && devs[i].is_object()) {
      d.footprint = std::max(d.used, devs[i].value("footprint", d.used));
    }
    job->devices.push_back(d);
  }
  job->counters = r.counters;
  job->shared_with.clear();
  if (info.contains("shared_with") && info["shared_with"].is_array()) {
    for (const auto& p : info["shared_with"]) {
      if (p.is_number_integer()) job->shared_with.push_back(p.get<int64_t>());
    }
  }
  job->compute_governed = r.compute_policy != "native";
  job->UpdateAchievedShare(Clock::now());
}

// "bytes" of an agent's result; 0 when absent or not a number (the agent is
// the job's own process).
uint64_t BytesOf(const nlohmann::json& result) {
  return result.is_object() && result.contains("bytes") && result["bytes"].is_number_unsigned()
             ? result["bytes"].get<uint64_t>()
             : 0;
}

ctl::Request MakeRequest(const std::string& cmd, nlohmann::json args) {
  ctl::Request req;
  req.cmd = cmd;
  req.args = std::move(args);
  return req;
}

}  // namespace

Coordinator::Coordinator(const DaemonConfig& config, const NodeGpus* gpus, EventLog* events)
    : config_(config), gpus_(gpus), events_(events) {}

bool Coordinator::RefreshOne(pid_t pid, Job* job) {
  ctl::Response resp;
  ctl::ClientOptions o;
  o.run_dir = config_.run_dir;
  o.timeout_ms = kInfoTimeoutMs;
  o.deadline_ms = kInfoDeadlineMs;
  o.give_up = [pid] { return ProcessStopped(pid); };  // stopped mid-request
  if (!ctl::Call(pid, MakeRequest("info", nlohmann::json::object()), {}, &resp, o).ok() ||
      !resp.ok) {
    return false;
  }
  job->pid = pid;
  // The answer comes from the job's own process: wrong types must not stop vgpud.
  try {
    Merge(resp.result, job);
  } catch (const std::exception& e) {
    VGPU_LOG(kWarn, "pid {}: malformed info ignored: {}", pid, e.what());
    return false;
  }
  return true;
}

void Coordinator::Refresh() {
  std::map<pid_t, Job> fresh;
  for (const ctl::AgentEntry& a : ctl::ListAgents(config_.run_dir)) {
    Job j;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = jobs_.find(a.pid); it != jobs_.end()) j = it->second;
      else j.running_since = Clock::now();
    }
    const JobState before = j.state;
    // A stopped job cannot answer: its last view stands, marked stopped (a
    // new one is known by its pid only), and nothing is sent to it.
    j.stopped = ProcessStopped(a.pid);
    if (j.stopped) {
      j.pid = a.pid;
      fresh[a.pid] = std::move(j);
      continue;
    }
    if (!RefreshOne(a.pid, &j)) {
      // Busy (mid-operation) or gone: keep the last view while it lives.
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = jobs_.find(a.pid); it != jobs_.end()) {
        fresh[a.pid] = it->second;
        fresh[a.pid].stopped = ProcessStopped(a.pid);  // stopped mid-request
      }
      continue;
    }
    if (before != JobState::kRunning && j.state == JobState::kRunning) j.running_since = Clock::now();
    if (j.state == JobState::kWaiting && before != JobState::kWaiting) {
      j.waiting_since = Clock::now();  // parked by an earlier vgpud
    }
    fresh[a.pid] = std::move(j);
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [pid, job] : jobs_) {
    if (fresh.count(pid) == 0) {
      if (job.parked_on_disk && !job.image_path.empty()) unlink(job.image_path.c_str());
      events_->Add({0, "exit", pid, 0, "", job.TotalFootprint(), 0,
                    std::string("job gone while ") + JobStateName(job.state)});
    }
  }
  jobs_ = std::move(fresh);
  last_refresh_ = Clock::now();
}

void Coordinator::Reconcile(const DaemonState& previous) {
  std::lock_guard<std::mutex> decide(decide_mu_);
  events_->Restore(previous.events);
  Refresh();
  std::lock_guard<std::mutex> lock(mu_);
  {
    std::lock_guard<std::mutex> drain(drain_mu_);
    drained_ = previous.drained;
  }
  // Keep the previous waiting order: earlier parked, earlier resumed.
  const auto now = Clock::now();
  for (size_t i = 0; i < previous.parked.size(); ++i) {
    const ParkedJob& p = previous.parked[i];
    auto it = jobs_.find(p.pid);
    if (it == jobs_.end() || !ProcessAlive(p.pid, p.start_time)) continue;
    if (it->second.state == JobState::kWaiting) {
      it->second.waiting_since = now - std::chrono::milliseconds(previous.parked.size() - i);
      if (it->second.parked_on_disk) it->second.image_path = p.image_path;
    }
  }
  size_t waiting = 0;
  for (const auto& [pid, j] : jobs_) waiting += j.state == JobState::kWaiting;
  events_->Add({0, "start", 0, 0, "", 0, 0,
                std::to_string(jobs_.size()) + " jobs, " + std::to_string(waiting) +
                    " parked by vgpud"});
}

std::vector<Job> Coordinator::Jobs() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Job> out;
  for (const auto& [pid, j] : jobs_) out.push_back(j);
  return out;
}

bool Coordinator::OwnedBy(pid_t pid, int64_t uid) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(pid);
  return it != jobs_.end() && it->second.uid == uid;
}

Status Coordinator::Park(Job* victim, pid_t for_pid, const std::string& uuid, bool preempt,
                         const std::function<void()>& on_progress) {
  const uint64_t footprint = victim->TotalFootprint();
  const bool to_disk = policy::ParkOnDisk(jobs_, *victim, RulesNow().host_budget);
  nlohmann::json args = {{"by", "vgpud"}, {"grace_ms", config_.grace_ms}};
  std::string cmd = "suspend";
  if (to_disk) {
    cmd = "checkpoint";
    if (!config_.checkpoint_dir.empty()) args["dir"] = config_.checkpoint_dir;
  }
  const pid_t pid = victim->pid;
  ctl::ClientOptions o;
  o.run_dir = config_.run_dir;
  o.timeout_ms = kResidencyTimeoutMs;
  o.deadline_ms = ResidencyDeadlineMs(footprint);
  o.give_up = [pid] { return ProcessStopped(pid); };  // stopped mid-request
  ctl::Response resp;
  const auto t0 = Clock::now();
  ctl::ProgressCallback progress;
  if (on_progress) progress = [&on_progress](const ctl::Progress&) { on_progress(); };
  Status s = RefuseIfStopped(pid, cmd);
  if (s.ok()) s = ctl::Call(pid, MakeRequest(cmd, args), progress, &resp, o);
  if (s.ok() && !resp.ok) s = Status::Error(resp.code, resp.error);
  if (!s.ok()) {
    events_->Add({0, "refuse", pid, for_pid, uuid, 0, Since(t0), cmd + " failed: " + s.message});
    // Not asked again for a while (non-migratable memory, busy): other
    // victims are tried, and a waiting allocation does not spin on this one.
    std::lock_guard<std::mutex> lock(mu_);
    victim->refused_until = Clock::now() + policy::kRefusedBackoff;
    return s;
  }
  const uint64_t bytes = BytesOf(resp.result);
  std::lock_guard<std::mutex> lock(mu_);
  victim->state = JobState::kWaiting;
  victim->parked_on_disk = to_disk;
  victim->image_path = to_disk && resp.result.contains("path") && resp.result["path"].is_string()
                           ? resp.result["path"].get<std::string>()
                           : std::string();
  victim->waiting_since = Clock::now();
  victim->suspensions++;
  victim->preemptions += preempt;
  victim->bytes_moved += bytes;
  victim->reason = std::string(preempt ? "preempted by " : "made room for ") +
                   std::to_string(for_pid);
  for (JobDevice& d : victim->devices) d.used = 0;
  events_->Add({0, to_disk ? "checkpoint" : "suspend", pid, for_pid, uuid, bytes, Since(t0),
                victim->reason});
  return Status::Ok();
}

Status Coordinator::Unpark(Job* job, const std::string& why) {
  const pid_t pid = job->pid;
  ctl::ClientOptions o;
  o.run_dir = config_.run_dir;
  o.timeout_ms = kResidencyTimeoutMs;
  o.deadline_ms = ResidencyDeadlineMs(job->TotalFootprint());
  o.give_up = [pid] { return ProcessStopped(pid); };  // stopped mid-request
  ctl::Response resp;
  const std::string cmd = job->parked_on_disk ? "restore" : "resume";
  nlohmann::json args = nlohmann::json::object();
  if (job->parked_on_disk && !job->image_path.empty()) args["from"] = job->image_path;
  const auto t0 = Clock::now();
  Status s = RefuseIfStopped(pid, cmd);
  if (s.ok()) s = ctl::Call(pid, MakeRequest(cmd, args), {}, &resp, o);
  if (s.ok() && !resp.ok) s = Status::Error(resp.code, resp.error);
  if (!s.ok()) {
    events_->Add({0, "refuse", pid, 0, "", 0, Since(t0), cmd + " failed: " + s.message});
    return s;
  }
  const uint64_t bytes = BytesOf(resp.result);
  // The image was vgpud's, and the memory is back: it is not a checkpoint anyone asked for.
  if (job->parked_on_disk && !job->image_path.empty()) unlink(job->image_path.c_str());
  std::lock_guard<std::mutex> lock(mu_);
  job->state = JobState::kRunning;
  job->parked_on_disk = false;
  job->image_path.clear();
  job->running_since = Clock::now();
  job->bytes_moved += bytes;
  job->reason = why;
  for (JobDevice& d : job->devices) d.used = d.footprint;
  events_->Add({0, cmd, pid, 0, "", bytes, Since(t0), why});
  return Status::Ok();
}

uint64_t Coordinator::FreeFor(const GpuMemory& m) const {
  auto it = reserved_.find(m.uuid);
  if (it == reserved_.end() || Clock::now() >= it->second.until) return m.free();
  return m.free() > it->second.bytes ? m.free() - it->second.bytes : 0;
}

uint64_t Coordinator::AvailableOn(const std::string& uuid) const {
  GpuMemory m;
  return gpus_->Read(uuid, &m) ? FreeFor(m) : 0;
}

policy::Room Coordinator::RoomNow() const {
  policy::Room room;
  for (const GpuMemory& g : gpus_->Read()) {
    room.push_back({g.uuid, g.total, g.free(), FreeFor(g)});
  }
  return room;
}

policy::Rules Coordinator::RulesNow() const {
  return {std::chrono::milliseconds(config_.quantum_ms), config_.oversubscribe,
          policy::HostBudget(config_.host_budget, HostRam())};
}

void Coordinator::TryResume(Job* w) {
  const policy::ResumePlan plan = policy::PlanResume(*w, jobs_, RoomNow(), RulesNow(), Clock::now());
  using Kind = policy::ResumePlan::Kind;
  if (plan.kind == Kind::kWait) return;
  if (plan.kind == Kind::kResume) {
    (void)Unpark(w, "memory fits");
    return;
  }
  for (const auto& [pid, uuid] : plan.park) {
    // Memory freed by itself meanwhile (a job exited): no need for this one.
    if (AvailableOn(uuid) >= w->FootprintOn(uuid)) continue;
    Job& victim = jobs_.at(pid);
    if (!Park(&victim, w->pid, uuid, policy::Preempts(victim, w->priority)).ok()) return;
  }
  if (policy::Fits(*w, RoomNow())) (void)Unpark(w, "its turn");
}

void Coordinator::Tick() {
  std::lock_guard<std::mutex> decide(decide_mu_);
  if (Clock::now() - last_refresh_ >= std::chrono::milliseconds(std::max<int64_t>(config_.tick_ms, 500))) {
    Refresh();
  }
  for (pid_t pid : policy::ResumeOrder(jobs_)) {
    Job& w = jobs_.at(pid);
    if (w.state == JobState::kWaiting) TryResume(&w);  // an earlier resume may have parked it
  }
  MoveOffDrained();
  SaveState();
}

Status Coordinator::MakeRoom(pid_t pid, const std::string& uuid, uint64_t bytes,
                             const std::function<bool()>& keepalive) {
  const auto t0 = Clock::now();
  bool logged = false;
  for (;;) {
    {
      std::lock_guard<std::mutex> decide(decide_mu_);
      if (jobs_.count(pid) == 0) {
        Job j;
        j.running_since = Clock::now();
        if (!RefreshOne(pid, &j)) return Status::Error(ErrorCode::kNoEnt, "no agent for pid " + std::to_string(pid));
        std::lock_guard<std::mutex> lock(mu_);
        jobs_[pid] = j;
      }
      Job& r = jobs_.at(pid);
      auto done = [&](Status s) {
        std::lock_guard<std::mutex> lock(mu_);
        r.waiting_for_memory = false;
        SaveState();
        return s;
      };
      if (r.state != JobState::kRunning) return done(Status::Ok());  // retried after resume
      GpuMemory m;
      if (!gpus_->Read(uuid, &m)) return done(Status::Error(ErrorCode::kNoEnt, "unknown device " + uuid));
      const policy::RoomPlan plan =
          policy::PlanRoom(r, uuid, bytes, jobs_, RoomNow(), Drained(), RulesNow(), Clock::now());
      using Kind = policy::RoomPlan::Kind;
      if (plan.kind == Kind::kRefuse) return done(Status::Error(ErrorCode::kNoMem, plan.why));
      if (plan.kind == Kind::kProceed) {
        // Held for the retry, which follows at once: a resume must not take it.
        reserved_[uuid] = {bytes, Clock::now() + std::chrono::seconds(2)};
        if (logged) {
          events_->Add({0, "room", pid, 0, uuid, bytes, Since(t0), "allocation proceeds"});
          std::lock_guard<std::mutex> lock(mu_);
          r.running_since = Clock::now();  // its quantum starts now, not while it waited
        }
        return done(Status::Ok());
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        r.waiting_for_memory = true;
      }
      if (!logged) {
        events_->Add({0, "wait", pid, 0, uuid, bytes, 0, "allocation waits for memory"});
        logged = true;
      }
      if (MadeRoom(plan, pid, r.priority, uuid, keepalive)) {
        SaveState();
        continue;  // look again at once
      }
      if (plan.kind == Kind::kWait && !plan.stopped_holders.empty() &&
          Clock::now() - t0 >= kStoppedHolderWait) {
        std::string pids;
        for (pid_t p : plan.stopped_holders) pids += (pids.empty() ? "" : ", ") + std::to_string(p);
        const std::string why = "the device's memory is held by stopped job(s) " + pids +
                                ", which keep it until continued (VGPU_SUSPEND_ON_SIGTSTP "
                                "releases it on SIGTSTP)";
        events_->Add({0, "refuse", pid, 0, uuid, bytes, Since(t0), why});
        return done(Status::Error(ErrorCode::kNoMem, why));
      }
    }
    if (!keepalive()) {  // gone: it gave up, or asks again on a new connection
      std::lock_guard<std::mutex> decide(decide_mu_);
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = jobs_.find(pid); it != jobs_.end()) it->second.waiting_for_memory = false;
      return Status::Error(ErrorCode::kIo, "the caller is gone");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(config_.tick_ms));
  }
}

bool Coordinator::MadeRoom(const policy::RoomPlan& plan, pid_t for_pid, Priority priority,
                           const std::string& uuid, const std::function<bool()>& keepalive) {
  for (const policy::Move& m : plan.moves) {
    if (Carry(m, "made room for " + std::to_string(for_pid), for_pid)) return true;
  }
  if (plan.victims.empty()) return false;
  Job& v = jobs_.at(plan.victims.front());
  return Park(&v, for_pid, uuid, policy::Preempts(v, priority), [&keepalive] { keepalive(); }).ok();
}

ctl::Response Coordinator::Set(pid_t pid, const nlohmann::json& args) {
  std::lock_guard<std::mutex> decide(decide_mu_);
  ctl::ClientOptions o;
  o.run_dir = config_.run_dir;
  o.timeout_ms = kInfoTimeoutMs;
  o.deadline_ms = kInfoDeadlineMs;
  o.give_up = [pid] { return ProcessStopped(pid); };  // stopped mid-request
  ctl::Response resp;
  if (Status s = RefuseIfStopped(pid, "set"); !s.ok()) return ctl::Response::Error(s);
  if (Status s = ctl::Call(pid, MakeRequest("set", args), {}, &resp, o); !s.ok()) {
    return ctl::Response::Error(s);
  }
  if (resp.ok) {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = jobs_.find(pid); it != jobs_.end()) {
      Priority p;
      if (args.contains("priority") && args["priority"].is_string() &&
          ParsePriority(args["priority"].get<std::string>(), &p)) {
        it->second.priority = p;
      }
      if (args.contains("weight") && args["weight"].is_number_integer()) {
        it->second.weight = std::max(1, args["weight"].get<int>());
      }
    }
    events_->Add({0, "set", pid, 0, "", 0, 0, ctl::DumpLine(args)});
  }
  return resp;
}

void Coordinator::SaveState() {
  DaemonState s;
  {
    std::vector<const Job*> parked;
    for (const auto& [pid, j] : jobs_) {
      if (j.state == JobState::kWaiting) parked.push_back(&j);
    }
    std::sort(parked.begin(), parked.end(),
              [](const Job* a, const Job* b) { return a->waiting_since < b->waiting_since; });
    const auto now = Clock::now();
    for (const Job* j : parked) {
      const auto ago = std::chrono::duration_cast<std::chrono::milliseconds>(now - j->waiting_since);
      s.parked.push_back({j->pid, ProcessStartTime(j->pid), UnixMs() - ago.count(),
                          j->parked_on_disk, j->image_path});
    }
  }
  s.events = events_->Recent(100);
  s.drained = Drained();
  // Written (with its fsync) only when what it says changes: the parked jobs
  // and their order, or a new decision. Every tick calls this.
  std::string said;
  for (const ParkedJob& p : s.parked) {
    said += std::to_string(p.pid) + (p.on_disk ? "d" : "r") + p.image_path + ";";
  }
  for (const std::string& d : s.drained) said += d + ",";
  said += std::to_string(s.events.size()) + "@" +
          std::to_string(s.events.empty() ? 0 : s.events.back().unix_ms);
  if (said == last_saved_) return;
  if (Status st = WriteState(StateFilePath(config_), s); !st.ok()) {
    VGPU_LOG(kWarn, "state file not written: {}", st.message);
    return;
  }
  last_saved_ = std::move(said);
}

}  // namespace vgpu::vgpud
