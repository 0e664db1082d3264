// The graph-memory charge's rules on fake pools: a launch reserves what it can
// add to a pool, is refused (and gives back what it took) when the quota
// cannot hold it, and the charge then follows the pool's reserved size.
#include "quota/graph_memory_charge.h"

#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "tests/unit/fake_quota.h"

namespace vgpu {
namespace {

using testing_fakes::FakeQuota;

// A pool per device: `used` what launches hold, `reserved` what the driver
// keeps (used plus a cache), `round` what the driver adds beyond a request.
class FakePools : public GraphPools {
 public:
  uint64_t Used(int d) override { return used[d]; }
  uint64_t Reserved(int d) override { return reserved[d]; }
  void Trim(int d) override {
    ++trims;
    reserved[d] = used[d];
  }
  // The driver runs a launch that allocates `bytes` on d and keeps them.
  void Launch(int d, uint64_t bytes) {
    used[d] += bytes;
    if (reserved[d] < used[d]) reserved[d] = used[d] + round;
  }
  // The graph's allocations are freed (the pool keeps the memory cached).
  void FreeAll(int d) { used[d] = 0; }
  std::map<int, uint64_t> used, reserved;
  uint64_t round = 0;
  int trims = 0;
};

struct Fixture {
  explicit Fixture(uint64_t limit) : quota(limit) { accounting.SetQuota(&quota); }
  FakeQuota quota;
  FakePools pools;
  AllocationAccounting accounting;
  std::map<int, uint64_t> noted;  // the non-migratable report
  GraphMemoryCharge charge{&pools, &accounting, [this](int d, uint64_t c) { noted[d] = c; }};
};

const void* const kExec = reinterpret_cast<const void*>(0x1);
const void* const kOther = reinterpret_cast<const void*>(0x2);

GraphMemoryCharge::Bytes On(int d, uint64_t b) {
  GraphMemoryCharge::Bytes bytes = {};
  bytes[d] = b;
  return bytes;
}

TEST(GraphMemoryChargeTest, GraphsWithoutAllocationNodesAreNotTracked) {
  Fixture f(100);
  f.charge.OnInstantiated(kExec, GraphMemoryCharge::Bytes{});
  EXPECT_FALSE(f.charge.Active());
  GraphMemoryCharge::LaunchScope scope(f.charge, kExec);
  EXPECT_TRUE(scope.ok());
  EXPECT_EQ(f.quota.Used(0), 0u);
}

TEST(GraphMemoryChargeTest, ALaunchIsChargedAndSettledOnThePool) {
  Fixture f(100);
  f.charge.OnInstantiated(kExec, On(1, 40));
  EXPECT_TRUE(f.charge.Active());
  {
    GraphMemoryCharge::LaunchScope scope(f.charge, kExec);
    ASSERT_TRUE(scope.ok());
    EXPECT_EQ(f.quota.Used(1), 40u);  // reserved before the driver runs it
    f.pools.round = 8;                // the driver rounds its pool up
    f.pools.Launch(1, 40);
  }
  EXPECT_EQ(f.quota.Used(1), 48u);  // settled on the pool's reserved size
  EXPECT_EQ(f.charge.Charged(1), 48u);
  EXPECT_EQ(f.noted[1], 48u);
}

TEST(GraphMemoryChargeTest, ARelaunchUsesWhatThePoolHoldsUnused) {
  Fixture f(100);
  f.charge.OnInstantiated(kExec, On(0, 60));
  {
    GraphMemoryCharge::LaunchScope scope(f.charge, kExec);
    f.pools.Launch(0, 60);
  }
  f.pools.FreeAll(0);  // the pool caches the 60 bytes
  {
    GraphMemoryCharge::LaunchScope scope(f.charge, kExec);
    ASSERT_TRUE(scope.ok()) << "a relaunch into the cached pool needs no new quota";
    EXPECT_EQ(f.quota.Used(0), 60u);
    f.pools.Launch(0, 60);
  }
  EXPECT_EQ(f.quota.Used(0), 60u);
}

TEST(GraphMemoryChargeTest, ALaunchTheQuotaCannotHoldIsRefusedAndTakesNothing) {
  Fixture f(100);
  GraphMemoryCharge::Bytes bytes = On(0, 30);
  bytes[1] = 200;  // more than the quota on device 1
  f.charge.OnInstantiated(kExec, bytes);
  {
    GraphMemoryCharge::LaunchScope scope(f.charge, kExec);
    EXPECT_FALSE(scope.ok());
  }
  EXPECT_EQ(f.quota.Used(0), 0u) << "device 0's reservation must be given back";
  EXPECT_EQ(f.quota.Used(1), 0u);
}

TEST(GraphMemoryChargeTest, TrimAndDestructionSettleTheCharge) {
  Fixture f(100);
  f.charge.OnInstantiated(kExec, On(0, 50));
  f.charge.OnInstantiated(kOther, On(0, 10));
  {
    GraphMemoryCharge::LaunchScope scope(f.charge, kExec);
    f.pools.Launch(0, 50);
  }
  f.pools.FreeAll(0);
  f.charge.TrimUnused();
  EXPECT_EQ(f.pools.trims, 1);
  EXPECT_EQ(f.quota.Used(0), 0u);
  EXPECT_EQ(f.noted[0], 0u);
  f.charge.OnDestroyed(kExec);
  EXPECT_TRUE(f.charge.Active());  // kOther still has allocation nodes
  f.charge.OnDestroyed(kOther);
  EXPECT_FALSE(f.charge.Active());
}

TEST(GraphMemoryChargeTest, TrimSkipsPoolsThatAreNotCharged) {
  Fixture f(100);
  f.pools.reserved[3] = 70;  // another library's graph memory, not ours
  f.charge.TrimUnused();
  EXPECT_EQ(f.pools.trims, 0);
  EXPECT_EQ(f.quota.Used(3), 0u);
}

}  // namespace
}  // namespace vgpu
