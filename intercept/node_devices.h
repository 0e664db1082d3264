// Which node device each driver ordinal of this process names. The quota
// ledger and the compute scheduler are node-wide and indexed by node device;
// the process addresses devices by driver ordinal. The two are the same until
// a migration: the driver's checkpoint restore with GPU pairs keeps the
// process's ordinals and makes them name the target GPUs (docs/migration.md),
// and libvgpu then moves its charges and records here. Lock-free reads: one
// relaxed load per lookup, on hot paths too.
#pragma once

#include <atomic>

#include "common/device_index.h"

namespace vgpu {

inline constexpr int kNodeDevices = 16;

// Namespace scope, not the Runtime's: read on every launch (one relaxed
// load), and written only by a migration.
namespace node_devices_internal {
inline std::atomic<int> g_node[kNodeDevices] = {0, 1, 2,  3,  4,  5,  6,  7,
                                                8, 9, 10, 11, 12, 13, 14, 15};
}  // namespace node_devices_internal

// The node device behind driver ordinal p (p's number for out-of-range p).
inline NodeIndex NodeDevice(DriverOrdinal p) {
  if (!p.valid() || p.value() >= kNodeDevices) return NodeIndex(p.value());
  return NodeIndex(node_devices_internal::g_node[p.value()].load(std::memory_order_relaxed));
}

// The driver ordinal that names node device n; invalid if none does.
inline DriverOrdinal OrdinalOfNodeDevice(NodeIndex n) {
  for (int p = 0; p < kNodeDevices; ++p) {
    if (NodeDevice(DriverOrdinal(p)) == n) return DriverOrdinal(p);
  }
  return DriverOrdinal();
}

// After a migration: ordinal p names node device n now.
inline void SetNodeDevice(DriverOrdinal p, NodeIndex n) {
  if (p.valid() && p.value() < kNodeDevices) node_devices_internal::g_node[p.value()].store(n.value());
}

}  // namespace vgpu
