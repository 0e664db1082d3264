// The driver checkpoint API (cuCheckpointProcess*, r580+ / CUDA 13) called on
// another process: states, transitions, errors, what LOCKED and CHECKPOINTED
// mean, and restore with GPU pairs. CheckpointApiTest is portable (also runs
// on a real driver, label gpu); SimCheckpointTest needs two devices of the
// simulated node.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "test_util.h"

namespace vgpu::conformance {
namespace {

constexpr size_t kJobBytes = 256ull << 20;

class CheckpointApiTest : public ContextTest {
 protected:
  void SetUp() override {
    ContextTest::SetUp();
    if (IsSkipped()) return;
    ASSERT_CU_OK(cuDeviceGetUuid_v2(&uuid_, dev_));
  }

  void TearDown() override {
    if (job_.pid > 0) {
      CUprocessState st = CU_PROCESS_STATE_RUNNING;
      if (cuCheckpointProcessGetState(job_.pid, &st) == CUDA_SUCCESS) {
        if (st == CU_PROCESS_STATE_CHECKPOINTED) cuCheckpointProcessRestore(job_.pid, nullptr);
        if (st != CU_PROCESS_STATE_RUNNING) cuCheckpointProcessUnlock(job_.pid, nullptr);
      }
      WriteLine(&job_, "quit");
      WaitChild(&job_);
    }
    ContextTest::TearDown();
  }

  void StartJob(size_t bytes, const std::vector<std::string>& env = {}) {
    ASSERT_TRUE(SpawnChild(CONF_CHILD_PATH, {"ckptjob", std::to_string(bytes), CONF_CUBIN_PATH}, env,
                           &job_));
    std::string line;
    ASSERT_TRUE(ReadLine(&job_, &line, 20000));
    ASSERT_EQ(line, "ready 0");
  }

  // Sends a command to the job and returns its answer ("" on timeout).
  std::string Ask(const std::string& command, int timeout_ms = 20000) {
    std::string line;
    if (!WriteLine(&job_, command) || !ReadLine(&job_, &line, timeout_ms)) return "";
    return line;
  }

  CUprocessState State() {
    CUprocessState st = CU_PROCESS_STATE_FAILED;
    EXPECT_CU_OK(cuCheckpointProcessGetState(job_.pid, &st));
    return st;
  }

  uint64_t FreeBytes() {
    size_t free = 0, total = 0;
    EXPECT_CU_OK(cuMemGetInfo(&free, &total));
    return free;
  }

  CUcheckpointGpuPair Pair(const CUuuid& from, const CUuuid& to) {
    CUcheckpointGpuPair p{};
    p.oldUuid = from;
    p.newUuid = to;
    return p;
  }

