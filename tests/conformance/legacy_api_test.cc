// Entry points that were NOT_SUPPORTED stubs in the simulator (issue 16):
// host-side context operations, coredump and log settings, the pre-4.0
// launch API, and the unversioned 32-bit (CUDA 3.0 ABI) names. Portable
// suites assert what cuda.h documents; the 32-bit names are documented only
// by the driver's own build, so their checks are Sim* suites.
#include <dlfcn.h>

#include <climits>
#include <cstring>
#include <string>
#include <vector>

#include <cudaProfiler.h>

#include "test_util.h"

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace vgpu::conformance {
namespace {

class CtxExtrasTest : public KernelTest {};

TEST_F(CtxExtrasTest, ProfilerNeedsAContext) {
  EXPECT_CU_OK(cuProfilerStart());
  EXPECT_CU_OK(cuProfilerStop());
  CUcontext popped = nullptr;
  ASSERT_CU_OK(cuCtxPopCurrent(&popped));
  EXPECT_CU(CUDA_ERROR_INVALID_CONTEXT, cuProfilerStart());
  EXPECT_CU(CUDA_ERROR_INVALID_CONTEXT, cuProfilerStop());
  ASSERT_CU_OK(cuCtxPushCurrent(popped));
}

TEST_F(CtxExtrasTest, SetFlagsShowsInGetFlags) {
  unsigned before = 0;
  ASSERT_CU_OK(cuCtxGetFlags(&before));
  ASSERT_CU_OK(cuCtxSetFlags(CU_CTX_SCHED_BLOCKING_SYNC));
  unsigned now = 0;
  ASSERT_CU_OK(cuCtxGetFlags(&now));
  EXPECT_EQ(now & CU_CTX_SCHED_MASK, static_cast<unsigned>(CU_CTX_SCHED_BLOCKING_SYNC));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuCtxSetFlags(0x100));
  ASSERT_CU_OK(cuCtxSetFlags(before));
}

TEST_F(CtxExtrasTest, CacheAndBankSettingsNeedNoHardware) {
  EXPECT_CU_OK(cuCtxResetPersistingL2Cache());
  EXPECT_CU_OK(cuCtxSetSharedMemConfig(CU_SHARED_MEM_CONFIG_DEFAULT_BANK_SIZE));
  EXPECT_CU_OK(cuFlushGPUDirectRDMAWrites(CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TARGET_CURRENT_CTX,
                                          CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_OWNER));
  EXPECT_CU_OK(cuDeviceGraphMemTrim(dev_));
  EXPECT_CU(CUDA_ERROR_INVALID_DEVICE, cuDeviceGraphMemTrim(9999));
}

// cuCtxRecordEvent captures the work of every stream of the context.
TEST_F(CtxExtrasTest, RecordEventCoversEveryStream) {
  CUstream s = nullptr;
  CUevent e = nullptr;
  ASSERT_CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  ASSERT_CU_OK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
  ASSERT_CU_OK(Sleep(s, 200 * kMs));
  ASSERT_CU_OK(cuCtxRecordEvent(ctx_, e));
  EXPECT_CU(CUDA_ERROR_NOT_READY, cuEventQuery(e));
  ASSERT_CU_OK(cuEventSynchronize(e));
  EXPECT_CU_OK(cuStreamQuery(s));
  cuEventDestroy(e);
  cuStreamDestroy(s);
}

// cuCtxWaitEvent holds the context's later work until the event completes.
TEST_F(CtxExtrasTest, WaitEventHoldsLaterWork) {
  CUstream a = nullptr, b = nullptr;
  CUevent e = nullptr, after = nullptr;
  ASSERT_CU_OK(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
  ASSERT_CU_OK(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
  ASSERT_CU_OK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
  ASSERT_CU_OK(cuEventCreate(&after, CU_EVENT_DISABLE_TIMING));
  ASSERT_CU_OK(Sleep(a, 200 * kMs));
  ASSERT_CU_OK(cuEventRecord(e, a));
  ASSERT_CU_OK(cuCtxWaitEvent(ctx_, e));
  ASSERT_CU_OK(cuEventRecord(after, b));
  EXPECT_CU(CUDA_ERROR_NOT_READY, cuEventQuery(after));
  ASSERT_CU_OK(cuEventSynchronize(after));
  EXPECT_CU_OK(cuEventQuery(e));
  cuEventDestroy(e);
  cuEventDestroy(after);
  cuStreamDestroy(a);
  cuStreamDestroy(b);
}

TEST_F(CtxExtrasTest, RecordEventOfAnotherContextIsRefused) {
  CUcontext other = nullptr;
  CUevent e = nullptr;
  CUctxCreateParams params{};
  ASSERT_CU_OK(cuCtxCreate(&other, &params, 0, dev_));
  ASSERT_CU_OK(cuEventCreate(&e, 0));  // belongs to `other`, now current
  ASSERT_CU_OK(cuCtxPopCurrent(nullptr));
  EXPECT_CU(CUDA_ERROR_INVALID_HANDLE, cuCtxRecordEvent(ctx_, e));
  cuEventDestroy(e);
  cuCtxDestroy(other);
}

TEST_F(CtxExtrasTest, CoredumpIsOffByDefaultAndSettingsRoundTrip) {
  size_t size = 0;
  ASSERT_CU_OK(cuCoredumpGetAttributeGlobal(CU_COREDUMP_ENABLE_ON_EXCEPTION, nullptr, &size));
  EXPECT_EQ(size, sizeof(bool));
  bool on = true;
  size = sizeof on;
  ASSERT_CU_OK(cuCoredumpGetAttribute(CU_COREDUMP_ENABLE_ON_EXCEPTION, &on, &size));
  EXPECT_FALSE(on);
  char file[] = "/tmp/vgpu-conformance-core";
  size = sizeof file;
  ASSERT_CU_OK(cuCoredumpSetAttribute(CU_COREDUMP_FILE, file, &size));
  char back[1024] = {};
  size = sizeof back;
  ASSERT_CU_OK(cuCoredumpGetAttribute(CU_COREDUMP_FILE, back, &size));
  EXPECT_STREQ(back, file);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuCoredumpGetAttribute(CU_COREDUMP_FILE, back, nullptr));
}

TEST_F(CtxExtrasTest, LogsApiFollowsItsContract) {
  CUlogsCallbackHandle h = nullptr;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuLogsRegisterCallback(nullptr, nullptr, &h));
  auto cb = [](void*, CUlogLevel, char*, size_t) {};
  ASSERT_CU_OK(cuLogsRegisterCallback(cb, nullptr, &h));
  ASSERT_NE(h, nullptr);
  EXPECT_CU_OK(cuLogsUnregisterCallback(h));
  CUlogIterator it = 0;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuLogsCurrent(&it, 1));
  ASSERT_CU_OK(cuLogsCurrent(&it, 0));
  char buf[25600 + 1];
  size_t size = sizeof buf;
  ASSERT_CU_OK(cuLogsDumpToMemory(&it, buf, &size, 0));  // nothing logged since `it`
  EXPECT_EQ(size, 0u);
  EXPECT_EQ(buf[0], '\0');
}

