// vgpud's name for the node's GPUs. The code lives in the driver layer
// (driver/node_gpus.h) since vgpuctl's CDI generator lists the GPUs too.
#pragma once

#include "driver/node_gpus.h"

namespace vgpu::vgpud {

using driver::GpuMemory;
using driver::NodeGpus;

}  // namespace vgpu::vgpud
