// The simulated device's execution engine keeps the modelled timeline: a
// kernel occupies the engine for its modelled duration, whenever the host
// thread that ran it wakes up, and the next kernel starts where it ended.
// Checked on NodeRegion directly and through the simulated libcuda's stream
// worker. The properties are exact (no timing thresholds): only the host's
// lateness varies between runs, and it must not show.
#include <cuda.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "sim/node/node_region.h"
#include "sim/node/sim_config.h"

namespace vgpu::sim {
namespace {

// One node per test binary: libcuda attaches to one node per process.
const std::string& NodeName() {
  static const std::string name = "enginetest-" + std::to_string(getpid());
  return name;
}

class SimEngine : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    setenv("VGPU_SIM_NODE", NodeName().c_str(), 1);
    setenv("VGPU_SIM_DEVICES", "1x8GiB", 1);
    shm_unlink(NodeRegion::ShmName(NodeName()).c_str());
  }
  static void TearDownTestSuite() { shm_unlink(NodeRegion::ShmName(NodeName()).c_str()); }

  // The node as a second handle of this process (its own slot), as a stream
  // worker of another process would see it.
  NodeRegion* OpenNode() {
    SimConfig config;
    std::string error;
    EXPECT_TRUE(LoadSimConfig(&config, &error)) << error;
    NodeRegion* node = NodeRegion::Open(config, &error);
    EXPECT_NE(node, nullptr) << error;
    return node;
  }
};

TEST_F(SimEngine, ReleaseRecordsTheModelledEndNotTheWakeUp) {
  NodeRegion* node = OpenNode();
  ASSERT_NE(node, nullptr);
  DeviceState& dev = node->device(0);
  constexpr uint64_t kDuration = 300'000;  // 300 us
  uint64_t busy0 = dev.busy_ns.load(), own0 = node->self()->busy_ns[0].load();
  uint64_t runs0 = dev.kernels_run.load();
  uint64_t start = node->EngineAcquire(0, NowNs());
  // The host thread wakes up 2 ms late.
  std::this_thread::sleep_for(std::chrono::microseconds(kDuration / 1000 + 2000));
  EXPECT_EQ(node->EngineRelease(0, start, start + kDuration), start + kDuration);
  EXPECT_EQ(dev.busy_ns.load() - busy0, kDuration);
  EXPECT_EQ(node->self()->busy_ns[0].load() - own0, kDuration);
  EXPECT_EQ(dev.last_release_ns.load(), start + kDuration);
  EXPECT_EQ(dev.kernels_run.load() - runs0, 1u);
  // Work queued meanwhile starts at the modelled end, back to back.
  uint64_t next = node->EngineAcquire(0, start);
  EXPECT_EQ(next, start + kDuration);
  node->EngineRelease(0, next, next + kDuration);
  EXPECT_EQ(dev.busy_ns.load() - busy0, 2 * kDuration);
  node->Unregister();
  munmap(node->header(), sizeof(NodeHeader));
  delete node;
}

#define CK(call) ASSERT_EQ((call), CUDA_SUCCESS) << #call

// Back-to-back sleep kernels on a stream: the engine's busy time grows by
// exactly their modelled durations, events between them are that far apart,
// and the host still sees them complete no earlier than the modelled end.
TEST_F(SimEngine, StreamKernelsOccupyExactlyTheirModelledTime) {
  CK(cuInit(0));
  CUdevice dev = 0;
  CK(cuDeviceGet(&dev, 0));
  CUcontext ctx = nullptr;
  CK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CK(cuCtxSetCurrent(ctx));
  CUmodule mod = nullptr;
  CK(cuModuleLoad(&mod, "@builtin"));
  CUfunction sleep_fn = nullptr;
  CK(cuModuleGetFunction(&sleep_fn, mod, "vgpu_sim_sleep"));
  CUstream stream = nullptr;
  CK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  CUevent after_first = nullptr, after_last = nullptr;
  CK(cuEventCreate(&after_first, CU_EVENT_DEFAULT));
  CK(cuEventCreate(&after_last, CU_EVENT_DEFAULT));
  std::string error;
  NodeRegion* node = NodeRegion::Attach(NodeName(), &error);
  ASSERT_NE(node, nullptr) << error;
  DeviceState& d = node->device(0);

  constexpr uint64_t kFirst = 50'000'000;  // 50 ms: the rest is queued before it ends
  constexpr uint64_t kEach = 200'000;      // 200 us, shorter than a typical late wake-up x 5
  constexpr int kCount = 20;
  unsigned long long ns = 0;
  void* params[] = {&ns};
  uint64_t busy0 = d.busy_ns.load();
  uint64_t t0 = NowNs();
  ns = kFirst;
  CK(cuLaunchKernel(sleep_fn, 1, 1, 1, 1, 1, 1, 0, stream, params, nullptr));
  CK(cuEventRecord(after_first, stream));
  for (int i = 0; i < kCount; ++i) {
    ns = kEach;
    CK(cuLaunchKernel(sleep_fn, 1, 1, 1, 1, 1, 1, 0, stream, params, nullptr));
  }
  CK(cuEventRecord(after_last, stream));
  bool queued_in_time = NowNs() < t0 + kFirst;
  CK(cuStreamSynchronize(stream));
  uint64_t t1 = NowNs();

  EXPECT_EQ(d.busy_ns.load() - busy0, kFirst + kCount * kEach);
  EXPECT_GE(t1 - t0, kFirst + kCount * kEach);  // never reported before the modelled end
  if (queued_in_time) {
    float ms = 0;
    CK(cuEventElapsedTime(&ms, after_first, after_last));
    EXPECT_FLOAT_EQ(ms, static_cast<float>(kCount * kEach) / 1e6f);
  }
  CK(cuEventDestroy(after_first));
  CK(cuEventDestroy(after_last));
  CK(cuStreamDestroy(stream));
  CK(cuDevicePrimaryCtxRelease(dev));
  munmap(node->header(), sizeof(NodeHeader));
  delete node;
}

// VGPU_SIM_P2P: which device pairs have a peer path (both directions).
TEST(SimP2pSpecTest, PairsAllNoneAndMalformed) {
  std::vector<std::pair<int, int>> p2p;
  std::string error;
  SimConfig c;
  ASSERT_TRUE(ParseP2pSpec("none", 4, &c.p2p, &error)) << error;
  EXPECT_FALSE(c.PeerAccess(0, 1));
  ASSERT_TRUE(ParseP2pSpec("0-1,3-2", 4, &c.p2p, &error)) << error;
  EXPECT_TRUE(c.PeerAccess(1, 0));
  EXPECT_TRUE(c.PeerAccess(2, 3));
  EXPECT_FALSE(c.PeerAccess(0, 2));
  ASSERT_TRUE(ParseP2pSpec("all", 3, &c.p2p, &error)) << error;
  EXPECT_TRUE(c.PeerAccess(0, 2));
  EXPECT_TRUE(c.PeerAccess(2, 1));
  for (const char* bad : {"", "0-0", "0-4", "0", "a-b", "0-1,", "-1"}) {
    EXPECT_FALSE(ParseP2pSpec(bad, 4, &p2p, &error)) << bad;
    EXPECT_NE(error.find("VGPU_SIM_P2P"), std::string::npos) << error;
  }
}

}  // namespace
}  // namespace vgpu::sim
