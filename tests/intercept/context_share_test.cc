// The governed launch charges the device of the launching thread's current
// context, as that context changes between launches (libvgpu caches it per
// thread: intercept/current_context.h). Each step of one client thread
// switches the context with another call (create, set, push, pop), launches,
// synchronizes and waits; the test then reads the compute scheduler's
// per-device charge of the client's group and expects only the device of the
// new current context to have grown. Run through every path a program
// reaches the driver by (linked, dlsym, cuGetProcAddress).
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "intercept_fixture.h"
#include "intercept_test_util.h"
#include "share/sched_region.h"

namespace vgpu::itest {
namespace {

class ContextShareTest : public PathTest {
 protected:
  void TearDown() override {
    shm_unlink(region_name_.c_str());
    PathTest::TearDown();
  }

  // Charged ns of our group on physical device `d` (0 if it never joined).
  uint64_t Used(int d) {
    if (region_ == nullptr) {
      region_ = std::move(SchedRegion::Open(region_name_).value());
      if (region_ == nullptr) return 0;
    }
    for (const SchedGroup& g : region_->device(d).groups) {
      if (g.key.load() != 0 && group_ == g.name) return g.used_ns.load();
    }
    return 0;
  }

  // After a step that ran `kernel_ns` of work on device `dev`: waits until
  // the accountant charged most of it there, then checks nothing went to the
  // other device.
  void ExpectChargedTo(int dev, uint64_t kernel_ns, const char* step) {
    bool grew = false;
    for (int i = 0; i < 200 && !grew; ++i) {
      grew = Used(dev) - before_[dev] >= kernel_ns / 2;
      if (!grew) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_TRUE(grew) << step << ": device " << dev << " charged " << (Used(dev) - before_[dev]) / 1000
                      << " us of " << kernel_ns / 1000 << " us";
    EXPECT_LT(Used(1 - dev) - before_[1 - dev], kernel_ns / 4)
        << step << ": device " << 1 - dev << " was charged for device " << dev << "'s launches";
    // The accountant charges the rest of this step in its own time (later
    // under CPU load): the next step's baseline is taken once the charges
    // stop moving, so that this step's tail is not read as the next one's.
    uint64_t last[2] = {Used(0), Used(1)};
    for (int stable = 0, i = 0; stable < 3 && i < 200; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      uint64_t now[2] = {Used(0), Used(1)};
      stable = now[0] == last[0] && now[1] == last[1] ? stable + 1 : 0;
      last[0] = now[0];
      last[1] = now[1];
    }
    before_[0] = last[0];
    before_[1] = last[1];
  }

  std::string region_name_;  // set by the test (id_ is set in SetUp)
  std::unique_ptr<SchedRegion> region_;
  uint64_t before_[2] = {0, 0};
};

INSTANTIATE_TEST_SUITE_P(Paths, ContextShareTest, ::testing::ValuesIn(kPaths), ParamName);

TEST_P(ContextShareTest, LaunchesChargeTheCurrentContextsDevice) {
  constexpr int kLaunches = 10;
  constexpr uint64_t kKernelUs = 2000;
  const uint64_t step_ns = kLaunches * kKernelUs * 1000;
  const std::string launch = "launch:" + std::to_string(kLaunches) + ":" + std::to_string(kKernelUs);
  region_name_ = "/vgpu-sched-" + id_;
  // Each device's launches always come from one context (ctxnew:1 is pushed,
  // then pushed again; ctx:0 is device 0's primary context).
  Proc c;
  ASSERT_TRUE(c.Start(Argv(GetParam(), {"init", "ctxnew:1", launch, "wait",  // created: device 1
                                        "ctx:0", launch, "wait",             // set: device 0
                                        "push", launch, "wait",              // pushed: device 1
                                        "pop", launch, "wait"}),             // popped: device 0
                      Env(true, {GroupVar(), "VGPU_SIM_DEVICES=2x1GiB", "VGPU_COMPUTE_WEIGHT=1",
                                 "VGPU_SCHED_REGION=" + region_name_})));
  const struct {
    int dev;
    const char* step;
  } kSteps[] = {{1, "cuCtxCreate"}, {0, "cuCtxSetCurrent"}, {1, "cuCtxPushCurrent"}, {0, "cuCtxPopCurrent"}};
  for (const auto& s : kSteps) {
    std::string rc;
    ASSERT_TRUE(c.WaitKey("launch", &rc, 20000)) << s.step << "\n" << c.StderrText();
    ASSERT_EQ(rc, "0") << s.step << "\n" << c.stdout_text() << c.StderrText();
    ASSERT_TRUE(c.WaitKey("waiting", nullptr, 20000)) << s.step;
    ExpectChargedTo(s.dev, step_ns, s.step);
    c.Send("go");
  }
  c.Finish(20000);
  EXPECT_TRUE(c.out().Has("done")) << c.stdout_text() << c.StderrText();
}

// The same through the CUDA 3.x entry points (cuCtxPushCurrent,
// cuCtxPopCurrent, cuCtxDestroy without _v2), which old binaries link and
// cuGetProcAddress returns for an old version: libvgpu hooks them too, so its
// per-thread view of the current context follows them. Each call comes right
// after a launch that cached the previous context.
TEST_P(ContextShareTest, LegacyContextCallsMoveTheLaunchesToo) {
  constexpr int kLaunches = 10;
  constexpr uint64_t kKernelUs = 2000;
  const uint64_t step_ns = kLaunches * kKernelUs * 1000;
  const std::string launch = "launch:" + std::to_string(kLaunches) + ":" + std::to_string(kKernelUs);
  region_name_ = "/vgpu-sched-" + id_;
  Proc c;
  ASSERT_TRUE(c.Start(Argv(GetParam(), {"init", "ctxnew:1", "ctx:0", launch, "wait",  // device 0
                                        "push1", launch, "wait",                      // device 1
                                        "pop1", launch, "wait",                       // device 0
                                        "push1", launch, "wait",                      // device 1
                                        "ctxdestroy1", launch, "wait"}),              // device 0
                      Env(true, {GroupVar(), "VGPU_SIM_DEVICES=2x1GiB", "VGPU_COMPUTE_WEIGHT=1",
                                 "VGPU_SCHED_REGION=" + region_name_})));
  const struct {
    int dev;
    const char* step;
  } kSteps[] = {{0, "cuCtxSetCurrent"},
                {1, "cuCtxPushCurrent"},
                {0, "cuCtxPopCurrent"},
                {1, "cuCtxPushCurrent again"},
                {0, "cuCtxDestroy of the current context"}};
  for (const auto& s : kSteps) {
    std::string rc;
    ASSERT_TRUE(c.WaitKey("launch", &rc, 20000)) << s.step << "\n" << c.StderrText();
    ASSERT_EQ(rc, "0") << s.step << "\n" << c.stdout_text() << c.StderrText();
    ASSERT_TRUE(c.WaitKey("waiting", nullptr, 20000)) << s.step;
    ExpectChargedTo(s.dev, step_ns, s.step);
    c.Send("go");
  }
  c.Finish(20000);
  EXPECT_TRUE(c.out().Has("done")) << c.stdout_text() << c.StderrText();
  for (const char* key : {"push1", "pop1", "ctxdestroy1"}) {
    EXPECT_EQ(c.out().Get(key), "0") << key << "\n" << c.stdout_text();
  }
}

}  // namespace
}  // namespace vgpu::itest
