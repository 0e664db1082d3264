// The residency engine's rules, on the simulated driver given as its table
// (no libvgpu, no agent): what suspend, resume, checkpoint and restore do to
// the memory and the state, and when they refuse. One simulated node per test
// process; every test uses an Engine, a vmm::Manager and a context of its own.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/counters.h"
#include "driver/real_driver.h"
#include "residency/engine.h"

namespace vgpu::residency {
namespace {

constexpr size_t kBytes = 3u << 20;  // spans more than one 2 MiB chunk

const driver::RealCuda& Sim() {
  static const driver::RealCuda* t = [] {
    auto* table = new driver::RealCuda();
    if (!driver::LoadCuda(VGPU_SIM_LIBCUDA, table)) table->handle = nullptr;
    return table;
  }();
  return *t;
}

class SimNode : public ::testing::Environment {
 public:
  void SetUp() override {
    setenv("VGPU_SIM_NODE", name_.c_str(), 1);
    setenv("VGPU_SIM_DEVICES", "1x256MiB", 1);
    ASSERT_NE(Sim().handle, nullptr) << "cannot load " << VGPU_SIM_LIBCUDA;
    ASSERT_EQ(Sim().cuInit_(0), CUDA_SUCCESS);
  }
  void TearDown() override { shm_unlink(("/vgpu-sim-" + name_).c_str()); }

 private:
  std::string name_ = "residency-unit-" + std::to_string(getpid());
};
const auto* const g_node = ::testing::AddGlobalTestEnvironment(new SimNode);

class ResidencyEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(Sim().cuCtxCreate_v2_(&ctx_, 0, 0), CUDA_SUCCESS);
    dir_ = std::filesystem::temp_directory_path() /
           ("residency-engine-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    ASSERT_EQ(vmm_.Alloc(0, ctx_, kBytes, nullptr, &va_), CUDA_SUCCESS);
    pattern_.resize(kBytes);
    for (size_t i = 0; i < kBytes; ++i) pattern_[i] = static_cast<uint8_t>(i * 7 + 3);
    ASSERT_EQ(Sim().cuMemcpyHtoD_v2_(va_, pattern_.data(), kBytes), CUDA_SUCCESS);
  }
  void TearDown() override {
    if (engine_.state() != State::kRunning) engine_.Resume({});
    vmm_.Free(va_, nullptr);
    Sim().cuCtxDestroy_v2_(ctx_);
    std::filesystem::remove_all(dir_);
  }

  std::vector<uint8_t> Read() {
    std::vector<uint8_t> out(kBytes);
    EXPECT_EQ(Sim().cuMemcpyDtoH_v2_(out.data(), va_, kBytes), CUDA_SUCCESS);
    return out;
  }
  std::string Image() {
    for (const auto& e : std::filesystem::directory_iterator(dir_)) return e.path().string();
    return "";
  }

  uint64_t non_migratable_ = 0;
  std::string sharing_;
  CUcontext ctx_ = nullptr;
  vmm::Manager vmm_{Sim()};
  Engine engine_{EnginePorts{.cuda = &Sim(),
                             .vmm = &vmm_,
                             .non_migratable_bytes = [this] { return non_migratable_; },
                             .sharing_refusal = [this] { return sharing_; }}};
  CUdeviceptr va_ = 0;
  std::vector<uint8_t> pattern_;
  std::filesystem::path dir_;
};

TEST_F(ResidencyEngineTest, SuspendReleasesTheMemoryAndResumeBringsItBack) {
  const uint64_t suspends = counters::Get(counters::Id::kSuspends);
  Result r = engine_.Suspend({});
  ASSERT_TRUE(r.ok()) << r.status().message;
  EXPECT_EQ(engine_.state(), State::kSuspended);
  EXPECT_GE(r->bytes, kBytes);
  EXPECT_EQ(vmm_.MappedBytes(), 0u);
  EXPECT_TRUE(g_gate_closed.load()) << "a suspended process keeps its gate closed";
  EXPECT_EQ(counters::Get(counters::Id::kSuspends), suspends + 1);
  r = engine_.Resume({});
  ASSERT_TRUE(r.ok()) << r.status().message;
  EXPECT_EQ(engine_.state(), State::kRunning);
  EXPECT_FALSE(g_gate_closed.load());
  EXPECT_EQ(Read(), pattern_);
}

TEST_F(ResidencyEngineTest, WrongStatesAreRefusedWithEbusy) {
  Result r = engine_.Resume({});
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code, ErrorCode::kBusy);
  ASSERT_TRUE(engine_.Suspend({}).ok());
  r = engine_.Suspend({});
  EXPECT_EQ(r.status().code, ErrorCode::kBusy);
  EXPECT_EQ(engine_.state(), State::kSuspended);
}

TEST_F(ResidencyEngineTest, NonMigratableMemoryRefusesSuspendAndCheckpointAndLeavesTheGateOpen) {
  non_migratable_ = 4096;
  const uint64_t suspends = counters::Get(counters::Id::kSuspends);
  Result r = engine_.Suspend({});
  EXPECT_EQ(r.status().code, ErrorCode::kBusy);
  EXPECT_NE(r.status().message.find("4096 bytes of non-migratable"), std::string::npos)
      << r.status().message;
  r = engine_.Checkpoint(dir_.string(), false, {});
  EXPECT_EQ(r.status().code, ErrorCode::kBusy);
  EXPECT_EQ(engine_.state(), State::kRunning);
  EXPECT_FALSE(g_gate_closed.load());
  EXPECT_EQ(counters::Get(counters::Id::kSuspends), suspends) << "a refusal counts nothing";
  EXPECT_EQ(Read(), pattern_);
}

