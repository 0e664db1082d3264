// Primary contexts, created contexts and the per-thread context stack.
#include <dlfcn.h>

#include <thread>

#include "test_util.h"

namespace vgpu::conformance {
namespace {

class ContextStackTest : public DriverTest {
 protected:
  void SetUp() override {
    DriverTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    // Start from an empty stack on this thread.
    CUcontext c = nullptr;
    while (cuCtxGetCurrent(&c) == CUDA_SUCCESS && c != nullptr) {
      if (cuCtxPopCurrent(&c) != CUDA_SUCCESS) break;
    }
    ASSERT_CU_OK(cuCtxSetCurrent(nullptr));
  }
};

TEST_F(ContextStackTest, PrimaryContextRetainReleaseState) {
  ASSERT_CU_OK(cuDevicePrimaryCtxReset(dev_));
  unsigned flags = 0xffff;
  int active = -1;
  ASSERT_CU_OK(cuDevicePrimaryCtxGetState(dev_, &flags, &active));
  EXPECT_EQ(active, 0);

  CUcontext a = nullptr, b = nullptr;
  ASSERT_CU_OK(cuDevicePrimaryCtxRetain(&a, dev_));
  ASSERT_NE(a, nullptr);
  ASSERT_CU_OK(cuDevicePrimaryCtxGetState(dev_, &flags, &active));
  EXPECT_EQ(active, 1);
  ASSERT_CU_OK(cuDevicePrimaryCtxRetain(&b, dev_));
  EXPECT_EQ(a, b);  // one primary context per device

  // Retain does not make it current.
  CUcontext cur = reinterpret_cast<CUcontext>(1);
  ASSERT_CU_OK(cuCtxGetCurrent(&cur));
  EXPECT_EQ(cur, nullptr);
  ASSERT_CU_OK(cuCtxSetCurrent(a));
  CUdevice d = -1;
  ASSERT_CU_OK(cuCtxGetDevice(&d));
  EXPECT_EQ(d, dev_);
  ASSERT_CU_OK(cuCtxSetCurrent(nullptr));

  ASSERT_CU_OK(cuDevicePrimaryCtxRelease(dev_));
  ASSERT_CU_OK(cuDevicePrimaryCtxGetState(dev_, &flags, &active));
  EXPECT_EQ(active, 1);  // still retained once
  ASSERT_CU_OK(cuDevicePrimaryCtxRelease(dev_));
  ASSERT_CU_OK(cuDevicePrimaryCtxGetState(dev_, &flags, &active));
  EXPECT_EQ(active, 0);
  // Releasing more than retained is an error.
  EXPECT_NE(CUDA_SUCCESS, cuDevicePrimaryCtxRelease(dev_));
}

// Resetting does not release: modules that retained the primary context
// release it afterwards as usual, and a retain brings it back.
TEST_F(ContextStackTest, PrimaryContextRetainsOutliveAReset) {
  ASSERT_CU_OK(cuDevicePrimaryCtxReset(dev_));
  CUcontext a = nullptr;
  ASSERT_CU_OK(cuDevicePrimaryCtxRetain(&a, dev_));
  ASSERT_CU_OK(cuDevicePrimaryCtxRetain(&a, dev_));
  ASSERT_CU_OK(cuDevicePrimaryCtxRelease(dev_));
  ASSERT_CU_OK(cuDevicePrimaryCtxReset(dev_));
  unsigned flags = 0;
  int active = -1;
  ASSERT_CU_OK(cuDevicePrimaryCtxGetState(dev_, &flags, &active));
  EXPECT_EQ(active, 0);
  EXPECT_CU_OK(cuDevicePrimaryCtxRelease(dev_)) << "the retain made before the reset";
  ASSERT_CU_OK(cuDevicePrimaryCtxRetain(&a, dev_));
  ASSERT_CU_OK(cuDevicePrimaryCtxGetState(dev_, &flags, &active));
  EXPECT_EQ(active, 1);
  ASSERT_CU_OK(cuCtxSetCurrent(a));
  CUdeviceptr p = 0;
  EXPECT_CU_OK(cuMemAlloc(&p, 4096)) << "usable again after a reset and a retain";
  EXPECT_CU_OK(cuMemFree(p));
  ASSERT_CU_OK(cuCtxSetCurrent(nullptr));
  ASSERT_CU_OK(cuDevicePrimaryCtxRelease(dev_));
}

TEST_F(ContextStackTest, PrimaryContextFlags) {
  ASSERT_CU_OK(cuDevicePrimaryCtxReset(dev_));
  ASSERT_CU_OK(cuDevicePrimaryCtxSetFlags(dev_, CU_CTX_SCHED_BLOCKING_SYNC));
  unsigned flags = 0;
  int active = -1;
  ASSERT_CU_OK(cuDevicePrimaryCtxGetState(dev_, &flags, &active));
  EXPECT_EQ(flags & CU_CTX_SCHED_MASK, unsigned{CU_CTX_SCHED_BLOCKING_SYNC});
  CUcontext c;
  ASSERT_CU_OK(cuDevicePrimaryCtxRetain(&c, dev_));
  ASSERT_CU_OK(cuCtxSetCurrent(c));
  unsigned ctx_flags = 0;
  ASSERT_CU_OK(cuCtxGetFlags(&ctx_flags));
  EXPECT_EQ(ctx_flags & CU_CTX_SCHED_MASK, unsigned{CU_CTX_SCHED_BLOCKING_SYNC});
  ASSERT_CU_OK(cuCtxSetCurrent(nullptr));
  ASSERT_CU_OK(cuDevicePrimaryCtxRelease(dev_));
  ASSERT_CU_OK(cuDevicePrimaryCtxReset(dev_));
  ASSERT_CU_OK(cuDevicePrimaryCtxSetFlags(dev_, 0));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuDevicePrimaryCtxSetFlags(dev_, 0x7fff0000u));
}

TEST_F(ContextStackTest, PrimaryContextResetFreesItsMemory) {
  CUcontext c;
  ASSERT_CU_OK(cuDevicePrimaryCtxRetain(&c, dev_));
  ASSERT_CU_OK(cuCtxSetCurrent(c));
  size_t free0, total;
  ASSERT_CU_OK(cuMemGetInfo(&free0, &total));
  CUdeviceptr p;
  const size_t kBytes = size_t{512} << 20;
  ASSERT_CU_OK(cuMemAlloc(&p, kBytes));
  ASSERT_CU_OK(cuDevicePrimaryCtxReset(dev_));
  int active = -1;
  unsigned flags;
  ASSERT_CU_OK(cuDevicePrimaryCtxGetState(dev_, &flags, &active));
  EXPECT_EQ(active, 0);
  ASSERT_CU_OK(cuCtxSetCurrent(nullptr));
  ASSERT_CU_OK(cuDevicePrimaryCtxRetain(&c, dev_));
  ASSERT_CU_OK(cuCtxSetCurrent(c));
  size_t free1;
  ASSERT_CU_OK(cuMemGetInfo(&free1, &total));
  EXPECT_GE(free1 + (kBytes / 2), free0) << "the allocation survived cuDevicePrimaryCtxReset";
  ASSERT_CU_OK(cuCtxSetCurrent(nullptr));
  ASSERT_CU_OK(cuDevicePrimaryCtxRelease(dev_));
}

TEST_F(ContextStackTest, CreatePushPopDestroy) {
  CUcontext a = nullptr, b = nullptr, cur = nullptr;
  ASSERT_CU_OK(cuCtxCreate(&a, nullptr, 0, dev_));  // cuCtxCreate_v4, NULL params
  ASSERT_NE(a, nullptr);
  ASSERT_CU_OK(cuCtxGetCurrent(&cur));
  EXPECT_EQ(cur, a);
  ASSERT_CU_OK(cuCtxCreate(&b, nullptr, 0, dev_));
  EXPECT_NE(a, b);
  ASSERT_CU_OK(cuCtxGetCurrent(&cur));
  EXPECT_EQ(cur, b);

  CUcontext popped = nullptr;
  ASSERT_CU_OK(cuCtxPopCurrent(&popped));
  EXPECT_EQ(popped, b);
  ASSERT_CU_OK(cuCtxGetCurrent(&cur));
  EXPECT_EQ(cur, a);

  ASSERT_CU_OK(cuCtxPushCurrent(b));
  ASSERT_CU_OK(cuCtxGetCurrent(&cur));
  EXPECT_EQ(cur, b);
  CUdevice d = -1;
  ASSERT_CU_OK(cuCtxGetDevice(&d));
  EXPECT_EQ(d, dev_);

  // cuCtxSetCurrent replaces the top of the stack.
  ASSERT_CU_OK(cuCtxSetCurrent(a));
  ASSERT_CU_OK(cuCtxPopCurrent(&popped));
  EXPECT_EQ(popped, a);
  ASSERT_CU_OK(cuCtxGetCurrent(&cur));
  EXPECT_EQ(cur, a);  // the entry below, pushed by the first cuCtxCreate

  // Destroying the current context pops it.
  ASSERT_CU_OK(cuCtxPushCurrent(b));
  ASSERT_CU_OK(cuCtxDestroy(b));
  ASSERT_CU_OK(cuCtxGetCurrent(&cur));
  EXPECT_EQ(cur, a);
  ASSERT_CU_OK(cuCtxDestroy(a));
  ASSERT_CU_OK(cuCtxGetCurrent(&cur));
  EXPECT_EQ(cur, nullptr);
  // A destroyed handle is undefined behaviour on a real driver (580 accepted
  // the push and then corrupted its heap); the sim refuses it.
  if (IsSim()) {
    EXPECT_NE(CUDA_SUCCESS, cuCtxPushCurrent(a)) << "destroyed context accepted";
  }
}

// The CUDA 3.x entry points (cuCtxPushCurrent, cuCtxPopCurrent, cuCtxDestroy
// without _v2), which old binaries and old-version cuGetProcAddress lookups
// reach, work on the same per-thread stack as the _v2 ones.
TEST_F(ContextStackTest, LegacyEntryPointsShareTheStack) {
  using CtxFn = CUresult (*)(CUcontext);
  using PopFn = CUresult (*)(CUcontext*);
  auto push = reinterpret_cast<CtxFn>(dlsym(RTLD_DEFAULT, "cuCtxPushCurrent"));
  auto pop = reinterpret_cast<PopFn>(dlsym(RTLD_DEFAULT, "cuCtxPopCurrent"));
  auto destroy = reinterpret_cast<CtxFn>(dlsym(RTLD_DEFAULT, "cuCtxDestroy"));
  ASSERT_NE(push, nullptr);
  ASSERT_NE(pop, nullptr);
  ASSERT_NE(destroy, nullptr);
  CUcontext a = nullptr, b = nullptr, cur = nullptr, popped = nullptr;
  ASSERT_CU_OK(cuCtxCreate(&a, nullptr, 0, dev_));
  ASSERT_CU_OK(cuCtxCreate(&b, nullptr, 0, dev_));
  ASSERT_CU_OK(pop(&popped));
  EXPECT_EQ(popped, b);
  ASSERT_CU_OK(cuCtxGetCurrent(&cur));
  EXPECT_EQ(cur, a);
  ASSERT_CU_OK(push(b));
  ASSERT_CU_OK(cuCtxGetCurrent(&cur));
  EXPECT_EQ(cur, b);
  ASSERT_CU_OK(destroy(b));  // current: popped
  ASSERT_CU_OK(cuCtxGetCurrent(&cur));
  EXPECT_EQ(cur, a);
  if (IsSim()) {
    EXPECT_NE(CUDA_SUCCESS, push(b)) << "destroyed context accepted";  // see above
  }
  ASSERT_CU_OK(destroy(a));
  ASSERT_CU_OK(cuCtxGetCurrent(&cur));
  EXPECT_EQ(cur, nullptr);
  EXPECT_NE(CUDA_SUCCESS, pop(&popped)) << "popped an empty stack";
}

TEST_F(ContextStackTest, CreatedContextsAreIsolated) {
  CUcontext a, b;
  ASSERT_CU_OK(cuCtxCreate(&a, nullptr, 0, dev_));
  CUdeviceptr p;
  ASSERT_CU_OK(cuMemAlloc(&p, 4096));
  CUcontext owner = nullptr;
  ASSERT_CU_OK(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, p));
  EXPECT_EQ(owner, a);
  ASSERT_CU_OK(cuCtxCreate(&b, nullptr, 0, dev_));
  ASSERT_CU_OK(cuCtxDestroy(b));
  ASSERT_CU_OK(cuCtxGetCurrent(&owner));
  EXPECT_EQ(owner, a);
  ASSERT_CU_OK(cuMemFree(p));
  ASSERT_CU_OK(cuCtxDestroy(a));
}

