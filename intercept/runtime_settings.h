// What `vgpuctl set` changes in a running process besides the quota ledger's
// limits (docs/control-protocol.md, "set"): the compute share of each visible
// device, the compute weight and the priority. They start from the
// configuration; the agent writes them, joins of the compute scheduler and
// `info` read them. All atomics: no reader ever waits for the agent, and the
// launch path reads none of them (the scheduler's copy lives in shared memory).
#pragma once

#include <atomic>
#include <cstdint>

#include "common/config/config.h"
#include "share/sched_region.h"

namespace vgpu {

class RuntimeSettings {
 public:
  void InitFrom(const Config& cfg);

  // Visible device v's share in permille; 0: none (no cap).
  uint32_t share_permille(int v) const;
  uint32_t weight() const { return weight_.load(std::memory_order_acquire); }  // >= 1
  Config::Priority priority() const {
    return static_cast<Config::Priority>(priority_.load(std::memory_order_acquire));
  }
  void set_share_permille(int v, uint32_t permille);
  void set_weight(uint32_t weight);
  void set_priority(Config::Priority priority);

  // The compute scheduler's parameters for visible device v under `policy`
  // (not native): the settings in force now.
  GroupParams ParamsFor(Config::ComputePolicy policy, int v) const;

 private:
  std::atomic<uint32_t> share_permille_[Config::kMaxDevices] = {};
  std::atomic<uint32_t> weight_{1};
  std::atomic<int> priority_{static_cast<int>(Config::Priority::kNormal)};
};

}  // namespace vgpu
