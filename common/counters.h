// Per-process counters, declared once: VGPU_COUNTERS below is the only list.
// From it come the ids, the names on the wire (`vgpuctl info --json`,
// "counters"), units and help text; docs/counters.md is checked against it by
// a unit test. vgpud will export the same names.
//
// Counting is a relaxed fetch_add on a cache-line-aligned cell: no lock, no
// syscall, no allocation. It is still only done on slow paths (a refused
// allocation, a launch that waited in the compute-share gate, a suspend), so
// the hot paths (launch, event record, memcpy) are untouched. A fork child
// starts with its parent's counts (they are plain memory).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "common/clock.h"

// X(Id, "wire_name", "unit", "help"). Add a counter: one line here, one row in
// docs/counters.md ("Adding a counter"), and an Add() where it happens.
#define VGPU_COUNTERS(X)                                                                          \
  X(kAllocationsRefused, "allocations_refused", "allocations",                                    \
    "Device allocations refused because they would exceed the memory quota.")                     \
  X(kQuotaChargedBytes, "quota_charged_bytes", "bytes",                                           \
    "Bytes charged to the memory quota (cumulative; releases are not subtracted).")               \
  X(kLaunchesThrottled, "launches_throttled", "launches",                                         \
    "Launches that waited in the compute-share gate for their tenant's turn.")                    \
  X(kComputeChargedNs, "compute_charged_ns", "ns",                                                \
    "GPU time the compute scheduler charged to this process (its measured device time).")         \
  X(kThrottleWaitNs, "throttle_wait_ns", "ns",                                                    \
    "Time launches spent waiting in the compute-share gate.")                                     \
  X(kGateWaits, "gate_waits", "calls",                                                            \
    "CUDA calls that waited at the quiesce gate while a suspend, checkpoint or restore ran.")     \
  X(kGateWaitNs, "gate_wait_ns", "ns", "Time calls spent waiting at the quiesce gate.")           \
  X(kSuspends, "suspends", "operations", "Completed suspends (device memory moved to host RAM).") \
  X(kSuspendBytes, "suspend_bytes", "bytes", "Device memory copied out by suspends.")             \
  X(kSuspendNs, "suspend_ns", "ns", "Time spent in suspends.")                                    \
  X(kResumes, "resumes", "operations", "Completed resumes (device memory brought back).")         \
  X(kResumeBytes, "resume_bytes", "bytes", "Device memory copied back by resumes.")               \
  X(kResumeNs, "resume_ns", "ns", "Time spent in resumes.")                                       \
  X(kCheckpoints, "checkpoints", "operations", "Completed checkpoints (images written).")         \
  X(kCheckpointBytes, "checkpoint_bytes", "bytes", "Device memory written to checkpoint images.") \
  X(kCheckpointNs, "checkpoint_ns", "ns", "Time spent in checkpoints.")                           \
  X(kRestores, "restores", "operations", "Completed restores (images loaded).")                   \
  X(kRestoreBytes, "restore_bytes", "bytes", "Device memory loaded from checkpoint images.")      \
  X(kRestoreNs, "restore_ns", "ns", "Time spent in restores.")

namespace vgpu::counters {

enum class Id : int {
#define VGPU_COUNTER_ID(id, name, unit, help) id,
  VGPU_COUNTERS(VGPU_COUNTER_ID)
#undef VGPU_COUNTER_ID
};

inline constexpr size_t kCount = 0
#define VGPU_COUNTER_ONE(id, name, unit, help) +1
    VGPU_COUNTERS(VGPU_COUNTER_ONE)
#undef VGPU_COUNTER_ONE
    ;

struct Info {
  const char* id;    // the enumerator, for the table's own test
  const char* name;  // snake_case, on the wire and in the docs
  const char* unit;
  const char* help;  // one sentence
};

inline constexpr Info kInfo[kCount] = {
#define VGPU_COUNTER_INFO(id, name, unit, help) {#id, name, unit, help},
    VGPU_COUNTERS(VGPU_COUNTER_INFO)
#undef VGPU_COUNTER_INFO
};

// One counter per cache line: counters bumped by different threads never
// share one.
struct alignas(64) Cell {
  std::atomic<uint64_t> value{0};
};

// This process's counters (one copy per binary that links them: libvgpu's are
// the process's). Namespace scope: an increment on a hot path is one relaxed
// add, and mechanisms below any composition root count too.
extern Cell g_cells[kCount];

inline void Add(Id id, uint64_t n = 1) noexcept {
  g_cells[static_cast<int>(id)].value.fetch_add(n, std::memory_order_relaxed);
}

inline uint64_t Get(Id id) noexcept {
  return g_cells[static_cast<int>(id)].value.load(std::memory_order_relaxed);
}

inline uint64_t Get(size_t index) noexcept {
  return g_cells[index].value.load(std::memory_order_relaxed);
}

// Times a wait on a slow path: when the scope ends, counts one event and the
// nanoseconds since the first Waiting(), or nothing if it never waited.
class ScopedWait {
 public:
  ScopedWait(Id events, Id ns) noexcept : events_(events), ns_(ns) {}
  ~ScopedWait() {
    if (start_ == 0) return;
    Add(events_);
    Add(ns_, MonotonicNs() - start_);
  }
  void Waiting() noexcept {
    if (start_ == 0) start_ = MonotonicNs();
  }
  ScopedWait(const ScopedWait&) = delete;
  ScopedWait& operator=(const ScopedWait&) = delete;

 private:
  Id events_;
  Id ns_;
  uint64_t start_ = 0;
};

}  // namespace vgpu::counters
