#include "quota/mapped_handles.h"

namespace vgpu {

void MappedHandles::Mapped(uint64_t va, uint64_t size, uint64_t handle) {
  std::lock_guard<std::mutex> lock(mu_);
  maps_[va] = Mapping{size, handle, false};
  ++live_[handle].mappings;
}

bool MappedHandles::IsMapped(uint64_t handle) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(handle);
  return it != live_.end() && it->second.mappings > 0;
}

uint64_t MappedHandles::Defer(uint64_t handle, const Charge& charge) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t key = next_key_++;
  Held held;
  if (auto it = live_.find(handle); it != live_.end()) {
    held = it->second;
    live_.erase(it);
  }
  held.charge = charge;
  for (auto& [va, m] : maps_) {
    if (!m.released && m.id == handle) m = Mapping{m.size, key, true};
  }
  released_[key] = held;
  return key;
}

std::vector<std::pair<uint64_t, Charge>> MappedHandles::Unmapped(uint64_t va, uint64_t size) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::pair<uint64_t, Charge>> done;
  for (auto it = maps_.lower_bound(va); it != maps_.end() && it->first < va + size;) {
    const Mapping m = it->second;
    it = maps_.erase(it);
    auto& book = m.released ? released_ : live_;
    auto h = book.find(m.id);
    if (h == book.end() || --h->second.mappings > 0) continue;
    if (m.released) done.emplace_back(m.id, h->second.charge);
    book.erase(h);
  }
  return done;
}

}  // namespace vgpu
