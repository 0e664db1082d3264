// vgpud's decision rules (docs/vgpud.md, "What vgpud decides") as pure
// functions of a snapshot: the jobs as last refreshed, the room on each GPU
// and the time now. The Coordinator gathers the snapshot, asks these who is
// suspended, rotated, resumed, moved or drained, and carries the answer out
// through the agents; nothing here calls an agent, reads a clock or NVML, so
// every rule has a unit test on hand-made jobs (tests/vgpud/policy_test.cc).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ctl/vgpud/job.h"

namespace vgpu::vgpud::policy {

using Jobs = std::map<pid_t, Job>;

// A job whose agent refused a suspend or a move is not asked again for this
// long (non-migratable memory, busy): others are tried meanwhile.
inline constexpr auto kRefusedBackoff = std::chrono::seconds(10);

// One GPU as a decision sees it.
struct DeviceRoom {
  std::string uuid;
  uint64_t total = 0;
  uint64_t free = 0;       // physical free memory now
  uint64_t available = 0;  // free less the room held for allocations about to retry
};
using Room = std::vector<DeviceRoom>;

// The parameters the rules read (from DaemonConfig).
struct Rules {
  std::chrono::milliseconds quantum{30000};
  bool oversubscribe = true;
  uint64_t host_budget = 0;  // bytes of host RAM for parked jobs (resolved, see HostBudget)
};

// The host budget: the configured bytes, or half of the host's RAM when 0.
uint64_t HostBudget(uint64_t configured, uint64_t host_ram);

// A suspended job's memory goes to host RAM while what vgpud parked there
// plus its footprint stays within the budget, else to a checkpoint image.
bool ParkOnDisk(const Jobs& jobs, const Job& victim, uint64_t host_budget);
// Bytes of the jobs vgpud parked in host RAM (not on disk).
uint64_t ParkedInHost(const Jobs& jobs);

// Running jobs on `uuid` that may give way to a job of `priority`, best victim
// first: lower priorities first, never a higher one; an equal priority only
// once it has run its quantum times its weight; none whose agent refused
// within kRefusedBackoff, none stopped. Among equals, the one that has held the device longest.
std::vector<pid_t> Victims(const Jobs& jobs, const std::string& uuid, pid_t except,
                           Priority priority, const Rules& rules, Clock::time_point now);
// True when suspending `victim` for a job of `priority` is a preemption.
inline bool Preempts(const Job& victim, Priority priority) { return victim.priority < priority; }

// The order in which waiting jobs are offered the GPU: higher priority first,
// then the one that has waited longest.
std::vector<pid_t> ResumeOrder(const Jobs& jobs);

// True when every device the job has memory on has room for its footprint.
bool Fits(const Job& job, const Room& room);

// What to do for a waiting job at a tick.
struct ResumePlan {
  enum class Kind { kResume, kWait, kParkThenResume } kind = Kind::kWait;
  // kParkThenResume: suspend these (victim, device) in order, then resume.
  std::vector<std::pair<pid_t, std::string>> park;
};
ResumePlan PlanResume(const Job& waiting, const Jobs& jobs, const Room& room, const Rules& rules,
                      Clock::time_point now);

// A move of one job's memory from one GPU to another; `to` empty: no GPU has room.
struct Move {
  pid_t pid = 0;
  std::string from, to;
  uint64_t bytes = 0;
};

// The GPU, not `except` and not drained, with the most available room, if it
// has at least `bytes`; empty if none.
std::string TargetFor(uint64_t bytes, const std::string& except, const Room& room,
                      const std::vector<std::string>& drained);

// An allocation of `requester` of `bytes` on `uuid` does not fit: what to do.
struct RoomPlan {
  enum class Kind { kProceed, kRefuse, kMakeRoom, kWait } kind = Kind::kWait;
  std::string why;  // kRefuse: the reason
  // kMakeRoom: first try these moves (another GPU has room: no time-slicing),
  // cheapest first; if none succeeds, suspend the first victim.
  std::vector<Move> moves;
  std::vector<pid_t> victims;
  // kWait: stopped jobs holding memory on the device (they give none back
  // until continued; the caller bounds its wait on them).
  std::vector<pid_t> stopped_holders;
};
RoomPlan PlanRoom(const Job& requester, const std::string& uuid, uint64_t bytes, const Jobs& jobs,
                  const Room& room, const std::vector<std::string>& drained, const Rules& rules,
                  Clock::time_point now);

// Moves that take every running job's memory off the drained GPUs, each to the
// GPU with the most room left after the moves before it (`to` empty: none has
// room). Jobs refused recently are left for a later tick.
std::vector<Move> PlanDrain(const Jobs& jobs, const Room& room,
                            const std::vector<std::string>& drained, Clock::time_point now);

}  // namespace vgpu::vgpud::policy
