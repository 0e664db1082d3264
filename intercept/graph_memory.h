// The driver's side of the graph-memory charge (quota/graph_memory_charge.h):
// the real driver's graph pools, and the walk that finds a graph's
// allocation nodes. The charge itself is owned by the Runtime.
#pragma once

#include <cuda.h>

#include "quota/graph_memory_charge.h"

namespace vgpu::graph_memory {

// The real driver's per-device graph pools (physical ordinals).
class DriverGraphPools final : public GraphPools {
 public:
  uint64_t Used(int device) override;
  uint64_t Reserved(int device) override;
  void Trim(int device) override;
};

// The bytes the allocation nodes of `graph` (child graphs too) take, per
// physical device.
GraphMemoryCharge::Bytes AllocationBytes(CUgraph graph);

// Suspend cannot move a graph pool: its charge is noted as driver memory
// under this key of the non-migratable book.
inline uint64_t NonMigratableKey(int device) {
  return 0x6772617068000000ull + static_cast<uint64_t>(device);  // "graph"
}

}  // namespace vgpu::graph_memory
