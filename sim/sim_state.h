// Process-wide state of the simulated driver, created by cuInit.
#pragma once

#include <cuda.h>

#include "sim/node_region.h"
#include "sim/sim_config.h"

namespace vgpu::sim {

struct SimState {
  SimConfig config;
  NodeRegion* node = nullptr;
};

// The state after a successful cuInit; nullptr before (or after a failed one).
SimState* State();
inline NodeRegion& Node() { return *State()->node; }

// cuInit's work; the result is sticky like the real driver's.
CUresult InitOnce(unsigned int flags);

}  // namespace vgpu::sim
