// The device memory a suspend cannot move (managed memory, arrays,
// driver-path allocations, application-owned VMM handles, graph pools): each
// holder notes its bytes under a key of its own, and suspend and checkpoint
// refuse while any is noted. Written by the memory and graph hooks, read by
// the residency engine; owned by the process's Runtime.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <mutex>
#include <unordered_map>

namespace vgpu {

class NonMigratableBook {
 public:
  // `ctx`: the context the memory dies with (nullptr: none).
  void Note(uint64_t key, uint64_t bytes, CUcontext ctx);
  void Forget(uint64_t key);
  // Everything noted with `ctx` (the context was destroyed).
  void ForgetContext(CUcontext ctx);
  uint64_t Bytes() const;

 private:
  struct Entry {
    uint64_t bytes;
    CUcontext ctx;
  };
  mutable std::mutex mu_;
  std::unordered_map<uint64_t, Entry> entries_;
};

}  // namespace vgpu
