// The compute share's accounting, deterministically: ComputeShare instances
// (one per simulated tenant, sharing one private scheduler region) run on a
// fake clock against a scripted GPU that executes kernels in launch order.
// The clock moves only when the simulation steps or a blocking driver call
// (event or context synchronize, a sleep) waits for it, so every run is the
// same run, and the ground truth (which tenant's kernels ran when) is exact.
// A 4% accounting error, a wrong refill rate or a cap that leaks fails here
// every time; the end-to-end tests (tests/share) keep realistic tolerances.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "share/compute_share.h"
#include "share/sched_region.h"

namespace vgpu {
namespace {

constexpr uint64_t kUs = 1'000;
constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kStepNs = 200 * kUs;  // the accountant's poll interval

// One device running kernels one at a time in launch order (the lease makes
// tenants exclusive, except for the tail a holder leaves at a hand-over,
// which runs before the next holder's work).
class FakeGpu {
 public:
  uint64_t now = 1000 * kMs;

  void Launch(int tenant, uint64_t duration_ns) {
    uint64_t start = std::max(now, queue_end_);
    queue_end_ = start + duration_ns;
    tenant_end_[tenant] = queue_end_;
    kernels_.push_back({tenant, start, queue_end_});
  }
  // When everything `tenant` launched so far is done.
  uint64_t TenantDone(int tenant) const {
    auto it = tenant_end_.find(tenant);
    return it == tenant_end_.end() ? now : std::max(now, it->second);
  }
  void WaitUntil(uint64_t t) { now = std::max(now, t); }
  // GPU time `tenant`'s kernels ran within [from, to).
  uint64_t Busy(int tenant, uint64_t from, uint64_t to) const {
    uint64_t sum = 0;
    for (const Kernel& k : kernels_) {
      if (k.tenant != tenant) continue;
      uint64_t a = std::max(k.start, from), b = std::min(k.end, to);
      if (b > a) sum += b - a;
    }
    return sum;
  }
  // When `tenant`'s first kernel at or after `from` started (0: none).
  uint64_t FirstStart(int tenant, uint64_t from) const {
    for (const Kernel& k : kernels_) {
      if (k.tenant == tenant && k.start >= from) return k.start;
    }
    return 0;
  }

 private:
  struct Kernel {
    int tenant;
    uint64_t start, end;
  };
  uint64_t queue_end_ = 0;
  std::map<int, uint64_t> tenant_end_;
  std::vector<Kernel> kernels_;
};

// A tenant's view of the fake node: markers complete when the tenant's work
// recorded before them does; synchronizing moves the shared clock.
class FakeHost final : public ShareHost {
 public:
  FakeHost(FakeGpu* gpu, int tenant, GroupParams params)
      : gpu_(gpu), tenant_(tenant), params_(params) {}

  uint64_t NowNs() override { return gpu_->now; }
  void SleepNs(uint64_t ns) override { gpu_->now += ns; }
  CUresult EventCreate(CUevent* event) override {
    event_done_.push_back(0);
    *event = reinterpret_cast<CUevent>(event_done_.size());
    return CUDA_SUCCESS;
  }
  CUresult EventRecord(CUevent event, CUstream /*stream*/) override {
    event_done_[Index(event)] = gpu_->TenantDone(tenant_);
    return CUDA_SUCCESS;
  }
  CUresult EventSynchronize(CUevent event) override {
    gpu_->WaitUntil(event_done_[Index(event)]);
    return CUDA_SUCCESS;
  }
  CUresult CtxSynchronize() override {
    gpu_->WaitUntil(gpu_->TenantDone(tenant_));
    return CUDA_SUCCESS;
  }
  CUresult CtxSetCurrent(CUcontext /*ctx*/) override { return CUDA_SUCCESS; }
  bool ParamsFor(int /*device*/, GroupParams* params) override {
    *params = params_;
    return true;
  }
  bool StartThread(std::function<void()> /*loop*/) override { return true; }  // the test drives it
  void Warn(const std::string& message) override { ADD_FAILURE() << message; }

 private:
  static size_t Index(CUevent e) { return reinterpret_cast<uintptr_t>(e) - 1; }
  FakeGpu* gpu_;
  int tenant_;
  GroupParams params_;
  std::vector<uint64_t> event_done_;
};

struct Tenant {
  std::string group;
  std::unique_ptr<FakeHost> host;
  std::unique_ptr<ComputeShare> share;
  uint64_t kernel_ns;
  bool launching = false;   // keeps its queue full while set
  uint64_t burst_left = 0;  // launches still to make (as its gate admits them)
  uint64_t launches = 0;
};

GroupParams Fixed(uint32_t permille) { return {SchedPolicy::kFixed, permille, 1, false}; }
GroupParams Weighted(uint32_t weight, bool high_priority = false) {
  return {SchedPolicy::kWeighted, 1000, weight, high_priority};
}

// The simulated node: per step, every launching tenant launches what its gate
// admits, then every accountant makes a pass; a step in which no accountant
// waited for the GPU moves the clock by one poll interval.
class ShareWorld {
 public:
  ShareWorld() : region_(SchedRegion::CreatePrivate()) {}