// Memory shared with another process (CUDA IPC) is never moved from under it.
TEST_F(ResidencyEngineTest, SharedMemoryRefusesSuspendAndCheckpointWithThePeers) {
  sharing_ = "memory shared with PIDs 12, 34 (CUDA IPC)";
  Result r = engine_.Suspend({});
  EXPECT_EQ(r.status().code, ErrorCode::kBusy);
  EXPECT_EQ(r.status().message, sharing_);
  r = engine_.Checkpoint(dir_.string(), false, {});
  EXPECT_EQ(r.status().code, ErrorCode::kBusy);
  EXPECT_EQ(engine_.state(), State::kRunning);
  EXPECT_FALSE(g_gate_closed.load());
  EXPECT_EQ(Read(), pattern_);
  sharing_.clear();
  EXPECT_TRUE(engine_.Suspend({}).ok());
  EXPECT_TRUE(engine_.Resume({}).ok());
}

TEST_F(ResidencyEngineTest, CheckpointThenResumeRestoresFromTheImage) {
  Result r = engine_.Checkpoint(dir_.string(), /*leave_running=*/false, {});
  ASSERT_TRUE(r.ok()) << r.status().message;
  EXPECT_EQ(engine_.state(), State::kCheckpointed);
  EXPECT_EQ(vmm_.MappedBytes(), 0u);
  EXPECT_EQ(r->path, Image());
  r = engine_.Checkpoint(dir_.string(), false, {});
  EXPECT_EQ(r.status().code, ErrorCode::kBusy) << "the image is the only copy: never replaced";
  r = engine_.Resume({});  // from the image
  ASSERT_TRUE(r.ok()) << r.status().message;
  EXPECT_EQ(engine_.state(), State::kRunning);
  EXPECT_EQ(Read(), pattern_);
}

TEST_F(ResidencyEngineTest, RestoreOfARunningProcessRollsItsMemoryBack) {
  ASSERT_TRUE(engine_.Checkpoint(dir_.string(), /*leave_running=*/true, {}).ok());
  EXPECT_EQ(engine_.state(), State::kRunning);
  std::vector<uint8_t> other(kBytes, 0xee);
  ASSERT_EQ(Sim().cuMemcpyHtoD_v2_(va_, other.data(), kBytes), CUDA_SUCCESS);
  Result r = engine_.Restore(dir_.string(), {});
  ASSERT_TRUE(r.ok()) << r.status().message;
  EXPECT_EQ(Read(), pattern_);
}

TEST_F(ResidencyEngineTest, ACheckpointNeverReplacesAFileItDidNotWrite) {
  ASSERT_TRUE(engine_.Checkpoint(dir_.string(), true, {}).ok());
  const std::string image = Image();
  // Its own image is replaced (atomically)...
  ASSERT_TRUE(engine_.Checkpoint(dir_.string(), true, {}).ok());
  // ...another file under that name is not, even on the inode ours had
  // (deleted, the inode is handed out again at once).
  std::filesystem::remove(image);
  std::ofstream(image) << "another job's image";
  Result r = engine_.Checkpoint(dir_.string(), true, {});
  EXPECT_EQ(r.status().code, ErrorCode::kExist) << r.status().message;
  std::ifstream in(image);
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(content, "another job's image");
}

TEST_F(ResidencyEngineTest, ADamagedImageIsRefusedAndNothingChanges) {
  ASSERT_TRUE(engine_.Checkpoint(dir_.string(), true, {}).ok());
  const std::string image = Image();
  {
    std::fstream f(image, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(std::filesystem::file_size(image) / 2));
    const char garbage[64] = {1, 2, 3, 4, 5, 6, 7, 8};
    f.write(garbage, sizeof garbage);
  }
  std::vector<uint8_t> other(kBytes, 0x5a);
  ASSERT_EQ(Sim().cuMemcpyHtoD_v2_(va_, other.data(), kBytes), CUDA_SUCCESS);
  Result r = engine_.Restore(image, {});
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(engine_.state(), State::kRunning);
  EXPECT_FALSE(g_gate_closed.load());
  EXPECT_EQ(Read(), other) << "a refused restore must not touch the memory";
}

TEST_F(ResidencyEngineTest, AnImageOfOtherAllocationsIsRefused) {
  ASSERT_TRUE(engine_.Checkpoint(dir_.string(), true, {}).ok());
  CUdeviceptr extra = 0;
  ASSERT_EQ(vmm_.Alloc(0, ctx_, 1 << 20, nullptr, &extra), CUDA_SUCCESS);
  Result r = engine_.Restore(dir_.string(), {});
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.status().message.find("does not match this process"), std::string::npos)
      << r.status().message;
  EXPECT_EQ(engine_.state(), State::kRunning);
  vmm_.Free(extra, nullptr);
}

TEST_F(ResidencyEngineTest, RestoreWithoutAnyCheckpointIsENOENT) {
  Result r = engine_.Restore("", {});
  EXPECT_EQ(r.status().code, ErrorCode::kNoEnt);
  r = engine_.Restore(dir_.string() + "/missing.vgpuckpt", {});
  EXPECT_EQ(r.status().code, ErrorCode::kNoEnt);
}

}  // namespace
}  // namespace vgpu::residency
