// The calling thread's current context and its device, kept per thread so
// that a governed launch does not ask the driver (cuCtxGetCurrent +
// cuCtxGetDevice) on every launch: it asks once after each change.
//
// Exact because every hook that can change the calling thread's current
// context (cuCtxSetCurrent, cuCtxPushCurrent[_v2], cuCtxPopCurrent[_v2],
// cuCtxCreate_v2/v3/v4, cuCtxDestroy[_v2]) forgets it after the real call, and
// every hook that can destroy a context current to *another* thread
// (cuCtxDestroy[_v2], cuDevicePrimaryCtxRelease_v2/Reset_v2) and the fork child
// handler bump a process-wide epoch: a handle of a destroyed context may be
// reused for a new one on another device. A thread that never called a
// context function starts unknown and asks at its first launch.
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstdint>

#include "common/device_index.h"

namespace vgpu {

struct CurrentContext {
  CUcontext ctx = nullptr;
  DriverOrdinal device;  // invalid: none, or beyond the scheduler's table
  uint64_t epoch = 0;  // g_context_epoch when ctx was read
  bool known = false;
};

extern std::atomic<uint64_t> g_context_epoch;
inline thread_local CurrentContext t_current_context;

// After a call that may change the calling thread's current context.
inline void ForgetCurrentContext() { t_current_context.known = false; }

// After a call that may have destroyed a context anywhere in the process.
inline void ForgetAllCurrentContexts() {
  g_context_epoch.fetch_add(1, std::memory_order_acq_rel);
  ForgetCurrentContext();
}

// Asks the driver; out of line (once per change, not per launch).
const CurrentContext& RereadCurrentContext();

// The calling thread's current context: no lock, no syscall, no driver call
// while nothing changed.
inline const CurrentContext& CurrentContextOfThread() {
  const CurrentContext& c = t_current_context;
  if (c.known && c.epoch == g_context_epoch.load(std::memory_order_acquire)) return c;
  return RereadCurrentContext();
}

}  // namespace vgpu
