#include "ctl/vgpud/job.h"

namespace vgpu::vgpud {

const char* PriorityName(Priority p) {
  switch (p) {
    case Priority::kLow: return "low";
    case Priority::kHigh: return "high";
    default: return "normal";
  }
}

bool ParsePriority(const std::string& s, Priority* out) {
  if (s == "low") *out = Priority::kLow;
  else if (s == "normal") *out = Priority::kNormal;
  else if (s == "high") *out = Priority::kHigh;
  else return false;
  return true;
}

const char* JobStateName(JobState s) {
  switch (s) {
    case JobState::kSuspended: return "suspended";
    case JobState::kCheckpointed: return "checkpointed";
    case JobState::kWaiting: return "waiting";
    default: return "running";
  }
}

void Job::UpdateAchievedShare(Clock::time_point now) {
  // Readings closer together than this would make a 1 s refresh's noise the share.
  constexpr auto kShareWindow = std::chrono::milliseconds(500);
  const uint64_t* charged = nullptr;
  for (const auto& [name, value] : counters) {
    if (name == "compute_charged_ns") charged = &value;
  }
  if (charged == nullptr || !compute_governed) {
    achieved_share = -1;
    return;
  }
  if (charged_at == Clock::time_point{} || *charged < charged_ns) {  // first, or a new process image
    charged_ns = *charged;
    charged_at = now;
    return;
  }
  if (now - charged_at < kShareWindow) return;
  const double wall_ns = std::chrono::duration<double, std::nano>(now - charged_at).count();
  achieved_share = static_cast<double>(*charged - charged_ns) / wall_ns;
  charged_ns = *charged;
  charged_at = now;
}

nlohmann::json ToJson(const Job& j) {
  nlohmann::json devices = nlohmann::json::array();
  for (const JobDevice& d : j.devices) {
    nlohmann::json dj = {{"uuid", d.uuid}, {"used", d.used}, {"footprint", d.footprint}};
    if (d.quota != 0) dj["quota"] = d.quota;
    devices.push_back(dj);
  }
  nlohmann::json counters = nlohmann::json::object();
  for (const auto& [name, value] : j.counters) counters[name] = value;
  std::string state = JobStateName(j.state);
  if (j.state == JobState::kRunning && j.waiting_for_memory) state = "waiting for memory";
  if (j.stopped) state = "stopped";
  return {{"pid", j.pid},
          {"uid", j.uid},
          {"command", j.command},
          {"group", j.group},
          {"claim", j.claim},
          {"pod", j.pod},
          {"slurm_job", j.slurm_job},
          {"preemptible", j.preemptible},
          {"placed", j.placed},
          {"priority", PriorityName(j.priority)},
          {"weight", j.weight},
          {"state", state},
          {"stopped", j.stopped},
          {"reason", j.reason},
          {"on_disk", j.parked_on_disk},
          {"devices", devices},
          {"suspensions", j.suspensions},
          {"migrations", j.migrations},
          {"preemptions", j.preemptions},
          {"bytes_moved", j.bytes_moved},
          {"compute_share", j.compute_share},
          {"compute_share_achieved",
           j.achieved_share < 0 ? nlohmann::json(nullptr) : nlohmann::json(j.achieved_share)},
          {"shared_with", j.shared_with},
          {"counters", counters}};
}

}  // namespace vgpu::vgpud
