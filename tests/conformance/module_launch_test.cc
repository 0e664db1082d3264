// Modules and libraries (cubin file and memory, fatbin, globals, the sim's
// @builtin module) and the launch entry points.
#include <cstring>

#include "test_util.h"

namespace vgpu::conformance {
namespace {

class ModuleTest : public ContextTest {
 protected:
  void SetUp() override {
    ContextTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    ASSERT_CU_OK(cuMemAlloc(&buf_, kCount * 4));
    ASSERT_CU_OK(cuMemsetD32(buf_, 0, kCount));
    // A memset of device memory is asynchronous to the host, and tests launch
    // on non-blocking streams, which do not wait for the legacy stream.
    ASSERT_CU_OK(cuCtxSynchronize());
  }
  void TearDown() override {
    if (buf_ != 0) {
      cuCtxSynchronize();
      cuMemFree(buf_);
    }
    ContextTest::TearDown();
  }
  // Runs fill(5) then add(2) from module m and checks the result.
  void ExpectFillAddWork(CUmodule m) {
    CUfunction fill, add;
    ASSERT_CU_OK(cuModuleGetFunction(&fill, m, "conf_fill_u32"));
    ASSERT_CU_OK(cuModuleGetFunction(&add, m, "conf_add_u32"));
    ASSERT_CU_OK(LaunchArrayKernel(fill, nullptr, buf_, 5, kCount));
    ASSERT_CU_OK(LaunchArrayKernel(add, nullptr, buf_, 2, kCount - 1));
    ASSERT_CU_OK(cuCtxSynchronize());
    std::vector<uint32_t> v = ReadU32(buf_, kCount);
    EXPECT_EQ(v[0], 7u);
    EXPECT_EQ(v[kCount - 2], 7u);
    EXPECT_EQ(v[kCount - 1], 5u);
  }
  static constexpr size_t kCount = 10000;
  CUdeviceptr buf_ = 0;
};

TEST_F(ModuleTest, CubinFromFile) {
  CUmodule m;
  ASSERT_CU_OK(cuModuleLoad(&m, CONF_CUBIN_PATH));
  ExpectFillAddWork(m);
  ASSERT_CU_OK(cuModuleUnload(m));
}

TEST_F(ModuleTest, CubinFromMemory) {
  std::vector<uint8_t> image = ReadFile(CONF_CUBIN_PATH);
  ASSERT_FALSE(image.empty());
  CUmodule m;
  ASSERT_CU_OK(cuModuleLoadData(&m, image.data()));
  image.assign(image.size(), 0);  // the driver keeps its own copy
  ExpectFillAddWork(m);
  ASSERT_CU_OK(cuModuleUnload(m));
  image = ReadFile(CONF_CUBIN_PATH);
  ASSERT_CU_OK(cuModuleLoadDataEx(&m, image.data(), 0, nullptr, nullptr));
  ExpectFillAddWork(m);
  ASSERT_CU_OK(cuModuleUnload(m));
}

TEST_F(ModuleTest, Fatbin) {
  std::vector<uint8_t> image = ReadFile(CONF_FATBIN_PATH);
  ASSERT_FALSE(image.empty());
  CUmodule m;
  ASSERT_CU_OK(cuModuleLoadFatBinary(&m, image.data()));
  ExpectFillAddWork(m);
  ASSERT_CU_OK(cuModuleUnload(m));
  ASSERT_CU_OK(cuModuleLoadData(&m, image.data()));
  ExpectFillAddWork(m);
  ASSERT_CU_OK(cuModuleUnload(m));
  ASSERT_CU_OK(cuModuleLoad(&m, CONF_FATBIN_PATH));
  ExpectFillAddWork(m);
  ASSERT_CU_OK(cuModuleUnload(m));
}

TEST_F(ModuleTest, LoadErrors) {
  CUmodule m;
  EXPECT_CU(CUDA_ERROR_FILE_NOT_FOUND, cuModuleLoad(&m, "/nonexistent/conformance.cubin"));
  // No magic: the driver reads it as NUL-terminated PTX text, so it must end.
  std::vector<uint8_t> garbage(4096, 0x5a);
  garbage.back() = 0;
  EXPECT_NE(CUDA_SUCCESS, cuModuleLoadData(&m, garbage.data()));
  ASSERT_CU_OK(cuModuleLoad(&m, CONF_CUBIN_PATH));
  CUfunction f;
  EXPECT_CU(CUDA_ERROR_NOT_FOUND, cuModuleGetFunction(&f, m, "no_such_kernel"));
  CUdeviceptr g;
  size_t bytes;
  EXPECT_CU(CUDA_ERROR_NOT_FOUND, cuModuleGetGlobal(&g, &bytes, m, "no_such_global"));
  ASSERT_CU_OK(cuModuleUnload(m));
}

TEST_F(ModuleTest, GlobalVariable) {
  CUmodule m;
  ASSERT_CU_OK(cuModuleLoad(&m, CONF_CUBIN_PATH));
  CUdeviceptr g = 0;
  size_t bytes = 0;
  ASSERT_CU_OK(cuModuleGetGlobal(&g, &bytes, m, "conf_global"));
  EXPECT_EQ(bytes, 16 * sizeof(uint32_t));
  ASSERT_NE(g, 0u);
  std::vector<uint32_t> init = ReadU32(g, 16);
  for (uint32_t i = 0; i < 16; ++i) EXPECT_EQ(init[i], i + 1) << "initializer of element " << i;
  // It is ordinary device memory: kernels and copies reach it.
  CUfunction add;
  ASSERT_CU_OK(cuModuleGetFunction(&add, m, "conf_add_u32"));
  ASSERT_CU_OK(LaunchArrayKernel(add, nullptr, g, 100, 16));
  ASSERT_CU_OK(cuCtxSynchronize());
  EXPECT_EQ(ReadU32(g + 15 * 4, 1)[0], 116u);
  CUdeviceptr g2 = 0;
  ASSERT_CU_OK(cuModuleGetGlobal(&g2, nullptr, m, "conf_global"));
  EXPECT_EQ(g2, g);
  ASSERT_CU_OK(cuModuleUnload(m));
}

TEST_F(ModuleTest, LibraryAndKernelHandles) {
  std::vector<uint8_t> image = ReadFile(CONF_CUBIN_PATH);
  CUlibrary lib;
  ASSERT_CU_OK(cuLibraryLoadData(&lib, image.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
  CUkernel kfill, kadd;
  ASSERT_CU_OK(cuLibraryGetKernel(&kfill, lib, "conf_fill_u32"));
  ASSERT_CU_OK(cuLibraryGetKernel(&kadd, lib, "conf_add_u32"));
  CUkernel missing;
  EXPECT_CU(CUDA_ERROR_NOT_FOUND, cuLibraryGetKernel(&missing, lib, "no_such_kernel"));
  CUfunction fill, add;
  ASSERT_CU_OK(cuKernelGetFunction(&fill, kfill));
  ASSERT_CU_OK(cuKernelGetFunction(&add, kadd));
  ASSERT_CU_OK(LaunchArrayKernel(fill, nullptr, buf_, 40, kCount));
  ASSERT_CU_OK(LaunchArrayKernel(add, nullptr, buf_, 2, kCount));
  ASSERT_CU_OK(cuCtxSynchronize());
  EXPECT_EQ(ReadU32(buf_ + 4 * 1234, 1)[0], 42u);
  CUmodule m = nullptr;
  ASSERT_CU_OK(cuLibraryGetModule(&m, lib));
  CUfunction via_module;
  ASSERT_CU_OK(cuModuleGetFunction(&via_module, m, "conf_fill_u32"));
  ASSERT_CU_OK(LaunchArrayKernel(via_module, nullptr, buf_, 1, 1));
  ASSERT_CU_OK(cuCtxSynchronize());
  EXPECT_EQ(ReadU32(buf_, 1)[0], 1u);
  CUdeviceptr g;
  size_t bytes = 0;
  ASSERT_CU_OK(cuLibraryGetGlobal(&g, &bytes, lib, "conf_global"));
  EXPECT_EQ(bytes, 64u);
  ASSERT_CU_OK(cuLibraryUnload(lib));
}

// ---- Launch entry points --------------------------------------------------

class LaunchTest : public ModuleTest {
 protected:
  void SetUp() override {
    ModuleTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    ASSERT_CU_OK(cuModuleLoad(&m_, CONF_CUBIN_PATH));
    ASSERT_CU_OK(cuModuleGetFunction(&fill_, m_, "conf_fill_u32"));
  }
  void TearDown() override {
    if (m_ != nullptr) {
      cuCtxSynchronize();
      cuModuleUnload(m_);
    }
    ModuleTest::TearDown();
  }
  CUmodule m_ = nullptr;
  CUfunction fill_ = nullptr;
};

TEST_F(LaunchTest, KernelParamsAreCopiedAtLaunch) {
  CUdeviceptr p = buf_;
  uint32_t value = 11;
  uint64_t count = kCount;
  void* params[] = {&p, &value, &count};
  CUstream s;
  ASSERT_CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUfunction sleep;
  ASSERT_CU_OK(cuModuleGetFunction(&sleep, m_, "conf_sleep_ns"));
  ASSERT_CU_OK(LaunchSleepKernel(sleep, s, 50 * kMs));
  ASSERT_CU_OK(cuLaunchKernel(fill_, 4, 1, 1, 128, 1, 1, 0, s, params, nullptr));
  value = 99;  // must not affect the queued launch
  count = 1;
  ASSERT_CU_OK(cuStreamSynchronize(s));
  EXPECT_EQ(ReadU32(buf_ + 4 * (kCount - 1), 1)[0], 11u);
  ASSERT_CU_OK(cuStreamDestroy(s));
}

TEST_F(LaunchTest, ExtraParameterBuffer) {
  struct {
    CUdeviceptr p;
    uint32_t value;
    uint32_t pad;
    uint64_t count;
  } args{buf_, 23, 0, kCount};
  size_t size = sizeof args;
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &args, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                   CU_LAUNCH_PARAM_END};
  ASSERT_CU_OK(cuLaunchKernel(fill_, 8, 1, 1, 256, 1, 1, 0, nullptr, nullptr, extra));
  ASSERT_CU_OK(cuCtxSynchronize());
  std::vector<uint32_t> v = ReadU32(buf_, kCount);
  EXPECT_EQ(v[0], 23u);
  EXPECT_EQ(v[kCount - 1], 23u);
  // Both forms at once is invalid.
  uint32_t value = 1;
  uint64_t count = 1;
  void* params[] = {&args.p, &value, &count};
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE,
            cuLaunchKernel(fill_, 1, 1, 1, 1, 1, 1, 0, nullptr, params, extra));
}

TEST_F(LaunchTest, InvalidConfigurations) {
  CUdeviceptr p = buf_;
  uint32_t value = 1;
  uint64_t count = 1;
  void* params[] = {&p, &value, &count};
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE,
            cuLaunchKernel(fill_, 1, 1, 1, 1025, 1, 1, 0, nullptr, params, nullptr));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE,
            cuLaunchKernel(fill_, 0, 1, 1, 32, 1, 1, 0, nullptr, params, nullptr));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE,
            cuLaunchKernel(fill_, 1, 1, 1, 32, 32, 2, 0, nullptr, params, nullptr));
  EXPECT_NE(CUDA_SUCCESS, cuLaunchKernel(nullptr, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr));
  // Nothing ran, the context is healthy.
  ASSERT_CU_OK(cuCtxSynchronize());
  EXPECT_EQ(ReadU32(buf_, 1)[0], 0u);
}