TEST_F(CtxExtrasTest, AsyncNotificationRegistersAndUnregisters) {
  auto cb = [](CUasyncNotificationInfo*, void*, CUasyncCallbackHandle) {};
  CUasyncCallbackHandle h = nullptr;
  CUresult r = cuDeviceRegisterAsyncNotification(dev_, cb, nullptr, &h);
  if (r == CUDA_ERROR_NOT_SUPPORTED) GTEST_SKIP() << "no async notifications on this platform";
  ASSERT_CU_OK(r);
  EXPECT_CU_OK(cuDeviceUnregisterAsyncNotification(dev_, h));
  EXPECT_CU(CUDA_ERROR_INVALID_DEVICE, cuDeviceRegisterAsyncNotification(9999, cb, nullptr, &h));
}

// The pre-4.0 launch API: shape, parameters and grid set separately.
TEST_F(CtxExtrasTest, LegacyLaunchApiRunsTheKernel) {
  constexpr uint64_t kCount = 1000;
  CUdeviceptr p = 0;
  ASSERT_CU_OK(cuMemAlloc(&p, kCount * 4));
  const uint32_t value = 0xabcd1234u;
  ASSERT_CU_OK(cuFuncSetBlockShape(fill_, 128, 1, 1));
  ASSERT_CU_OK(cuFuncSetSharedSize(fill_, 0));
  ASSERT_CU_OK(cuParamSetv(fill_, 0, &p, sizeof p));
  ASSERT_CU_OK(cuParamSeti(fill_, 8, value));
  uint64_t count = kCount;
  ASSERT_CU_OK(cuParamSetv(fill_, 16, &count, sizeof count));
  ASSERT_CU_OK(cuParamSetSize(fill_, 24));
  ASSERT_CU_OK(cuLaunchGrid(fill_, 8, 1));
  ASSERT_CU_OK(cuCtxSynchronize());
  std::vector<uint32_t> got = ReadU32(p, kCount);
  EXPECT_EQ(got.front(), value);
  EXPECT_EQ(got.back(), value);
  ASSERT_CU_OK(cuParamSeti(fill_, 8, 7));
  ASSERT_CU_OK(cuLaunchGridAsync(fill_, 8, 1, nullptr));
  ASSERT_CU_OK(cuCtxSynchronize());
  EXPECT_EQ(ReadU32(p, kCount).back(), 7u);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuFuncSetBlockShape(fill_, 0, 1, 1));
  cuMemFree(p);
}

