// Which node device each driver ordinal of this process names. The quota
// ledger and the compute scheduler are node-wide and indexed by node device;
// the process addresses devices by driver ordinal. The two are the same until
// a migration: the driver's checkpoint restore with GPU pairs keeps the
// process's ordinals and makes them name the target GPUs (docs/migration.md),
// and libvgpu then moves its charges and records here. Lock-free reads: one
// relaxed load per lookup, on hot paths too.
#pragma once

#include <atomic>

namespace vgpu {

inline constexpr int kNodeDevices = 16;

namespace node_devices_internal {
inline std::atomic<int> g_node[kNodeDevices] = {0, 1, 2,  3,  4,  5,  6,  7,
                                                8, 9, 10, 11, 12, 13, 14, 15};
}  // namespace node_devices_internal

// The node device behind driver ordinal p (p itself for out-of-range p).
inline int NodeDevice(int p) {
  if (p < 0 || p >= kNodeDevices) return p;
  return node_devices_internal::g_node[p].load(std::memory_order_relaxed);
}

// The driver ordinal that names node device n; -1 if none does.
inline int OrdinalOfNodeDevice(int n) {
  for (int p = 0; p < kNodeDevices; ++p) {
    if (NodeDevice(p) == n) return p;
  }
  return -1;
}

// After a migration: ordinal p names node device n now.
inline void SetNodeDevice(int p, int n) {
  if (p >= 0 && p < kNodeDevices) node_devices_internal::g_node[p].store(n);
}

}  // namespace vgpu
