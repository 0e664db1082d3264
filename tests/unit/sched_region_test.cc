// The compute scheduler's decisions, on a private region with an injected
// clock: no processes, no GPU, deterministic.
#include "common/sched_region.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

namespace vgpu {
namespace {

constexpr uint64_t kMs = 1'000'000;

// A pid that named a process which has exited and been waited for.
pid_t DeadPid() {
  pid_t pid = fork();
  if (pid == 0) _exit(0);
  waitpid(pid, nullptr, 0);
  return pid;
}

class SchedRegionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    region_ = SchedRegion::CreatePrivate();
    ASSERT_NE(region_, nullptr);
  }
  // A client in `group`; all clients are this process (alive).
  int Client(const std::string& group, const GroupParams& p) {
    int c = region_->RegisterClient(getpid());
    EXPECT_GE(region_->JoinGroup(0, c, group, p), 0);
    return c;
  }
  SchedGroup& GroupOf(int c) {
    return region_->device(0).groups[region_->client(c).group[0].load()];
  }
  static GroupParams Fixed(uint32_t permille) { return {SchedPolicy::kFixed, permille, 1, false}; }
  static GroupParams Weighted(uint32_t w, bool hp = false) {
    return {SchedPolicy::kWeighted, 1000, w, hp};
  }
  std::unique_ptr<SchedRegion> region_;
  uint64_t now_ = 1000 * kMs;
};

TEST_F(SchedRegionTest, FreeLeaseGoesToTheOnlyWaiter) {
  int a = Client("a", Weighted(1));
  region_->SetDemand(0, a, now_);
  EXPECT_EQ(region_->PickNext(0, -1, now_), a);
  EXPECT_TRUE(region_->TryAcquire(0, a, now_));
  EXPECT_EQ(region_->device(0).holder.load(), a);
}

TEST_F(SchedRegionTest, SameGroupClientsShareOneBucket) {
  int a1 = Client("a", Weighted(1));
  int a2 = Client("a", Weighted(1));
  EXPECT_EQ(region_->client(a1).group[0].load(), region_->client(a2).group[0].load());
}

TEST_F(SchedRegionTest, FixedCapRefillsAtItsShareOfWallTime) {
  int a = Client("a", Fixed(300));
  region_->SetDemand(0, a, now_);
  region_->Refill(0, now_);
  region_->Refill(0, now_ + 10 * kMs);
  EXPECT_NEAR(GroupOf(a).tokens_ns.load(), 3 * kMs, 1000);
}

TEST_F(SchedRegionTest, FixedCapMustYieldWhenItsBucketIsEmptyEvenAlone) {
  int a = Client("a", Fixed(500));
  region_->SetDemand(0, a, now_);
  GroupOf(a).tokens_ns.store(20 * kMs);
  ASSERT_TRUE(region_->TryAcquire(0, a, now_));
  EXPECT_FALSE(region_->ShouldYield(0, a, now_ + kMs));
  region_->Charge(0, region_->client(a).group[0].load(), 25 * kMs, now_ + kMs);
  EXPECT_TRUE(region_->ShouldYield(0, a, now_ + kMs)) << "a cap holds on an idle device";
}

TEST_F(SchedRegionTest, FixedCapNeedsBankedTimeToStartATurn) {
  int a = Client("a", Fixed(300));
  region_->SetDemand(0, a, now_);
  GroupOf(a).tokens_ns.store(static_cast<int64_t>(kMs / 10));
  EXPECT_EQ(region_->PickNext(0, -1, now_), -1) << "tiny turns would cost a handover each";
  GroupOf(a).tokens_ns.store(10 * kMs);
  EXPECT_EQ(region_->PickNext(0, -1, now_), a);
}

