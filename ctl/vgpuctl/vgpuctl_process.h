// vgpuctl's process-control commands: they talk to the agents of interposed
// processes (ctl/client.h) and need no daemon.
#pragma once

#include <sys/types.h>

#include "ctl/vgpuctl/vgpuctl_cli.h"

namespace vgpu::ctl::cli {

// Each takes its parsed options and returns an exit code.
int Ps(const CommonOptions& o);
int Info(const InfoCommand& o);
int Suspend(const PidCommand& o);
int Resume(const PidCommand& o);
int Checkpoint(const CheckpointCommand& o);
int Restore(const RestoreCommand& o);
int Set(const SetCommand& o);
int Migrate(const MigrateCommand& o);  // vgpuctl_migrate.cc
// restore --device N: moves the (checkpointed) job to GPU N first; an exit code.
int MoveBeforeRestore(pid_t pid, int device, const CommonOptions& o);  // vgpuctl_migrate.cc

}  // namespace vgpu::ctl::cli
