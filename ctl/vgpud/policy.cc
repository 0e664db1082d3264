#include "ctl/vgpud/policy.h"

#include <algorithm>
#include <set>

namespace vgpu::vgpud::policy {
namespace {

const DeviceRoom* Find(const Room& room, const std::string& uuid) {
  for (const DeviceRoom& d : room) {
    if (d.uuid == uuid) return &d;
  }
  return nullptr;
}

bool Drained(const std::vector<std::string>& drained, const std::string& uuid) {
  return std::find(drained.begin(), drained.end(), uuid) != drained.end();
}

// Not to be parked or moved now: its agent refused lately, it shares device
// memory with other processes (CUDA IPC), which libvgpu refuses to move (the
// group stays as it is, never half parked), or the admin made it
// non-preemptible (VGPU_PREEMPTIBLE=false), or it is stopped (SIGSTOP: its
// agent cannot answer, a request would only time out).
bool Pinned(const Job& j, Clock::time_point now) {
  return now < j.refused_until || !j.shared_with.empty() || !j.preemptible || j.stopped;
}

// Devices the job holds memory on (it may see more).
int Holding(const Job& j) {
  int n = 0;
  for (const JobDevice& d : j.devices) n += d.footprint != 0;
  return n;
}

}  // namespace

uint64_t HostBudget(uint64_t configured, uint64_t host_ram) {
  return configured != 0 ? configured : host_ram / 2;
}

uint64_t ParkedInHost(const Jobs& jobs) {
  uint64_t n = 0;
  for (const auto& [pid, j] : jobs) {
    if (j.state == JobState::kWaiting && !j.parked_on_disk) n += j.TotalFootprint();
  }
  return n;
}

bool ParkOnDisk(const Jobs& jobs, const Job& victim, uint64_t host_budget) {
  return ParkedInHost(jobs) + victim.TotalFootprint() > host_budget;
}

std::vector<pid_t> Victims(const Jobs& jobs, const std::string& uuid, pid_t except,
                           Priority priority, const Rules& rules, Clock::time_point now) {
  std::vector<const Job*> c;
  for (const auto& [pid, j] : jobs) {
    if (pid == except || j.state != JobState::kRunning || j.FootprintOn(uuid) == 0) continue;
    if (j.priority > priority || Pinned(j, now)) continue;
    if (j.priority == priority && now - j.running_since < rules.quantum * j.weight) continue;
    c.push_back(&j);
  }
  std::stable_sort(c.begin(), c.end(), [](const Job* a, const Job* b) {
    if (a->priority != b->priority) return a->priority < b->priority;
    return a->running_since < b->running_since;  // held the device longest
  });
  std::vector<pid_t> out;
  for (const Job* j : c) out.push_back(j->pid);
  return out;
}

std::vector<pid_t> ResumeOrder(const Jobs& jobs) {
  std::vector<const Job*> waiting;
  for (const auto& [pid, j] : jobs) {
    // A stopped job is resumed once continued: its agent cannot answer now.
    if (j.state == JobState::kWaiting && !j.stopped) waiting.push_back(&j);
  }
  std::stable_sort(waiting.begin(), waiting.end(), [](const Job* a, const Job* b) {
    if (a->priority != b->priority) return a->priority > b->priority;
    return a->waiting_since < b->waiting_since;
  });
  std::vector<pid_t> out;
  for (const Job* j : waiting) out.push_back(j->pid);
  return out;
}

bool Fits(const Job& job, const Room& room) {
  for (const JobDevice& d : job.devices) {
    if (d.footprint == 0) continue;
    const DeviceRoom* r = Find(room, d.uuid);
    if (r == nullptr || r->available < d.footprint) return false;
  }
  return true;
}

ResumePlan PlanResume(const Job& w, const Jobs& jobs, const Room& room, const Rules& rules,
                      Clock::time_point now) {
  ResumePlan plan;
  if (Fits(w, room)) {
    plan.kind = ResumePlan::Kind::kResume;
    return plan;
  }
  if (!rules.oversubscribe) return plan;
  std::set<pid_t> parked;  // victims already planned for an earlier device
  for (const JobDevice& d : w.devices) {
    if (d.footprint == 0) continue;
    const DeviceRoom* r = Find(room, d.uuid);
    if (r == nullptr) return {};
    uint64_t room_made = r->available;
    for (pid_t p : parked) room_made += jobs.at(p).FootprintOn(d.uuid);
    std::vector<pid_t> victims = Victims(jobs, d.uuid, w.pid, w.priority, rules, now);
    uint64_t can_free = room_made;
    for (pid_t v : victims) can_free += parked.count(v) != 0 ? 0 : jobs.at(v).FootprintOn(d.uuid);
    if (can_free < d.footprint) return {};  // not its turn yet
    for (pid_t v : victims) {
      if (room_made >= d.footprint) break;
      if (!parked.insert(v).second) continue;
      room_made += jobs.at(v).FootprintOn(d.uuid);
      plan.park.emplace_back(v, d.uuid);
    }
  }
  plan.kind = ResumePlan::Kind::kParkThenResume;
  return plan;
}

std::string TargetFor(uint64_t bytes, const std::string& except, const Room& room,
                      const std::vector<std::string>& drained) {
  const DeviceRoom* best = nullptr;
  for (const DeviceRoom& g : room) {
    if (g.uuid == except || Drained(drained, g.uuid) || g.available < bytes) continue;
    if (best == nullptr || g.available > best->available) best = &g;
  }
  return best != nullptr ? best->uuid : std::string();
}

RoomPlan PlanRoom(const Job& requester, const std::string& uuid, uint64_t bytes, const Jobs& jobs,
                  const Room& room, const std::vector<std::string>& drained, const Rules& rules,
                  Clock::time_point now) {
  RoomPlan plan;
  const DeviceRoom* d = Find(room, uuid);
  if (d == nullptr) {
    plan.kind = RoomPlan::Kind::kRefuse;
    plan.why = "unknown device " + uuid;
    return plan;
  }
  // The requester's own retry may use what was held for it: physical free.
  if (d->free >= bytes) {
    plan.kind = RoomPlan::Kind::kProceed;
    return plan;
  }
  plan.kind = RoomPlan::Kind::kRefuse;
  if (!rules.oversubscribe) return plan.why = "oversubscription is off", plan;
  if (requester.FootprintOn(uuid) + bytes > d->total) {
    return plan.why = "does not fit on the device even alone", plan;
  }
  // Another GPU with room: move a job there instead of time-slicing.
  std::vector<const Job*> movable;
  for (const auto& [pid, j] : jobs) {
    const uint64_t f = j.FootprintOn(uuid);
    if (pid == requester.pid || j.state != JobState::kRunning || f == 0 || Holding(j) != 1 ||
        Pinned(j, now) || j.placed || d->available + f < bytes) {
      continue;
    }
    movable.push_back(&j);
  }
  std::stable_sort(movable.begin(), movable.end(), [&](const Job* a, const Job* b) {
    return a->FootprintOn(uuid) < b->FootprintOn(uuid);  // the cheapest to move first
  });
  for (const Job* j : movable) {
    const uint64_t f = j->FootprintOn(uuid);
    std::string to = TargetFor(f, uuid, room, drained);
    if (!to.empty()) plan.moves.push_back({j->pid, uuid, to, f});
  }
  plan.victims = Victims(jobs, uuid, requester.pid, requester.priority, rules, now);
  plan.kind = plan.moves.empty() && plan.victims.empty() ? RoomPlan::Kind::kWait
                                                         : RoomPlan::Kind::kMakeRoom;
  if (plan.kind == RoomPlan::Kind::kWait) {
    for (const auto& [pid, j] : jobs) {
      if (pid != requester.pid && j.stopped && j.FootprintOn(uuid) != 0) {
        plan.stopped_holders.push_back(pid);
      }
    }
  }
  return plan;
}

std::vector<Move> PlanDrain(const Jobs& jobs, const Room& room,
                            const std::vector<std::string>& drained, Clock::time_point now) {
  std::vector<Move> out;
  if (drained.empty()) return out;
  Room left = room;  // what the moves before this one leave
  for (const auto& [pid, j] : jobs) {
    // A placed job stays: its scheduler gave it this GPU and may have given
    // the others to other jobs.
    if (j.state != JobState::kRunning || Pinned(j, now) || j.placed) continue;
    for (const JobDevice& d : j.devices) {
      if (d.footprint == 0 || !Drained(drained, d.uuid)) continue;
      Move m{pid, d.uuid, TargetFor(d.footprint, d.uuid, left, drained), d.footprint};
      for (DeviceRoom& g : left) {
        if (g.uuid != m.to) continue;
        g.available -= d.footprint;
        g.free = g.free > d.footprint ? g.free - d.footprint : 0;
      }
      out.push_back(std::move(m));
    }
  }
  return out;
}

}  // namespace vgpu::vgpud::policy
