// Several processes on one simulated node: shared capacity, recovery of a
// killed process's memory, one execution engine per device.
#include <signal.h>
#include <sys/wait.h>

#include <sstream>

#include "test_util.h"

namespace vgpu::conformance {
namespace {

class SimMultiProcessTest : public ContextTest {
 protected:
  void SetUp() override {
    ContextTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    SKIP_UNLESS_SIM();
  }
  // Starts `conformance_child alloc BYTES` on this process's node and returns
  // the code of its allocation.
  int StartAlloc(Child* c, size_t bytes) {
    if (!SpawnChild(CONF_CHILD_PATH, {"alloc", std::to_string(bytes)}, {}, c)) return -1;
    std::string line;
    if (!ReadLine(c, &line, 20000)) return -2;
    if (line.rfind("alloc ", 0) != 0) return -3;
    return std::stoi(line.substr(6));
  }
};

TEST_F(SimMultiProcessTest, CapacityIsSharedAcrossProcesses) {
  size_t total = 0;
  ASSERT_CU_OK(cuDeviceTotalMem(&total, dev_));
  const size_t kChild = total * 5 / 8;  // lazily backed: costs nothing
  Child child;
  ASSERT_EQ(StartAlloc(&child, kChild), 0);
  // Together more than the device: this process's allocation fails.
  CUdeviceptr p = 0;
  EXPECT_CU(CUDA_ERROR_OUT_OF_MEMORY, cuMemAlloc(&p, total / 2));
  size_t free_b, total_b;
  ASSERT_CU_OK(cuMemGetInfo(&free_b, &total_b));
  EXPECT_LE(free_b, total - kChild) << "cuMemGetInfo ignores the other process";
  // The child frees on request; then it fits.
  ASSERT_TRUE(WriteLine(&child, "free"));
  std::string line;
  ASSERT_TRUE(ReadLine(&child, &line, 20000));
  EXPECT_EQ(line, "freed");
  int status = WaitChild(&child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ASSERT_CU_OK(cuMemAlloc(&p, total / 2));
  ASSERT_CU_OK(cuMemFree(p));
}

TEST_F(SimMultiProcessTest, KilledProcessReleasesItsMemory) {
  size_t total = 0;
  ASSERT_CU_OK(cuDeviceTotalMem(&total, dev_));
  Child child;
  ASSERT_EQ(StartAlloc(&child, total * 3 / 4), 0);
  CUdeviceptr p = 0;
  EXPECT_CU(CUDA_ERROR_OUT_OF_MEMORY, cuMemAlloc(&p, total / 2));
  KillChild(&child);  // SIGKILL: no chance to clean up
  ASSERT_CU_OK(cuMemAlloc(&p, total / 2)) << "a dead process's memory was not reclaimed";
  ASSERT_CU_OK(cuMemFree(p));
  size_t free_b, total_b;
  ASSERT_CU_OK(cuMemGetInfo(&free_b, &total_b));
  EXPECT_GE(free_b, total - (size_t{64} << 20));
}

TEST_F(SimMultiProcessTest, ProcessExitReleasesMemoryWithoutFree) {
  size_t free0, total;
  ASSERT_CU_OK(cuMemGetInfo(&free0, &total));
  int status = 0;
  std::string out = RunChild({"allocs", std::to_string(size_t{1} << 30), "3"}, {}, &status);
  ASSERT_TRUE(WIFEXITED(status)) << out;
  EXPECT_NE(out.find("alloc 3 0"), std::string::npos) << out;
  size_t free1;
  ASSERT_CU_OK(cuMemGetInfo(&free1, &total));
  EXPECT_EQ(free1, free0);
}

TEST_F(SimMultiProcessTest, EngineIsSharedAcrossProcesses) {
  Child a, b;
  ASSERT_TRUE(SpawnChild(CONF_CHILD_PATH, {"sleep", std::to_string(150 * kMs)}, {}, &a));
  ASSERT_TRUE(SpawnChild(CONF_CHILD_PATH, {"sleep", std::to_string(150 * kMs)}, {}, &b));
  std::string line;
  ASSERT_TRUE(ReadLine(&a, &line, 20000));
  ASSERT_EQ(line, "ready");
  ASSERT_TRUE(ReadLine(&b, &line, 20000));
  ASSERT_EQ(line, "ready");
  ASSERT_TRUE(WriteLine(&a, "go"));
  ASSERT_TRUE(WriteLine(&b, "go"));
  uint64_t t0[2], t1[2];
  int rl[2], rs[2];
  Child* kids[] = {&a, &b};
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(ReadLine(kids[i], &line, 20000));
    std::istringstream in(line);
    std::string tag;
    in >> tag >> t0[i] >> t1[i] >> rl[i] >> rs[i];
    ASSERT_EQ(tag, "times") << line;
    EXPECT_EQ(rl[i], 0);
    EXPECT_EQ(rs[i], 0);
  }
  WaitChild(&a);
  WaitChild(&b);
  // Both launched at about the same time ...
  uint64_t start_gap = t0[0] > t0[1] ? t0[0] - t0[1] : t0[1] - t0[0];
  ASSERT_LT(start_gap, 100 * kMs) << "children did not start together; test is inconclusive";
  // ... yet one kernel had to wait for the other.
  uint64_t span = std::max(t1[0], t1[1]) - std::min(t0[0], t0[1]);
  EXPECT_GE(span, 295 * kMs) << "kernels of two processes overlapped on one engine";
  for (int i = 0; i < 2; ++i) EXPECT_GE(t1[i] - t0[i], 145 * kMs);
}

}  // namespace
}  // namespace vgpu::conformance
