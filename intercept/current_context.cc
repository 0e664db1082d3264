#include "intercept/current_context.h"

#include "driver/real_driver.h"
#include "share/sched_region.h"

namespace vgpu {

// Namespace scope, not the Runtime's: read on every launch next to the
// thread-local cache it invalidates (current_context.h).
std::atomic<uint64_t> g_context_epoch{0};

const CurrentContext& RereadCurrentContext() {
  CurrentContext& c = t_current_context;
  // The epoch is read first: a destroy that races with the query below
  // leaves it stale, so the next launch asks again.
  c.epoch = g_context_epoch.load(std::memory_order_acquire);
  c.ctx = nullptr;
  c.device = DriverOrdinal();
  CUdevice d = -1;
  if (REAL_CALL(cuCtxGetCurrent, &c.ctx) == CUDA_SUCCESS && c.ctx != nullptr &&
      REAL_CALL(cuCtxGetDevice, &d) == CUDA_SUCCESS && d >= 0 && d < kSchedDevices) {
    c.device = DriverOrdinal(d);
  }
  c.known = true;
  return c;
}

}  // namespace vgpu
