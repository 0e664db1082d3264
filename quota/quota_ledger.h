// Device-memory ledger of one quota group, in POSIX shared memory so that all
// processes of the group (a container, a job) draw from one quota.
//
// Correctness rules (see docs/security.md and docs/architecture.md):
// - The quota is never exceeded, by any interleaving of any number of
//   processes and threads: a reservation adds to the caller's own slot first,
//   then sums all slots (sequentially consistent), and backs off if the sum is
//   over the limit. Any two successful reservations see each other.
// - A process killed at any instruction leaves only its own slot behind; dead
//   slots (pid gone, or pid reused: start time differs) are reaped and their
//   usage returns to the group. No lock is ever held, so nothing can deadlock.
// - The region has a magic, a version and its size; a foreign or damaged
//   region is refused with a clear message (the caller fails closed).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace vgpu {

inline constexpr uint64_t kLedgerMagic = 0x3151474c55504756ull;  // "VGPULGQ1"
inline constexpr uint32_t kLedgerVersion = 2;
inline constexpr int kLedgerDevices = 16;
inline constexpr int kLedgerSlots = 512;
inline constexpr uint64_t kUnlimited = UINT64_MAX;

struct LedgerSlot {
  std::atomic<int32_t> pid;          // 0 free, -pid while being claimed or reaped
  std::atomic<uint64_t> start_time;  // /proc/<pid>/stat field 22
  std::atomic<uint64_t> used[kLedgerDevices];
  std::atomic<uint64_t> image_id;  // ProcessImageId(): tells a pre-exec image apart
};

struct LedgerRegion {
  uint64_t magic;
  uint32_t version;
  uint32_t region_bytes;
  std::atomic<uint32_t> ready;
  uint32_t reserved0;
  std::atomic<uint64_t> limit[kLedgerDevices];  // bytes; kUnlimited when no quota
  std::atomic<uint64_t> generation;             // bumped when a limit changes
  char group[128];
  LedgerSlot slots[kLedgerSlots];
};

class QuotaLedger {
 public:
  // The group's shared ledger, "/vgpu-ledger-<uid>-<group>" in /dev/shm,
  // created with mode 0600 (owner only) if absent. `limits[d]` initializes the
  // limit of device d when the region is created; when it already exists the
  // stricter (smaller) of the existing and the requested limit is kept, so a
  // member can never raise the group's quota. An empty group name gives a
  // private ledger (anonymous shared memory; shared with fork()ed children).
  // On failure, a Status with a one-line message (EINVAL: a bad group name
  // or too many limits; EIO: a foreign or damaged region, or no access).
  static Result<std::unique_ptr<QuotaLedger>> Open(const std::string& group,
                                                   const std::vector<uint64_t>& limits);
  ~QuotaLedger();

  // Claims this process's member slot now (it is otherwise claimed at the
  // first reservation); false if all kLedgerSlots hold live processes.
  // libvgpu joins at cuInit, so the 513th process of a group fails there
  // with a clear message instead of at its first allocation.
  bool Join();

  // Reserves bytes on device d for this process; false if that would put the
  // group over its limit (after reaping dead members once).
  bool TryReserve(int d, uint64_t bytes);
  void Release(int d, uint64_t bytes);

  uint64_t Used(int d) const;   // the whole group's usage
  uint64_t Limit(int d) const;  // kUnlimited if none
  uint64_t SelfUsed(int d) const;
  void SetLimit(int d, uint64_t bytes);  // runtime change, unchecked
  // Runtime change that never leaves the group over its limit: a new limit
  // below what the group holds is refused (false, *used = the usage seen)
  // and the old one stays. Concurrent reservations either are counted here
  // or are checked against the new limit (see AddThenCheck).
  bool TrySetLimit(int d, uint64_t bytes, uint64_t* used);

  // Frees the slots of dead members; returns the bytes returned to the group.
  uint64_t ReapDead();

  // After fork(): the child takes a slot of its own on first use; the parent's
  // usage stays the parent's.
  void OnForkChild();

  // The shm name used for a group (for tools and docs).
  static std::string ShmName(const std::string& group);

  // Test seam: called between the two halves of every reservation step (after
  // the own-slot add, before the group sum), so a test can run a competing
  // reservation exactly there. Null (the default) in the product.
  using StepHook = void (*)(int device, uint64_t bytes);
  static void SetStepHookForTest(StepHook hook);

 private:
  QuotaLedger() = default;
  LedgerSlot* Self();  // claims a slot on first use in this process
  void ReleasePreviousImages(LedgerSlot* mine, pid_t pid, uint64_t start);

  LedgerRegion* region_ = nullptr;
  size_t mapped_bytes_ = 0;
  std::atomic<LedgerSlot*> self_{nullptr};
  pid_t self_pid_ = 0;
};

// A device's memory as a process under a quota sees it (cuMemGetInfo, NVML):
// total is the quota (never above the device's), used the group's charge, and
// free what the process could still allocate: the quota left, but never more
// than the device has free (other tenants may hold the rest). Never wraps.
struct MemoryView {
  uint64_t total = 0;
  uint64_t used = 0;
  uint64_t free = 0;
};
MemoryView QuotaMemoryView(uint64_t limit, uint64_t used, uint64_t device_total,
                           uint64_t device_free);

}  // namespace vgpu
