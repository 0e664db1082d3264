#include "test_util.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>

namespace vgpu::conformance {

std::string CuName(CUresult r) {
  const char* name = nullptr;
  if (cuGetErrorName(r, &name) != CUDA_SUCCESS || name == nullptr) name = "?";
  return std::string(name) + " (" + std::to_string(static_cast<int>(r)) + ")";
}

::testing::AssertionResult CuResultIs(const char* expected_expr, const char* actual_expr,
                                      CUresult expected, CUresult actual) {
  if (expected == actual) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << actual_expr << " returned " << CuName(actual) << ", expected " << CuName(expected);
}

bool IsSim() {
  static const bool is_sim = [] {
    if (cuInit(0) != CUDA_SUCCESS) return false;
    CUdevice d;
    char name[256] = {};
    if (cuDeviceGet(&d, 0) != CUDA_SUCCESS) return false;
    if (cuDeviceGetName(name, sizeof name, d) != CUDA_SUCCESS) return false;
    return strncmp(name, "vgpu-sim", 8) == 0;
  }();
  return is_sim;
}

bool GpuTarget() {
  const char* t = getenv("VGPU_CONFORMANCE_TARGET");
  return t != nullptr && strcmp(t, "gpu") == 0;
}

void DriverTest::SetUp() {
  if (GpuTarget() && DriverLibraryIsSim())
    GTEST_SKIP() << "gpu target: libcuda.so.1 is the simulator; set LD_LIBRARY_PATH to the real "
                    "driver's directory";
  ASSERT_CU_OK(cuInit(0));
  if (GpuTarget() && IsSim()) GTEST_SKIP() << "gpu target: running on the simulator";
  ASSERT_CU_OK(cuDeviceGet(&dev_, 0));
}

void ContextTest::SetUp() {
  DriverTest::SetUp();
  if (IsSkipped() || HasFatalFailure()) return;
  ASSERT_CU_OK(cuDevicePrimaryCtxRetain(&ctx_, dev_));
  ASSERT_CU_OK(cuCtxSetCurrent(ctx_));
}

void ContextTest::TearDown() {
  if (ctx_ == nullptr) return;
  cuCtxSetCurrent(ctx_);
  EXPECT_CU_OK(cuCtxSynchronize());
  cuCtxSetCurrent(nullptr);
  EXPECT_CU_OK(cuDevicePrimaryCtxRelease(dev_));
  ctx_ = nullptr;
}

void KernelTest::SetUp() {
  ContextTest::SetUp();
  if (IsSkipped() || HasFatalFailure()) return;
  ASSERT_CU_OK(cuModuleLoad(&module_, CONF_CUBIN_PATH));
  ASSERT_CU_OK(cuModuleGetFunction(&fill_, module_, "conf_fill_u32"));
  ASSERT_CU_OK(cuModuleGetFunction(&add_, module_, "conf_add_u32"));
  ASSERT_CU_OK(cuModuleGetFunction(&sleep_, module_, "conf_sleep_ns"));
}

void KernelTest::TearDown() {
  if (ctx_ != nullptr) {
    cuCtxSetCurrent(ctx_);
    EXPECT_CU_OK(cuCtxSynchronize());
    if (module_ != nullptr) {
      EXPECT_CU_OK(cuModuleUnload(module_));
    }
    module_ = nullptr;
  }
  ContextTest::TearDown();
}

CUresult KernelTest::Fill(CUstream s, CUdeviceptr p, uint32_t value, uint64_t count) {
  return LaunchArrayKernel(fill_, s, p, value, count);
}
CUresult KernelTest::Add(CUstream s, CUdeviceptr p, uint32_t value, uint64_t count) {
  return LaunchArrayKernel(add_, s, p, value, count);
}
CUresult KernelTest::Sleep(CUstream s, uint64_t ns) { return LaunchSleepKernel(sleep_, s, ns); }

CUresult LaunchArrayKernel(CUfunction f, CUstream s, CUdeviceptr p, uint32_t value,
                           uint64_t count) {
  void* params[] = {&p, &value, &count};
  unsigned blocks = static_cast<unsigned>(std::min<uint64_t>((count + 255) / 256, 1024));
  if (blocks == 0) blocks = 1;
  return cuLaunchKernel(f, blocks, 1, 1, 256, 1, 1, 0, s, params, nullptr);
}

CUresult LaunchSleepKernel(CUfunction f, CUstream s, uint64_t ns) {
  void* params[] = {&ns};
  return cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, params, nullptr);
}

std::vector<uint8_t> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::vector<uint32_t> ReadU32(CUdeviceptr p, size_t count) {
  std::vector<uint32_t> out(count, 0xdeadbeef);
  CUresult r = cuMemcpyDtoH(out.data(), p, count * sizeof(uint32_t));
  EXPECT_CU_OK(r);
  return out;
}

std::string RunChild(const std::vector<std::string>& args, const std::vector<std::string>& env,
                     int* status, int timeout_ms) {
  Child c;
  if (!SpawnChild(CONF_CHILD_PATH, args, env, &c)) {
    ADD_FAILURE() << "cannot start " << CONF_CHILD_PATH;
    *status = -1;
    return "";
  }
  close(c.to_child);
  c.to_child = -1;
  double deadline = NowMs() + timeout_ms;
  std::string out = ReadRest(&c, timeout_ms);
  if (NowMs() >= deadline) {
    ADD_FAILURE() << "child timed out: " << out;
    KillChild(&c);
    *status = -1;
    return out;
  }
  *status = WaitChild(&c);
  return out;
}

}  // namespace vgpu::conformance