TEST_F(SchedRegionTest, WeightedChargesAreConservedAndSplitByWeight) {
  int a = Client("a", Weighted(1));
  int b = Client("b", Weighted(3));
  region_->SetDemand(0, a, now_);
  region_->SetDemand(0, b, now_);
  int gb = region_->client(b).group[0].load();
  region_->Charge(0, gb, 8 * kMs, now_);  // b used 8 ms: a is owed 2, b 6
  EXPECT_NEAR(GroupOf(a).tokens_ns.load(), 2 * kMs, 1000);
  EXPECT_NEAR(GroupOf(b).tokens_ns.load(), -2 * static_cast<int64_t>(kMs), 1000);
  EXPECT_NEAR(GroupOf(a).tokens_ns.load() + GroupOf(b).tokens_ns.load(), 0, 1000);
}

TEST_F(SchedRegionTest, WaiterFarEnoughAheadTakesOverAfterTheMinimumSlice) {
  int a = Client("a", Weighted(1));
  int b = Client("b", Weighted(1));
  region_->SetDemand(0, a, now_);
  ASSERT_TRUE(region_->TryAcquire(0, a, now_));
  region_->ClearDemand(0, a);
  region_->SetDemand(0, b, now_ + 5 * kMs);
  GroupOf(b).tokens_ns.store(20 * kMs);
  EXPECT_FALSE(region_->ShouldYield(0, a, now_ + kMs)) << "minimum slice not over";
  EXPECT_TRUE(region_->ShouldYield(0, a, now_ + 11 * kMs));
  GroupOf(b).tokens_ns.store(5 * kMs);
  EXPECT_FALSE(region_->ShouldYield(0, a, now_ + 11 * kMs))
      << "within the hysteresis, and b has not waited a minimum slice";
}

TEST_F(SchedRegionTest, WaiterOwedAsMuchTakesOverAfterWaitingAMinimumSlice) {
  int a = Client("a", Weighted(1));
  int b = Client("b", Weighted(1));
  region_->SetDemand(0, a, now_);
  ASSERT_TRUE(region_->TryAcquire(0, a, now_));
  region_->ClearDemand(0, a);
  GroupOf(a).tokens_ns.store(3 * kMs);
  region_->SetDemand(0, b, now_ + 5 * kMs);
  GroupOf(b).tokens_ns.store(3 * kMs);
  EXPECT_FALSE(region_->ShouldYield(0, a, now_ + 11 * kMs)) << "b has waited only 6 ms";
  EXPECT_TRUE(region_->ShouldYield(0, a, now_ + 16 * kMs)) << "b waited 11 ms and is owed as much";
  GroupOf(b).tokens_ns.store(2 * kMs);
  EXPECT_FALSE(region_->ShouldYield(0, a, now_ + 16 * kMs)) << "b is owed less: a keeps its turn";
}

TEST_F(SchedRegionTest, ReleaseHandsTheLeaseToTheBestWaiter) {
  int a = Client("a", Weighted(1));
  int b = Client("b", Weighted(1));
  int c = Client("c", Weighted(1));
  region_->SetDemand(0, a, now_);
  ASSERT_TRUE(region_->TryAcquire(0, a, now_));
  region_->ClearDemand(0, a);
  region_->SetDemand(0, b, now_);
  region_->SetDemand(0, c, now_ + 1);
  GroupOf(c).tokens_ns.store(3 * kMs);
  uint32_t gen = region_->device(0).gen.load();
  region_->Release(0, a, now_ + 2);
  EXPECT_EQ(region_->device(0).holder.load(), c);
  EXPECT_NE(region_->device(0).gen.load(), gen) << "waiters are woken";
}

TEST_F(SchedRegionTest, HighPriorityPreemptsAndKeepsOthersOutWhileActive) {
  int t = Client("trainer", Weighted(1));
  int h = Client("online", Weighted(1, /*hp=*/true));
  region_->SetDemand(0, t, now_);
  ASSERT_TRUE(region_->TryAcquire(0, t, now_));
  region_->ClearDemand(0, t);
  region_->SetDemand(0, h, now_ + kMs);
  EXPECT_TRUE(region_->ShouldYield(0, t, now_ + kMs)) << "no minimum slice against high priority";
  region_->Release(0, t, now_ + kMs);
  EXPECT_EQ(region_->device(0).holder.load(), h);
  // h finishes and idles for 5 ms: the trainer still may not run.
  region_->ClearDemand(0, h);
  region_->Release(0, h, now_ + 2 * kMs);
  region_->SetDemand(0, t, now_ + 7 * kMs);
  EXPECT_EQ(region_->PickNext(0, -1, now_ + 7 * kMs), -1);
  // After the idle window the trainer resumes.
  EXPECT_EQ(region_->PickNext(0, -1, now_ + 30 * kMs), t);
}

