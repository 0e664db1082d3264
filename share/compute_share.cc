#include "share/compute_share.h"

#include <algorithm>
#include <utility>

#include "common/counters.h"
#include "common/futex.h"

namespace vgpu {
namespace {

// Queued GPU work per process is bounded to about this much measured time, so
// a holder asked to yield gives the device up within about two of these.
constexpr uint64_t kQueueBoundNs = 2'000'000;
// A holder with nothing queued keeps the lease this long if nobody waits,
// so a process that pauses briefly does not pay a re-acquisition.
constexpr uint64_t kIdleReleaseNs = 20'000'000;
// ... and this long when somebody waits (work conservation).
constexpr uint64_t kIdleHandoverNs = 500'000;
constexpr uint64_t kPollNs = 200'000;
// A holder that yields to a waiter hands the lease over when about this much
// of its queued work is left: the next holder's wake-up and first launch
// overlap that tail instead of leaving the device idle. Its tail is then
// charged to the next holder, which in turn leaves its own tail to whoever
// follows, so on average every tenant is charged its own time.
constexpr uint64_t kHandoverLeadNs = 500'000;

}  // namespace

ComputeShare::ComputeShare(std::shared_ptr<SchedRegion> region, int client, std::string group,
                           ShareHost* host)
    : region_(std::move(region)), client_(client), group_name_(std::move(group)), host_(host) {}

bool ComputeShare::UpdateParams(int device, const GroupParams& params) {
  if (device < 0 || device >= kSchedDevices) return false;
  return region_->SetGroupParams(device, group_name_, params);
}

Status ComputeShare::Join(int device) {
  if (device < 0) return Status::Ok();
  if (device >= kSchedDevices) {  // launches there would pass the gate ungoverned
    GroupParams params;
    if (!host_->ParamsFor(device, &params)) return Status::Ok();
    return Status::Error(ErrorCode::kNoSys, "physical device " + std::to_string(device) +
                                                " is beyond the compute scheduler's " +
                                                std::to_string(kSchedDevices) + " devices");
  }
  Status s = EnsureJoined(device);
  return s.code == ErrorCode::kNoEnt ? Status::Ok() : s;
}

// The outcome of an earlier join, as EnsureJoined reports it (its reason was
// reported when it happened).
Status ComputeShare::JoinedStatus(int group) {
  if (group >= 0) return Status::Ok();
  return Status::Error(group == kNotGoverned ? ErrorCode::kNoEnt : ErrorCode::kBusy, {});
}

Status ComputeShare::EnsureJoined(int device) {
  PerDevice& s = dev_[device];
  int g = s.group.load(std::memory_order_acquire);
  if (g != kNotJoined) return JoinedStatus(g);
  std::lock_guard<std::mutex> lock(join_mu_);
  if (s.group.load() != kNotJoined) return JoinedStatus(s.group.load());
  // Start joins every governed device (and fails cuInit if it cannot); a
  // later failure is remembered so launches do not retry a shared-memory
  // scan each.
  GroupParams params;
  if (!host_->ParamsFor(device, &params)) {
    s.group.store(kNotGoverned, std::memory_order_release);  // no cap on this device
    return JoinedStatus(kNotGoverned);
  }
  std::string why;
  g = region_->JoinGroup(device, client_, group_name_, params, host_->NowNs());
  if (g < 0) {
    why = "the compute scheduler's group table of device " + std::to_string(device) + " is full (" +
          std::to_string(kSchedGroups) + " groups with live members, the limit per device)";
  } else if (!accountant_started_) {
    accountant_started_ = host_->StartThread([this] { AccountantLoop(); });
    if (!accountant_started_) why = "the compute scheduler's accountant thread cannot start";
  }
  if (!why.empty()) {
    host_->Warn("compute share: " + why);
    s.group.store(kJoinFailed, std::memory_order_release);
    return Status::Error(ErrorCode::kBusy, std::move(why));
  }
  s.group.store(g, std::memory_order_release);
  return Status::Ok();
}

void ComputeShare::SlowGate(int device, CUcontext ctx, CUstream stream) {
  counters::ScopedWait throttled(counters::Id::kLaunchesThrottled, counters::Id::kThrottleWaitNs);
  for (;;) {
    GateTry t = TryAdmit(device, ctx, stream);
    if (t.admission != Admission::kAdmitted) throttled.Waiting();
    switch (t.admission) {
      case Admission::kAdmitted:
        return;
      case Admission::kQueueFull:  // the accountant retires it
        FutexWait(&dev_[device].completed_signal, t.seen, 1'000'000, FutexScope::kProcess);
        break;
      case Admission::kNoLease:
        // A hand-over to us, or the lease freed, wakes us; the timeout is
        // for what does not (SchedRegion::WaiterSleepNs).
        region_->WaitForTurn(client_, t.seen, region_->WaiterSleepNs(device, client_));
        break;
    }
  }
}

ComputeShare::GateTry ComputeShare::TryAdmit(int device, CUcontext ctx, CUstream stream) {
  if (device < 0) return {Admission::kAdmitted, 0};
  // Launches on an ungoverned device come here every time: the remembered
  // outcome is one load; only the first launch may join.
  const int group = dev_[device].group.load(std::memory_order_acquire);
  const bool joined = group >= 0 || (group == kNotJoined && EnsureJoined(device).ok());
  if (!joined) return {Admission::kAdmitted, 0};  // not governed
  PerDevice& s = dev_[device];
  CUcontext none = nullptr;
  s.ctx.compare_exchange_strong(none, ctx);
  if (!s.holding.load(std::memory_order_acquire) || s.must_yield.load()) {
    uint32_t gen = 0;
    if (!TakeLease(device, &gen)) return {Admission::kNoLease, gen};
  }
  uint32_t signal = s.completed_signal.load();
  if (s.launched.load() - s.completed.load() >= s.max_inflight.load()) {
    FutexBumpAndWakeAll(&wake_, FutexScope::kProcess);
    return {Admission::kQueueFull, signal};
  }
  if (s.launched.load() >= s.next_marker_at.load()) PlaceMarker(device, stream);
  s.launched.fetch_add(1, std::memory_order_relaxed);
  return {Admission::kAdmitted, 0};
}

// Asks for the lease and takes it if it is ours; true if it is held (and not
// being given up). `gen`: this client's turn sequence seen before asking.
bool ComputeShare::TakeLease(int device, uint32_t* gen) {
  PerDevice& s = dev_[device];
  uint64_t now = host_->NowNs();
  region_->Refill(device, now);
  region_->SetDemand(device, client_, now);
  *gen = region_->TurnSeq(client_);
  if (s.must_yield.load() || s.holding.load() || !region_->TryAcquire(device, client_, now)) {
    return false;
  }
  std::lock_guard<std::mutex> lock(join_mu_);
  // A GiveUp may have run between TryAcquire and the lock, handing the
  // lease on: only a lease still ours is taken.
  if (!s.holding.load() && region_->device(device).holder.load() == client_) {
    s.grant_ns.store(now, std::memory_order_relaxed);
    s.fresh_lease.store(true, std::memory_order_release);
    region_->ClearDemand(device, client_);
    s.holding.store(true, std::memory_order_release);
    FutexBumpAndWakeAll(&wake_, FutexScope::kProcess);
  }
  return s.holding.load(std::memory_order_acquire) && !s.must_yield.load();
}

// Marks the first `launched` launches done: the queue bound moves on.
void ComputeShare::Retire(int device, uint64_t launched) {
  PerDevice& s = dev_[device];
  s.completed.store(launched, std::memory_order_release);
  FutexBumpAndWakeAll(&s.completed_signal, FutexScope::kProcess);
}

// Waits for the oldest marker; false if none is pending.
bool ComputeShare::WaitMarker(int device) {
  PerDevice& s = dev_[device];
  if (s.marker_tail == s.marker_head.load(std::memory_order_acquire)) return false;
  int slot = static_cast<int>(s.marker_tail % PerDevice::kMarkers);
  host_->EventSynchronize(s.markers[slot]);
  Retire(device, s.marker_launched[slot]);
  ++s.marker_tail;
  return true;
}

// Called by a launching thread (with its context current) when a marker is
// due: it records an event behind everything launched so far on this stream.
void ComputeShare::PlaceMarker(int device, CUstream stream) {
  PerDevice& s = dev_[device];
  std::lock_guard<std::mutex> lock(s.marker_mu);
  uint64_t launched = s.launched.load();
  if (launched < s.next_marker_at.load()) return;  // another thread placed it
  uint64_t step = std::max<uint64_t>(1, s.max_inflight.load() / 2);
  s.next_marker_at.store(launched + step, std::memory_order_relaxed);
  uint32_t head = s.marker_head.load();
  if (head - s.marker_tail >= PerDevice::kMarkers) return;  // ring full: skip this one
  int slot = static_cast<int>(head % PerDevice::kMarkers);
  if (s.markers[slot] == nullptr && host_->EventCreate(&s.markers[slot]) != CUDA_SUCCESS) {
    return;
  }
  if (host_->EventRecord(s.markers[slot], stream) != CUDA_SUCCESS) return;
  s.marker_launched[slot] = launched;
  s.marker_head.store(head + 1, std::memory_order_release);
}

void ComputeShare::DrainAll(int device) {
  while (WaitMarker(device)) {
  }
  PerDevice& s = dev_[device];
  uint64_t launched = s.launched.load();
  if (launched == s.completed.load()) return;
  host_->CtxSynchronize();
  Retire(device, launched);
}

// Retires queued work until about kHandoverLeadNs of it is left (by the
// measured time per launch). True if work is still queued: the caller hands
// over early. With nobody to hand over to, drains everything.
bool ComputeShare::DrainToLead(int device, uint64_t now) {
  PerDevice& s = dev_[device];
  if (s.avg_launch_ns <= 0 || region_->PickNext(device, client_, now) < 0) {
    DrainAll(device);
    return false;
  }
  auto left_ns = [&] {
    return static_cast<double>(s.launched.load() - s.completed.load()) * s.avg_launch_ns;
  };
  while (left_ns() > kHandoverLeadNs && WaitMarker(device)) {
  }
  if (s.launched.load() == s.completed.load()) return false;
  // No marker covers the rest: it started when the last one was retired.
  double wait = std::min(left_ns() - kHandoverLeadNs, 2.0 * kQueueBoundNs);
  if (wait > 0) host_->SleepNs(static_cast<uint64_t>(wait));
  return true;
}

// After an early hand-over: waits for our tail without charging it (the next
// holder's wall time covers it) so the queue bound starts from empty.
void ComputeShare::FinishTail(int device) {
  DrainAll(device);
  PerDevice& s = dev_[device];
  if (s.holding.load()) return;  // re-acquired meanwhile: that lease charges from its grant
  s.last_seen_launched = s.launched.load();
  s.busy = false;
}

void ComputeShare::GiveUp(int device, uint64_t now) {
  PerDevice& s = dev_[device];
  std::lock_guard<std::mutex> lock(join_mu_);
  s.holding.store(false, std::memory_order_release);
  s.must_yield.store(false, std::memory_order_release);
  region_->Release(device, client_, now);
}

// One scheduling step for a device whose lease we hold; true if it waited
// for the device (so the loop need not sleep).
bool ComputeShare::Tick(int device, uint64_t now) {
  PerDevice& s = dev_[device];
  host_->CtxSetCurrent(s.ctx.load());
  if (s.fresh_lease.exchange(false, std::memory_order_acquire)) {
    // A new lease: charging starts at the grant; time spent waiting for the
    // lease is neither charged nor GPU time per launch.
    s.charged_until_ns = s.grant_ns.load(std::memory_order_relaxed);
    s.idle_since_ns = 0;
    s.rate_launches = s.completed.load();
    s.rate_since_ns = s.charged_until_ns;
  }
  bool waited = WaitMarker(device);
  // No marker covers the tail of a burst: drain it once nothing new comes.
  if (!waited && s.launched.load() != s.completed.load() &&
      (s.must_yield.load() || s.launched.load() == s.last_seen_launched)) {
    DrainAll(device);
    waited = true;
  }
  bool early = s.must_yield.load() && DrainToLead(device, now);
  now = host_->NowNs();
  // Exclusive lease: an interval in which we had work queued at its start, or
  // launched any, ran only our work, so its wall time is our GPU time (queued
  // work included). Only intervals idle from end to end are free.
  uint64_t launched = s.launched.load();
  bool worked = s.busy || launched != s.last_seen_launched;
  if (worked) {
    region_->Charge(device, s.group.load(std::memory_order_relaxed), now - s.charged_until_ns, now);
    counters::Add(counters::Id::kComputeChargedNs,
                  now - s.charged_until_ns);  // the accountant's thread
  }
  s.charged_until_ns = now;
  s.last_seen_launched = launched;
  s.busy = launched != s.completed.load();
  UpdateQueueBound(device, now);
  region_->Refill(device, now);
  bool idle = !s.busy;
  s.idle_since_ns = idle ? (s.idle_since_ns != 0 ? s.idle_since_ns : now) : 0;
  if (s.must_yield.load()) {
    GiveUp(device, now);  // drained above, or down to the lead
    if (early) FinishTail(device);
    return true;
  }
  uint64_t idle_for = idle ? now - s.idle_since_ns : 0;
  if (region_->ShouldYield(device, client_, now)) {
    s.must_yield.store(true, std::memory_order_release);  // new launches wait from here on
    if (idle) GiveUp(device, now);
  } else if (idle &&
             (idle_for >= kIdleReleaseNs ||
              (idle_for >= kIdleHandoverNs && region_->PickNext(device, client_, now) >= 0))) {
    GiveUp(device, now);
  }
  return waited;
}

// Keeps about kQueueBoundNs of measured GPU time queued (at least 2 launches).
void ComputeShare::UpdateQueueBound(int device, uint64_t now) {
  PerDevice& s = dev_[device];
  uint64_t done = s.completed.load();
  if (done > s.rate_launches + 8 && now > s.rate_since_ns) {
    double per =
        static_cast<double>(now - s.rate_since_ns) / static_cast<double>(done - s.rate_launches);
    s.avg_launch_ns = s.avg_launch_ns == 0 ? per : 0.7 * s.avg_launch_ns + 0.3 * per;
    s.rate_launches = done;
    s.rate_since_ns = now;
    auto bound = static_cast<uint64_t>(2.0 * kQueueBoundNs / std::max(1.0, s.avg_launch_ns));
    s.max_inflight.store(std::clamp<uint64_t>(bound, 4, 4096), std::memory_order_relaxed);
  }
  if (!s.busy) {  // idle time is not GPU time per launch
    s.rate_launches = done;
    s.rate_since_ns = now;
  }
}

bool ComputeShare::AccountantPass(bool* holding) {
  uint64_t now = host_->NowNs();
  bool busy = false;
  *holding = false;
  for (int d = 0; d < kSchedDevices; ++d) {
    if (dev_[d].group.load(std::memory_order_acquire) < 0 ||
        !dev_[d].holding.load(std::memory_order_acquire)) {
      continue;
    }
    *holding = true;
    busy = Tick(d, now) || busy;
  }
  region_->ReapDeadIfDue(now);  // a dead waiter must not be handed the lease
  return busy;
}

void ComputeShare::AccountantLoop() {
  for (;;) {
    uint32_t signal = wake_.load();
    bool holding = false;
    if (!AccountantPass(&holding)) {
      FutexWait(&wake_, signal, holding ? kPollNs : 50'000'000, FutexScope::kProcess);
    }
  }
}

}  // namespace vgpu
