#include "intercept/non_migratable.h"

#include <iterator>

namespace vgpu {

void NonMigratableBook::Note(uint64_t key, uint64_t bytes, CUcontext ctx) {
  std::lock_guard<std::mutex> lock(mu_);
  entries_[key] = Entry{bytes, ctx};
}

void NonMigratableBook::Forget(uint64_t key) {
  std::lock_guard<std::mutex> lock(mu_);
  entries_.erase(key);
}

void NonMigratableBook::ForgetContext(CUcontext ctx) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = entries_.begin(); it != entries_.end();) {
    it = it->second.ctx == ctx ? entries_.erase(it) : std::next(it);
  }
}

uint64_t NonMigratableBook::Bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t n = 0;
  for (const auto& [key, e] : entries_) n += e.bytes;
  return n;
}

}  // namespace vgpu
