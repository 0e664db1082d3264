// The shared device-memory ledger (quota/quota_ledger.h): exact limits,
// sharing between processes, never a byte of overshoot under a race of
// processes x threads, reclaiming SIGKILLed members, and refusing damaged or
// foreign regions.
#include "quota/quota_ledger.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/process_info.h"

namespace vgpu {
namespace {

using Clock = std::chrono::steady_clock;
constexpr uint64_t kMiB = 1024 * 1024;

// A group name no other test (or concurrent ctest process) uses; the region
// is removed when the test ends, whatever happens.
class ScopedGroup {
 public:
  explicit ScopedGroup(const char* tag) {
    static int counter = 0;
    name_ = std::string("qltest-") + tag + "-" + std::to_string(getpid()) + "-" +
            std::to_string(counter++);
    shm_unlink(QuotaLedger::ShmName(name_).c_str());
  }
  ~ScopedGroup() { shm_unlink(QuotaLedger::ShmName(name_).c_str()); }
  const std::string& name() const { return name_; }
  std::string path() const { return "/dev/shm" + QuotaLedger::ShmName(name_); }

 private:
  std::string name_;
};

std::unique_ptr<QuotaLedger> MustOpen(const std::string& group, std::vector<uint64_t> limits) {
  auto opened = QuotaLedger::Open(group, limits);
  EXPECT_TRUE(opened.ok()) << opened.status().message;
  EXPECT_NE(opened.value(), nullptr);
  return std::move(opened.value());
}

// The raw region, to damage it or to fake slots as a crashed process leaves them.
class RawRegion {
 public:
  explicit RawRegion(const std::string& group) {
    fd_ = shm_open(QuotaLedger::ShmName(group).c_str(), O_RDWR, 0);
    if (fd_ < 0) return;
    void* p = mmap(nullptr, sizeof(LedgerRegion), PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    if (p != MAP_FAILED) region_ = static_cast<LedgerRegion*>(p);
  }
  ~RawRegion() {
    if (region_ != nullptr) munmap(region_, sizeof(LedgerRegion));
    if (fd_ >= 0) close(fd_);
  }
  LedgerRegion* operator->() { return region_; }
  LedgerRegion* get() { return region_; }
  int fd() const { return fd_; }

  // Installs a slot as some process left it; also raises the high-water mark
  // (reserved0) so that sums and reaps look at it.
  LedgerSlot* Fake(int index, int32_t pid, uint64_t start, uint64_t used0) {
    LedgerSlot& s = region_->slots[index];
    s.start_time.store(start);
    s.used[0].store(used0);
    s.pid.store(pid);
    std::atomic_ref<uint32_t> hw(region_->reserved0);
    if (hw.load() < static_cast<uint32_t>(index) + 1) hw.store(static_cast<uint32_t>(index) + 1);
    return &s;
  }

 private:
  int fd_ = -1;
  LedgerRegion* region_ = nullptr;
};

template <class F>
pid_t Spawn(F body) {
  pid_t pid = fork();
  if (pid == 0) _exit(body());
  return pid;
}

int WaitExit(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// A pid that named a process which has exited and been waited for.
pid_t DeadPid() {
  pid_t pid = Spawn([] { return 0; });
  WaitExit(pid);
  return pid;
}

TEST(QuotaLedgerTest, LimitIsExactToTheByte) {
  ScopedGroup g("exact");
  auto ledger = MustOpen(g.name(), {1000});
  ASSERT_NE(ledger, nullptr);
  EXPECT_EQ(ledger->Limit(0), 1000u);
  EXPECT_EQ(ledger->Limit(1), kUnlimited);  // devices without a limit
  EXPECT_TRUE(ledger->TryReserve(0, 400));
  EXPECT_TRUE(ledger->TryReserve(0, 600));
  EXPECT_FALSE(ledger->TryReserve(0, 1));
  EXPECT_EQ(ledger->Used(0), 1000u);
  EXPECT_EQ(ledger->SelfUsed(0), 1000u);
  EXPECT_FALSE(ledger->TryReserve(0, 1001));
  EXPECT_FALSE(ledger->TryReserve(0, UINT64_MAX));
  EXPECT_TRUE(ledger->TryReserve(0, 0));
  EXPECT_EQ(ledger->Used(0), 1000u);
}

// Runtime changes (vgpuctl set): a limit below the group's usage is refused
// and the old one stays; anything else takes effect for the next reservation.
TEST(QuotaLedgerTest, TrySetLimitRefusesToGoBelowUsage) {
  ScopedGroup g("setlimit");
  auto ledger = MustOpen(g.name(), {1000});
  auto other = MustOpen(g.name(), {});  // a second member of the group
  ASSERT_NE(ledger, nullptr);
  ASSERT_NE(other, nullptr);
  ASSERT_TRUE(ledger->TryReserve(0, 300));
  uint64_t used = 0;
  EXPECT_FALSE(ledger->TrySetLimit(0, 299, &used));
  EXPECT_EQ(used, 300u) << "the usage the refusal saw";
  EXPECT_EQ(ledger->Limit(0), 1000u) << "a refused change leaves the old limit";
  EXPECT_TRUE(other->TrySetLimit(0, 300, &used)) << "down to exactly the usage";
  EXPECT_EQ(ledger->Limit(0), 300u) << "the limit is the group's";
  EXPECT_FALSE(ledger->TryReserve(0, 1));
  EXPECT_TRUE(ledger->TrySetLimit(0, 500, &used));
  EXPECT_TRUE(other->TryReserve(0, 200));
  EXPECT_FALSE(other->TryReserve(0, 1));
  EXPECT_TRUE(ledger->TrySetLimit(0, kUnlimited, &used));
  EXPECT_TRUE(ledger->TryReserve(0, 1ull << 40));
  // From unlimited down: the bytes taken while unlimited count.
  EXPECT_FALSE(other->TrySetLimit(0, 1ull << 40, &used));
  EXPECT_EQ(used, 500u + (1ull << 40));
  EXPECT_EQ(ledger->Limit(0), kUnlimited);
  ledger->Release(0, 1ull << 40);
  EXPECT_TRUE(other->TrySetLimit(0, 600, &used));
  EXPECT_TRUE(ledger->TryReserve(0, 100));
  EXPECT_FALSE(ledger->TryReserve(0, 1));
  EXPECT_FALSE(ledger->TrySetLimit(kLedgerDevices, 1, &used));
}

TEST(QuotaLedgerTest, ReleaseReturnsBytes) {
  ScopedGroup g("release");
  auto ledger = MustOpen(g.name(), {1000});
  ASSERT_NE(ledger, nullptr);
  ASSERT_TRUE(ledger->TryReserve(0, 1000));
  ledger->Release(0, 300);
  EXPECT_EQ(ledger->Used(0), 700u);
  EXPECT_TRUE(ledger->TryReserve(0, 300));
  ledger->Release(0, 1000);
  EXPECT_EQ(ledger->Used(0), 0u);
  // Releasing more than was reserved (a caller bug) must not wrap the count.
  ledger->Release(0, 5);
  EXPECT_EQ(ledger->Used(0), 0u);
  EXPECT_TRUE(ledger->TryReserve(0, 1000));
}

TEST(QuotaLedgerTest, UnlimitedDeviceStillCounts) {
  ScopedGroup g("unlimited");
  auto ledger = MustOpen(g.name(), {});
  ASSERT_NE(ledger, nullptr);
  EXPECT_TRUE(ledger->TryReserve(3, 1ull << 50));
  EXPECT_EQ(ledger->Used(3), 1ull << 50);
  EXPECT_FALSE(ledger->TryReserve(3, UINT64_MAX));  // would wrap the counter
  EXPECT_EQ(ledger->Used(3), 1ull << 50);
}

TEST(QuotaLedgerTest, InvalidDevicesAreRefused) {
  auto ledger = MustOpen("", {100});
  ASSERT_NE(ledger, nullptr);
  EXPECT_FALSE(ledger->TryReserve(-1, 1));
  EXPECT_FALSE(ledger->TryReserve(kLedgerDevices, 1));
  EXPECT_EQ(ledger->Limit(kLedgerDevices), 0u);
  EXPECT_EQ(ledger->Used(-1), 0u);
  ledger->Release(kLedgerDevices, 1);  // no effect, no crash
}

TEST(QuotaLedgerTest, TwoOpensOfOneGroupShareUsage) {
  ScopedGroup g("share");
  auto a = MustOpen(g.name(), {1000});
  auto b = MustOpen(g.name(), {1000});
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  ASSERT_TRUE(a->TryReserve(0, 700));
  EXPECT_EQ(b->Used(0), 700u);
  EXPECT_EQ(b->SelfUsed(0), 0u);
  EXPECT_FALSE(b->TryReserve(0, 301));
  EXPECT_TRUE(b->TryReserve(0, 300));
  EXPECT_EQ(a->Used(0), 1000u);
  a->Release(0, 700);
  EXPECT_EQ(b->Used(0), 300u);
}

TEST(QuotaLedgerTest, SharedAcrossProcesses) {
  ScopedGroup g("procs");
  auto parent = MustOpen(g.name(), {1000});
  ASSERT_NE(parent, nullptr);
  ASSERT_TRUE(parent->TryReserve(0, 600));
  pid_t child = Spawn([&] {
    auto ledger = std::move(QuotaLedger::Open(g.name(), {1000}).value());
    if (ledger == nullptr) return 10;
    if (ledger->Used(0) != 600) return 11;
    if (ledger->TryReserve(0, 401)) return 12;
    if (!ledger->TryReserve(0, 400)) return 13;
    return 0;  // exits holding 400
  });
  ASSERT_EQ(WaitExit(child), 0);
  EXPECT_EQ(parent->Used(0), 1000u);
  EXPECT_EQ(parent->ReapDead(), 400u);
  EXPECT_EQ(parent->Used(0), 600u);
}

TEST(QuotaLedgerTest, StricterLimitWinsAndIsNeverRaised) {
  ScopedGroup g("stricter");
  auto a = MustOpen(g.name(), {1000, 1000});
  ASSERT_NE(a, nullptr);
  const uint64_t gen = RawRegion(g.name())->generation.load();
  auto b = MustOpen(g.name(), {500});
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(a->Limit(0), 500u);
  EXPECT_EQ(b->Limit(0), 500u);
  EXPECT_EQ(b->Limit(1), 1000u);  // not named by b: unchanged
  EXPECT_GT(RawRegion(g.name())->generation.load(), gen);
  auto c = MustOpen(g.name(), {2000, kUnlimited});
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->Limit(0), 500u);
  EXPECT_EQ(c->Limit(1), 1000u);
  EXPECT_FALSE(c->TryReserve(0, 501));
}

TEST(QuotaLedgerTest, SetLimitChangesTheGroupLimit) {
  ScopedGroup g("setlimit");
  auto a = MustOpen(g.name(), {1000});
  auto b = MustOpen(g.name(), {1000});
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  const uint64_t gen = RawRegion(g.name())->generation.load();
  a->SetLimit(0, 200);
  EXPECT_EQ(b->Limit(0), 200u);
  EXPECT_GT(RawRegion(g.name())->generation.load(), gen);
  EXPECT_FALSE(b->TryReserve(0, 201));
  EXPECT_TRUE(b->TryReserve(0, 200));
  a->SetLimit(0, 5000);  // the daemon may raise it
  EXPECT_TRUE(a->TryReserve(0, 4800));
  EXPECT_FALSE(a->TryReserve(0, 1));
}

TEST(QuotaLedgerTest, PrivateLedgerIsSharedWithForkedChildrenOnly) {
  auto ledger = MustOpen("", {1000});
  auto other = MustOpen("", {1000});
  ASSERT_NE(ledger, nullptr);
  ASSERT_NE(other, nullptr);
  ASSERT_TRUE(ledger->TryReserve(0, 600));
  EXPECT_EQ(other->Used(0), 0u);  // another private ledger is another quota
  pid_t child = Spawn([&] {
    ledger->OnForkChild();
    if (ledger->SelfUsed(0) != 0) return 10;  // not the parent's slot
    if (ledger->Used(0) != 600) return 11;
    if (ledger->TryReserve(0, 401)) return 12;
    if (!ledger->TryReserve(0, 300)) return 13;
    return ledger->SelfUsed(0) == 300 ? 0 : 14;
  });
  ASSERT_EQ(WaitExit(child), 0);
  EXPECT_EQ(ledger->SelfUsed(0), 600u);
  EXPECT_EQ(ledger->Used(0), 900u);
  EXPECT_EQ(ledger->ReapDead(), 300u);
  EXPECT_EQ(ledger->Used(0), 600u);
}

TEST(QuotaLedgerTest, ClosingAnEmptyHandleFreesItsSlot) {
  ScopedGroup g("close");
  auto keep = MustOpen(g.name(), {kUnlimited});
  ASSERT_NE(keep, nullptr);
  {
    auto a = MustOpen(g.name(), {});
    ASSERT_TRUE(a->TryReserve(0, 10));
    a->Release(0, 10);
  }
  {
    auto b = MustOpen(g.name(), {});
    ASSERT_TRUE(b->TryReserve(0, 10));  // closed holding 10: stays counted
  }
  RawRegion raw(g.name());
  int live = 0;
  for (auto& s : raw->slots) live += s.pid.load() != 0;
  EXPECT_EQ(live, 1);
  EXPECT_EQ(keep->Used(0), 10u);
}

TEST(QuotaLedgerTest, FullSlotTableFailsClosed) {
  ScopedGroup g("full");
  std::vector<std::unique_ptr<QuotaLedger>> handles;
  for (int i = 0; i < kLedgerSlots; ++i) {
    handles.push_back(MustOpen(g.name(), {1000}));
    ASSERT_NE(handles.back(), nullptr);
    ASSERT_TRUE(handles.back()->TryReserve(0, 1)) << i;
    handles.back()->Release(0, 1);
  }
  auto extra = MustOpen(g.name(), {1000});
  ASSERT_NE(extra, nullptr);
  EXPECT_FALSE(extra->TryReserve(0, 1));  // no slot: refused, not unaccounted
  handles.pop_back();                     // empty: its slot comes back
  EXPECT_TRUE(extra->TryReserve(0, 1));
}

// --- Races -------------------------------------------------------------------

// Shared by the parent and its forked reservers (anonymous shared memory).
struct RaceStats {
  std::atomic<uint64_t> committed;      // raised after success, lowered before release
  std::atomic<uint64_t> max_committed;  // the most ever held at once
  std::atomic<uint64_t> overshoots;     // times committed went over the limit
  std::atomic<uint64_t> successes;
  std::atomic<uint64_t> refusals;
  std::atomic<uint64_t> final_held;  // what the reservers still hold at the end
  std::atomic<int> go;
  std::atomic<int> done;  // reservers finished, still alive and holding
  std::atomic<int> may_exit;
};

void RaiseMax(std::atomic<uint64_t>& max, uint64_t v) {
  uint64_t cur = max.load();
  while (v > cur && !max.compare_exchange_weak(cur, v)) {
  }
}

// Reserves random sizes for `seconds`, holding up to a few at a time. The
// checker counter is raised only after a reservation succeeded and lowered
// before it is released, so it never exceeds what the ledger has committed:
// committed > limit would be a real overshoot.
void Reserver(QuotaLedger* ledger, RaceStats* stats, uint64_t limit, uint64_t seed,
              Clock::time_point deadline) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<uint64_t> size(1, limit / 16);
  std::vector<uint64_t> held;
  uint64_t successes = 0, refusals = 0;
  while (Clock::now() < deadline) {
    if (held.size() < 4 && (held.empty() || rng() % 3 != 0)) {
      uint64_t bytes = size(rng);
      if (ledger->TryReserve(0, bytes)) {
        uint64_t now = stats->committed.fetch_add(bytes) + bytes;
        if (now > limit) stats->overshoots.fetch_add(1);
        RaiseMax(stats->max_committed, now);
        held.push_back(bytes);
        ++successes;
      } else {
        ++refusals;
      }
    } else {
      size_t i = rng() % held.size();
      stats->committed.fetch_sub(held[i]);
      ledger->Release(0, held[i]);
      held[i] = held.back();
      held.pop_back();
    }
  }
  uint64_t total = 0;
  for (uint64_t b : held) total += b;
  stats->final_held.fetch_add(total);
  stats->successes.fetch_add(successes);
  stats->refusals.fetch_add(refusals);
}

TEST(QuotaLedgerTest, RaceOfProcessesAndThreadsNeverOvershoots) {
  constexpr int kProcesses = 8;
  constexpr int kThreads = 4;
  constexpr uint64_t kLimit = 64 * kMiB + 7;
  const auto kRun = std::chrono::milliseconds(1000);
  ScopedGroup g("race");
  auto parent = MustOpen(g.name(), {kLimit});
  ASSERT_NE(parent, nullptr);
  void* mem =
      mmap(nullptr, sizeof(RaceStats), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  auto* stats = new (mem) RaceStats{};

  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    children.push_back(Spawn([&, p] {
      auto ledger = std::move(QuotaLedger::Open(g.name(), {kLimit}).value());
      if (ledger == nullptr) return 10;
      while (stats->go.load() == 0) sched_yield();
      const auto deadline = Clock::now() + kRun;
      std::vector<std::thread> threads;
      for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back(Reserver, ledger.get(), stats, kLimit, p * 100 + t, deadline);
      }
      for (auto& t : threads) t.join();
      // Stay alive until every reserver is done: an exited member's holdings
      // are rightly reaped, and the others could then take them.
      stats->done.fetch_add(1);
      while (stats->may_exit.load() == 0) sched_yield();
      return 0;  // exits holding what it held: the parent checks and reaps it
    }));
  }
  // The watcher samples the group's usage. Used() includes reservations in
  // flight (added, not yet checked), so it may briefly read above the limit;
  // it is reported, the committed counter above is what is asserted.
  std::atomic<bool> stop{false};
  uint64_t max_used = 0, samples = 0;
  std::thread watcher([&] {
    while (!stop.load()) {
      uint64_t used = parent->Used(0);
      max_used = std::max(max_used, used);
      ++samples;
      RaiseMax(stats->max_committed, stats->committed.load());
    }
  });
  stats->go.store(1);
  while (stats->done.load() < kProcesses) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  stop.store(true);
  watcher.join();
  const uint64_t used_at_end = parent->Used(0);
  stats->may_exit.store(1);
  for (pid_t c : children) EXPECT_EQ(WaitExit(c), 0);

