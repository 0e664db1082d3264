// Process-wide state of the simulated driver, created by cuInit.
#pragma once

#include <cuda.h>

#include "sim/node/node_region.h"
#include "sim/node/sim_config.h"

namespace vgpu::sim {

struct SimState {
  SimConfig config;
  NodeRegion* node = nullptr;
};

// The state after a successful cuInit; nullptr before (or after a failed one).
SimState* State();
inline NodeRegion& Node() { return *State()->node; }
// A device ordinal of this node (false before cuInit).
inline bool ValidDevice(CUdevice d) {
  const SimState* s = State();
  return s != nullptr && d >= 0 && d < s->node->device_count();
}

// cuInit's work; the result is sticky like the real driver's.
CUresult InitOnce(unsigned int flags);

}  // namespace vgpu::sim
