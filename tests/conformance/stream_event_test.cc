// Streams and events: asynchrony, ordering, cross-stream dependencies, host
// functions, legacy and per-thread default streams, timing.
#include <atomic>
#include <mutex>
#include <thread>

#include "test_util.h"

namespace vgpu::conformance {
namespace {

class StreamTest : public KernelTest {
 protected:
  void SetUp() override {
    KernelTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    ASSERT_CU_OK(cuMemAlloc(&buf_, kCount * 4));
    ASSERT_CU_OK(cuMemsetD32(buf_, 0, kCount));
  }
  void TearDown() override {
    if (buf_ != 0) {
      cuCtxSynchronize();
      cuMemFree(buf_);
    }
    KernelTest::TearDown();
  }
  static constexpr size_t kCount = 4096;
  CUdeviceptr buf_ = 0;
};

TEST_F(StreamTest, CreateWithFlagsAndPriorities) {
  int least, greatest;
  ASSERT_CU_OK(cuCtxGetStreamPriorityRange(&least, &greatest));
  CUstream s;
  ASSERT_CU_OK(cuStreamCreateWithPriority(&s, CU_STREAM_NON_BLOCKING, greatest));
  int prio = 12345;
  ASSERT_CU_OK(cuStreamGetPriority(s, &prio));
  EXPECT_EQ(prio, greatest);
  unsigned flags = 0;
  ASSERT_CU_OK(cuStreamGetFlags(s, &flags));
  EXPECT_EQ(flags, unsigned{CU_STREAM_NON_BLOCKING});
  CUcontext c = nullptr;
  ASSERT_CU_OK(cuStreamGetCtx(s, &c));
  EXPECT_EQ(c, ctx_);
  ASSERT_CU_OK(cuStreamDestroy(s));
  // Out-of-range priorities are clamped.
  ASSERT_CU_OK(cuStreamCreateWithPriority(&s, 0, greatest - 100));
  ASSERT_CU_OK(cuStreamGetPriority(s, &prio));
  EXPECT_EQ(prio, greatest);
  ASSERT_CU_OK(cuStreamDestroy(s));
  ASSERT_CU_OK(cuStreamCreateWithPriority(&s, 0, least + 100));
  ASSERT_CU_OK(cuStreamGetPriority(s, &prio));
  EXPECT_EQ(prio, least);
  ASSERT_CU_OK(cuStreamGetFlags(s, &flags));
  EXPECT_EQ(flags, unsigned{CU_STREAM_DEFAULT});
  ASSERT_CU_OK(cuStreamDestroy(s));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuStreamCreate(&s, 0x80));
}

TEST_F(StreamTest, LaunchReturnsBeforeTheKernelEnds) {
  CUstream s;
  ASSERT_CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  double t0 = NowMs();
  ASSERT_CU_OK(Sleep(s, 200 * kMs));
  double launched = NowMs() - t0;
  EXPECT_LT(launched, 100.0) << "cuLaunchKernel blocked";
  EXPECT_CU(CUDA_ERROR_NOT_READY, cuStreamQuery(s));
  ASSERT_CU_OK(cuStreamSynchronize(s));
  EXPECT_GE(NowMs() - t0, 195.0);
  EXPECT_CU_OK(cuStreamQuery(s));
  ASSERT_CU_OK(cuStreamDestroy(s));
}

TEST_F(StreamTest, WorkOnOneStreamRunsInOrder) {
  CUstream s;
  ASSERT_CU_OK(cuStreamCreate(&s, 0));
  ASSERT_CU_OK(Sleep(s, 50 * kMs));
  ASSERT_CU_OK(Fill(s, buf_, 10, kCount));
  for (int i = 0; i < 5; ++i) ASSERT_CU_OK(Add(s, buf_, 1, kCount));
  ASSERT_CU_OK(cuMemsetD32Async(buf_, 100, 1, s));
  ASSERT_CU_OK(Add(s, buf_, 2, kCount));
  ASSERT_CU_OK(cuStreamSynchronize(s));
  std::vector<uint32_t> v = ReadU32(buf_, kCount);
  EXPECT_EQ(v[0], 102u);
  EXPECT_EQ(v[1], 17u);
  EXPECT_EQ(v[kCount - 1], 17u);
  ASSERT_CU_OK(cuStreamDestroy(s));
}

TEST_F(StreamTest, WaitEventAcrossStreams) {
  CUstream s1, s2;
  ASSERT_CU_OK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
  ASSERT_CU_OK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
  CUevent e;
  ASSERT_CU_OK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
  double t0 = NowMs();
  ASSERT_CU_OK(Sleep(s1, 150 * kMs));
  ASSERT_CU_OK(Fill(s1, buf_, 1, kCount));
  ASSERT_CU_OK(cuEventRecord(e, s1));
  ASSERT_CU_OK(cuStreamWaitEvent(s2, e, 0));
  ASSERT_CU_OK(cuMemsetD32Async(buf_ + 4, 5, 1, s2));  // must come after the fill
  EXPECT_CU(CUDA_ERROR_NOT_READY, cuStreamQuery(s2));
  ASSERT_CU_OK(cuStreamSynchronize(s2));
  EXPECT_GE(NowMs() - t0, 145.0);
  std::vector<uint32_t> v = ReadU32(buf_, 3);
  EXPECT_EQ(v[0], 1u);
  EXPECT_EQ(v[1], 5u);
  EXPECT_EQ(v[2], 1u);
  ASSERT_CU_OK(cuEventDestroy(e));
  ASSERT_CU_OK(cuStreamDestroy(s1));
  ASSERT_CU_OK(cuStreamDestroy(s2));
}

struct HostLog {
  std::mutex mu;
  std::vector<int> order;
  std::vector<double> when;
  std::vector<CUresult> status;
};
struct HostCall {
  HostLog* log;
  int id;
};

void CUDA_CB HostFn(void* p) {
  auto* c = static_cast<HostCall*>(p);
  std::lock_guard<std::mutex> l(c->log->mu);
  c->log->order.push_back(c->id);
  c->log->when.push_back(NowMs());
}

void CUDA_CB Callback(CUstream, CUresult status, void* p) {
  auto* c = static_cast<HostCall*>(p);
  std::lock_guard<std::mutex> l(c->log->mu);
  c->log->order.push_back(c->id);
  c->log->when.push_back(NowMs());
  c->log->status.push_back(status);
}

TEST_F(StreamTest, HostFunctionsAndCallbacksRunInStreamOrder) {
  CUstream s;
  ASSERT_CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  HostLog log;
  HostCall c1{&log, 1}, c2{&log, 2}, c3{&log, 3};
  double t0 = NowMs();
  ASSERT_CU_OK(Sleep(s, 80 * kMs));
  ASSERT_CU_OK(cuLaunchHostFunc(s, HostFn, &c1));
  ASSERT_CU_OK(Fill(s, buf_, 3, kCount));
  ASSERT_CU_OK(cuStreamAddCallback(s, Callback, &c2, 0));
  ASSERT_CU_OK(cuLaunchHostFunc(s, HostFn, &c3));
  {
    std::lock_guard<std::mutex> l(log.mu);
    EXPECT_TRUE(log.order.empty()) << "host function ran before the preceding kernel";
  }
  ASSERT_CU_OK(cuStreamSynchronize(s));
  ASSERT_EQ(log.order, (std::vector<int>{1, 2, 3}));
  EXPECT_GE(log.when[0] - t0, 75.0);
  ASSERT_EQ(log.status.size(), 1u);
  EXPECT_CU_OK(log.status[0]);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuStreamAddCallback(s, Callback, &c2, 1));
  ASSERT_CU_OK(cuStreamDestroy(s));
}