  std::printf(
      "race: %d processes x %d threads, %llu reservations, %llu refusals, "
      "max committed %llu of %llu, max Used() sampled %llu (%llu samples), "
      "overshoots %llu\n",
      kProcesses, kThreads, static_cast<unsigned long long>(stats->successes.load()),
      static_cast<unsigned long long>(stats->refusals.load()),
      static_cast<unsigned long long>(stats->max_committed.load()),
      static_cast<unsigned long long>(kLimit), static_cast<unsigned long long>(max_used),
      static_cast<unsigned long long>(samples),
      static_cast<unsigned long long>(stats->overshoots.load()));
  EXPECT_EQ(stats->overshoots.load(), 0u);
  EXPECT_LE(stats->max_committed.load(), kLimit);
  EXPECT_GT(stats->successes.load(), 1000u);
  EXPECT_GT(stats->refusals.load(), 0u);  // the quota really was contended
  // The dead reservers' holdings are still counted, exactly, until reaped.
  EXPECT_LE(stats->final_held.load(), kLimit);
  EXPECT_EQ(used_at_end, stats->final_held.load());
  EXPECT_EQ(parent->Used(0), stats->final_held.load());
  EXPECT_EQ(parent->ReapDead(), stats->final_held.load());
  EXPECT_EQ(parent->Used(0), 0u);
  munmap(mem, sizeof(RaceStats));
}

// A demand that fits must not be refused because a request that does not fit
// is being added and backed out concurrently. B holds 40 of 100 for good, A
// cycles 60 (always fits beside B), C keeps asking for 61 (never fits). C is
// slow to ask again (each refusal reaps), so a fourth member D replays just
// the in-flight part of such requests: add 61, back it out, in a tight loop.
TEST(QuotaLedgerTest, FittingDemandIsNotRefusedUnderContention) {
  ScopedGroup g("spurious");
  auto a = MustOpen(g.name(), {100});
  auto b = MustOpen(g.name(), {100});
  auto c = MustOpen(g.name(), {100});
  ASSERT_TRUE(b->TryReserve(0, 40));
  RawRegion raw(g.name());
  ASSERT_NE(raw.get(), nullptr);
  LedgerSlot* d = raw.Fake(kLedgerSlots - 1, getpid(), ProcessStartTime(getpid()), 0);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> c_successes{0}, c_attempts{0}, d_cycles{0};
  std::thread spoiler([&] {
    while (!stop.load()) {
      c_attempts.fetch_add(1);
      if (c->TryReserve(0, 61)) {
        c_successes.fetch_add(1);
        c->Release(0, 61);
      }
    }
  });
  std::thread in_flight([&] {
    while (!stop.load()) {
      d->used[0].fetch_add(61);
      d->used[0].fetch_sub(61);
      d_cycles.fetch_add(1);
      for (int i = 0; i < 64; ++i) (void)d_cycles.load();  // the rest of a request
    }
  });
  while (c_attempts.load() == 0 || d_cycles.load() == 0) sched_yield();
  uint64_t a_refusals = 0, rounds = 0;
  // A refused request is slow (it reaps, then re-checks), so run until C has
  // made enough of them rather than for a fixed time.
  const auto deadline = Clock::now() + std::chrono::seconds(3);
  for (; c_attempts.load() < 1000 && Clock::now() < deadline; ++rounds) {
    if (a->TryReserve(0, 60)) {
      a->Release(0, 60);
    } else {
      ++a_refusals;
    }
  }
  stop.store(true);
  spoiler.join();
  in_flight.join();
  std::printf(
      "contention: %llu rounds against %llu refused requests and %llu in-flight "
      "cycles, %llu spurious refusals of a fitting demand\n",
      static_cast<unsigned long long>(rounds), static_cast<unsigned long long>(c_attempts.load()),
      static_cast<unsigned long long>(d_cycles.load()),
      static_cast<unsigned long long>(a_refusals));
  EXPECT_EQ(c_successes.load(), 0u);
  EXPECT_GT(c_attempts.load(), 100u);
  // Left: refusals while an in-flight add is preempted for longer than the
  // retries wait (~0.3 ms); about 1e-4 of rounds on an oversubscribed box.
  EXPECT_LE(a_refusals * 100, rounds);
}

// --- Dead members ----------------------------------------------------------------

// Reclaimed as soon as the kernel reports the member dead, without waiting
// for its parent to reap it: how long the kernel takes is not asserted.
TEST(QuotaLedgerTest, SigkilledMemberIsReclaimedOnceItIsAZombie) {
  constexpr uint64_t kLimit = 100 * kMiB;
  ScopedGroup g("sigkill");
  auto parent = MustOpen(g.name(), {kLimit});
  ASSERT_NE(parent, nullptr);
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t child = Spawn([&] {
    auto ledger = std::move(QuotaLedger::Open(g.name(), {kLimit}).value());
    if (ledger == nullptr || !ledger->TryReserve(0, 50 * kMiB)) return 10;
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&] {
        for (;;) {  // killed somewhere in here
          if (ledger->TryReserve(0, kMiB)) ledger->Release(0, kMiB);
        }
      });
    }
    char c = 1;
    if (write(ready[1], &c, 1) != 1) return 11;
    for (auto& t : threads) t.join();
    return 0;
  });
  char c;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(parent->TryReserve(0, kLimit));
  ASSERT_EQ(kill(child, SIGKILL), 0);
  // Not waited for yet: the child becomes a zombie, which holds no device
  // memory. The deadline only stops a hang.
  const auto start = Clock::now();
  while (ProcessStartTime(child) != 0 && Clock::now() - start < std::chrono::seconds(60)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(ProcessStartTime(child), 0u) << "the killed child never became a zombie";
  EXPECT_TRUE(parent->TryReserve(0, kLimit)) << "a refusal reaps the dead, then it fits";
  EXPECT_EQ(parent->Used(0), kLimit);
  EXPECT_EQ(WaitExit(child), 128 + SIGKILL);
  close(ready[0]);
  close(ready[1]);
}

