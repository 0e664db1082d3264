// The set of live handles of one kind (streams, events): the driver answers
// CUDA_ERROR_INVALID_HANDLE for a destroyed or bogus handle instead of
// following it. Objects themselves are retired, not freed (queued work may
// still name them), so a lookup never races with a free.
#pragma once

#include <mutex>
#include <shared_mutex>
#include <unordered_set>

namespace vgpu::sim {

template <typename T>
class HandleRegistry {
 public:
  void Add(T* p) {
    std::unique_lock lock(mu_);
    live_.insert(p);
  }
  void Remove(T* p) {
    std::unique_lock lock(mu_);
    live_.erase(p);
  }
  bool Contains(T* p) const {
    std::shared_lock lock(mu_);
    return live_.count(p) != 0;
  }

 private:
  mutable std::shared_mutex mu_;
  std::unordered_set<T*> live_;
};

}  // namespace vgpu::sim