TEST_F(ContextStackTest, NoCurrentContext) {
  CUcontext cur = reinterpret_cast<CUcontext>(1);
  ASSERT_CU_OK(cuCtxGetCurrent(&cur));
  EXPECT_EQ(cur, nullptr);
  CUdeviceptr p;
  EXPECT_CU(CUDA_ERROR_INVALID_CONTEXT, cuMemAlloc(&p, 4096));
  EXPECT_CU(CUDA_ERROR_INVALID_CONTEXT, cuCtxSynchronize());
  CUdevice d;
  EXPECT_CU(CUDA_ERROR_INVALID_CONTEXT, cuCtxGetDevice(&d));
  CUstream s;
  EXPECT_CU(CUDA_ERROR_INVALID_CONTEXT, cuStreamCreate(&s, 0));
  size_t f, t;
  EXPECT_CU(CUDA_ERROR_INVALID_CONTEXT, cuMemGetInfo(&f, &t));
  CUmodule m;
  EXPECT_CU(CUDA_ERROR_INVALID_CONTEXT, cuModuleLoad(&m, CONF_CUBIN_PATH));
  CUcontext popped;
  EXPECT_CU(CUDA_ERROR_INVALID_CONTEXT, cuCtxPopCurrent(&popped));
}

TEST_F(ContextStackTest, CurrentContextIsPerThread) {
  CUcontext c;
  ASSERT_CU_OK(cuDevicePrimaryCtxRetain(&c, dev_));
  ASSERT_CU_OK(cuCtxSetCurrent(c));
  CUcontext seen = reinterpret_cast<CUcontext>(1);
  CUresult r_get = CUDA_ERROR_UNKNOWN, r_alloc = CUDA_ERROR_UNKNOWN, r_alloc2 = CUDA_ERROR_UNKNOWN;
  std::thread t([&] {
    r_get = cuCtxGetCurrent(&seen);
    CUdeviceptr p;
    r_alloc = cuMemAlloc(&p, 4096);
    cuCtxSetCurrent(c);
    r_alloc2 = cuMemAlloc(&p, 4096);
    if (r_alloc2 == CUDA_SUCCESS) cuMemFree(p);
  });
  t.join();
  EXPECT_CU_OK(r_get);
  EXPECT_EQ(seen, nullptr);
  EXPECT_CU(CUDA_ERROR_INVALID_CONTEXT, r_alloc);
  EXPECT_CU_OK(r_alloc2);
  CUcontext mine;
  ASSERT_CU_OK(cuCtxGetCurrent(&mine));
  EXPECT_EQ(mine, c);
  ASSERT_CU_OK(cuCtxSetCurrent(nullptr));
  ASSERT_CU_OK(cuDevicePrimaryCtxRelease(dev_));
}

