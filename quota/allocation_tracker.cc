#include "quota/allocation_tracker.h"

namespace vgpu {

void AllocationTracker::Add(ChargeKind kind, uint64_t key, const Charge& c) {
  std::lock_guard<std::mutex> lock(mu_);
  charges_[TaggedKey(kind, key)] = c;
}

bool AllocationTracker::Take(ChargeKind kind, uint64_t key, Charge* out) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = charges_.find(TaggedKey(kind, key));
  if (it == charges_.end()) return false;
  *out = it->second;
  charges_.erase(it);
  return true;
}

std::vector<Charge> AllocationTracker::TakeOwner(const void* owner) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Charge> out;
  for (auto it = charges_.begin(); it != charges_.end();) {
    if (it->second.owner == owner) {
      out.push_back(it->second);
      it = charges_.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

void AllocationTracker::Clear() {
  std::lock_guard<std::mutex> lock(mu_);
  charges_.clear();
}

}  // namespace vgpu