  Child job_;
  CUuuid uuid_{};
};

TEST_F(CheckpointApiTest, WalksTheDocumentedStatesAndRefusesEveryWrongTransition) {
  StartJob(kJobBytes);
  const int pid = job_.pid;
  EXPECT_EQ(State(), CU_PROCESS_STATE_RUNNING);
  EXPECT_CU(CUDA_ERROR_ILLEGAL_STATE, cuCheckpointProcessCheckpoint(pid, nullptr));
  EXPECT_CU(CUDA_ERROR_ILLEGAL_STATE, cuCheckpointProcessRestore(pid, nullptr));
  EXPECT_CU(CUDA_ERROR_ILLEGAL_STATE, cuCheckpointProcessUnlock(pid, nullptr));
  EXPECT_EQ(State(), CU_PROCESS_STATE_RUNNING);

  ASSERT_CU_OK(cuCheckpointProcessLock(pid, nullptr));
  EXPECT_EQ(State(), CU_PROCESS_STATE_LOCKED);
  EXPECT_CU(CUDA_ERROR_ILLEGAL_STATE, cuCheckpointProcessLock(pid, nullptr));
  EXPECT_CU(CUDA_ERROR_ILLEGAL_STATE, cuCheckpointProcessRestore(pid, nullptr));

  ASSERT_CU_OK(cuCheckpointProcessCheckpoint(pid, nullptr));
  EXPECT_EQ(State(), CU_PROCESS_STATE_CHECKPOINTED);
  EXPECT_CU(CUDA_ERROR_ILLEGAL_STATE, cuCheckpointProcessCheckpoint(pid, nullptr));
  EXPECT_CU(CUDA_ERROR_ILLEGAL_STATE, cuCheckpointProcessLock(pid, nullptr));
  EXPECT_CU(CUDA_ERROR_ILLEGAL_STATE, cuCheckpointProcessUnlock(pid, nullptr));

  ASSERT_CU_OK(cuCheckpointProcessRestore(pid, nullptr));
  EXPECT_EQ(State(), CU_PROCESS_STATE_LOCKED);  // restore leaves it locked
  ASSERT_CU_OK(cuCheckpointProcessUnlock(pid, nullptr));
  EXPECT_EQ(State(), CU_PROCESS_STATE_RUNNING);
  // Memory, stream, event and context came back at the same handles.
  EXPECT_EQ(Ask("check"), "check 0 0 0 0");
}

TEST_F(CheckpointApiTest, RestoreThreadIsAThreadOfTheJob) {
  StartJob(1 << 20);
  int tid = 0;
  CUresult r = CUDA_ERROR_NOT_READY;
  for (int i = 0; i < 100 && r == CUDA_ERROR_NOT_READY; ++i, usleep(10000)) {
    r = cuCheckpointProcessGetRestoreThreadId(job_.pid, &tid);
  }
  ASSERT_CU_OK(r);
  struct stat st;
  std::string task = "/proc/" + std::to_string(job_.pid) + "/task/" + std::to_string(tid);
  EXPECT_EQ(stat(task.c_str(), &st), 0) << task;
  EXPECT_NE(tid, job_.pid);
}

TEST_F(CheckpointApiTest, LockedJobsCudaCallsWaitUntilUnlock) {
  StartJob(1 << 20);
  ASSERT_CU_OK(cuCheckpointProcessLock(job_.pid, nullptr));
  ASSERT_TRUE(WriteLine(&job_, "alloc"));
  std::string line;
  EXPECT_FALSE(ReadLine(&job_, &line, 300)) << "answered while locked: " << line;
  ASSERT_CU_OK(cuCheckpointProcessUnlock(job_.pid, nullptr));
  ASSERT_TRUE(ReadLine(&job_, &line, 10000));
  EXPECT_EQ(line, "alloc 0");
}

// Which calls of a locked process wait (driver 580, H100: the three that
// submit or allocate wait; a stream query, an attribute query and a
// synchronize with nothing queued return). Prints one line per call.
TEST_F(CheckpointApiTest, LockHoldsCallsThatSubmitOrAllocateAndLetsQueriesThrough) {
  StartJob(1 << 20);
  for (const char* call : {"memset", "alloc", "launch", "query", "attr", "call"}) {
    std::string command = std::string(call) == "launch" ? "sleep 0" : call;
    ASSERT_CU_OK(cuCheckpointProcessLock(job_.pid, nullptr));
    ASSERT_TRUE(WriteLine(&job_, command));
    std::string line;
    bool answered = ReadLine(&job_, &line, 300);
    ASSERT_CU_OK(cuCheckpointProcessUnlock(job_.pid, nullptr));
    if (!answered) ASSERT_TRUE(ReadLine(&job_, &line, 10000)) << call;
    std::printf("locked job, %-7s %s (%s)\n", call, answered ? "went through" : "waited", line.c_str());
    const std::string c = call;
    EXPECT_EQ(answered, c == "query" || c == "attr" || c == "call") << c;
  }
}

TEST_F(CheckpointApiTest, CheckpointAndRestoreThroughput) {
  const size_t bytes = GpuTarget() ? (8ull << 30) : (512ull << 20);
  StartJob(bytes);
  double t0 = NowMs();
  ASSERT_CU_OK(cuCheckpointProcessLock(job_.pid, nullptr));
  double t1 = NowMs();
  ASSERT_CU_OK(cuCheckpointProcessCheckpoint(job_.pid, nullptr));
  double t2 = NowMs();
  ASSERT_CU_OK(cuCheckpointProcessRestore(job_.pid, nullptr));
  double t3 = NowMs();
  ASSERT_CU_OK(cuCheckpointProcessUnlock(job_.pid, nullptr));
  double t4 = NowMs();
  const double gb = static_cast<double>(bytes) / 1e9;
  std::printf("RESULT ckpt_api bytes=%zu lock_ms=%.1f checkpoint_ms=%.1f (%.2f GB/s) restore_ms=%.1f "
              "(%.2f GB/s) unlock_ms=%.1f\n",
              bytes, t1 - t0, t2 - t1, gb / ((t2 - t1) / 1e3), t3 - t2, gb / ((t3 - t2) / 1e3), t4 - t3);
  EXPECT_EQ(Ask("check", 60000), "check 0 0 0 0");
}

TEST_F(CheckpointApiTest, CheckpointFreesTheDeviceMemoryAndRestoreTakesItBack) {
  StartJob(kJobBytes);
  const uint64_t before = FreeBytes();
  ASSERT_CU_OK(cuCheckpointProcessLock(job_.pid, nullptr));
  ASSERT_CU_OK(cuCheckpointProcessCheckpoint(job_.pid, nullptr));
  const uint64_t checkpointed = FreeBytes();
  EXPECT_GE(checkpointed, before + kJobBytes) << "free before " << before;
  ASSERT_CU_OK(cuCheckpointProcessRestore(job_.pid, nullptr));
  EXPECT_LE(FreeBytes(), checkpointed - kJobBytes);
  ASSERT_CU_OK(cuCheckpointProcessUnlock(job_.pid, nullptr));
  EXPECT_EQ(Ask("check"), "check 0 0 0 0");
}

TEST_F(CheckpointApiTest, RestoreWithAPairOntoTheSameGpuKeepsTheData) {
  StartJob(kJobBytes);
  ASSERT_CU_OK(cuCheckpointProcessLock(job_.pid, nullptr));
  ASSERT_CU_OK(cuCheckpointProcessCheckpoint(job_.pid, nullptr));
  CUcheckpointGpuPair pair = Pair(uuid_, uuid_);
  CUcheckpointRestoreArgs args{};
  args.gpuPairs = &pair;
  args.gpuPairsCount = 1;
  ASSERT_CU_OK(cuCheckpointProcessRestore(job_.pid, &args));
  ASSERT_CU_OK(cuCheckpointProcessUnlock(job_.pid, nullptr));
  EXPECT_EQ(Ask("check"), "check 0 0 0 0");
}

TEST_F(CheckpointApiTest, RestoreOntoAnUnknownGpuFailsAndLeavesTheJobCheckpointed) {
  StartJob(1 << 20);
  ASSERT_CU_OK(cuCheckpointProcessLock(job_.pid, nullptr));
  ASSERT_CU_OK(cuCheckpointProcessCheckpoint(job_.pid, nullptr));
  CUuuid nowhere{};
  std::memset(nowhere.bytes, 0x5a, sizeof nowhere.bytes);
  CUcheckpointGpuPair pair = Pair(uuid_, nowhere);
  CUcheckpointRestoreArgs args{};
  args.gpuPairs = &pair;
  args.gpuPairsCount = 1;
  EXPECT_NE(cuCheckpointProcessRestore(job_.pid, &args), CUDA_SUCCESS);
  EXPECT_EQ(State(), CU_PROCESS_STATE_CHECKPOINTED);
  ASSERT_CU_OK(cuCheckpointProcessRestore(job_.pid, nullptr));
  ASSERT_CU_OK(cuCheckpointProcessUnlock(job_.pid, nullptr));
  EXPECT_EQ(Ask("check"), "check 0 0 0 0");
}

TEST_F(CheckpointApiTest, NonZeroReservedArgumentsAreInvalid) {
  StartJob(1 << 20);
  CUcheckpointLockArgs lock{};
  lock.reserved0 = 1;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuCheckpointProcessLock(job_.pid, &lock));
  EXPECT_EQ(State(), CU_PROCESS_STATE_RUNNING);
}

TEST_F(CheckpointApiTest, AProcessWithoutCudaHasNoState) {
  Child plain;
  ASSERT_TRUE(SpawnChild("/bin/sleep", {"10"}, {}, &plain));
  CUprocessState st;
  CUresult r = cuCheckpointProcessGetState(plain.pid, &st);
  KillChild(&plain);
  EXPECT_NE(r, CUDA_SUCCESS);
}

TEST_F(CheckpointApiTest, CallerMustHaveCalledCuInit) {
  int status = 0;
  std::string out = RunChild({"noinit"}, {}, &status);
  EXPECT_NE(out.find("ckptstate 3\n"), std::string::npos) << out;  // NOT_INITIALIZED
}

TEST_F(CheckpointApiTest, LockWithATimeoutWhileWorkRunsLeavesTheJobRunning) {
  StartJob(1 << 20);
  ASSERT_EQ(Ask("sleep 2000000000"), "launched 0");  // a 2 s kernel
  CUcheckpointLockArgs lock{};
  lock.timeoutMs = 200;
  const double t0 = NowMs();
  CUresult r = cuCheckpointProcessLock(job_.pid, &lock);
  const double waited = NowMs() - t0;
  if (r == CUDA_SUCCESS) {
    // Some drivers lock without waiting for queued work; then it must be held.
    EXPECT_EQ(State(), CU_PROCESS_STATE_LOCKED);
    ASSERT_CU_OK(cuCheckpointProcessUnlock(job_.pid, nullptr));
    GTEST_SKIP() << "the driver locked in " << waited << " ms with a kernel running";
  }
  EXPECT_CU(CUDA_ERROR_NOT_READY, r) << "after " << waited << " ms";
  EXPECT_LT(waited, 1500);
  EXPECT_EQ(State(), CU_PROCESS_STATE_RUNNING);
  EXPECT_EQ(Ask("call"), "call 0");
}

// --- Simulated node only: two devices, remapping and capacity. ---

class SimCheckpointTest : public CheckpointApiTest {
 protected:
  void SetUp() override {
    SKIP_UNLESS_SIM();
    CheckpointApiTest::SetUp();
    int n = 0;
    ASSERT_CU_OK(cuDeviceGetCount(&n));
    if (n < 2) GTEST_SKIP() << "needs two devices";
    ASSERT_CU_OK(cuDeviceGetUuid_v2(&uuid1_, 1));
  }

