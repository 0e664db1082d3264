// Facts about other processes that survive pid reuse.
#pragma once

#include <sys/types.h>

#include <cstdint>

namespace vgpu {

// Start time of a process in clock ticks since boot (field 22 of
// /proc/<pid>/stat); 0 if the process is gone or a zombie. A (pid, start time)
// pair names one process for the life of the system.
uint64_t ProcessStartTime(pid_t pid);

}  // namespace vgpu
