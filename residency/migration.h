// The process's half of a migration (docs/migration.md). vgpuctl moves the job
// with the driver's checkpoint API (lock, checkpoint, restore with GPU pairs,
// unlock); around it the agent:
//   migrate_prepare {pairs: [{from, to}], hold_ms}: refuses a job that is not
//     running or a target over the group's quota (before anything is locked),
//     reserves the job's charge on the targets, and closes the quiesce gate so
//     that the driver lock never catches a job thread inside libvgpu;
//   migrate_finish: reads from the driver which GPU each ordinal names now,
//     moves the quota charge, the compute-share membership and the process's
//     view of its devices accordingly (or drops the reservation if the job
//     stayed), and opens the gate.
// If no finish comes within hold_ms (vgpuctl killed), the watchdog finishes by
// itself once the driver says the job runs: a job is never left held.
//
// A mechanism: everything it reads or moves is reached through the
// MigrationHost it is given (libvgpu: intercept/migration_host.cc), and it is
// unit-tested on a fake one (tests/unit/migration_test.cc).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "common/device_index.h"
#include "common/status.h"

namespace vgpu {

class ComputeShare;
class QuotaLedger;

class MigrationHost {
 public:
  virtual ~MigrationHost() = default;
  // The driver as it answers now.
  virtual int DriverDeviceCount() = 0;                // capped at the node's devices
  virtual std::string DriverUuid(DriverOrdinal) = 0;  // "" if unknown
  virtual bool DriverSaysRunning() = 0;               // cuCheckpointProcessGetState
  // The process's view of its devices.
  virtual int VisibleCount() = 0;
  virtual std::string VisibleUuid(VisibleIndex) = 0;
  virtual DriverOrdinal OrdinalOf(VisibleIndex) = 0;
  virtual void SetVisibleUuid(VisibleIndex, const std::string& uuid) = 0;
  virtual NodeIndex NodeOf(DriverOrdinal) = 0;
  virtual void SetNode(DriverOrdinal, NodeIndex) = 0;
  virtual void ViewMoved() = 0;  // after the view follows a move (NVML's answers)
  // What moves with the job.
  virtual QuotaLedger* ledger() = 0;  // by node device; nullptr without a quota
  virtual ComputeShare* share() = 0;  // nullptr when the policy is native
  virtual bool Running() = 0;         // the job runs (its gate is open)
  virtual void CloseGate() = 0;
  virtual void OpenGate() = 0;
  // Why the job cannot move ("" if it can): it shares device memory with
  // another process (ipc_sharing.h).
  virtual std::string SharingRefusal() { return ""; }
};

// Owned by the Runtime; one migration of the process at a time.
class Migration {
 public:
  explicit Migration(MigrationHost* host) : host_(host) {}
  ~Migration();  // ends the watchdog
  Migration(const Migration&) = delete;
  Migration& operator=(const Migration&) = delete;

  // {"held": true}, or why not (nothing reserved or closed then).
  Result<nlohmann::json> Prepare(const nlohmann::json& args);
  // {"moved": [{from, to, bytes}...]}.
  Result<nlohmann::json> Finish();
  // In a fork child: the watchdog does not exist there, and the child's
  // devices were never held (the parent's prepare closed the parent's gate).
  void AfterForkInChild();

 private:
  struct Move {
    DriverOrdinal ordinal;  // the driver ordinal that names `from` before the move
    NodeIndex from;
    NodeIndex to;
    uint64_t bytes = 0;  // the job's charge on `from`, reserved on `to` meanwhile
  };
  void LearnNodeUuids();
  std::string UuidOf(NodeIndex n) const;
  NodeIndex NodeOf(const std::string& uuid) const;
  Status Refuse(ErrorCode code, const std::string& why);
  Status PlanMove(const nlohmann::json& pair);
  nlohmann::json Reconcile();
  void MoveCharge(const Move& m, NodeIndex now);
  void Watchdog(uint64_t generation, int64_t hold_ms);
  bool Held(uint64_t generation) const {
    return !stopping_ && prepared_ && generation_ == generation;
  }

  MigrationHost* host_;
  std::mutex mu_;
  std::condition_variable cv_;  // wakes the watchdog: finished, or stopping
  bool prepared_ = false;
  bool stopping_ = false;
  uint64_t generation_ = 0;
  std::vector<Move> moves_;
  bool gate_ours_ = false;  // the prepare closed the gate (the job was running)
  // The UUID of each node device, by index: what the driver's ordinals named
  // before the first migration (ordinal == node device then).
  std::vector<std::string> node_uuids_;
  std::thread watchdog_;
};

}  // namespace vgpu
