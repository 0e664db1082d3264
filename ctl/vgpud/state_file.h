// vgpud's state file (docs/vgpud.md, "State file"): the jobs it suspended or
// checkpointed, in the order they wait, and the recent decisions. Written
// atomically (temporary file, fsync, rename) after every decision, so a vgpud
// killed at any moment leaves the previous or the new state, never a torn one.
// It is never the only copy of anything: the agents know whether vgpud
// suspended them, and a job whose vgpud is gone resumes by itself.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "ctl/vgpud/event_log.h"

namespace vgpu::vgpud {

struct ParkedJob {
  pid_t pid = 0;
  uint64_t start_time = 0;  // /proc/<pid>/stat field 22: tells a reused pid apart
  int64_t waiting_since_unix_ms = 0;
  bool on_disk = false;
  std::string image_path;  // when on_disk
};

struct DaemonState {
  std::vector<ParkedJob> parked;  // in waiting order
  std::vector<Event> events;
  std::vector<std::string> drained;  // device UUIDs (vgpuctl drain)
};

Status WriteState(const std::string& path, const DaemonState& s);
// ENOENT when there is none; EINVAL for a corrupt or foreign file (vgpud then
// starts from the agents alone).
Status ReadState(const std::string& path, DaemonState* out);

}  // namespace vgpu::vgpud
