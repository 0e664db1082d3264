// The quiesce gate (docs/vmm.md): every hooked entry point that touches
// device memory or queues device work (allocation, free, memcpy/memset,
// launches, graph launches) runs inside a GateGuard. Entering is a store to
// a thread-local slot and one load of the process-wide "closed" flag (no
// shared read-modify-write, no lock); only when the gate is closed does a
// caller block, until it reopens. Suspend closes the gate, waits until no
// thread is inside, drains every context, and then owns the device memory
// exclusively. A call made while the gate is closed waits; it never fails.
//
// A thread keeps its slot until the kernel thread is gone: the slot is
// reused by a later thread only once its owner's tid no longer exists, so a
// call made from a thread's exit handlers (C++ thread_local destructors,
// pthread key destructors such as cudart's per-thread cleanup) still has a
// slot of its own.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace vgpu::residency {

struct alignas(64) GateSlot {
  std::atomic<uint32_t> active{0};  // 1 while the owner is inside a call
  uint32_t depth = 0;               // nesting, owner-only
  GateSlot* next = nullptr;         // registry list (slots are never freed)
  std::atomic<pid_t> owner{0};      // tid of the thread that holds the slot
};

extern std::atomic<bool> g_gate_closed;
// This thread's slot; trivially destructible, so it stays valid through every
// exit handler of the thread.
inline thread_local GateSlot* t_gate_slot = nullptr;

GateSlot* ThisThreadSlot();  // registers the thread on first use
void WaitWhileClosed(GateSlot* slot);
// The fork() child's part: the process's lifecycle owner (Runtime's one fork
// handler) calls it in the child.
void AfterForkInChild();

class GateGuard {
 public:
  GateGuard() {
    slot_ = t_gate_slot != nullptr ? t_gate_slot : ThisThreadSlot();
    if (slot_->depth++ != 0) return;  // nested: already inside
    slot_->active.store(1, std::memory_order_seq_cst);
    if (g_gate_closed.load(std::memory_order_seq_cst)) WaitWhileClosed(slot_);
  }
  ~GateGuard() {
    if (--slot_->depth == 0) slot_->active.store(0, std::memory_order_release);
  }
  GateGuard(const GateGuard&) = delete;
  GateGuard& operator=(const GateGuard&) = delete;

 private:
  GateSlot* slot_;
};

// Closes the gate and returns once no thread is inside (a slot whose thread
// no longer exists, e.g. one inherited from the parent across fork(), does
// not count). The caller must not be inside itself.
void CloseGate();
void OpenGate();
// Slots ever registered (tests: reuse keeps this bounded by the peak number
// of threads).
size_t GateSlotCount();

// Leaves the gate for a wait inside a gated call that this process's own
// suspension must not be blocked by (an allocation waiting for vgpud to make
// room: vgpud may suspend this very job meanwhile). The caller touches no
// device memory while stepped out; on return it re-enters, waiting if the
// gate closed in between.
class GateStepOut {
 public:
  GateStepOut() : slot_(t_gate_slot) {
    if (slot_ == nullptr || slot_->depth == 0) return;
    saved_depth_ = slot_->depth;
    slot_->depth = 0;
    slot_->active.store(0, std::memory_order_seq_cst);
  }
  ~GateStepOut() {
    if (saved_depth_ == 0) return;
    slot_->depth = saved_depth_;
    slot_->active.store(1, std::memory_order_seq_cst);
    if (g_gate_closed.load(std::memory_order_seq_cst)) WaitWhileClosed(slot_);
  }
  GateStepOut(const GateStepOut&) = delete;
  GateStepOut& operator=(const GateStepOut&) = delete;

 private:
  GateSlot* slot_;
  uint32_t saved_depth_ = 0;
};

}  // namespace vgpu::residency
