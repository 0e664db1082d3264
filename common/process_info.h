// Facts about other processes that survive pid reuse.
#pragma once

#include <sys/types.h>

#include <cstdint>

namespace vgpu {

// Start time of a process in clock ticks since boot (field 22 of
// /proc/<pid>/stat); 0 if the process is gone or a zombie. A (pid, start time)
// pair names one process for the life of the system.
uint64_t ProcessStartTime(pid_t pid);

// Whether `pid` is still the process whose start time was recorded as
// `start_time`. 0 means the recorder could not read /proc (hidepid, another
// uid): existence is all that can be checked then, and a process we may not
// signal (EPERM) exists. The one liveness rule of every shared table: slots
// of processes whose /proc we cannot read must not look dead.
bool ProcessAlive(pid_t pid, uint64_t start_time);

// Whether `pid` is stopped (state T or t in /proc/<pid>/stat: SIGSTOP,
// SIGTSTP, a tracer): it answers nothing until continued. False if gone or
// unreadable.
bool ProcessStopped(pid_t pid);

// Identity of this process *image*: random bytes the kernel places at every
// exec (AT_RANDOM), the same for every library of the process and inherited
// by fork()ed children. A slot with our pid and start time but another image
// id belongs to what this process was before it exec'd.
uint64_t ProcessImageId();

// Inode of this process's pid namespace (0 if /proc cannot tell): with the
// pid, it names a process across containers; the host's is kInitPidNamespace.
uint64_t PidNamespaceId();
inline constexpr uint64_t kInitPidNamespace = 0xEFFFFFFCu;  // the kernel's PROC_PID_INIT_INO

}  // namespace vgpu
