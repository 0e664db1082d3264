// libvgpu's half of a migration (docs/migration.md). vgpuctl moves the job
// with the driver's checkpoint API (lock, checkpoint, restore with GPU pairs,
// unlock); around it the agent:
//   migrate_prepare {pairs: [{from, to}], hold_ms}: refuses a job that is not
//     running or a target over the group's quota (before anything is locked),
//     reserves the job's charge on the targets, and closes the quiesce gate so
//     that the driver lock never catches a job thread inside libvgpu;
//   migrate_finish: reads from the driver which GPU each ordinal names now,
//     moves the quota charge, the compute-share membership and the device
//     map's UUIDs accordingly (or drops the reservation if the job stayed),
//     and opens the gate.
// If no finish comes within hold_ms (vgpuctl killed), the agent finishes by
// itself once the driver says the job runs: a job is never left held.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ctl/control/protocol.h"
#include "intercept/device_index.h"

namespace vgpu {

class ComputeShare;
class DeviceMap;
class QuotaLedger;

// What a migration reaches, given by the Runtime that owns it.
struct MigrationPorts {
  DeviceMap* devices = nullptr;          // its UUIDs follow the move
  std::function<QuotaLedger*()> ledger;  // by node device; nullptr without a quota
  std::function<ComputeShare*()> share;  // nullptr when the policy is native
  std::function<bool()> running;         // the job runs (its gate is open)
};

// Owned by the Runtime; one migration of the process at a time.
class Migration {
 public:
  explicit Migration(MigrationPorts ports) : ports_(std::move(ports)) {}
  ctl::Response Prepare(const nlohmann::json& args);
  ctl::Response Finish();

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
  ctl::Response Refuse(ctl::ErrorCode code, const std::string& why);
  nlohmann::json Reconcile();
  void Watchdog(uint64_t generation, int64_t hold_ms);

  MigrationPorts ports_;
  std::mutex mu_;
  bool prepared_ = false;
  uint64_t generation_ = 0;
  std::vector<Move> moves_;
  bool gate_ours_ = false;  // the prepare closed the gate (the job was running)
  // The UUID of each node device, by index: what the driver's ordinals named
  // before the first migration (ordinal == node device then).
  std::vector<std::string> node_uuids_;
};

}  // namespace vgpu
