// Monotonic time for deadlines and accounting: CLOCK_MONOTONIC never jumps
// with wall-clock changes, and its values compare across the processes of one
// boot (the shared scheduler region stores them).
#pragma once

#include <time.h>

#include <cstdint>

namespace vgpu {

inline uint64_t MonotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

inline uint64_t MonotonicMs() { return MonotonicNs() / 1'000'000; }

}  // namespace vgpu