TEST_F(SchedRegionTest, IdleWeightedGroupReturnsLevelWithTheActiveOnes) {
  int a = Client("a", Weighted(1));
  int b = Client("b", Weighted(1));
  int c = Client("c", Weighted(1));
  region_->SetDemand(0, a, now_);
  GroupOf(a).tokens_ns.store(-40 * static_cast<int64_t>(kMs));
  region_->ClearDemand(0, a);  // a stops wanting the device
  region_->SetDemand(0, b, now_ + 100 * kMs);
  region_->SetDemand(0, c, now_ + 100 * kMs);
  GroupOf(b).tokens_ns.store(-10 * static_cast<int64_t>(kMs));
  GroupOf(c).tokens_ns.store(-30 * static_cast<int64_t>(kMs));
  region_->Refill(0, now_ + 100 * kMs);
  EXPECT_EQ(GroupOf(a).tokens_ns.load(), -10 * static_cast<int64_t>(kMs))
      << "no debt or credit carried over an idle period: level with the most-owed active group";
}

TEST_F(SchedRegionTest, WaitingGroupStaysActiveWithoutRecentDemandTimestamps) {
  // On a loaded host a waiter may not run for longer than the activity window.
  int a = Client("a", Weighted(1));
  int b = Client("b", Weighted(1));
  region_->SetDemand(0, a, now_);
  region_->SetDemand(0, b, now_);
  GroupOf(a).tokens_ns.store(7 * kMs);
  region_->Refill(0, now_ + 500 * kMs);
  EXPECT_EQ(GroupOf(a).tokens_ns.load(), 7 * static_cast<int64_t>(kMs));
  region_->Charge(0, region_->client(b).group[0].load(), 10 * kMs, now_ + 500 * kMs);
  EXPECT_NEAR(GroupOf(a).tokens_ns.load(), 12 * kMs, 1000) << "a waiter is credited";
}


TEST_F(SchedRegionTest, HolderStaysActiveWhileItsAccountantIsStarved) {
  // The holder charged long ago (its accountant got no CPU); a waiter's
  // refill must not re-level it to the waiter's bucket and erase its debt.
  int a = Client("a", Weighted(1));
  int b = Client("b", Weighted(3));
  region_->SetDemand(0, b, now_);
  ASSERT_TRUE(region_->TryAcquire(0, b, now_));
  region_->ClearDemand(0, b);
  region_->Charge(0, region_->client(b).group[0].load(), 0, now_);
  GroupOf(b).tokens_ns.store(-30 * static_cast<int64_t>(kMs));
  region_->SetDemand(0, a, now_ + 100 * kMs);
  GroupOf(a).tokens_ns.store(10 * static_cast<int64_t>(kMs));
  region_->Refill(0, now_ + 100 * kMs);
  EXPECT_EQ(GroupOf(b).tokens_ns.load(), -30 * static_cast<int64_t>(kMs));
  region_->Charge(0, region_->client(b).group[0].load(), 8 * kMs, now_ + 100 * kMs);
  EXPECT_NEAR(GroupOf(a).tokens_ns.load(), 12 * kMs, 1000) << "credited by weight, 1/4";
  EXPECT_NEAR(GroupOf(b).tokens_ns.load(), -32 * static_cast<int64_t>(kMs), 1000);
}
TEST_F(SchedRegionTest, ActiveGroupsAreTheHolderTheWaitersAndTheRecentlyBusyInAFullTable) {
  // Every group slot taken: the one pass that finds the active set must
  // credit exactly the holder's, the waiters' and the recently busy groups.
  std::vector<int> c(kSchedGroups);
  for (int g = 0; g < kSchedGroups; ++g) c[g] = Client("g" + std::to_string(g), Weighted(1));
  region_->SetDemand(0, c[0], now_);
  ASSERT_TRUE(region_->TryAcquire(0, c[0], now_));
  region_->ClearDemand(0, c[0]);       // holder, quiet for a second
  region_->SetDemand(0, c[7], now_);   // waiter since a second ago
  region_->SetDemand(0, c[31], now_);  // a waiter whose slot is being freed
  region_->client(c[31]).pid.store(-getpid());
  const uint64_t t = now_ + 1000 * kMs;
  region_->Charge(0, region_->client(c[20]).group[0].load(), 0, t - kMs);  // busy just now
  region_->Charge(0, region_->client(c[12]).group[0].load(), 32 * kMs, t);
  for (int g = 0; g < kSchedGroups; ++g) {
    int64_t expected = g == 0 || g == 7 || g == 20 ? 8 * static_cast<int64_t>(kMs) : 0;
    if (g == 12) expected = -24 * static_cast<int64_t>(kMs);  // the charged group is a member
    EXPECT_NEAR(GroupOf(c[g]).tokens_ns.load(), expected, 1000) << "group " << g;
  }
  region_->Refill(0, t);
  EXPECT_EQ(GroupOf(c[3]).tokens_ns.load(), 8 * static_cast<int64_t>(kMs))
      << "idle: level with the most-owed active group";
  EXPECT_EQ(GroupOf(c[12]).tokens_ns.load(), -24 * static_cast<int64_t>(kMs)) << "charged: active";
}