TEST_F(StreamTest, LegacyDefaultStreamSynchronizesWithBlockingStreams) {
  CUstream blocking;
  ASSERT_CU_OK(cuStreamCreate(&blocking, CU_STREAM_DEFAULT));
  double t0 = NowMs();
  ASSERT_CU_OK(Sleep(blocking, 150 * kMs));
  ASSERT_CU_OK(Fill(blocking, buf_, 1, kCount));
  // Legacy stream work waits for the blocking stream's earlier work ...
  ASSERT_CU_OK(cuMemsetD32Async(buf_, 7, 1, CU_STREAM_LEGACY));
  EXPECT_CU(CUDA_ERROR_NOT_READY, cuStreamQuery(CU_STREAM_LEGACY));
  ASSERT_CU_OK(cuStreamSynchronize(nullptr));  // NULL is the legacy stream here
  EXPECT_GE(NowMs() - t0, 145.0);
  EXPECT_EQ(ReadU32(buf_, 2), (std::vector<uint32_t>{7, 1}));
  // ... and later blocking-stream work waits for the legacy stream.
  ASSERT_CU_OK(Sleep(CU_STREAM_LEGACY, 100 * kMs));
  ASSERT_CU_OK(cuMemsetD32Async(buf_, 8, 1, blocking));
  EXPECT_CU(CUDA_ERROR_NOT_READY, cuStreamQuery(blocking));
  ASSERT_CU_OK(cuStreamSynchronize(blocking));
  EXPECT_CU_OK(cuStreamQuery(CU_STREAM_LEGACY));
  EXPECT_EQ(ReadU32(buf_, 1)[0], 8u);
  ASSERT_CU_OK(cuStreamDestroy(blocking));
}

