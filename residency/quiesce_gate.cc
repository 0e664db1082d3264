#include "residency/quiesce_gate.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "common/counters.h"

namespace vgpu::residency {

// Namespace scope, not an Engine's: every hot path reads the flag and its
// thread's slot (one load each); a process has one gate, whatever owns it.
std::atomic<bool> g_gate_closed{false};

namespace {

std::mutex g_slots_mu;
GateSlot* g_slots = nullptr;  // every slot ever registered (never freed)
size_t g_slot_count = 0;
std::mutex g_wait_mu;
std::condition_variable g_wait_cv;

pid_t CurrentTid() { return static_cast<pid_t>(syscall(SYS_gettid)); }

// Whether thread `tid` of this process no longer exists. Only then can its
// slot change hands: it can make no further call.
bool ThreadGone(pid_t tid) {
  if (tid <= 0) return true;
  return syscall(SYS_tgkill, getpid(), tid, 0) != 0 && errno == ESRCH;
}

bool AnyThreadInside() {
  std::lock_guard<std::mutex> lock(g_slots_mu);
  for (GateSlot* s = g_slots; s != nullptr; s = s->next) {
    if (s->active.load(std::memory_order_seq_cst) == 0) continue;
    // A thread cannot leave a call it is no longer alive to finish.
    if (ThreadGone(s->owner.load(std::memory_order_relaxed))) {
      s->active.store(0, std::memory_order_relaxed);
      continue;
    }
    return true;
  }
  return false;
}

}  // namespace

// In a fork() child the forking thread has a new tid: its slot must say so,
// or a new thread of the child would see the slot's owner gone and share it.
void AfterForkInChild() {
  if (t_gate_slot != nullptr) t_gate_slot->owner.store(CurrentTid(), std::memory_order_relaxed);
}

GateSlot* ThisThreadSlot() {
  const pid_t me = CurrentTid();
  std::lock_guard<std::mutex> lock(g_slots_mu);
  GateSlot* slot = nullptr;
  for (GateSlot* s = g_slots; s != nullptr && slot == nullptr; s = s->next) {
    pid_t owner = s->owner.load(std::memory_order_relaxed);
    if (owner != me && ThreadGone(owner)) slot = s;
  }
  if (slot == nullptr) {
    slot = new GateSlot();
    slot->next = g_slots;
    g_slots = slot;
    ++g_slot_count;
  }
  slot->depth = 0;
  slot->active.store(0, std::memory_order_relaxed);
  slot->owner.store(me, std::memory_order_relaxed);
  t_gate_slot = slot;
  return slot;
}

void WaitWhileClosed(GateSlot* slot) {
  counters::ScopedWait wait(counters::Id::kGateWaits, counters::Id::kGateWaitNs);
  wait.Waiting();  // only reached with the gate closed
  for (;;) {
    slot->active.store(0, std::memory_order_seq_cst);
    {
      std::unique_lock<std::mutex> lock(g_wait_mu);
      g_wait_cv.wait(lock, [] { return !g_gate_closed.load(std::memory_order_seq_cst); });
    }
    slot->active.store(1, std::memory_order_seq_cst);
    if (!g_gate_closed.load(std::memory_order_seq_cst)) return;
  }
}

void CloseGate() {
  g_gate_closed.store(true, std::memory_order_seq_cst);
  while (AnyThreadInside()) std::this_thread::sleep_for(std::chrono::microseconds(50));
}

void OpenGate() {
  {
    std::lock_guard<std::mutex> lock(g_wait_mu);
    g_gate_closed.store(false, std::memory_order_seq_cst);
  }
  g_wait_cv.notify_all();
}

size_t GateSlotCount() {
  std::lock_guard<std::mutex> lock(g_slots_mu);
  return g_slot_count;
}

}  // namespace vgpu::residency
