// The process side of the device-memory quota: every allocation the library
// lets through is reserved in the group's ledger before the driver is asked,
// recorded under the driver's key once it succeeded, and returned exactly once
// when it is freed (or when its context dies). The hooks (intercept/
// hooks_memory.cc) only call the driver between Reserve and Commit, and
// between BeginFree and EndFree; the rules live here and are unit-tested on a
// fake quota (tests/unit/allocation_accounting_test.cc).
//
// Rules:
// - The quota is never exceeded: a reservation happens before the driver
//   allocates, and is given back if the driver refuses.
// - A charge is taken out before the driver frees: as soon as the memory is
//   freed another thread may get the same pointer back and record its own
//   charge under that key. If the driver refuses the free, it is put back.
// - A charge recorded under a key that is already charged replaces a stale
//   charge (memory the driver freed behind our back, a destroyed context's):
//   the stale one is returned to the quota.
// Devices are the ledger's (for libvgpu: driver ordinals, translated by
// intercept/device_ledger.h).
#pragma once

#include <cstdint>
#include <functional>

#include "quota/allocation_tracker.h"

namespace vgpu {

// The quota as the accounting sees it; nullptr when none applies.
class DeviceQuota {
 public:
  virtual ~DeviceQuota() = default;
  virtual bool TryReserve(int device, uint64_t bytes) = 0;
  virtual void Release(int device, uint64_t bytes) = 0;
  virtual uint64_t Limit(int device) const = 0;  // kUnlimited when none
  virtual uint64_t Used(int device) const = 0;   // the whole group's
};

// What the accounting reports; every member may be empty.
struct AccountingObservers {
  // A final refusal (logged by libvgpu with the call site).
  std::function<void(int device, uint64_t bytes)> refused;
  // Allocation tracing (VGPU_TRACE_ALLOCATIONS): keys are tagged by kind.
  std::function<void(uint64_t trace_key, uint64_t bytes)> allocated;
  std::function<void(uint64_t trace_key)> freed;
};

class AllocationAccounting {
 public:
  explicit AllocationAccounting(AccountingObservers observers = {});

  // Set once the ledger is open (libvgpu: after the real cuInit); before,
  // and with nullptr, nothing is charged.
  void SetQuota(DeviceQuota* quota) { quota_ = quota; }
  DeviceQuota* quota() const { return quota_; }

  // Reserves without reporting a refusal (a caller that retries).
  bool TryReserve(int device, uint64_t bytes);
  // Reserves, or reports the refusal.
  bool Reserve(int device, uint64_t bytes);
  // A final refusal: counted, then `refused` (for a caller that retried
  // through TryReserve, vmm::Manager).
  void ReportRefusal(int device, uint64_t bytes);
  void Release(int device, uint64_t bytes);
  // What the quota still allows on `device`; UINT64_MAX without one.
  uint64_t Available(int device) const;
  uint64_t Limit(int device) const;

  // After the driver allocated `bytes` reserved on `device`: records the
  // charge under (kind, key), owned by `owner` (nullptr: outlives contexts).
  void Commit(ChargeKind kind, uint64_t key, int device, const void* owner, uint64_t bytes);
  // The charge of (kind, key) becomes `bytes` (an allocation whose size the
  // driver decides, cuMemAllocPitch). False if the quota cannot hold the
  // growth (reported as a refusal); the charge is then left as it was.
  bool Resize(ChargeKind kind, uint64_t key, uint64_t bytes);

  // Before the driver frees (kind, key): takes its charge out. Returns an
  // opaque ticket for EndFree.
  struct FreeTicket {
    Charge charge;
    bool charged = false;
  };
  FreeTicket BeginFree(ChargeKind kind, uint64_t key);
  // After the driver answered: `freed` returns the charge to the quota;
  // otherwise the charge is put back as it was.
  void EndFree(ChargeKind kind, uint64_t key, const FreeTicket& ticket, bool freed);
  // Takes the charge out for a release the caller defers (stream-ordered
  // frees release when the stream reaches them). False if none.
  bool TakeCharge(ChargeKind kind, uint64_t key, Charge* out);
  // A context died: everything it owned returns to the quota.
  void ReleaseOwner(const void* owner);
  // fork child: the parent's charges are the parent's.
  void Clear() { tracker_.Clear(); }

  // Call-site tracing for allocations the accounting does not charge itself
  // (VMM chunks are charged by vmm::Manager).
  void TraceAlloc(ChargeKind kind, uint64_t key, uint64_t bytes) const;
  void TraceFree(ChargeKind kind, uint64_t key) const;

 private:
  DeviceQuota* quota_ = nullptr;
  AccountingObservers observers_;
  AllocationTracker tracker_;
};

}  // namespace vgpu