TEST_F(StreamTest, NonBlockingStreamDoesNotSynchronizeWithLegacyStream) {
  CUstream nb;
  ASSERT_CU_OK(cuStreamCreate(&nb, CU_STREAM_NON_BLOCKING));
  ASSERT_CU_OK(Sleep(nb, 200 * kMs));
  double t0 = NowMs();
  ASSERT_CU_OK(cuMemsetD32Async(buf_, 9, 1, CU_STREAM_LEGACY));
  ASSERT_CU_OK(cuStreamSynchronize(CU_STREAM_LEGACY));
  EXPECT_LT(NowMs() - t0, 120.0) << "legacy stream waited for a non-blocking stream";
  EXPECT_CU(CUDA_ERROR_NOT_READY, cuStreamQuery(nb));
  EXPECT_EQ(ReadU32(buf_, 1)[0], 9u);
  ASSERT_CU_OK(cuStreamSynchronize(nb));
  ASSERT_CU_OK(cuStreamDestroy(nb));
}

TEST_F(StreamTest, PerThreadDefaultStream) {
  double t0 = NowMs();
  ASSERT_CU_OK(Sleep(CU_STREAM_PER_THREAD, 150 * kMs));
  EXPECT_CU(CUDA_ERROR_NOT_READY, cuStreamQuery(CU_STREAM_PER_THREAD));
  // Another thread's per-thread stream is independent of this one.
  std::atomic<double> other_done{0};
  CUresult r1 = CUDA_ERROR_UNKNOWN, r2 = CUDA_ERROR_UNKNOWN;
  std::thread t([&] {
    cuCtxSetCurrent(ctx_);
    r1 = cuMemsetD32Async(buf_ + 64, 4, 4, CU_STREAM_PER_THREAD);
    r2 = cuStreamSynchronize(CU_STREAM_PER_THREAD);
    other_done = NowMs() - t0;
  });
  t.join();
  EXPECT_CU_OK(r1);
  EXPECT_CU_OK(r2);
  EXPECT_LT(other_done.load(), 120.0);
  EXPECT_CU(CUDA_ERROR_NOT_READY, cuStreamQuery(CU_STREAM_PER_THREAD));
  ASSERT_CU_OK(Fill(CU_STREAM_PER_THREAD, buf_, 6, 16));
  ASSERT_CU_OK(cuStreamSynchronize(CU_STREAM_PER_THREAD));
  EXPECT_GE(NowMs() - t0, 145.0);
  std::vector<uint32_t> v = ReadU32(buf_, 20);
  EXPECT_EQ(v[0], 6u);
  EXPECT_EQ(v[16], 4u);
}