TEST(QuotaLedgerTest, SlotLeftMidClaimByADeadProcessIsReclaimed) {
  ScopedGroup g("midclaim");
  auto ledger = MustOpen(g.name(), {1000});
  ASSERT_NE(ledger, nullptr);
  RawRegion raw(g.name());
  ASSERT_NE(raw.get(), nullptr);
  LedgerSlot* dead = raw.Fake(5, -DeadPid(), 0, 123);
  LedgerSlot* busy = raw.Fake(6, -getpid(), 0, 7);  // a live process at work
  EXPECT_EQ(ledger->Used(0), 130u);
  EXPECT_EQ(ledger->ReapDead(), 123u);
  EXPECT_EQ(dead->pid.load(), 0);
  EXPECT_EQ(busy->pid.load(), -getpid());
  EXPECT_EQ(ledger->Used(0), 7u);
}

TEST(QuotaLedgerTest, ReusedPidIsReapedByStartTime) {
  ScopedGroup g("pidreuse");
  auto ledger = MustOpen(g.name(), {1000});
  ASSERT_NE(ledger, nullptr);
  RawRegion raw(g.name());
  ASSERT_NE(raw.get(), nullptr);
  const uint64_t my_start = ProcessStartTime(getpid());
  ASSERT_NE(my_start, 0u);
  // Our pid, but another start time: a dead process whose pid we now have.
  LedgerSlot* reused = raw.Fake(3, getpid(), my_start + 1, 200);
  LedgerSlot* alive = raw.Fake(4, getpid(), my_start, 50);
  LedgerSlot* gone = raw.Fake(7, DeadPid(), my_start, 25);
  EXPECT_EQ(ledger->Used(0), 275u);
  EXPECT_EQ(ledger->ReapDead(), 225u);
  EXPECT_EQ(reused->pid.load(), 0);
  EXPECT_EQ(gone->pid.load(), 0);
  EXPECT_EQ(alive->pid.load(), getpid());
  EXPECT_EQ(ledger->Used(0), 50u);
  // A refused reservation reaps too.
  raw.Fake(3, getpid(), my_start + 1, 900);
  EXPECT_TRUE(ledger->TryReserve(0, 950));
}

