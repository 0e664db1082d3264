// Residency of the process's device memory: the quiesce gate, suspend/resume
// to host RAM and checkpoint/restore to an image on disk (docs/vmm.md).
//
// The gate: every hooked entry point that touches device memory or queues
// device work (allocation, free, memcpy/memset, launches, graph launches)
// runs inside a GateGuard. Entering is a store to a thread-local slot and one
// load of the process-wide "closed" flag (no shared read-modify-write, no
// lock); only when the gate is closed does a caller block, until it reopens.
// Suspend closes the gate, waits until no thread is inside, drains every
// context (cuCtxSynchronize), and then owns the device memory exclusively.
// A call made while suspended waits; it never fails.
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace vgpu::residency {

struct alignas(64) GateSlot {
  std::atomic<uint32_t> active{0};
  uint32_t depth = 0;
  GateSlot* next = nullptr;
  std::atomic<bool> in_use{true};
};

extern std::atomic<bool> g_gate_closed;
GateSlot* ThisThreadSlot();  // registers the thread on first use
void WaitWhileClosed(GateSlot* slot);

class GateGuard {
 public:
  GateGuard() {
    static thread_local GateSlot* tslot = nullptr;
    if (tslot == nullptr) tslot = ThisThreadSlot();
    slot_ = tslot;
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

enum class State { kRunning, kSuspended, kCheckpointed };
const char* StateName(State s);
State CurrentState();

// Non-migratable device memory (managed, arrays, driver-path allocations,
// application-owned VMM handles): suspend refuses while any is held.
void NoteNonMigratable(uint64_t key, uint64_t bytes, CUcontext ctx);
void ForgetNonMigratable(uint64_t key);
void ForgetNonMigratableContext(CUcontext ctx);
uint64_t NonMigratableBytes();
// Contexts to drain on suspend (created or retained through the hooks).
void NoteContext(CUcontext ctx);

// Operation results: ok, or an errno name ("EBUSY", "EIO", "ENOENT",
// "EINVAL") with a one-line message.
struct Result {
  bool ok = true;
  std::string code;
  std::string message;
  uint64_t bytes = 0;
  double seconds = 0;
  std::string path;
  // Named phases of the operation in seconds, in order (suspend: "drain",
  // "copy_out", "release"), so that the latency beyond the copy can be told
  // apart from the copy itself.
  std::vector<std::pair<std::string, double>> phases;
  static Result Ok() { return {}; }
  static Result Error(std::string c, std::string m) {
    Result r;
    r.ok = false;
    r.code = std::move(c);
    r.message = std::move(m);
    return r;
  }
};

using Progress = std::function<void(const char* phase, uint64_t done, uint64_t total)>;

// One operation at a time (serialized internally).
Result Suspend(const Progress& progress);
Result Resume(const Progress& progress);
// dir: the image is <dir>/image.vgpuckpt. leave_running: the process goes on
// afterwards; else it stays suspended with its device memory released and the
// image as the only copy (resume restores from it).
Result Checkpoint(const std::string& dir, bool leave_running, const Progress& progress);
// from: a directory holding image.vgpuckpt, or the image file itself; empty:
// the most recent checkpoint. The image is validated completely before
// anything changes; on failure the process stays as it was.
Result Restore(const std::string& from, const Progress& progress);


}  // namespace vgpu::residency
