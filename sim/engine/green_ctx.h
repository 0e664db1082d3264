// Green contexts (cuGreenCtx*): a context created on a subset of a device's
// SMs. The sim records the SM count and answers every query from it; its
// engine runs one kernel at a time whatever the partition (docs/sim.md).
#pragma once

#include <cuda.h>

#include "sim/engine/context.h"

namespace vgpu::sim {

// The green context a context stands for (cuCtxFromGreenCtx), or nullptr for
// an ordinary one.
CUgreenCtx GreenCtxOf(const Context* ctx);

}  // namespace vgpu::sim