TEST_F(LaunchTest, LaunchKernelEx) {
  CUdeviceptr p = buf_;
  uint32_t value = 31;
  uint64_t count = kCount;
  void* params[] = {&p, &value, &count};
  CUstream s;
  ASSERT_CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUlaunchConfig cfg{};
  cfg.gridDimX = 16;
  cfg.gridDimY = cfg.gridDimZ = 1;
  cfg.blockDimX = 128;
  cfg.blockDimY = cfg.blockDimZ = 1;
  cfg.hStream = s;
  ASSERT_CU_OK(cuLaunchKernelEx(&cfg, fill_, params, nullptr));
  ASSERT_CU_OK(cuStreamSynchronize(s));
  EXPECT_EQ(ReadU32(buf_ + 4 * (kCount - 1), 1)[0], 31u);
  CUlaunchAttribute attr{};
  attr.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
  attr.value.cooperative = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  value = 32;
  ASSERT_CU_OK(cuLaunchKernelEx(&cfg, fill_, params, nullptr));
  ASSERT_CU_OK(cuStreamSynchronize(s));
  EXPECT_EQ(ReadU32(buf_, 1)[0], 32u);
  ASSERT_CU_OK(cuStreamDestroy(s));
}

TEST_F(LaunchTest, CooperativeLaunch) {
  CUdeviceptr p = buf_;
  uint32_t value = 77;
  uint64_t count = kCount;
  void* params[] = {&p, &value, &count};
  ASSERT_CU_OK(cuLaunchCooperativeKernel(fill_, 2, 1, 1, 256, 1, 1, 0, nullptr, params));
  ASSERT_CU_OK(cuCtxSynchronize());
  EXPECT_EQ(ReadU32(buf_ + 4 * (kCount - 1), 1)[0], 77u);
}

