// A job as vgpud knows it: one libvgpu process, its agent's view (info) and
// vgpud's own bookkeeping (docs/vgpud.md, "Jobs and states").
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace vgpu::vgpud {

using Clock = std::chrono::steady_clock;

// Seconds from t to now (event durations).
inline double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

enum class Priority { kLow = 0, kNormal = 1, kHigh = 2 };
const char* PriorityName(Priority p);
bool ParsePriority(const std::string& s, Priority* out);

// What vgpuctl ps shows. kWaiting: suspended by vgpud, waiting for memory or
// its turn; kSuspended/kCheckpointed: by hand (vgpud leaves those alone).
enum class JobState { kRunning, kSuspended, kCheckpointed, kWaiting };
const char* JobStateName(JobState s);

struct JobDevice {
  std::string uuid;
  uint64_t used = 0;       // bytes resident now
  uint64_t footprint = 0;  // bytes it needs when resident (its live allocations)
  uint64_t quota = 0;      // 0: unlimited
};

struct Job {
  pid_t pid = 0;
  int64_t uid = -1;
  std::string command;
  std::string group;
  std::string claim;  // VGPU_CLAIM, VGPU_POD: labels for ps and metrics
  std::string pod;
  std::string slurm_job;
  // VGPU_PREEMPTIBLE=false (only an admin file sets it under ceilings): never
  // suspended, rotated, parked or moved for another job (policy.cc, Pinned).
  bool preemptible = true;
  // Its GPUs were given by a cluster scheduler (InfoResult::placed): never
  // moved to another GPU, neither to make room nor off a drained GPU.
  bool placed = false;
  Priority priority = Priority::kNormal;
  int weight = 1;
  JobState state = JobState::kRunning;
  std::string reason;       // why it is in its state ("rotated for 1234", ...)
  bool parked_on_disk = false;  // vgpud checkpointed it (past the host budget)
  std::string image_path;       // that checkpoint's image, removed once restored
  std::vector<JobDevice> devices;
  Clock::time_point running_since{};  // first seen running, or last resumed
  Clock::time_point waiting_since{};
  uint64_t suspensions = 0;
  uint64_t preemptions = 0;  // suspensions for a higher-priority job
  uint64_t bytes_moved = 0;  // copied out and back by vgpud's decisions
  uint64_t migrations = 0;   // moves to another GPU by vgpud
  bool waiting_for_memory = false;  // an allocation of it waits in make_room
  // Stopped (SIGSTOP/SIGTSTP: /proc/<pid>/stat says T) at the last refresh: its
  // agent cannot answer, so vgpud sends it nothing; its memory stays used and
  // is not reclaimable (policy.cc, Pinned) until it is continued.
  bool stopped = false;
  Clock::time_point refused_until{};  // its agent refused a suspend: not a victim till then
  std::vector<int64_t> shared_with;   // processes it shares device memory with (CUDA IPC)
  std::vector<std::pair<std::string, uint64_t>> counters;  // libvgpu's
  double compute_share = 0;  // percent; 0: not limited / unknown
  bool compute_governed = false;  // a compute policy other than native
  // Achieved compute share: the rate of libvgpu's compute_charged_ns between
  // readings at least kShareWindow apart (device time per wall time, summed
  // over devices). -1: not governed, or no two readings yet.
  double achieved_share = -1;
  uint64_t charged_ns = 0;          // the reading the rate starts from
  Clock::time_point charged_at{};

  // Takes a new compute_charged_ns reading (from `counters`) at `now`.
  void UpdateAchievedShare(Clock::time_point now);

  uint64_t FootprintOn(const std::string& uuid) const {
    for (const JobDevice& d : devices) {
      if (d.uuid == uuid) return d.footprint;
    }
    return 0;
  }
  uint64_t TotalFootprint() const {
    uint64_t n = 0;
    for (const JobDevice& d : devices) n += d.footprint;
    return n;
  }
};

nlohmann::json ToJson(const Job& j);

}  // namespace vgpu::vgpud
