// vgpud's decisions carried out (docs/vgpud.md, "What vgpud decides"): which
// jobs hold a device's memory when their working sets together exceed it. The
// rules themselves are pure functions in policy.h; this class gathers their
// inputs (agents, NVML, the clock) and acts on their answers. Jobs are
// suspended (device memory to host RAM, or to a checkpoint image past the host
// budget) to make room for an allocation that would not fit, lower priority
// first and then the equal-priority job that has held the device longest once
// it has had its quantum (times its weight); suspended jobs are resumed when
// their memory fits again, or at their turn. One decision at a time; the
// agents are the source of truth, refreshed every tick.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/status.h"
#include "ctl/control/protocol.h"
#include "ctl/vgpud/daemon_config.h"
#include "ctl/vgpud/event_log.h"
#include "ctl/vgpud/job.h"
#include "ctl/vgpud/node_gpus.h"
#include "ctl/vgpud/policy.h"
#include "ctl/vgpud/state_file.h"

namespace vgpu::vgpud {

class Coordinator {
 public:
  Coordinator(const DaemonConfig& config, const NodeGpus* gpus, EventLog* events);

  // At start: the jobs a previous vgpud parked (state file) whose agents still
  // say so wait again, in their order.
  void Reconcile(const DaemonState& previous);
  // Every tick: refresh the jobs from their agents, resume what fits, rotate.
  void Tick();
  // An allocation of `pid` of `bytes` on device `uuid` does not fit: make room.
  // Returns when the allocation may be retried (Ok), or ENOMEM when it cannot
  // fit (not even alone, or oversubscription is off). `keepalive` is called
  // while it waits; false from it means the caller is gone (it gave up, or
  // asks again on a new connection): the wait ends (ECANCELED).
  Status MakeRoom(pid_t pid, const std::string& uuid, uint64_t bytes,
                  const std::function<bool()>& keepalive);
  // vgpuctl set: forwarded to the job's agent; priority and weight are kept.
  ctl::Response Set(pid_t pid, const nlohmann::json& args);
  // vgpuctl migrate through vgpud (coordinator_migrate.cc): pairs of device
  // UUIDs or indices, from -> to.
  ctl::Response Migrate(pid_t pid, const std::vector<std::pair<std::string, std::string>>& pairs);
  // vgpuctl drain / undrain: every job moves off the device (where another
  // has room), and jobs that appear on it later are moved too, until undrain.
  ctl::Response Drain(const std::string& device, bool on);
  std::vector<std::string> Drained() const;
  bool oversubscribe() const { return config_.oversubscribe; }

  std::vector<Job> Jobs() const;
  const NodeGpus& gpus() const { return *gpus_; }
  const EventLog& events() const { return *events_; }
  // True when `uid` may act on job `pid` (its owner; root and admins are
  // checked by the caller).
  bool OwnedBy(pid_t pid, int64_t uid) const;

 private:
  void Refresh();
  bool RefreshOne(pid_t pid, Job* job);
  // `on_progress`: called at each progress line of the victim's agent (a
  // make_room caller's keepalive: a long suspend must not look like silence).
  Status Park(Job* victim, pid_t for_pid, const std::string& uuid, bool preempt,
              const std::function<void()>& on_progress = {});
  Status Unpark(Job* job, const std::string& why);
  // The snapshot the decision rules (policy.h) read.
  policy::Room RoomNow() const;
  policy::Rules RulesNow() const;
  // Free memory of `uuid` less the room just made for allocations that have
  // not happened yet (so that a resume does not take it first).
  uint64_t FreeFor(const GpuMemory& m) const;
  uint64_t AvailableOn(const std::string& uuid) const;
  void TryResume(Job* job);
  // Migration (coordinator_migrate.cc), with decide_mu_ held.
  Status MoveJob(Job* job, const GpuMemory& from, const GpuMemory& to, const std::string& why,
                 pid_t for_pid, double* stopped_ms);
  // Carries out a make-room plan: a move, else the first victim parked. True
  // when something was done (look again at once).
  bool MadeRoom(const policy::RoomPlan& plan, pid_t for_pid, Priority priority,
                const std::string& uuid, const std::function<bool()>& keepalive);
  // Carries out a planned move; false if the devices are unknown or it failed.
  bool Carry(const policy::Move& move, const std::string& why, pid_t for_pid);
  void MoveOffDrained();
  bool ResolveDevice(const std::string& name, GpuMemory* out) const;
  void SaveState();

  DaemonConfig config_;
  const NodeGpus* gpus_;
  EventLog* events_;
  std::mutex decide_mu_;     // one decision at a time, held across agent calls
  mutable std::mutex mu_;    // jobs_
  std::map<pid_t, Job> jobs_;
  Clock::time_point last_refresh_{};
  std::string last_saved_;  // what the state file says now (SaveState)
  struct Reservation {
    uint64_t bytes = 0;
    Clock::time_point until{};
  };
  std::map<std::string, Reservation> reserved_;  // by device UUID; under decide_mu_
  // Its own lock: SaveState reads it from under mu_ and from outside.
  mutable std::mutex drain_mu_;
  std::vector<std::string> drained_;  // device UUIDs; under drain_mu_
};

}  // namespace vgpu::vgpud
