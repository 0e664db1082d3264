// The quiesce gate: callers wait while it is closed, closing waits for the
// threads inside, and a slot changes hands only once its thread is gone.
#include "residency/quiesce_gate.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "common/counters.h"

namespace vgpu::residency {
namespace {

using namespace std::chrono_literals;

// The slot a new thread gets; returns once that thread no longer exists
// (pthread_join can return while the kernel still lists the exiting thread).
GateSlot* SlotOfNewThread() {
  GateSlot* slot = nullptr;
  pid_t tid = 0;
  std::thread([&] {
    GateGuard g;
    slot = t_gate_slot;
    tid = slot->owner.load();
  }).join();
  for (int i = 0; i < 2000 && syscall(SYS_tgkill, getpid(), tid, 0) == 0; ++i) {
    std::this_thread::sleep_for(1ms);
  }
  return slot;
}

// A thread inside the gate from construction until Leave().
class ThreadInside {
 public:
  ThreadInside() {
    std::promise<void> inside;
    std::future<void> entered = inside.get_future();
    thread_ = std::thread([this, inside = std::move(inside)]() mutable {
      GateGuard g;
      inside.set_value();
      leave_f_.wait();
    });
    entered.wait();
  }
  ~ThreadInside() {
    if (thread_.joinable()) Leave();
  }
  void Leave() {
    leave_.set_value();
    thread_.join();
  }

 private:
  std::promise<void> leave_;
  std::shared_future<void> leave_f_ = leave_.get_future().share();
  std::thread thread_;
};

TEST(QuiesceGateTest, ClosedGateHoldsACallerUntilItOpens) {
  CloseGate();
  std::atomic<bool> entered{false};
  std::thread t([&] {
    GateGuard g;
    entered = true;
  });
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(entered) << "a call went through a closed gate";
  OpenGate();
  t.join();
  EXPECT_TRUE(entered);
}

// Whether thread `tid` of this process is asleep in the kernel (state S in
// /proc/self/task/<tid>/stat).
bool Asleep(pid_t tid) {
  std::ifstream stat("/proc/self/task/" + std::to_string(tid) + "/stat");
  std::string line;
  std::getline(stat, line);
  size_t paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] == 'S';
}

TEST(QuiesceGateTest, OnlyAWaitAtAClosedGateIsCounted) {
  uint64_t waits = counters::Get(counters::Id::kGateWaits);
  uint64_t ns = counters::Get(counters::Id::kGateWaitNs);
  std::thread([] { GateGuard g; }).join();
  EXPECT_EQ(counters::Get(counters::Id::kGateWaits), waits) << "an open gate counts nothing";
  CloseGate();
  std::atomic<pid_t> tid{0};
  std::thread t([&tid] {
    ThisThreadSlot();  // registered beforehand: from here on it can only sleep at the gate
    tid.store(static_cast<pid_t>(syscall(SYS_gettid)));
    GateGuard g;
  });
  // However late the thread runs, the gate opens only once it is waiting
  // there, and then only 20 ms later.
  while (tid.load() == 0) std::this_thread::sleep_for(1ms);
  while (!Asleep(tid.load())) std::this_thread::sleep_for(1ms);
  std::this_thread::sleep_for(20ms);
  OpenGate();
  t.join();
  EXPECT_EQ(counters::Get(counters::Id::kGateWaits), waits + 1);
  EXPECT_GE(counters::Get(counters::Id::kGateWaitNs) - ns, 20'000'000u) << "20 ms waited at least";
}

TEST(QuiesceGateTest, CloseWaitsForTheThreadInside) {
  ThreadInside t;
  auto closed = std::async(std::launch::async, [] { CloseGate(); });
  EXPECT_EQ(closed.wait_for(50ms), std::future_status::timeout)
      << "the gate closed while a thread was inside";
  t.Leave();
  EXPECT_EQ(closed.wait_for(5s), std::future_status::ready);
  OpenGate();
}

TEST(QuiesceGateTest, NestedCallsLeaveTheGateOnceAtTheOutermost) {
  std::thread([] {
    GateGuard outer;
    { GateGuard inner; }
    EXPECT_EQ(t_gate_slot->active.load(), 1u) << "the inner guard let the thread out";
  }).join();
}

TEST(QuiesceGateTest, AnExitedThreadsSlotIsReused) {
  GateSlot* first = SlotOfNewThread();
  size_t count = GateSlotCount();
  for (int i = 0; i < 20; ++i) SlotOfNewThread();
  EXPECT_EQ(GateSlotCount(), count) << "threads that came and went each got a new slot";
  EXPECT_EQ(SlotOfNewThread(), first);
}

// A thread's exit handlers may still call the driver (cudart's per-thread
// cleanup does): until the thread is gone, its slot must stay its own.
struct LateCaller {
  std::promise<void>* inside = nullptr;
  std::shared_future<void> leave;
  ~LateCaller() {
    if (inside == nullptr) return;
    GateGuard g;
    inside->set_value();
    leave.wait();
  }
};
thread_local LateCaller t_late;

TEST(QuiesceGateTest, ASlotStaysWithItsThreadThroughTheThreadsExitHandlers) {
  std::promise<void> inside, leave;
  std::shared_future<void> leave_f = leave.get_future().share();
  GateSlot* exiting_slot = nullptr;
  std::thread t([&] {
    t_late.inside = &inside;  // constructed first: destroyed after everything else
    t_late.leave = leave_f;
    { GateGuard g; }
    exiting_slot = t_gate_slot;
  });
  inside.get_future().wait();  // t is in its exit handlers, inside the gate
  EXPECT_NE(SlotOfNewThread(), exiting_slot) << "a new thread took a slot still in use";
  auto closed = std::async(std::launch::async, [] { CloseGate(); });
  EXPECT_EQ(closed.wait_for(50ms), std::future_status::timeout)
      << "the gate closed while an exiting thread was inside";
  leave.set_value();
  t.join();
  EXPECT_EQ(closed.wait_for(5s), std::future_status::ready);
  OpenGate();
}

TEST(QuiesceGateTest, AForkChildClosesTheGateDespiteAParentThreadInside) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "TSan does not support threads in the child of a multi-threaded fork";
#endif
  // What the process's lifecycle owner (libvgpu's Runtime) does once.
  static const bool registered = pthread_atfork(nullptr, nullptr, AfterForkInChild) == 0;
  ASSERT_TRUE(registered);
  ThreadInside t;
  { GateGuard g; }  // this thread has a slot too
  pid_t child = fork();
  if (child == 0) {
    alarm(10);  // a hang fails the test instead of blocking it
    // As many live threads as there are slots: every slot whose owner is
    // gone here gets handed out, and the forking thread's must not be.
    GateSlot* mine = t_gate_slot;
    const size_t n = GateSlotCount();
    std::atomic<size_t> registered{0};
    std::atomic<bool> took_mine{false};
    std::vector<std::thread> threads;
    for (size_t i = 0; i < n; ++i) {
      threads.emplace_back([&] {
        { GateGuard g; }
        if (t_gate_slot == mine) took_mine = true;
        ++registered;
        while (registered < n) std::this_thread::yield();
      });
    }
    for (auto& th : threads) th.join();
    if (took_mine) _exit(2);  // the forking thread's slot was handed out
    CloseGate();              // the parent's thread does not exist here
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  t.Leave();
  ASSERT_TRUE(WIFEXITED(status)) << "child killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace vgpu::residency