  uint64_t FreeOn(int device) {
    CUcontext c;
    size_t free = 0, total = 0;
    EXPECT_CU_OK(cuDevicePrimaryCtxRetain(&c, device));
    EXPECT_CU_OK(cuCtxPushCurrent(c));
    EXPECT_CU_OK(cuMemGetInfo(&free, &total));
    EXPECT_CU_OK(cuCtxPopCurrent(&c));
    EXPECT_CU_OK(cuDevicePrimaryCtxRelease(device));
    return free;
  }

  CUresult RestoreOnto(const CUuuid& target) {
    CUcheckpointGpuPair pair = Pair(uuid_, target);
    CUcheckpointRestoreArgs args{};
    args.gpuPairs = &pair;
    args.gpuPairsCount = 1;
    return cuCheckpointProcessRestore(job_.pid, &args);
  }

  CUuuid uuid1_{};
};

std::string Hex(const CUuuid& u) {
  char buf[40];
  for (int i = 0; i < 16; ++i) {
    std::snprintf(buf + 2 * i, 3, "%02x", static_cast<unsigned char>(u.bytes[i]));
  }
  return buf;
}

TEST_F(SimCheckpointTest, RestoreOntoTheOtherDeviceMovesTheJobAndItsMemory) {
  StartJob(kJobBytes);
  const uint64_t free0 = FreeOn(0), free1 = FreeOn(1);
  ASSERT_CU_OK(cuCheckpointProcessLock(job_.pid, nullptr));
  ASSERT_CU_OK(cuCheckpointProcessCheckpoint(job_.pid, nullptr));
  ASSERT_CU_OK(RestoreOnto(uuid1_));
  ASSERT_CU_OK(cuCheckpointProcessUnlock(job_.pid, nullptr));
  EXPECT_GE(FreeOn(0), free0 + kJobBytes);
  EXPECT_LE(FreeOn(1), free1 - kJobBytes);
  // Same ordinal, same handles and addresses; the ordinal now names device 1.
  EXPECT_EQ(Ask("check"), "check 0 0 0 0");
  EXPECT_EQ(Ask("uuid"), "uuid 0 " + Hex(uuid1_));
  EXPECT_EQ(Ask("call"), "call 0");
}

TEST_F(SimCheckpointTest, RestoreOntoADeviceWithoutRoomFailsAndKeepsTheJobCheckpointed) {
  StartJob(kJobBytes);
  // Fill device 1 but for less than the job needs.
  CUdeviceptr hog = 0;
  CUcontext c1;
  ASSERT_CU_OK(cuDevicePrimaryCtxRetain(&c1, 1));
  ASSERT_CU_OK(cuCtxPushCurrent(c1));
  size_t free = 0, total = 0;
  ASSERT_CU_OK(cuMemGetInfo(&free, &total));
  ASSERT_CU_OK(cuMemAlloc(&hog, free - kJobBytes / 2));
  ASSERT_CU_OK(cuCtxPopCurrent(&c1));

  ASSERT_CU_OK(cuCheckpointProcessLock(job_.pid, nullptr));
  ASSERT_CU_OK(cuCheckpointProcessCheckpoint(job_.pid, nullptr));
  EXPECT_CU(CUDA_ERROR_OUT_OF_MEMORY, RestoreOnto(uuid1_));
  EXPECT_EQ(State(), CU_PROCESS_STATE_CHECKPOINTED);
  ASSERT_CU_OK(cuCheckpointProcessRestore(job_.pid, nullptr));  // back where it was
  ASSERT_CU_OK(cuCheckpointProcessUnlock(job_.pid, nullptr));
  EXPECT_EQ(Ask("check"), "check 0 0 0 0");
  EXPECT_EQ(Ask("uuid"), "uuid 0 " + Hex(uuid_));

  ASSERT_CU_OK(cuCtxPushCurrent(c1));
  EXPECT_CU_OK(cuMemFree(hog));
  ASSERT_CU_OK(cuCtxPopCurrent(&c1));
  EXPECT_CU_OK(cuDevicePrimaryCtxRelease(1));
}

TEST_F(SimCheckpointTest, PairsMustCoverEveryCheckpointedGpu) {
  StartJob(kJobBytes);
  ASSERT_CU_OK(cuCheckpointProcessLock(job_.pid, nullptr));
  ASSERT_CU_OK(cuCheckpointProcessCheckpoint(job_.pid, nullptr));
  CUcheckpointGpuPair pair = Pair(uuid1_, uuid_);  // device 1 -> 0: the job is on 0
  CUcheckpointRestoreArgs args{};
  args.gpuPairs = &pair;
  args.gpuPairsCount = 1;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuCheckpointProcessRestore(job_.pid, &args));
  EXPECT_EQ(State(), CU_PROCESS_STATE_CHECKPOINTED);
}