// ---- Simulator specifics -------------------------------------------------

class SimModuleTest : public ModuleTest {
 protected:
  void SetUp() override {
    ModuleTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    SKIP_UNLESS_SIM();
  }
};

TEST_F(SimModuleTest, BuiltinKernels) {
  CUmodule m;
  ASSERT_CU_OK(cuModuleLoad(&m, "@builtin"));
  CUfunction fill, add, checksum, sleep;
  ASSERT_CU_OK(cuModuleGetFunction(&fill, m, "vgpu_sim_fill_u32"));
  ASSERT_CU_OK(cuModuleGetFunction(&add, m, "vgpu_sim_add_u32"));
  ASSERT_CU_OK(cuModuleGetFunction(&checksum, m, "vgpu_sim_checksum"));
  ASSERT_CU_OK(cuModuleGetFunction(&sleep, m, "vgpu_sim_sleep"));
  CUfunction missing;
  EXPECT_CU(CUDA_ERROR_NOT_FOUND, cuModuleGetFunction(&missing, m, "vgpu_sim_nope"));

  ASSERT_CU_OK(LaunchArrayKernel(fill, nullptr, buf_, 3, kCount));
  ASSERT_CU_OK(LaunchArrayKernel(add, nullptr, buf_, 4, kCount / 2));
  CUdeviceptr out;
  ASSERT_CU_OK(cuMemAlloc(&out, 8));
  CUdeviceptr p = buf_;
  uint64_t count = kCount;
  void* cparams[] = {&p, &count, &out};
  ASSERT_CU_OK(cuLaunchKernel(checksum, 1, 1, 1, 256, 1, 1, 0, nullptr, cparams, nullptr));
  uint64_t sum = 0;
  ASSERT_CU_OK(cuMemcpyDtoH(&sum, out, 8));
  // The checksum is computed over the values; it must change with them.
  ASSERT_CU_OK(LaunchArrayKernel(add, nullptr, buf_, 1, 1));
  ASSERT_CU_OK(cuLaunchKernel(checksum, 1, 1, 1, 256, 1, 1, 0, nullptr, cparams, nullptr));
  uint64_t sum2 = 0;
  ASSERT_CU_OK(cuMemcpyDtoH(&sum2, out, 8));
  EXPECT_NE(sum, sum2);
  std::vector<uint32_t> v = ReadU32(buf_, kCount);
  EXPECT_EQ(v[0], 8u);
  EXPECT_EQ(v[1], 7u);
  EXPECT_EQ(v[kCount - 1], 3u);

  uint64_t ns = 100 * kMs;
  void* sparams[] = {&ns};
  double t0 = NowMs();
  ASSERT_CU_OK(cuLaunchKernel(sleep, 1, 1, 1, 1, 1, 1, 0, nullptr, sparams, nullptr));
  EXPECT_LT(NowMs() - t0, 50.0);
  ASSERT_CU_OK(cuCtxSynchronize());
  EXPECT_GE(NowMs() - t0, 95.0);
  ASSERT_CU_OK(cuMemFree(out));
  ASSERT_CU_OK(cuModuleUnload(m));
}