TEST_F(SchedRegionTest, RuntimeParameterChangeTakesEffectAtTheNextRefill) {
  int a = Client("a", Fixed(100));
  region_->SetDemand(0, a, now_);
  region_->Refill(0, now_);
  ASSERT_TRUE(region_->SetGroupParams(0, "a", Fixed(600)));
  region_->Refill(0, now_ + 10 * kMs);
  EXPECT_NEAR(GroupOf(a).tokens_ns.load(), 6 * kMs, 1000);
}

TEST_F(SchedRegionTest, AnExecedImageFreesTheSlotAndLeaseOfTheImageBefore) {
  // exec() keeps the pid and start time: the old image's slot looks alive.
  int old_image = Client("a", Weighted(1));
  region_->SetDemand(0, old_image, now_);
  ASSERT_TRUE(region_->TryAcquire(0, old_image, now_));
  region_->ReleasePreviousImages(getpid());
  EXPECT_EQ(region_->client(old_image).pid.load(), 0);
  EXPECT_EQ(region_->device(0).holder.load(), -1) << "its lease is given back";
  int b = Client("b", Weighted(1));
  region_->SetDemand(0, b, now_);
  EXPECT_TRUE(region_->TryAcquire(0, b, now_ + kMs));
}

TEST_F(SchedRegionTest, DeadHolderLosesTheLease) {
  int a = Client("a", Weighted(1));
  int b = Client("b", Weighted(1));
  region_->SetDemand(0, a, now_);
  ASSERT_TRUE(region_->TryAcquire(0, a, now_));
  region_->client(a).start_time.store(1);  // as if the pid had been reused: a is dead
  region_->SetDemand(0, b, now_);
  EXPECT_FALSE(region_->TryAcquire(0, b, now_ + kMs)) << "not before the grace period";
  EXPECT_TRUE(region_->TryAcquire(0, b, now_ + 20 * kMs));
}

TEST_F(SchedRegionTest, ClientWithUnknownStartTimeIsAliveWhileItsProcessExists) {
  // A process that could not read /proc at registration recorded start time
  // 0: existence decides, as in the quota ledger, instead of "dead".
  int live = region_->RegisterClient(getpid());
  region_->client(live).start_time.store(0);
  int gone = region_->RegisterClient(DeadPid());
  ASSERT_EQ(region_->client(gone).start_time.load(), 0u);
  EXPECT_TRUE(region_->ClientAlive(live));
  EXPECT_FALSE(region_->ClientAlive(gone));
  region_->ReapDead();
  EXPECT_EQ(region_->client(live).pid.load(), getpid());
  EXPECT_EQ(region_->client(gone).pid.load(), 0);
}

}  // namespace
}  // namespace vgpu