// --- Damaged and foreign regions -----------------------------------------------

void ExpectOpenFails(const ScopedGroup& g, const char* why) {
  auto opened = QuotaLedger::Open(g.name(), {1000});
  EXPECT_FALSE(opened.ok());
  EXPECT_EQ(opened.value(), nullptr);
  const std::string& error = opened.status().message;
  EXPECT_NE(error.find(g.path()), std::string::npos) << error;
  EXPECT_NE(error.find(why), std::string::npos) << error;
  EXPECT_EQ(error.find('\n'), std::string::npos) << error;
}

TEST(QuotaLedgerTest, DamagedRegionIsRefused) {
  ScopedGroup g("damaged");
  ASSERT_NE(MustOpen(g.name(), {1000}), nullptr);
  {
    RawRegion raw(g.name());
    raw->magic = 0x6567617262616721ull;
  }
  ExpectOpenFails(g, "magic");
  {
    RawRegion raw(g.name());
    raw->magic = kLedgerMagic;
    raw->version = kLedgerVersion + 1;
  }
  ExpectOpenFails(g, "version");
  {
    RawRegion raw(g.name());
    raw->version = kLedgerVersion;
    raw->region_bytes = 12;
  }
  ExpectOpenFails(g, "size");
}

TEST(QuotaLedgerTest, TruncatedRegionIsRefused) {
  ScopedGroup g("truncated");
  ASSERT_NE(MustOpen(g.name(), {1000}), nullptr);
  {
    RawRegion raw(g.name());
    ASSERT_EQ(ftruncate(raw.fd(), 4096), 0);
  }
  ExpectOpenFails(g, "size");
  {
    RawRegion raw(g.name());
    ASSERT_EQ(ftruncate(raw.fd(), 16), 0);
  }
  ExpectOpenFails(g, "truncated");
}