TEST_F(SimModuleTest, CubinKernelWithoutHostImplementationFailsAtLaunch) {
  CUmodule m;
  ASSERT_CU_OK(cuModuleLoad(&m, CONF_CUBIN_PATH));
  CUfunction f;
  ASSERT_CU_OK(cuModuleGetFunction(&f, m, "conf_no_host_impl"));  // the name is in the cubin
  CUdeviceptr p = buf_;
  void* params[] = {&p};
  CUresult r = cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, nullptr, params, nullptr);
  EXPECT_NE(CUDA_SUCCESS, r) << "launch of a kernel without host implementation succeeded";
  EXPECT_EQ(ReadU32(buf_, 1)[0], 0u);
  ASSERT_CU_OK(cuModuleUnload(m));
}

TEST_F(SimModuleTest, BadKernelArgumentsFaultTheContext) {
  // A pointer outside any allocation: the host implementation reports a fault,
  // which is sticky like an illegal address on a GPU.
  CUmodule m;
  ASSERT_CU_OK(cuModuleLoad(&m, "@builtin"));
  CUfunction fill;
  ASSERT_CU_OK(cuModuleGetFunction(&fill, m, "vgpu_sim_fill_u32"));
  ASSERT_CU_OK(LaunchArrayKernel(fill, nullptr, buf_ + 4 * kCount - 4, 1, 1000));
  CUresult r = cuCtxSynchronize();
  EXPECT_NE(CUDA_SUCCESS, r);
  EXPECT_NE(CUDA_SUCCESS, cuCtxSynchronize()) << "kernel fault is not sticky";
  // Recover for the fixture's teardown.
  ASSERT_CU_OK(cuDevicePrimaryCtxReset(dev_));
  buf_ = 0;
  ASSERT_CU_OK(cuDevicePrimaryCtxRetain(&ctx_, dev_));
  ASSERT_CU_OK(cuCtxSetCurrent(ctx_));
}

