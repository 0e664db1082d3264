// The allocation accounting's rules, on a fake quota (no driver, no shared
// memory): each charge is returned exactly once, a refused free keeps its
// charge, a stale charge under a reused key is returned, a resize that the
// quota cannot hold changes nothing.
#include "quota/allocation_accounting.h"

#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "common/counters.h"
#include "quota/quota_ledger.h"
#include "tests/unit/fake_quota.h"

namespace vgpu {
namespace {

using testing_fakes::FakeQuota;

struct Seen {
  std::vector<std::pair<int, uint64_t>> refused;
  std::vector<uint64_t> allocated, freed;
};

AccountingObservers Observe(Seen* s) {
  return AccountingObservers{
      .refused = [s](int d, uint64_t b) { s->refused.emplace_back(d, b); },
      .allocated = [s](uint64_t k, uint64_t) { s->allocated.push_back(k); },
      .freed = [s](uint64_t k) { s->freed.push_back(k); },
  };
}

const void* const kCtxA = reinterpret_cast<const void*>(0xa);
const void* const kCtxB = reinterpret_cast<const void*>(0xb);

TEST(AllocationAccountingTest, WithoutQuotaNothingIsChargedButAllocationsAreTraced) {
  Seen seen;
  AllocationAccounting a(Observe(&seen));
  EXPECT_TRUE(a.Reserve(0, 1ull << 40));
  a.Commit(ChargeKind::kPointer, 0x1000, 0, kCtxA, 1ull << 40);
  EXPECT_EQ(a.Available(0), UINT64_MAX);
  EXPECT_EQ(a.Limit(0), kUnlimited);
  AllocationAccounting::FreeTicket t = a.BeginFree(ChargeKind::kPointer, 0x1000);
  EXPECT_FALSE(t.charged);
  a.EndFree(ChargeKind::kPointer, 0x1000, t, true);
  EXPECT_EQ(seen.allocated, std::vector<uint64_t>{0x1000});
  EXPECT_EQ(seen.freed, std::vector<uint64_t>{0x1000});
}

TEST(AllocationAccountingTest, ReserveOverTheQuotaIsRefusedReportedAndCounted) {
  FakeQuota q(100);
  Seen seen;
  AllocationAccounting a(Observe(&seen));
  a.SetQuota(&q);
  const uint64_t refused_before = counters::Get(counters::Id::kAllocationsRefused);
  EXPECT_TRUE(a.Reserve(1, 60));
  EXPECT_FALSE(a.Reserve(1, 41));
  EXPECT_FALSE(a.TryReserve(1, 41));  // not reported: the caller retries
  EXPECT_EQ(seen.refused, (std::vector<std::pair<int, uint64_t>>{{1, 41}}));
  EXPECT_EQ(counters::Get(counters::Id::kAllocationsRefused), refused_before + 1);
  EXPECT_EQ(a.Available(1), 40u);
  EXPECT_EQ(a.Available(0), 100u);  // per device
}

TEST(AllocationAccountingTest, FreeReturnsTheChargeOnce) {
  FakeQuota q(100);
  AllocationAccounting a;
  a.SetQuota(&q);
  ASSERT_TRUE(a.Reserve(0, 30));
  a.Commit(ChargeKind::kPointer, 0x10, 0, kCtxA, 30);
  AllocationAccounting::FreeTicket t = a.BeginFree(ChargeKind::kPointer, 0x10);
  EXPECT_TRUE(t.charged);
  a.EndFree(ChargeKind::kPointer, 0x10, t, true);
  EXPECT_EQ(q.Used(0), 0u);
  // A second free of the same key (a double free the driver refuses, or one
  // it accepts) returns nothing more.
  t = a.BeginFree(ChargeKind::kPointer, 0x10);
  EXPECT_FALSE(t.charged);
  a.EndFree(ChargeKind::kPointer, 0x10, t, true);
  EXPECT_EQ(q.Used(0), 0u);
}

TEST(AllocationAccountingTest, RefusedFreeKeepsTheCharge) {
  FakeQuota q(100);
  Seen seen;
  AllocationAccounting a(Observe(&seen));
  a.SetQuota(&q);
  ASSERT_TRUE(a.Reserve(0, 30));
  a.Commit(ChargeKind::kArray, 0x10, 0, kCtxA, 30);
  AllocationAccounting::FreeTicket t = a.BeginFree(ChargeKind::kArray, 0x10);
  a.EndFree(ChargeKind::kArray, 0x10, t, false);
  EXPECT_EQ(q.Used(0), 30u);
  EXPECT_TRUE(seen.freed.empty());
  t = a.BeginFree(ChargeKind::kArray, 0x10);
  EXPECT_TRUE(t.charged);
  EXPECT_EQ(t.charge.bytes, 30u);
}

TEST(AllocationAccountingTest, KindsDoNotShareKeys) {
  FakeQuota q(100);
  AllocationAccounting a;
  a.SetQuota(&q);
  ASSERT_TRUE(a.Reserve(0, 10));
  a.Commit(ChargeKind::kPointer, 0x10, 0, kCtxA, 10);
  ASSERT_TRUE(a.Reserve(0, 20));
  a.Commit(ChargeKind::kVmmHandle, 0x10, 0, nullptr, 20);
  EXPECT_EQ(q.Used(0), 30u);
  AllocationAccounting::FreeTicket t = a.BeginFree(ChargeKind::kVmmHandle, 0x10);
  a.EndFree(ChargeKind::kVmmHandle, 0x10, t, true);
  EXPECT_EQ(q.Used(0), 10u);
}

TEST(AllocationAccountingTest, ACommitUnderAChargedKeyReturnsTheStaleCharge) {
  FakeQuota q(100);
  AllocationAccounting a;
  a.SetQuota(&q);
  ASSERT_TRUE(a.Reserve(0, 40));
  a.Commit(ChargeKind::kPointer, 0x10, 0, kCtxA, 40);
  // The driver freed 0x10 with its context behind our back and handed it out
  // again: the old charge must not stay in the quota for ever.
  ASSERT_TRUE(a.Reserve(0, 25));
  a.Commit(ChargeKind::kPointer, 0x10, 0, kCtxB, 25);
  EXPECT_EQ(q.Used(0), 25u);
}

TEST(AllocationAccountingTest, ResizeSettlesOnTheRealSize) {
  FakeQuota q(100);
  Seen seen;
  AllocationAccounting a(Observe(&seen));
  a.SetQuota(&q);
  ASSERT_TRUE(a.Reserve(0, 50));
  a.Commit(ChargeKind::kPointer, 0x10, 0, kCtxA, 50);
  EXPECT_TRUE(a.Resize(ChargeKind::kPointer, 0x10, 40));
  EXPECT_EQ(q.Used(0), 40u);
  EXPECT_TRUE(a.Resize(ChargeKind::kPointer, 0x10, 90));
  EXPECT_EQ(q.Used(0), 90u);
  // Growth the quota cannot hold: refused, reported, and the charge stays.
  EXPECT_FALSE(a.Resize(ChargeKind::kPointer, 0x10, 101));
  EXPECT_EQ(q.Used(0), 90u);
  EXPECT_EQ(seen.refused.size(), 1u);
  AllocationAccounting::FreeTicket t = a.BeginFree(ChargeKind::kPointer, 0x10);
  EXPECT_EQ(t.charge.bytes, 90u);
  a.EndFree(ChargeKind::kPointer, 0x10, t, true);
  EXPECT_EQ(q.Used(0), 0u);
}

TEST(AllocationAccountingTest, ReleaseOwnerReturnsOnlyThatContextsCharges) {
  FakeQuota q(100);
  AllocationAccounting a;
  a.SetQuota(&q);
  ASSERT_TRUE(a.Reserve(0, 10));
  a.Commit(ChargeKind::kPointer, 0x10, 0, kCtxA, 10);
  ASSERT_TRUE(a.Reserve(1, 20));
  a.Commit(ChargeKind::kArray, 0x20, 1, kCtxA, 20);
  ASSERT_TRUE(a.Reserve(0, 30));
  a.Commit(ChargeKind::kPointer, 0x30, 0, kCtxB, 30);
  ASSERT_TRUE(a.Reserve(0, 5));
  a.Commit(ChargeKind::kVmmHandle, 0x40, 0, nullptr, 5);  // outlives contexts
  a.ReleaseOwner(kCtxA);
  EXPECT_EQ(q.Used(0), 35u);
  EXPECT_EQ(q.Used(1), 0u);
  Charge c;
  EXPECT_FALSE(a.TakeCharge(ChargeKind::kPointer, 0x10, &c));
  EXPECT_TRUE(a.TakeCharge(ChargeKind::kPointer, 0x30, &c));
  EXPECT_EQ(c.bytes, 30u);
  EXPECT_EQ(q.Used(0), 35u);  // taken for a deferred release, not released
}

TEST(AllocationAccountingTest, ClearForgetsChargesWithoutReturningThem) {
  FakeQuota q(100);
  AllocationAccounting a;
  a.SetQuota(&q);
  ASSERT_TRUE(a.Reserve(0, 10));
  a.Commit(ChargeKind::kPointer, 0x10, 0, kCtxA, 10);
  a.Clear();  // a fork child: the parent's charges stay the parent's
  EXPECT_EQ(q.Used(0), 10u);
  EXPECT_FALSE(a.BeginFree(ChargeKind::kPointer, 0x10).charged);
}

}  // namespace
}  // namespace vgpu
