// The compute scheduler's decisions, on a private region with an injected
// clock: no processes, no GPU, deterministic.
#include "share/sched_region.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

namespace vgpu {
namespace {

constexpr uint64_t kMs = 1'000'000;

// The client slot RegisterClient gave, -1 if it gave none.
int Slot(const Result<int>& registered) { return registered.ok() ? registered.value() : -1; }

// Runs `body` in a fork()ed child that then exits (and is waited for): the
// clients it registers are those of a process that died.
template <typename Body>
void InProcessThatDies(Body body) {
  pid_t pid = fork();
  if (pid == 0) {
    body();
    _exit(0);
  }
  ASSERT_GT(pid, 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0) << "the dying process's own steps failed";
}

class SchedRegionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    region_ = SchedRegion::CreatePrivate();
    ASSERT_NE(region_, nullptr);
  }
  // A client in `group`; all clients are this process (alive).
  int Client(const std::string& group, const GroupParams& p) {
    int c = Slot(region_->RegisterClient(getpid()));
    EXPECT_GE(region_->JoinGroup(0, c, group, p, now_), 0);
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

// Users who pick the same VGPU_GROUP must not share one bucket on the node's
// region: the second would run on (and pay from) the first one's share.
TEST(SchedTenantGroup, SameGroupNameOfTwoUsersIsTwoGroups) {
  const std::string a = SchedRegion::TenantGroupName("train", 1000);
  const std::string b = SchedRegion::TenantGroupName("train", 1001);
  EXPECT_NE(SchedRegion::GroupKey(a), SchedRegion::GroupKey(b));
  EXPECT_EQ(a, SchedRegion::TenantGroupName("train", 1000)) << "one user's processes: one group";
  EXPECT_EQ(SchedRegion::TenantGroupName("0123abcd", 0), "0123abcd") << "a container's id as is";
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
  uint32_t turn_b = region_->TurnSeq(b), turn_c = region_->TurnSeq(c);
  region_->Release(0, a, now_ + 2);
  EXPECT_EQ(region_->device(0).holder.load(), c);
  EXPECT_NE(region_->device(0).gen.load(), gen) << "a lease change is counted";
  EXPECT_NE(region_->TurnSeq(c), turn_c) << "the new holder is woken";
  EXPECT_EQ(region_->TurnSeq(b), turn_b) << "other waiters sleep on";
  // A lease given up to nobody wakes every waiter: one of them may take it.
  GroupOf(b).tokens_ns.store(-50 * kMs);
  region_->ClearDemand(0, c);
  region_->SetDemand(0, b, now_ + 3);
  SchedGroup& only = GroupOf(b);
  only.policy.store(static_cast<uint32_t>(SchedPolicy::kFixed));  // no tokens: not eligible
  region_->Release(0, c, now_ + 4);
  EXPECT_EQ(region_->device(0).holder.load(), -1);
  EXPECT_NE(region_->TurnSeq(b), turn_b) << "a waiter learns the lease is free";
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

// Issue 18's capacities, and the high-water marks that bound every scan.
TEST_F(SchedRegionTest, HoldsTwoHundredFiftySixGroupsAndOneThousandTwentyFourClients) {
  EXPECT_EQ(region_->ClientsInUse(), 0);
  EXPECT_EQ(region_->GroupsInUse(0), 0);
  for (int g = 0; g < kSchedGroups; ++g) Client("g" + std::to_string(g), Fixed(2));
  EXPECT_EQ(region_->GroupsInUse(0), kSchedGroups);
  EXPECT_EQ(region_->GroupsInUse(1), 0);  // other devices are untouched
  int extra = Slot(region_->RegisterClient(getpid()));
  ASSERT_GE(extra, 0);
  EXPECT_LT(region_->JoinGroup(0, extra, "one-too-many", Fixed(2), now_), 0);
  EXPECT_GE(region_->JoinGroup(0, extra, "g7", Fixed(2), now_), 0);  // an existing group: joins
  while (Slot(region_->RegisterClient(getpid())) >= 0) {
  }
  EXPECT_EQ(region_->ClientsInUse(), kSchedClients);
  // Every group's member is seen: the last group waits and is picked.
  const int last = kSchedGroups - 1;
  region_->device(0).groups[last].tokens_ns.store(5 * kMs);
  region_->SetDemand(0, last, now_);
  EXPECT_EQ(region_->PickNext(0, -1, now_), last);
  EXPECT_LT(SchedRegion::RegionBytes(), 1u << 20) << "the region is mapped by every process";
}

TEST_F(SchedRegionTest, RuntimeParameterChangeTakesEffectAtTheNextRefill) {
  int a = Client("a", Fixed(100));
  region_->SetDemand(0, a, now_);
  region_->Refill(0, now_);
  ASSERT_TRUE(region_->SetGroupParams(0, "a", Fixed(600)));
  region_->Refill(0, now_ + 10 * kMs);
  EXPECT_NEAR(GroupOf(a).tokens_ns.load(), 6 * kMs, 1000);
}

TEST_F(SchedRegionTest, AnExecedImageIsDeadAndItsLeaseIsFreedByTheNextReap) {
  // exec() keeps the pid: only the closed (close-on-exec) lock tells the
  // image before it from the one after. The child holds the lease, execs
  // and lives on: its old slot must read dead.
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  pid_t pid = fork();
  if (pid == 0) {
    int c = Slot(region_->RegisterClient(getpid()));
    region_->JoinGroup(0, c, "a", Weighted(1), now_);
    region_->SetDemand(0, c, now_);
    region_->TryAcquire(0, c, now_);
    if (write(pipe_fds[1], &c, sizeof c) != sizeof c) _exit(1);
    execl("/bin/sleep", "sleep", "5", nullptr);
    _exit(1);
  }
  close(pipe_fds[1]);
  int old_image = -1;
  ASSERT_EQ(read(pipe_fds[0], &old_image, sizeof old_image),
            static_cast<ssize_t>(sizeof old_image));
  close(pipe_fds[0]);
  ASSERT_EQ(region_->device(0).holder.load(), old_image);
  bool dead = false;
  for (int i = 0; i < 5000 && !dead; ++i) {  // until the exec closed the descriptor
    dead = !region_->ClientAlive(old_image);
    if (!dead) usleep(1000);
  }
  EXPECT_TRUE(dead) << "an image before exec() still reads alive";
  EXPECT_EQ(kill(pid, 0), 0) << "the process itself lives on";
  region_->ReapDead();
  EXPECT_EQ(region_->client(old_image).pid.load(), 0);
  EXPECT_EQ(region_->device(0).holder.load(), -1) << "its lease is given back";
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

TEST_F(SchedRegionTest, DeadHolderLosesTheLease) {
  int b = Client("b", Weighted(1));
  int a = -1;
  InProcessThatDies([&] {
    a = Slot(region_->RegisterClient(getpid()));
    region_->JoinGroup(0, a, "a", Weighted(1), now_);
    region_->SetDemand(0, a, now_);
    if (!region_->TryAcquire(0, a, now_)) _exit(1);
  });
  a = region_->device(0).holder.load();
  ASSERT_GE(a, 0);
  ASSERT_NE(a, b);
  region_->SetDemand(0, b, now_);
  EXPECT_FALSE(region_->TryAcquire(0, b, now_ + kMs)) << "not before the grace period";
  EXPECT_TRUE(region_->TryAcquire(0, b, now_ + 20 * kMs));
}

// Liveness is the slot's lock, not the pid: pids repeat across containers
// and get reused, /proc of one pid namespace does not show another's.
TEST_F(SchedRegionTest, AClientIsAliveExactlyWhileItsProcessLives) {
  int live = Slot(region_->RegisterClient(getpid()));
  int exited = -1, killed = -1;
  InProcessThatDies([&] { exited = Slot(region_->RegisterClient(getpid())); });
  exited = live + 1;  // slots are taken in order
  pid_t victim = fork();
  if (victim == 0) {
    Slot(region_->RegisterClient(getpid()));
    pause();
    _exit(0);
  }
  killed = exited + 1;
  while (region_->client(killed).pid.load() <= 0) usleep(1000);
  while (!region_->ClientAlive(killed)) usleep(1000);  // registered, lock taken
  EXPECT_TRUE(region_->ClientAlive(live));
  EXPECT_FALSE(region_->ClientAlive(exited));
  EXPECT_TRUE(region_->ClientAlive(killed));
  kill(victim, SIGKILL);
  waitpid(victim, nullptr, 0);
  EXPECT_FALSE(region_->ClientAlive(killed)) << "SIGKILL at any instruction";
  // A live process of another namespace with the dead ones' pid (pid 1 of
  // every container) is not taken for them, nor they for it.
  region_->client(exited).pid.store(getpid());
  region_->client(live).pid.store(region_->client(killed).pid.load());
  region_->ReapDead();
  EXPECT_NE(region_->client(live).pid.load(), 0) << "a live slot reaped for its pid";
  EXPECT_EQ(region_->client(exited).pid.load(), 0);
  EXPECT_EQ(region_->client(killed).pid.load(), 0);
}

TEST_F(SchedRegionTest, AForkedChildDoesNotKeepItsParentsSlotAlive) {
  // The child shares the parent's open file descriptions, locks included,
  // unless it drops them: a dead holder would then keep its lease for as
  // long as any child of it lives.
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  pid_t parent = fork();
  if (parent == 0) {
    int c = Slot(region_->RegisterClient(getpid()));
    if (write(pipe_fds[1], &c, sizeof c) != sizeof c) _exit(1);
    if (fork() == 0) {
      // fork() has returned here, so the child's pthread_atfork handlers ran.
      int me = getpid();
      if (write(pipe_fds[1], &me, sizeof me) != sizeof me) _exit(1);
      pause();  // outlives its parent
      _exit(0);
    }
    _exit(0);
  }
  close(pipe_fds[1]);
  int msg[2] = {-1, 0};
  ASSERT_EQ(read(pipe_fds[0], &msg[0], sizeof(int)), static_cast<ssize_t>(sizeof(int)));
  ASSERT_EQ(read(pipe_fds[0], &msg[1], sizeof(int)), static_cast<ssize_t>(sizeof(int)));
  close(pipe_fds[0]);
  waitpid(parent, nullptr, 0);
  EXPECT_FALSE(region_->ClientAlive(msg[0])) << "the orphaned child holds its parent's lock";
  EXPECT_EQ(kill(msg[1], 0), 0);
  kill(msg[1], SIGKILL);
}

TEST_F(SchedRegionTest, UnregisterFreesTheSlotAndItsLock) {
  int c = Slot(region_->RegisterClient(getpid()));
  region_->Unregister(c);
  EXPECT_EQ(region_->client(c).pid.load(), 0);
  EXPECT_FALSE(region_->ClientAlive(c));
  EXPECT_EQ(Slot(region_->RegisterClient(getpid())), c) << "the lock was given back with the slot";
  EXPECT_TRUE(region_->ClientAlive(c));
}

// Group slots: a process alone joins "pid-<pid>", so short-lived processes
// would use up the 32 slots of a device if they were never given back.
class SchedGroupSlotTest : public SchedRegionTest {
 protected:
  // Every slot taken by a group whose only member has exited, each with
  // debt, usage and high priority a new group must not inherit.
  void FillWithGroupsOfTheDead() {
    InProcessThatDies([&] {
      for (int g = 0; g < kSchedGroups; ++g) {
        int c = Slot(region_->RegisterClient(getpid()));
        if (region_->JoinGroup(0, c, "pid-" + std::to_string(g), Weighted(1, true), now_) != g) {
          _exit(1);
        }
        region_->SetDemand(0, c, now_);
        region_->Charge(0, g, 50 * kMs, now_);
      }
    });
    ASSERT_EQ(region_->GroupsInUse(0), kSchedGroups);
  }
  int Join(const std::string& name, const GroupParams& p, uint64_t now) {
    return region_->JoinGroup(0, Slot(region_->RegisterClient(getpid())), name, p, now);
  }
  uint64_t Key(int g) { return region_->device(0).groups[g].key.load(); }
  static uint64_t Mark(const std::string& name, uint64_t tag) {
    return kGroupReclaimMark | tag << kGroupHashBits | SchedRegion::GroupKey(name);
  }
  const uint64_t idle_ = SchedTuning{}.group_reclaim_idle_ns;
};

TEST_F(SchedGroupSlotTest, SlotsOfGroupsWhoseMembersExitedAreReclaimedWhenTheTableIsFull) {
  FillWithGroupsOfTheDead();
  int g = Join("new", Fixed(300), now_ + idle_);
  ASSERT_GE(g, 0) << "a full table of dead groups must not leave new processes ungoverned";
  SchedGroup& grp = region_->device(0).groups[g];
  EXPECT_EQ(grp.key.load(), SchedRegion::GroupKey("new"));
  EXPECT_STREQ(grp.name, "new");
  EXPECT_EQ(grp.tokens_ns.load(), 0) << "another group's debt is not inherited";
  EXPECT_EQ(grp.used_ns.load(), 0u);
  EXPECT_EQ(grp.last_demand_ns.load(), 0u);
  EXPECT_EQ(grp.high_priority.load(), 0u);
  EXPECT_EQ(static_cast<SchedPolicy>(grp.policy.load()), SchedPolicy::kFixed);
  EXPECT_EQ(grp.share_permille.load(), 300u);
}

TEST_F(SchedGroupSlotTest, AMemberlessGroupKeepsItsSlotForTheIdleGrace) {
  // A tenant that restarts at once finds its bucket, debt included.
  FillWithGroupsOfTheDead();
  EXPECT_EQ(Join("new", Weighted(1), now_ + idle_ / 2), -1);
  EXPECT_EQ(Key(0), SchedRegion::GroupKey("pid-0"));
}

TEST_F(SchedGroupSlotTest, AGroupWithALiveMemberIsNeverReclaimed) {
  for (int g = 0; g < kSchedGroups; ++g) Client("live-" + std::to_string(g), Weighted(1));
  EXPECT_EQ(Join("new", Weighted(1), now_ + 100 * idle_), -1);
  for (int g = 0; g < kSchedGroups; ++g) {
    EXPECT_EQ(Key(g), SchedRegion::GroupKey("live-" + std::to_string(g))) << "slot " << g;
  }
}

TEST_F(SchedGroupSlotTest, OnlyTheGroupsOfTheDeadAreReclaimed) {
  FillWithGroupsOfTheDead();
  int live = Slot(region_->RegisterClient(getpid()));  // a live member among pid-7's dead ones
  ASSERT_EQ(region_->JoinGroup(0, live, "pid-7", Weighted(1), now_), 7);
  for (int n = 0; n < kSchedGroups - 1; ++n) {
    int g = Join("new-" + std::to_string(n), Weighted(1), now_ + idle_);
    ASSERT_GE(g, 0) << n;
    EXPECT_NE(g, 7);
  }
  EXPECT_EQ(Join("one-too-many", Weighted(1), now_ + idle_), -1);
  EXPECT_EQ(Key(7), SchedRegion::GroupKey("pid-7"));
}

TEST_F(SchedGroupSlotTest, AJoinerTakesItsGroupBackFromAReclaimInProgress) {
  // A reclaimer marks a slot, then looks for members: one that joined after
  // it looked must find the mark and restore the key, or the slot would be
  // freed under it.
  int a = Client("a", Weighted(1));
  int g = region_->client(a).group[0].load();
  region_->device(0).groups[g].key.store(Mark("a", 5));
  EXPECT_EQ(Join("a", Weighted(1), now_), g);
  EXPECT_EQ(Key(g), SchedRegion::GroupKey("a"));
}

TEST_F(SchedGroupSlotTest, SlotsLeftMarkedByAKilledReclaimerAreReclaimed) {
  FillWithGroupsOfTheDead();
  for (int g = 0; g < kSchedGroups; ++g) {
    region_->device(0).groups[g].key.store(Mark("pid-" + std::to_string(g), 9));
  }
  EXPECT_GE(Join("new", Weighted(1), now_ + idle_), 0);
}

TEST_F(SchedGroupSlotTest, RacingJoinersAndReclaimersNeverFreeAGroupWithAMember) {
  // Threads join ever new groups, each at a clock one grace later, so once
  // the table is full every join reclaims the slots of all groups but the
  // members' while others join: a joiner's slot must stay its group's for
  // as long as it is a member. (A join whose clock reading is older than
  // the other threads' stamps finds every group recent and is refused.)
  constexpr int kThreads = 4;
  constexpr int kJoins = 3000;
  std::atomic<uint64_t> clock{now_};
  std::atomic<int> lost{0}, refused{0};
  auto body = [&](int t) {
    int c = Slot(region_->RegisterClient(getpid()));
    for (int i = 0; i < kJoins; ++i) {
      std::string name = std::to_string(t) + "-" + std::to_string(i);
      int g = region_->JoinGroup(0, c, name, Weighted(1), clock.fetch_add(idle_));
      if (g < 0) {
        refused.fetch_add(1);
        continue;
      }
      for (int k = 0; k < 50; ++k) {
        if ((Key(g) & kGroupHashMask) != SchedRegion::GroupKey(name)) {
          lost.fetch_add(1);
          break;
        }
      }
      region_->client(c).group[0].store(-1);  // leaves
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(body, t);
  for (auto& th : threads) th.join();
  EXPECT_EQ(lost.load(), 0);
  EXPECT_LT(refused.load(), kThreads * kJoins / 20);
}

}  // namespace
}  // namespace vgpu