TEST_F(ContextStackTest, SecondDeviceHasItsOwnPrimaryContext) {
  int n = 0;
  ASSERT_CU_OK(cuDeviceGetCount(&n));
  if (n < 2) GTEST_SKIP() << "one device";
  CUdevice d1;
  ASSERT_CU_OK(cuDeviceGet(&d1, 1));
  CUcontext c0, c1;
  ASSERT_CU_OK(cuDevicePrimaryCtxRetain(&c0, dev_));
  ASSERT_CU_OK(cuDevicePrimaryCtxRetain(&c1, d1));
  EXPECT_NE(c0, c1);
  ASSERT_CU_OK(cuCtxSetCurrent(c1));
  CUdevice got;
  ASSERT_CU_OK(cuCtxGetDevice(&got));
  EXPECT_EQ(got, d1);
  size_t free0_before, free1_before, total;
  ASSERT_CU_OK(cuMemGetInfo(&free1_before, &total));
  ASSERT_CU_OK(cuCtxSetCurrent(c0));
  ASSERT_CU_OK(cuMemGetInfo(&free0_before, &total));
  ASSERT_CU_OK(cuCtxSetCurrent(c1));
  const size_t kBytes = size_t{256} << 20;
  CUdeviceptr p;
  ASSERT_CU_OK(cuMemAlloc(&p, kBytes));
  int ordinal = -1;
  ASSERT_CU_OK(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p));
  EXPECT_EQ(ordinal, 1);
  size_t free0, free1;
  ASSERT_CU_OK(cuMemGetInfo(&free1, &total));
  EXPECT_LE(free1 + kBytes, free1_before);
  ASSERT_CU_OK(cuCtxSetCurrent(c0));
  ASSERT_CU_OK(cuMemGetInfo(&free0, &total));
  if (IsSim()) {
    EXPECT_EQ(free0, free0_before) << "device 1's allocation was charged to device 0";
  }
  ASSERT_CU_OK(cuMemFree(p));  // any context may free
  ASSERT_CU_OK(cuCtxSetCurrent(nullptr));
  ASSERT_CU_OK(cuDevicePrimaryCtxRelease(dev_));
  ASSERT_CU_OK(cuDevicePrimaryCtxRelease(d1));
}