// The creator died right after shm_open (empty file) or before marking the
// region ready: openers wait a bounded time, then fail closed.
TEST(QuotaLedgerTest, NeverInitializedRegionTimesOut) {
  ScopedGroup g("stillborn");
  int fd = shm_open(QuotaLedger::ShmName(g.name()).c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  ASSERT_GE(fd, 0);
  auto start = Clock::now();
  ExpectOpenFails(g, "truncated");
  ASSERT_EQ(ftruncate(fd, sizeof(LedgerRegion)), 0);
  ExpectOpenFails(g, "never initialized");
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(15));
  close(fd);
}

TEST(QuotaLedgerTest, RegionOpenToOthersIsRefused) {
  ScopedGroup g("mode");
  ASSERT_NE(MustOpen(g.name(), {1000}), nullptr);
  RawRegion raw(g.name());
  ASSERT_EQ(fchmod(raw.fd(), 0666), 0);
  ExpectOpenFails(g, "mode 666");
}

TEST(QuotaLedgerTest, RegionOwnedByAnotherUserIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give the region to another uid";
  ScopedGroup g("foreign");
  ASSERT_NE(MustOpen(g.name(), {1000}), nullptr);
  RawRegion raw(g.name());
  ASSERT_EQ(fchown(raw.fd(), 65534, 65534), 0);
  ExpectOpenFails(g, "owned by uid 65534");
}