TEST_F(StreamTest, NonKernelWorkOverlapsWithKernels) {
  CUstream s1, s2;
  ASSERT_CU_OK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
  ASSERT_CU_OK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
  double t0 = NowMs();
  ASSERT_CU_OK(Sleep(s1, 200 * kMs));
  std::vector<uint32_t> host(kCount, 3);
  ASSERT_CU_OK(cuMemcpyHtoDAsync(buf_, host.data(), kCount * 4, s2));
  ASSERT_CU_OK(cuStreamSynchronize(s2));
  EXPECT_LT(NowMs() - t0, 120.0) << "a copy waited for a kernel on another stream";
  EXPECT_CU(CUDA_ERROR_NOT_READY, cuStreamQuery(s1));
  ASSERT_CU_OK(cuStreamSynchronize(s1));
  ASSERT_CU_OK(cuStreamDestroy(s1));
  ASSERT_CU_OK(cuStreamDestroy(s2));
}

TEST_F(StreamTest, SimKernelsOnTwoStreamsShareOneEngine) {
  SKIP_UNLESS_SIM();
  CUstream s1, s2;
  ASSERT_CU_OK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
  ASSERT_CU_OK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
  double t0 = NowMs();
  ASSERT_CU_OK(Sleep(s1, 100 * kMs));
  ASSERT_CU_OK(Sleep(s2, 100 * kMs));
  EXPECT_LT(NowMs() - t0, 80.0);
  ASSERT_CU_OK(cuCtxSynchronize());
  EXPECT_GE(NowMs() - t0, 195.0);
  ASSERT_CU_OK(cuStreamDestroy(s1));
  ASSERT_CU_OK(cuStreamDestroy(s2));
}

TEST_F(StreamTest, DestroyWithPendingWorkCompletesIt) {
  CUstream s;
  ASSERT_CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  ASSERT_CU_OK(Sleep(s, 150 * kMs));
  ASSERT_CU_OK(Fill(s, buf_, 42, kCount));
  double t0 = NowMs();
  ASSERT_CU_OK(cuStreamDestroy(s));
  EXPECT_LT(NowMs() - t0, 100.0) << "cuStreamDestroy blocked";
  ASSERT_CU_OK(cuCtxSynchronize());
  EXPECT_EQ(ReadU32(buf_ + 4 * (kCount - 1), 1)[0], 42u);
}

// ---- Events ---------------------------------------------------------------

class EventTest : public StreamTest {};

TEST_F(EventTest, RecordQuerySynchronizeElapsed) {
  CUstream s;
  ASSERT_CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUevent a, b;
  ASSERT_CU_OK(cuEventCreate(&a, CU_EVENT_DEFAULT));
  ASSERT_CU_OK(cuEventCreate(&b, CU_EVENT_BLOCKING_SYNC));
  ASSERT_CU_OK(cuEventRecord(a, s));
  ASSERT_CU_OK(Sleep(s, 100 * kMs));
  ASSERT_CU_OK(cuEventRecord(b, s));
  EXPECT_CU(CUDA_ERROR_NOT_READY, cuEventQuery(b));
  float ms = -1;
  EXPECT_CU(CUDA_ERROR_NOT_READY, cuEventElapsedTime(&ms, a, b));
  ASSERT_CU_OK(cuEventSynchronize(b));
  EXPECT_CU_OK(cuEventQuery(b));
  EXPECT_CU_OK(cuEventQuery(a));
  ASSERT_CU_OK(cuEventElapsedTime(&ms, a, b));
  EXPECT_GE(ms, 99.0f);
  EXPECT_LT(ms, 5000.0f);
  float back = 0;
  ASSERT_CU_OK(cuEventElapsedTime(&back, b, a));
  EXPECT_LE(back, -99.0f);
  // Re-recording moves the event.
  ASSERT_CU_OK(cuEventRecord(a, s));
  ASSERT_CU_OK(cuEventSynchronize(a));
  ASSERT_CU_OK(cuEventElapsedTime(&ms, b, a));
  EXPECT_GE(ms, 0.0f);
  EXPECT_LT(ms, 50.0f);
  ASSERT_CU_OK(cuEventDestroy(a));
  ASSERT_CU_OK(cuEventDestroy(b));
  ASSERT_CU_OK(cuStreamDestroy(s));
}

