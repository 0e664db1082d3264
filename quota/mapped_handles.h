// Physical memory (cuMemCreate handles) that outlives its handle: a driver
// frees it only once it is released *and* unmapped everywhere, so a program
// that maps, then releases (PyTorch's expandable segments do, and so may any
// cuMemCreate user) still holds it. The charge of such a handle is taken out
// at cuMemRelease and kept here until its last mapping goes (cuMemUnmap), so
// that the quota counts what the device holds. libvgpu's cuMemMap, cuMemUnmap
// and cuMemRelease hooks feed it (intercept/hooks_memory.cc). No CUDA here.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "quota/allocation_tracker.h"

namespace vgpu {

class MappedHandles {
 public:
  // cuMemMap of `handle` at [va, va + size) succeeded.
  void Mapped(uint64_t va, uint64_t size, uint64_t handle);
  // True while some mapping of `handle` is live.
  bool IsMapped(uint64_t handle) const;
  // cuMemRelease of a mapped handle succeeded: `charge` (taken out of the
  // accounting) waits for the handle's last unmap. Returns a key that names
  // the wait (for the caller's other books), unique for the process's life.
  uint64_t Defer(uint64_t handle, const Charge& charge);
  // cuMemUnmap of [va, va + size) succeeded: the charges whose last mapping
  // it removed, each with its Defer key, for the caller to return.
  std::vector<std::pair<uint64_t, Charge>> Unmapped(uint64_t va, uint64_t size);

 private:
  struct Mapping {
    uint64_t size = 0;
    uint64_t id = 0;  // the handle; its Defer key once released
    bool released = false;
  };
  struct Held {
    int mappings = 0;
    Charge charge;  // released ones only
  };
  mutable std::mutex mu_;
  std::map<uint64_t, Mapping> maps_;  // by VA
  // Mapped handles by value; a released one moves under its Defer key (a new
  // cuMemCreate may be given the same value).
  std::map<uint64_t, Held> live_;
  std::map<uint64_t, Held> released_;
  uint64_t next_key_ = 1;
};

}  // namespace vgpu
