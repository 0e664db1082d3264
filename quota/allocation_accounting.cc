#include "quota/allocation_accounting.h"

#include <utility>

#include "common/counters.h"
#include "quota/quota_ledger.h"

namespace vgpu {

AllocationAccounting::AllocationAccounting(AccountingObservers observers)
    : observers_(std::move(observers)) {}

bool AllocationAccounting::TryReserve(int device, uint64_t bytes) {
  if (quota_ == nullptr || bytes == 0) return true;
  if (!quota_->TryReserve(device, bytes)) return false;
  counters::Add(counters::Id::kQuotaChargedBytes, bytes);
  return true;
}

// Every final refusal passes here (VMM or not): it is also where it is counted.
bool AllocationAccounting::Reserve(int device, uint64_t bytes) {
  if (TryReserve(device, bytes)) return true;
  ReportRefusal(device, bytes);
  return false;
}

void AllocationAccounting::ReportRefusal(int device, uint64_t bytes) {
  counters::Add(counters::Id::kAllocationsRefused);
  if (observers_.refused) observers_.refused(device, bytes);
}

void AllocationAccounting::Release(int device, uint64_t bytes) {
  if (quota_ != nullptr && bytes != 0) quota_->Release(device, bytes);
}

uint64_t AllocationAccounting::Limit(int device) const {
  return quota_ == nullptr ? kUnlimited : quota_->Limit(device);
}

uint64_t AllocationAccounting::Available(int device) const {
  const uint64_t limit = Limit(device);
  if (limit == kUnlimited) return UINT64_MAX;
  const uint64_t used = quota_->Used(device);
  return used >= limit ? 0 : limit - used;
}

void AllocationAccounting::Commit(ChargeKind kind, uint64_t key, int device, const void* owner,
                                  uint64_t bytes) {
  if (quota_ != nullptr) {
    Charge stale;
    if (tracker_.Take(kind, key, &stale)) Release(stale.device, stale.bytes);
    tracker_.Add(kind, key, Charge{bytes, device, owner});
  }
  TraceAlloc(kind, key, bytes);
}

bool AllocationAccounting::Resize(ChargeKind kind, uint64_t key, uint64_t bytes) {
  Charge c;
  if (!tracker_.Take(kind, key, &c)) return true;  // nothing charged: no quota
  if (bytes < c.bytes) {
    Release(c.device, c.bytes - bytes);
  } else if (bytes > c.bytes && !Reserve(c.device, bytes - c.bytes)) {
    tracker_.Add(kind, key, c);
    return false;
  }
  c.bytes = bytes;
  tracker_.Add(kind, key, c);
  return true;
}

AllocationAccounting::FreeTicket AllocationAccounting::BeginFree(ChargeKind kind, uint64_t key) {
  FreeTicket t;
  t.charged = tracker_.Take(kind, key, &t.charge);
  return t;
}

void AllocationAccounting::EndFree(ChargeKind kind, uint64_t key, const FreeTicket& ticket,
                                   bool freed) {
  if (!freed) {
    if (ticket.charged) tracker_.Add(kind, key, ticket.charge);
    return;
  }
  if (ticket.charged) Release(ticket.charge.device, ticket.charge.bytes);
  TraceFree(kind, key);
}

bool AllocationAccounting::TakeCharge(ChargeKind kind, uint64_t key, Charge* out) {
  return tracker_.Take(kind, key, out);
}

void AllocationAccounting::ReleaseOwner(const void* owner) {
  for (const Charge& c : tracker_.TakeOwner(owner)) Release(c.device, c.bytes);
}

void AllocationAccounting::TraceAlloc(ChargeKind kind, uint64_t key, uint64_t bytes) const {
  if (observers_.allocated) observers_.allocated(TaggedKey(kind, key), bytes);
}

void AllocationAccounting::TraceFree(ChargeKind kind, uint64_t key) const {
  if (observers_.freed) observers_.freed(TaggedKey(kind, key));
}

}  // namespace vgpu