TEST_F(CtxExtrasTest, ArrayGetPlaneOfASinglePlaneArrayIsInvalid) {
  CUDA_ARRAY_DESCRIPTOR d{64, 4, CU_AD_FORMAT_FLOAT, 1};
  CUarray a = nullptr, plane = nullptr;
  ASSERT_CU_OK(cuArrayCreate(&a, &d));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuArrayGetPlane(&plane, a, 0));
  cuArrayDestroy(a);
}

// The CUDA 3.0 ABI (32-bit device pointers and sizes), reached by name.
class SimLegacyAbiTest : public ContextTest {
 protected:
  template <typename F>
  F Sym(const char* name) {
    return reinterpret_cast<F>(dlsym(RTLD_DEFAULT, name));
  }
};

TEST_F(SimLegacyAbiTest, SizesAreClampedTo32Bits) {
  SKIP_UNLESS_SIM();
  auto get_info = Sym<CUresult (*)(unsigned*, unsigned*)>("cuMemGetInfo");
  auto total_mem = Sym<CUresult (*)(unsigned*, CUdevice)>("cuDeviceTotalMem");
  ASSERT_NE(get_info, nullptr);
  ASSERT_NE(total_mem, nullptr);
  size_t total64 = 0;
  ASSERT_CU_OK(cuDeviceTotalMem(&total64, dev_));
  unsigned total = 0, free = 0, total2 = 0;
  ASSERT_CU_OK(total_mem(&total, dev_));
  EXPECT_EQ(total, total64 > UINT_MAX ? UINT_MAX : total64);
  ASSERT_CU_OK(get_info(&free, &total2));
  EXPECT_EQ(total2, total);
  EXPECT_LE(free, total2);
}

TEST_F(SimLegacyAbiTest, DeviceAddressesDoNotFit) {
  SKIP_UNLESS_SIM();
  auto alloc_pitch = Sym<CUresult (*)(unsigned*, unsigned*, unsigned, unsigned, unsigned)>("cuMemAllocPitch");
  auto host_ptr = Sym<CUresult (*)(unsigned*, void*, unsigned)>("cuMemHostGetDevicePointer");
  auto memset32 = Sym<CUresult (*)(unsigned, unsigned, unsigned)>("cuMemsetD32");
  ASSERT_NE(alloc_pitch, nullptr);
  ASSERT_NE(host_ptr, nullptr);
  ASSERT_NE(memset32, nullptr);
  unsigned d = 0, pitch = 0;
  EXPECT_CU(CUDA_ERROR_NOT_SUPPORTED, alloc_pitch(&d, &pitch, 256, 4, 4));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, alloc_pitch(&d, &pitch, 256, 4, 3));
  void* host = nullptr;
  ASSERT_CU_OK(cuMemHostAlloc(&host, 4096, CU_MEMHOSTALLOC_DEVICEMAP));
  EXPECT_CU(CUDA_ERROR_NOT_SUPPORTED, host_ptr(&d, host, 0));
  cuMemFreeHost(host);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, memset32(0x1000, 0, 4));  // no allocation there
}

