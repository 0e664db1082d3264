// The compute share, process side. Every launch passes Gate(): while this
// process holds its device's lease (share/sched_region.h) and its queued work
// is under the bound, that is a few atomic loads and one atomic increment — no
// lock, no syscall, no allocation. Otherwise the launching thread sleeps until
// the lease is granted. Launching threads drop a marker event every half
// queue; a per-process accountant thread retires work marker by marker,
// charges the measured busy time to the group's bucket, and hands the lease
// over when the scheduler says so.
//
// Everything outside the process's own state — the clock, the few driver
// calls, the group parameters, the thread — comes through a ShareHost, so
// the accounting can be driven deterministically on a fake clock and a
// scripted GPU (tests/unit/compute_share_accounting_test.cc). Only slow paths
// call the host; Gate()'s fast path is untouched by it.
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "share/sched_region.h"

namespace vgpu {

// What the compute share needs from the outside world. Production binds the
// real driver and CLOCK_MONOTONIC (compute_share_host.cc).
class ShareHost {
 public:
  virtual ~ShareHost() = default;
  virtual uint64_t NowNs() = 0;
  virtual void SleepNs(uint64_t ns) = 0;
  virtual CUresult EventCreate(CUevent* event) = 0;  // without timing
  virtual CUresult EventRecord(CUevent event, CUstream stream) = 0;
  virtual CUresult EventSynchronize(CUevent event) = 0;
  virtual CUresult CtxSynchronize() = 0;
  virtual CUresult CtxSetCurrent(CUcontext ctx) = 0;
  // The group's parameters on physical device `device`; false if the device
  // is not governed (native there).
  virtual bool ParamsFor(int device, GroupParams* params) = 0;
  // Runs the accountant's loop on a thread of its own; false if it cannot.
  virtual bool StartThread(std::function<void()> loop) = 0;
  virtual void Warn(const std::string& message) = 0;
};

class ComputeShare {
 public:
  // Runtime change (`vgpuctl set`): the group's parameters on physical
  // device `device`, in the shared region where every member's accountant
  // reads them (the next refill applies them). False if the group has no
  // slot on that device yet: its first member to join applies its own.
  bool UpdateParams(int device, const GroupParams& params);

  // Joins the group's slot on physical device `device` now (Start does it for
  // every governed device, so that a full group table fails cuInit instead of
  // leaving launches ungoverned). OK also where the device is not governed;
  // kBusy (group table full, accountant not started) or kNoSys (beyond the
  // scheduler's devices) with a one-line reason on failure.
  Status Join(int device);

  // A process's compute share as client `client` of `region`, in group
  // `group`. `host` outlives it.
  ComputeShare(std::shared_ptr<SchedRegion> region, int client, std::string group, ShareHost* host);

  // Admits one launch on physical device `device` of context `ctx` into
  // `stream` (`per_thread`: a _ptsz entry point, where 0 is the caller's
  // per-thread stream).
  void Gate(int device, CUcontext ctx, CUstream stream, bool per_thread) {
    if (device < 0) return;
    PerDevice& s = dev_[device];
    uint64_t launched = s.launched.load(std::memory_order_relaxed);
    if (s.holding.load(std::memory_order_acquire) &&
        !s.must_yield.load(std::memory_order_relaxed) &&
        launched - s.completed.load(std::memory_order_relaxed) <
            s.max_inflight.load(std::memory_order_relaxed) &&
        launched < s.next_marker_at.load(std::memory_order_relaxed)) {
      s.launched.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    // Markers go on the launch's own stream; a _ptsz launch's 0 is the
    // caller's per-thread stream, which the marker must name explicitly.
    SlowGate(device, ctx, per_thread && stream == nullptr ? CU_STREAM_PER_THREAD : stream);
  }

  // One non-blocking pass of the slow gate: the launch is admitted (or the
  // device is not governed), or the result says what to wait for. SlowGate
  // loops on it; a deterministic test calls it directly.
  enum class Admission { kAdmitted, kQueueFull, kNoLease };
  struct GateTry {
    Admission admission;
    uint32_t seen;  // kQueueFull: completed_signal; kNoLease: this client's turn sequence
  };
  GateTry TryAdmit(int device, CUcontext ctx, CUstream stream);
  // One pass of the accountant over the devices whose lease this process
  // holds. `holding`: whether it holds any; true if it waited for a device.
  bool AccountantPass(bool* holding);

 private:
  static constexpr int kNotJoined = -1;
  static constexpr int kJoinFailed = -2;   // table full: the device is not governed
  static constexpr int kNotGoverned = -3;  // native on this device (CUDA_DEVICE_SM_LIMIT_<i>=0)
  struct PerDevice {
    std::atomic<bool> holding{false};
    std::atomic<bool> must_yield{false};
    std::atomic<bool> fresh_lease{false};  // set by the acquiring thread, taken by the accountant
    std::atomic<uint64_t> grant_ns{0};     // when the current lease was granted
    std::atomic<uint64_t> launched{0};
    std::atomic<uint64_t> completed{0};
    std::atomic<uint64_t> max_inflight{4};      // grows once the time per launch is measured
    std::atomic<uint32_t> completed_signal{0};  // futex: launches waiting for the queue
    std::atomic<CUcontext> ctx{nullptr};
    std::atomic<int> group{kNotJoined};  // the scheduler group slot, once joined
    // Markers: events the launching threads record every half queue, so the
    // accountant can retire completions in steps while newer work stays queued.
    static constexpr int kMarkers = 8;
    std::mutex marker_mu;
    CUevent markers[kMarkers] = {};
    uint64_t marker_launched[kMarkers] = {};
    std::atomic<uint32_t> marker_head{0};  // written by launching threads
    uint32_t marker_tail = 0;              // accountant only
    std::atomic<uint64_t> next_marker_at{0};
    // Accountant thread only:
    bool busy = false;  // the queue was non-empty at the last tick
    uint64_t last_seen_launched = 0;
    uint64_t idle_since_ns = 0;
    uint64_t charged_until_ns = 0;
    double avg_launch_ns = 0;  // measured GPU time per launch, for the queue bound
    uint64_t rate_launches = 0;
    uint64_t rate_since_ns = 0;
  };

  void SlowGate(int device, CUcontext ctx, CUstream stream);
  bool TakeLease(int device, uint32_t* gen);
  // OK: joined. kNoEnt: the device is not governed. kBusy: the join failed
  // (now, with the reason; or before, without one).
  Status EnsureJoined(int device);
  static Status JoinedStatus(int group);
  void AccountantLoop();
  bool Tick(int device, uint64_t now);
  void Retire(int device, uint64_t launched);
  bool WaitMarker(int device);
  void PlaceMarker(int device, CUstream stream);
  void DrainAll(int device);
  bool DrainToLead(int device, uint64_t now);
  void FinishTail(int device);
  void UpdateQueueBound(int device, uint64_t now);
  void GiveUp(int device, uint64_t now);

  std::shared_ptr<SchedRegion> region_;
  int client_ = -1;
  std::string group_name_;
  ShareHost* host_;
  std::mutex join_mu_;
  PerDevice dev_[kSchedDevices];
  std::atomic<uint32_t> wake_{0};    // futex: wakes the accountant
  bool accountant_started_ = false;  // under join_mu_
};

}  // namespace vgpu