TEST(QuotaLedgerTest, InvalidGroupNamesAreRefused) {
  for (const std::string& bad : {std::string("a/b"), std::string("../x"), std::string("sp ace"),
                                 std::string("t\n"), std::string(101, 'a')}) {
    auto opened = QuotaLedger::Open(bad, {1000});
    EXPECT_FALSE(opened.ok()) << bad;
    EXPECT_EQ(opened.status().code, ErrorCode::kInval) << bad;
    EXPECT_NE(opened.status().message.find("invalid group"), std::string::npos)
        << opened.status().message;
  }
  std::string longest = "qltest-len100-" + std::to_string(getpid()) + "-";
  longest.resize(100, 'x');
  auto opened = QuotaLedger::Open(longest, {1000});
  EXPECT_TRUE(opened.ok()) << opened.status().message;
  shm_unlink(QuotaLedger::ShmName(longest).c_str());
  opened = QuotaLedger::Open("", std::vector<uint64_t>(kLedgerDevices + 1, 1));
  EXPECT_EQ(opened.status().code, ErrorCode::kInval);
  EXPECT_NE(opened.status().message.find("devices"), std::string::npos) << opened.status().message;
}

}  // namespace
}  // namespace vgpu

namespace vgpu {
namespace {

// cuMemGetInfo and NVML show this view: free is what the quota leaves, but
// never more than the device has free when other tenants hold the rest.
TEST(QuotaMemoryViewTest, FreeIsTheLesserOfQuotaAndDevice) {
  constexpr uint64_t kMiB = 1ull << 20, kGiB = 1ull << 30;
  // Another process holds 15 of 16 GiB; the job has a 2 GiB quota, 100 MiB used.
  MemoryView v = QuotaMemoryView(2 * kGiB, 100 * kMiB, 16 * kGiB, 1 * kGiB - 100 * kMiB);
  EXPECT_EQ(v.total, 2 * kGiB);
  EXPECT_EQ(v.used, 100 * kMiB);
  EXPECT_EQ(v.free, 1 * kGiB - 100 * kMiB);
  // Plenty free on the device: the quota decides.
  v = QuotaMemoryView(2 * kGiB, 100 * kMiB, 16 * kGiB, 15 * kGiB);
  EXPECT_EQ(v.free, 2 * kGiB - 100 * kMiB);
  // Over the quota (a lowered limit) and a quota above the device: no wrap.
  v = QuotaMemoryView(kGiB, 2 * kGiB, 16 * kGiB, 8 * kGiB);
  EXPECT_EQ(v.free, 0u);
  v = QuotaMemoryView(32 * kGiB, 0, 16 * kGiB, 16 * kGiB);
  EXPECT_EQ(v.total, 16 * kGiB);
  EXPECT_EQ(v.free, 16 * kGiB);
}

}  // namespace
}  // namespace vgpu

