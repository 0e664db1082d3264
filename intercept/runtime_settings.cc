#include "intercept/runtime_settings.h"

namespace vgpu {

void RuntimeSettings::InitFrom(const Config& cfg) {
  for (int v = 0; v < Config::kMaxDevices; ++v) set_share_permille(v, cfg.ShareFor(v));
  set_weight(cfg.compute_weight != 0 ? cfg.compute_weight : 1);
  set_priority(cfg.priority);
}

uint32_t RuntimeSettings::share_permille(int v) const {
  if (v < 0 || v >= Config::kMaxDevices) return 0;
  return share_permille_[v].load(std::memory_order_acquire);
}

void RuntimeSettings::set_share_permille(int v, uint32_t permille) {
  if (v >= 0 && v < Config::kMaxDevices)
    share_permille_[v].store(permille, std::memory_order_release);
}

void RuntimeSettings::set_weight(uint32_t weight) {
  weight_.store(weight != 0 ? weight : 1, std::memory_order_release);
}

void RuntimeSettings::set_priority(Config::Priority priority) {
  priority_.store(static_cast<int>(priority), std::memory_order_release);
}

GroupParams RuntimeSettings::ParamsFor(Config::ComputePolicy policy, int v) const {
  GroupParams p;
  p.policy = policy == Config::ComputePolicy::kFixed ? SchedPolicy::kFixed : SchedPolicy::kWeighted;
  const uint32_t share = share_permille(v);
  p.share_permille = share != 0 ? share : 1000;
  p.weight = weight();
  // The scheduler has two levels: low is normal to it (the coordinator
  // tells low from normal).
  p.high_priority = priority() == Config::Priority::kHigh;
  return p;
}

}  // namespace vgpu