class ContextSyncTest : public KernelTest {};

TEST_F(ContextSyncTest, SynchronizeWaitsForAllStreams) {
  CUstream s;
  ASSERT_CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  double t0 = NowMs();
  ASSERT_CU_OK(Sleep(s, 100 * kMs));
  ASSERT_CU_OK(cuCtxSynchronize());
  EXPECT_GE(NowMs() - t0, 95.0);
  EXPECT_CU_OK(cuStreamQuery(s));
  ASSERT_CU_OK(cuStreamDestroy(s));
}

TEST_F(ContextSyncTest, StreamPriorityRange) {
  int least = 1000, greatest = 1000;
  ASSERT_CU_OK(cuCtxGetStreamPriorityRange(&least, &greatest));
  EXPECT_LE(greatest, least);  // lower numbers are higher priority
  EXPECT_LT(greatest, 0);
  EXPECT_EQ(least, 0);
}

// Peer access as the driver reports it: the queries agree with each other,
// and enabling succeeds exactly where a peer path exists (the simulated node's
// run of this suite has one between devices 0 and 1: VGPU_SIM_P2P=0-1, set by
// PrepareSimEnvironment).
TEST_F(ContextTest, PeerAccessFollowsCanAccessPeer) {
  int count = 0;
  ASSERT_CU_OK(cuDeviceGetCount(&count));
  if (count < 2) GTEST_SKIP() << "needs two devices";
  int can = -1, same = -1, attr = -1;
  ASSERT_CU_OK(cuDeviceCanAccessPeer(&can, 0, 1));
  ASSERT_CU_OK(cuDeviceCanAccessPeer(&same, 0, 0));
  EXPECT_EQ(same, 0) << "a device is not its own peer";
  ASSERT_CU_OK(cuDeviceGetP2PAttribute(&attr, CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, 0, 1));
  EXPECT_EQ(attr, can);
  EXPECT_CU(CUDA_ERROR_INVALID_DEVICE,
            cuDeviceGetP2PAttribute(&attr, CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, 0, 0));
  EXPECT_CU(CUDA_ERROR_INVALID_DEVICE, cuDeviceCanAccessPeer(&can, 0, count));
  if (IsSim()) {
    EXPECT_EQ(can, 1) << "VGPU_SIM_P2P=0-1 in this suite's environment";
  }

  CUcontext peer = nullptr;
  ASSERT_CU_OK(cuDevicePrimaryCtxRetain(&peer, 1));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuCtxEnablePeerAccess(peer, 1));
  EXPECT_CU(CUDA_ERROR_INVALID_CONTEXT, cuCtxEnablePeerAccess(ctx_, 0)) << "itself";
  if (can == 1) {
    ASSERT_CU_OK(cuCtxEnablePeerAccess(peer, 0));
    EXPECT_CU(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, cuCtxEnablePeerAccess(peer, 0));
    ASSERT_CU_OK(cuCtxDisablePeerAccess(peer));
  } else {
    EXPECT_CU(CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, cuCtxEnablePeerAccess(peer, 0));
  }
  EXPECT_CU(CUDA_ERROR_PEER_ACCESS_NOT_ENABLED, cuCtxDisablePeerAccess(peer));
  ASSERT_CU_OK(cuDevicePrimaryCtxRelease(1));
}

}  // namespace
}  // namespace vgpu::conformance