  int AddTenant(const std::string& group, GroupParams params, uint64_t kernel_ns) {
    int id = static_cast<int>(tenants_.size());
    Result<int> registered = region_->RegisterClient(getpid());
    EXPECT_TRUE(registered.ok()) << registered.status().message;
    const int client = registered.ok() ? registered.value() : -1;
    auto t = std::make_unique<Tenant>();
    t->group = group;
    t->host = std::make_unique<FakeHost>(&gpu_, id, params);
    t->share = std::make_unique<ComputeShare>(region_, client, group, t->host.get());
    t->kernel_ns = kernel_ns;
    tenants_.push_back(std::move(t));
    return id;
  }
  Tenant& tenant(int id) { return *tenants_[id]; }
  FakeGpu& gpu() { return gpu_; }
  uint64_t now() const { return gpu_.now; }

  void RunFor(uint64_t ns) {
    const uint64_t until = gpu_.now + ns;
    while (gpu_.now < until) Step();
  }
  // Launches `count` kernels of `id` now, as far as its gate admits them;
  // returns how many it admitted.
  uint64_t Launch(int id, uint64_t count) {
    Tenant& t = *tenants_[id];
    uint64_t n = 0;
    for (; n < count; ++n) {
      auto stream = reinterpret_cast<CUstream>(static_cast<uintptr_t>(id + 1));
      auto ctx = reinterpret_cast<CUcontext>(static_cast<uintptr_t>(0x1000 + id));
      if (t.share->TryAdmit(0, ctx, stream).admission != ComputeShare::Admission::kAdmitted) break;
      gpu_.Launch(id, t.kernel_ns);
      ++t.launches;
    }
    return n;
  }
  void Step() {
    for (size_t i = 0; i < tenants_.size(); ++i) {
      Tenant& t = *tenants_[i];
      if (t.launching) Launch(static_cast<int>(i), 100'000);
      if (t.burst_left > 0) t.burst_left -= Launch(static_cast<int>(i), t.burst_left);
    }
    bool busy = false;
    for (auto& t : tenants_) {
      bool holding = false;
      busy = t->share->AccountantPass(&holding) || busy;
    }
    // Like AccountantLoop, an accountant that waited for the device goes
    // round again at once; when none did, all sleep for a poll interval.
    if (!busy || ++passes_without_sleep_ > 1000) {
      gpu_.now += kStepNs;
      passes_without_sleep_ = 0;
    }
  }

  // What the scheduler charged the group, in total.
  uint64_t Charged(int id) const { return Group(id).used_ns.load(); }
  const SchedGroup& Group(int id) const {
    for (const SchedGroup& g : region_->device(0).groups) {
      if (g.key.load() != 0 && tenants_[id]->group == g.name) return g;
    }
    ADD_FAILURE() << "no group " << tenants_[id]->group;
    return region_->device(0).groups[0];
  }
  int Holder() const { return region_->device(0).holder.load(); }
  SchedRegion& region() { return *region_; }

 private:
  FakeGpu gpu_;
  int passes_without_sleep_ = 0;
  std::shared_ptr<SchedRegion> region_;
  std::vector<std::unique_ptr<Tenant>> tenants_;
};

double Pct(uint64_t part, uint64_t whole) {
  return 100.0 * static_cast<double>(part) / static_cast<double>(whole);
}

// ---------------------------------------------------------------------------
// Charging: what a tenant is charged is the GPU time its work took.

TEST(ComputeShareAccounting, ALoneTenantIsChargedExactlyItsGpuTime) {
  ShareWorld w;
  int a = w.AddTenant("a", Weighted(1), 100 * kUs);
  const uint64_t t0 = w.now();
  w.tenant(a).launching = true;
  w.RunFor(500 * kMs);
  w.tenant(a).launching = false;
  w.RunFor(50 * kMs);  // drains; the idle lease is released
  uint64_t busy = w.gpu().Busy(a, t0, w.now());
  ASSERT_GT(busy, 450 * kMs) << "the tenant kept the device busy";
  EXPECT_NEAR(static_cast<double>(w.Charged(a)), static_cast<double>(busy), 0.001 * busy)
      << "charged " << w.Charged(a) << " ns for " << busy << " ns of GPU time";
  EXPECT_EQ(w.Holder(), -1) << "an idle holder gives the lease back";
}

TEST(ComputeShareAccounting, ChargesFollowTheKernelLengthNotTheLaunchCount) {
  for (uint64_t kernel : {20 * kUs, 300 * kUs, 3 * kMs}) {
    ShareWorld w;
    int a = w.AddTenant("a", Weighted(1), kernel);
    const uint64_t t0 = w.now();
    w.tenant(a).launching = true;
    w.RunFor(300 * kMs);
    w.tenant(a).launching = false;
    w.RunFor(50 * kMs);
    uint64_t busy = w.gpu().Busy(a, t0, w.now());
    EXPECT_NEAR(static_cast<double>(w.Charged(a)), static_cast<double>(busy), 0.001 * busy)
        << "kernels of " << kernel << " ns";
  }
}

TEST(ComputeShareAccounting, IdleTimeWithTheLeaseHeldIsNotCharged) {
  ShareWorld w;
  int a = w.AddTenant("a", Weighted(1), 100 * kUs);
  const uint64_t t0 = w.now();
  constexpr int kBursts = 20;
  for (int i = 0; i < kBursts; ++i) {
    w.tenant(a).burst_left = 20;  // 2 ms of work ...
    w.RunFor(12 * kMs);           // ... then idle, shorter than the idle release: the lease is kept
    ASSERT_EQ(w.tenant(a).burst_left, 0u);
    ASSERT_EQ(w.Holder(), 0) << "burst " << i;
  }
  w.RunFor(50 * kMs);
  uint64_t busy = w.gpu().Busy(a, t0, w.now());
  uint64_t charged = w.Charged(a);
  ASSERT_EQ(busy, kBursts * 2 * kMs);
  // The accountant sees a launch after an idle stretch at its next poll: the
  // interval it charges for it starts at its previous poll, so each burst may
  // add up to one poll interval of idle time (here, where launches come right
  // after a poll, exactly one), and nothing else may.
  EXPECT_GE(charged, busy) << "GPU time went uncharged";
  EXPECT_LE(charged, busy + kBursts * kStepNs)
      << "idle time charged: " << charged << " ns for " << busy << " ns of work in " << w.now() - t0
      << " ns";
}

// ---------------------------------------------------------------------------
// Hand-over: each tenant is charged its own time.

TEST(ComputeShareAccounting, HandOversChargeEachTenantItsOwnTime) {
  ShareWorld w;
  int a = w.AddTenant("a", Weighted(1), 100 * kUs);
  int b = w.AddTenant("b", Weighted(1), 250 * kUs);
  const uint64_t t0 = w.now();
  const uint32_t gen0 = w.region().device(0).gen.load();
  w.tenant(a).launching = w.tenant(b).launching = true;
  w.RunFor(2000 * kMs);
  w.tenant(a).launching = w.tenant(b).launching = false;
  w.RunFor(50 * kMs);
  // Every hand-over bumps the lease generation.
  EXPECT_GT(w.region().device(0).gen.load() - gen0, 100u) << "turns alternate";
  for (int id : {a, b}) {
    uint64_t busy = w.gpu().Busy(id, t0, w.now());
    ASSERT_GT(busy, 800 * kMs) << "tenant " << id << " got its turns";
    EXPECT_NEAR(static_cast<double>(w.Charged(id)), static_cast<double>(busy), 0.001 * busy)
        << "tenant " << id << " charged " << w.Charged(id) << " ns for " << busy << " ns";
  }
  uint64_t all = w.gpu().Busy(a, t0, w.now()) + w.gpu().Busy(b, t0, w.now());
  EXPECT_GT(Pct(all, 2000 * kMs), 99.0) << "hand-overs leave the device busy";
}

// ---------------------------------------------------------------------------
// Policies, measured on the scripted GPU (ground truth, not the charges).

// GPU shares of the tenants over [from, to).
std::vector<double> Shares(const FakeGpu& gpu, const std::vector<int>& ids, uint64_t from,
                           uint64_t to) {
  std::vector<double> out;
  for (int id : ids) out.push_back(Pct(gpu.Busy(id, from, to), to - from));
  return out;
}

TEST(ComputeShareAccounting, AFixedCapIsNeverExceededWhileAnotherTenantWaits) {
  ShareWorld w;
  int a = w.AddTenant("a", Fixed(300), 100 * kUs);
  int b = w.AddTenant("b", Weighted(1), 100 * kUs);
  w.tenant(a).launching = w.tenant(b).launching = true;
  w.RunFor(200 * kMs);
  const uint64_t t0 = w.now();
  // Every window of 500 ms, not only the total, stays at the cap.
  for (int window = 0; window < 8; ++window) {
    uint64_t from = w.now();
    w.RunFor(500 * kMs);
    auto s = Shares(w.gpu(), {a, b}, from, w.now());
    EXPECT_LE(s[0], 30.5) << "window " << window;
    EXPECT_GE(s[0], 29.0) << "window " << window;
    EXPECT_GE(s[0] + s[1], 99.0) << "the rest goes to the other tenant";
  }
  auto s = Shares(w.gpu(), {a, b}, t0, w.now());
  EXPECT_NEAR(s[0], 30.0, 0.3) << "over 4 s";
}

TEST(ComputeShareAccounting, ALoneCappedTenantStaysAtItsCapOnAnIdleDevice) {
  ShareWorld w;
  int a = w.AddTenant("a", Fixed(500), 300 * kUs);
  w.tenant(a).launching = true;
  w.RunFor(200 * kMs);
  const uint64_t t0 = w.now();
  w.RunFor(3000 * kMs);
  EXPECT_NEAR(Shares(w.gpu(), {a}, t0, w.now())[0], 50.0, 0.4);
}

TEST(ComputeShareAccounting, TwoCapsEachGetTheirShare) {
  ShareWorld w;
  int a = w.AddTenant("a", Fixed(200), 100 * kUs);
  int b = w.AddTenant("b", Fixed(700), 400 * kUs);
  w.tenant(a).launching = w.tenant(b).launching = true;
  w.RunFor(200 * kMs);
  const uint64_t t0 = w.now();
  w.RunFor(3000 * kMs);
  auto s = Shares(w.gpu(), {a, b}, t0, w.now());
  EXPECT_NEAR(s[0], 20.0, 0.4);
  EXPECT_NEAR(s[1], 70.0, 0.4);
}

// vgpuctl set: a share changed at runtime holds from the next refill on,
// in every member's view (the parameters live in the shared region).
TEST(ComputeShareAccounting, AShareChangedAtRuntimeTakesEffect) {
  ShareWorld w;
  int a = w.AddTenant("a", Fixed(500), 300 * kUs);
  w.tenant(a).launching = true;
  w.RunFor(200 * kMs);
  uint64_t t0 = w.now();
  w.RunFor(2000 * kMs);
  EXPECT_NEAR(Shares(w.gpu(), {a}, t0, w.now())[0], 50.0, 0.5);
  ASSERT_TRUE(w.tenant(a).share->UpdateParams(0, Fixed(200)));
  EXPECT_EQ(w.Group(a).share_permille.load(), 200u);
  w.RunFor(200 * kMs);
  t0 = w.now();
  w.RunFor(2000 * kMs);
  EXPECT_NEAR(Shares(w.gpu(), {a}, t0, w.now())[0], 20.0, 0.5);
  EXPECT_FALSE(w.tenant(a).share->UpdateParams(1, Fixed(200)))
      << "no slot of the group on a device it never joined";
}

TEST(ComputeShareAccounting, WeightsSplitTheDevice) {
  ShareWorld w;
  int a = w.AddTenant("a", Weighted(1), 100 * kUs);
  int b = w.AddTenant("b", Weighted(3), 300 * kUs);
  w.tenant(a).launching = w.tenant(b).launching = true;
  w.RunFor(200 * kMs);
  const uint64_t t0 = w.now();
  w.RunFor(3000 * kMs);
  auto s = Shares(w.gpu(), {a, b}, t0, w.now());
  EXPECT_NEAR(s[0], 25.0, 1.0);
  EXPECT_NEAR(s[1], 75.0, 1.0);
}

TEST(ComputeShareAccounting, HighPriorityPreemptsAtOnceAndRunsAsIfAlone) {
  ShareWorld w;
  int t = w.AddTenant("trainer", Weighted(1), 1 * kMs);
  int h = w.AddTenant("online", Weighted(1, /*high_priority=*/true), 200 * kUs);
  w.tenant(t).launching = true;
  w.RunFor(3 * kMs);  // the trainer's lease is younger than a minimum slice: no matter
  ASSERT_EQ(w.Holder(), 0);
  const uint64_t arrive = w.now();
  w.tenant(h).launching = true;
  w.RunFor(300 * kMs);
  const uint64_t leave = w.now();
  uint64_t first = w.gpu().FirstStart(h, arrive);
  ASSERT_NE(first, 0u) << "the high-priority tenant never ran";
  // The trainer's queue is bounded to about 2 x 2 ms; its accountant sees the
  // waiter at its next poll.
  EXPECT_LE(first - arrive, 5 * kMs) << "preemption latency";
  EXPECT_GT(Pct(w.gpu().Busy(h, first, leave), leave - first), 99.0)
      << "the high-priority tenant runs as if alone";
  w.tenant(h).launching = false;
  w.RunFor(60 * kMs);  // the trainer resumes 20 ms after it idles
  const uint64_t t1 = w.now();
  w.RunFor(200 * kMs);
  EXPECT_GT(Pct(w.gpu().Busy(t, t1, w.now()), w.now() - t1), 99.0) << "the trainer resumes";
}

}  // namespace
}  // namespace vgpu