TEST_F(SimLegacyAbiTest, ArraysContextsStreamsAndCopiesWork) {
  SKIP_UNLESS_SIM();
  struct Desc1 {
    unsigned Width, Height;
    CUarray_format Format;
    unsigned NumChannels;
  };
  auto create = Sym<CUresult (*)(CUarray*, const Desc1*)>("cuArrayCreate");
  auto htoa = Sym<CUresult (*)(CUarray, unsigned, const void*, unsigned)>("cuMemcpyHtoA");
  auto atoh = Sym<CUresult (*)(void*, CUarray, unsigned, unsigned)>("cuMemcpyAtoH");
  auto ctx_create = Sym<CUresult (*)(CUcontext*, unsigned, CUdevice)>("cuCtxCreate");
  auto detach = Sym<CUresult (*)(CUcontext)>("cuCtxDetach");
  auto stream_destroy = Sym<CUresult (*)(CUstream)>("cuStreamDestroy");
  ASSERT_TRUE(create && htoa && atoh && ctx_create && detach && stream_destroy);
  const Desc1 d{16, 1, CU_AD_FORMAT_UNSIGNED_INT32, 1};
  CUarray a = nullptr;
  ASSERT_CU_OK(create(&a, &d));
  uint32_t in[16], out[16] = {};
  for (uint32_t i = 0; i < 16; ++i) in[i] = i * 3;
  ASSERT_CU_OK(htoa(a, 0, in, sizeof in));
  ASSERT_CU_OK(atoh(out, a, 0, sizeof out));
  EXPECT_EQ(std::memcmp(in, out, sizeof in), 0);
  cuArrayDestroy(a);
  CUcontext c = nullptr;
  ASSERT_CU_OK(ctx_create(&c, 0, dev_));
  CUstream s = nullptr;
  ASSERT_CU_OK(cuStreamCreate(&s, 0));
  ASSERT_CU_OK(stream_destroy(s));
  ASSERT_CU_OK(detach(c));  // the creating reference: destroys it
  unsigned v = 0;
  EXPECT_CU(CUDA_ERROR_INVALID_CONTEXT, cuCtxGetApiVersion(c, &v));
  ASSERT_CU_OK(cuCtxSetCurrent(ctx_));
}

TEST_F(SimLegacyAbiTest, ModulesHaveNoTextureReferences) {
  SKIP_UNLESS_SIM();
  CUmodule m = nullptr;
  ASSERT_CU_OK(cuModuleLoad(&m, "@builtin"));
  CUtexref t = nullptr;
  CUsurfref s = nullptr;
  EXPECT_CU(CUDA_ERROR_NOT_FOUND, cuModuleGetTexRef(&t, m, "tex"));
  EXPECT_CU(CUDA_ERROR_NOT_FOUND, cuModuleGetSurfRef(&s, m, "surf"));
  cuModuleUnload(m);
}


// Hardware and graphics APIs the simulated node lacks answer, not stub out.
TEST_F(SimLegacyAbiTest, NoGraphicsContextAndNoMulticast) {
  SKIP_UNLESS_SIM();
  auto gl_devices = Sym<CUresult (*)(unsigned*, CUdevice*, unsigned, int)>("cuGLGetDevices_v2");
  ASSERT_NE(gl_devices, nullptr);
  unsigned count = 7;
  CUdevice devs[4];
  EXPECT_CU(CUDA_ERROR_INVALID_GRAPHICS_CONTEXT, gl_devices(&count, devs, 4, 1));
  EXPECT_EQ(count, 0u);
  int mc = 1;
  ASSERT_CU_OK(cuDeviceGetAttribute(&mc, CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED, dev_));
  EXPECT_EQ(mc, 0);
  CUmulticastObjectProp prop{};
  prop.numDevices = 1;
  prop.size = 2 << 20;
  size_t gran = 0;
  EXPECT_CU(CUDA_ERROR_NOT_SUPPORTED, cuMulticastGetGranularity(&gran, &prop, CU_MULTICAST_GRANULARITY_MINIMUM));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMulticastGetGranularity(nullptr, &prop, CU_MULTICAST_GRANULARITY_MINIMUM));
}

}  // namespace
}  // namespace vgpu::conformance