namespace vgpu {
namespace {

// A scripted interleaving instead of a race that may or may not happen: a
// second reservation runs exactly between the two halves of the first one's
// step. Add-then-sum makes the later of the two see both and back out; a
// check-then-add regression lets both pass the check and overshoot, and fails
// here on every run.
struct Interleaving {
  QuotaLedger* ledger = nullptr;
  uint64_t competing_bytes = 0;
  int hook_calls = 0;
  bool nested = false;
  bool competing_ok = false;
};
Interleaving g_interleaving;

void RunCompetingReservation(int device, uint64_t /*bytes*/) {
  Interleaving& s = g_interleaving;
  ++s.hook_calls;
  if (s.nested) return;
  s.nested = true;
  s.competing_ok = s.ledger->TryReserve(device, s.competing_bytes);
  s.nested = false;
}

TEST(QuotaLedgerInterleavingTest, ReservationInsideAnotherNeverOvershoots) {
  ScopedGroup group("interleave");
  auto ledger = MustOpen(group.name(), {64 * kMiB});
  ASSERT_NE(ledger, nullptr);
  for (uint64_t competing : {40 * kMiB, 24 * kMiB, 25 * kMiB}) {
    g_interleaving = Interleaving{ledger.get(), competing};
    QuotaLedger::SetStepHookForTest(RunCompetingReservation);
    bool first_ok = ledger->TryReserve(0, 40 * kMiB);
    QuotaLedger::SetStepHookForTest(nullptr);
    const Interleaving& s = g_interleaving;
    EXPECT_GE(s.hook_calls, 1) << "the step hook is never reached";
    uint64_t held = (first_ok ? 40 * kMiB : 0) + (s.competing_ok ? competing : 0);
    EXPECT_EQ(ledger->Used(0), held) << competing / kMiB << " MiB inside 40 MiB";
    EXPECT_LE(ledger->Used(0), 64 * kMiB) << competing / kMiB << " MiB inside 40 MiB";
    // Both fit only if together they do; otherwise exactly one gets through
    // (the outer one: it added first, so the inner one's sum saw it).
    if (40 * kMiB + competing <= 64 * kMiB) {
      EXPECT_TRUE(first_ok && s.competing_ok) << competing / kMiB;
    } else {
      EXPECT_TRUE(first_ok) << competing / kMiB;
      EXPECT_FALSE(s.competing_ok) << competing / kMiB;
    }
    if (first_ok) ledger->Release(0, 40 * kMiB);
    if (s.competing_ok) ledger->Release(0, competing);
    EXPECT_EQ(ledger->Used(0), 0u);
  }
}

// A limit lowered while a reservation is between its add and its sum: the
// setter's sum counts the reservation's bytes, so either the new limit holds
// them or the change is refused; never both succeed over the new limit.
struct LoweringInside {
  QuotaLedger* ledger = nullptr;
  uint64_t new_limit = 0;
  bool set_ok = false;
  uint64_t seen = 0;
};
LoweringInside g_lowering;

void LowerTheLimit(int device, uint64_t /*bytes*/) {
  LoweringInside& s = g_lowering;
  if (s.ledger == nullptr) return;
  QuotaLedger* l = s.ledger;
  s.ledger = nullptr;  // once
  s.set_ok = l->TrySetLimit(device, s.new_limit, &s.seen);
}

TEST(QuotaLedgerInterleavingTest, LimitLoweredInsideAReservation) {
  ScopedGroup group("lower-inside");
  auto ledger = MustOpen(group.name(), {64 * kMiB});
  ASSERT_NE(ledger, nullptr);
  ASSERT_TRUE(ledger->TryReserve(0, 20 * kMiB));
  // 20 held + 40 in flight: 60 holds both, 50 does not.
  for (uint64_t lower_to : {60 * kMiB, 50 * kMiB}) {
    g_lowering = LoweringInside{ledger.get(), lower_to};
    QuotaLedger::SetStepHookForTest(LowerTheLimit);
    bool reserved = ledger->TryReserve(0, 40 * kMiB);
    QuotaLedger::SetStepHookForTest(nullptr);
    EXPECT_EQ(g_lowering.seen, 60 * kMiB) << "the setter counted the bytes in flight";
    EXPECT_LE(ledger->Used(0), ledger->Limit(0)) << lower_to / kMiB;
    EXPECT_TRUE(reserved) << lower_to / kMiB;
    EXPECT_EQ(g_lowering.set_ok, lower_to == 60 * kMiB);
    EXPECT_EQ(ledger->Limit(0), g_lowering.set_ok ? lower_to : 64 * kMiB);
    ledger->Release(0, 40 * kMiB);
    ledger->SetLimit(0, 64 * kMiB);
  }
}

}  // namespace
}  // namespace vgpu
