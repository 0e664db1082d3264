// The target side of the driver checkpoint API (cuCheckpointProcess*): every
// initialized process runs a restore thread that executes the requests other
// processes post in its node slot (CheckpointChannel), and a lock that holds
// the process's own CUDA calls at ApiScope.
//
// What the states mean here, as on a real r580+ driver:
//   LOCKED        no thread of the process is inside the driver, new calls
//                 wait, and all work queued before the lock has finished;
//   CHECKPOINTED  the process's device memory is held in host memory and the
//                 devices' capacity is free for others (the simulated device
//                 memory is host memory already, so it stays where it is: the
//                 capacity is returned and the copy time is charged at the
//                 device's modelled checkpoint rate, ckpt= in VGPU_SIM_DEVICES);
//   restore       takes the capacity back (on the paired devices when gpuPairs
//                 remap the process: its ordinals then name the new devices,
//                 every handle and address stays), charges the copy again and
//                 leaves the process LOCKED.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "sim/node/node_region.h"

namespace vgpu::sim {

enum class CheckpointOp : uint32_t { kLock = 1, kCheckpoint = 2, kRestore = 3, kUnlock = 4 };

// Starts this process's restore thread (cuInit).
void StartRestoreThread(ProcessSlot* self);

// Executes one request on this process (the restore thread; tests).
CUresult ExecuteCheckpointOp(CheckpointChannel* ch);

}  // namespace vgpu::sim
