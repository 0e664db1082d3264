// Lock-free read-modify-write steps that the shared-memory regions (quota
// ledger, scheduler region, simulated node) share.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>

namespace vgpu {

// Raises a high-water mark (a std::atomic<uint32_t> or an atomic_ref to one)
// to at least `to`.
template <class AtomicU32>
void RaiseTo(AtomicU32&& mark, uint32_t to) {
  uint32_t cur = mark.load();
  while (cur < to && !mark.compare_exchange_weak(cur, to)) {
  }
}

// Subtracts at most what `v` holds, so a release larger than the reservation
// never wraps it to ~2^64; returns what was subtracted.
inline uint64_t SubtractAtMost(std::atomic<uint64_t>& v, uint64_t n) {
  uint64_t cur = v.load(std::memory_order_relaxed);
  uint64_t take = 0;
  do {
    take = std::min(cur, n);
  } while (!v.compare_exchange_weak(cur, cur - take));
  return take;
}

}  // namespace vgpu