TEST_F(SimCheckpointTest, CheckpointAndRestoreTakeTheModelledCopyTime) {
  // The default rates (driver 580 on an H100): 256 MiB take 117 ms to
  // checkpoint at 2.30 GB/s and 45 ms to restore at 5.97 GB/s.
  StartJob(kJobBytes);
  ASSERT_CU_OK(cuCheckpointProcessLock(job_.pid, nullptr));
  double t0 = NowMs();
  ASSERT_CU_OK(cuCheckpointProcessCheckpoint(job_.pid, nullptr));
  double t1 = NowMs();
  ASSERT_CU_OK(cuCheckpointProcessRestore(job_.pid, nullptr));
  double t2 = NowMs();
  ASSERT_CU_OK(cuCheckpointProcessUnlock(job_.pid, nullptr));
  EXPECT_GE(t1 - t0, 110.0);
  EXPECT_GE(t2 - t1, 42.0);
}

TEST_F(SimCheckpointTest, AJobKilledWhileCheckpointedLeavesNothingBehind) {
  StartJob(kJobBytes);
  const int pid = job_.pid;
  ASSERT_CU_OK(cuCheckpointProcessLock(pid, nullptr));
  KillChild(&job_);
  job_.pid = -1;
  CUprocessState st;
  EXPECT_NE(cuCheckpointProcessGetState(pid, &st), CUDA_SUCCESS);
  EXPECT_NE(cuCheckpointProcessCheckpoint(pid, nullptr), CUDA_SUCCESS);
}

}  // namespace
}  // namespace vgpu::conformance