TEST_F(EventTest, DisableTimingAndNeverRecorded) {
  CUevent a, b, fresh;
  ASSERT_CU_OK(cuEventCreate(&a, CU_EVENT_DISABLE_TIMING));
  ASSERT_CU_OK(cuEventCreate(&b, CU_EVENT_DISABLE_TIMING));
  ASSERT_CU_OK(cuEventCreate(&fresh, CU_EVENT_DEFAULT));
  ASSERT_CU_OK(cuEventRecord(a, nullptr));
  ASSERT_CU_OK(cuEventRecord(b, nullptr));
  ASSERT_CU_OK(cuEventSynchronize(b));
  float ms;
  EXPECT_CU(CUDA_ERROR_INVALID_HANDLE, cuEventElapsedTime(&ms, a, b));
  // An event never recorded is complete.
  EXPECT_CU_OK(cuEventQuery(fresh));
  EXPECT_CU_OK(cuEventSynchronize(fresh));
  CUevent timed;
  ASSERT_CU_OK(cuEventCreate(&timed, CU_EVENT_DEFAULT));
  ASSERT_CU_OK(cuEventRecord(timed, nullptr));
  ASSERT_CU_OK(cuEventSynchronize(timed));
  EXPECT_CU(CUDA_ERROR_INVALID_HANDLE, cuEventElapsedTime(&ms, fresh, timed));
  // A stream waiting on a never-recorded event does not wait.
  ASSERT_CU_OK(cuStreamWaitEvent(nullptr, fresh, 0));
  ASSERT_CU_OK(cuStreamSynchronize(nullptr));
  for (CUevent e : {a, b, fresh, timed}) ASSERT_CU_OK(cuEventDestroy(e));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuEventCreate(&a, 0x80));
}

TEST_F(EventTest, SimTwoKernelsOnTwoStreamsSerializeInEventTime) {
  SKIP_UNLESS_SIM();
  CUstream s1, s2;
  ASSERT_CU_OK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
  ASSERT_CU_OK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
  CUevent start, e1, e2;
  ASSERT_CU_OK(cuEventCreate(&start, 0));
  ASSERT_CU_OK(cuEventCreate(&e1, 0));
  ASSERT_CU_OK(cuEventCreate(&e2, 0));
  ASSERT_CU_OK(cuEventRecord(start, s1));
  ASSERT_CU_OK(cuStreamWaitEvent(s2, start, 0));
  ASSERT_CU_OK(Sleep(s1, 100 * kMs));
  ASSERT_CU_OK(Sleep(s2, 100 * kMs));
  ASSERT_CU_OK(cuEventRecord(e1, s1));
  ASSERT_CU_OK(cuEventRecord(e2, s2));
  ASSERT_CU_OK(cuCtxSynchronize());
  float t1 = 0, t2 = 0;
  ASSERT_CU_OK(cuEventElapsedTime(&t1, start, e1));
  ASSERT_CU_OK(cuEventElapsedTime(&t2, start, e2));
  EXPECT_GE(std::max(t1, t2), 195.0f);
  EXPECT_GE(std::min(t1, t2), 95.0f);
  for (CUevent e : {start, e1, e2}) ASSERT_CU_OK(cuEventDestroy(e));
  ASSERT_CU_OK(cuStreamDestroy(s1));
  ASSERT_CU_OK(cuStreamDestroy(s2));
}

}  // namespace
}  // namespace vgpu::conformance
