// One job's migration to other GPUs (docs/migration.md), shared by vgpuctl
// (without vgpud) and vgpud: the job's agent holds the job's threads
// (migrate_prepare), the driver's checkpoint API moves the job's contexts,
// streams, modules and memory (lock, checkpoint, restore with GPU pairs,
// unlock), and the agent re-points libvgpu's view (migrate_finish).
// Failure-atomic: the target's room is checked before anything is held; a
// failure after the lock restores the job where it was; only if that fails
// too is the job left CHECKPOINTED (its data in its own host memory), and the
// outcome says so.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "ctl/control/client.h"
#include "driver/node_gpus.h"

namespace vgpu::migrate {

struct GpuPair {
  driver::GpuMemory from, to;
  uint64_t bytes = 0;  // the job's footprint on `from`
};

struct Outcome {
  Status status = Status::Ok();  // ok: moved
  bool stranded = false;         // left CHECKPOINTED (see above)
  std::string step;              // the step that failed
  double stopped_ms = 0;         // locked to unlocked: the job's downtime
  double lock_wait_ms = 0;       // the lock waiting for the job's queued work
  uint64_t bytes = 0;
};

// Checks that each target has room for the job's footprint there (the node's
// free memory less `reserved_on_target`, e.g. room vgpud holds for others).
Status CheckRoom(const std::vector<GpuPair>& pairs);

// Moves job `pid`; `client` reaches its agent.
Outcome MigrateJob(pid_t pid, const std::vector<GpuPair>& pairs, const ctl::ClientOptions& client);

// "GPU-xxxxxxxx-..." -> 16 bytes; false if malformed.
bool ParseUuid(const std::string& text, unsigned char out[16]);

}  // namespace vgpu::migrate