// The occupancy calculator answers numbers within the SM's limits: blocks per
// SM fall as blocks grow, never exceed 2048 threads or 32 blocks, and a block
// that cannot fit answers 0; the suggested block size is whole warps.
TEST_F(KernelTest, OccupancyWithinTheSmLimits) {
  int b64 = -1, b256 = -1, b1024 = -1, huge_shared = -1;
  ASSERT_CU_OK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&b64, fill_, 64, 0));
  ASSERT_CU_OK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&b256, fill_, 256, 0));
  ASSERT_CU_OK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&b1024, fill_, 1024, 0));
  EXPECT_GE(b1024, 1);
  EXPECT_LE(b1024, 2);
  EXPECT_GE(b256, b1024);
  EXPECT_LE(b256, 8);
  EXPECT_GE(b64, b256);
  EXPECT_LE(b64, 32);
  ASSERT_CU_OK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&huge_shared, fill_, 256, size_t{1} << 30));
  EXPECT_EQ(huge_shared, 0) << "1 GiB of shared memory per block never fits";
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuOccupancyMaxActiveBlocksPerMultiprocessor(nullptr, fill_, 256, 0));

  int min_grid = -1, block = -1, sms = 0;
  ASSERT_CU_OK(cuOccupancyMaxPotentialBlockSize(&min_grid, &block, fill_, nullptr, 0, 0));
  ASSERT_CU_OK(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev_));
  EXPECT_EQ(block % 32, 0);
  EXPECT_GE(block, 32);
  EXPECT_LE(block, 1024);
  EXPECT_GE(min_grid, sms) << "a grid that fills every SM";
  ASSERT_CU_OK(cuOccupancyMaxPotentialBlockSize(&min_grid, &block, fill_, nullptr, 0, 96));
  EXPECT_LE(block, 96);

  size_t smem = 0;
  ASSERT_CU_OK(cuOccupancyAvailableDynamicSMemPerBlock(&smem, fill_, 1, 256));
  EXPECT_GT(smem, 0u);
}

}  // namespace
}  // namespace vgpu::conformance
