// The module, library and launch entry points of the simulated libcuda, with
// the fixture images and the host kernels of data/test_kernels.c.
#include <cuda.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

namespace {

std::vector<char> ReadFixture(const std::string& name) {
  std::ifstream in(std::string(VGPU_FIXTURE_DIR) + "/" + name, std::ios::binary);
  EXPECT_TRUE(in) << name;
  std::vector<char> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  bytes.push_back('\0');  // PTX is passed as NUL-terminated text
  return bytes;
}

std::string Fixture(const std::string& name) { return std::string(VGPU_FIXTURE_DIR) + "/" + name; }

class SimModuleApi : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    // Read by cuInit; the environment of a ctest run may already set them.
    setenv("VGPU_SIM_KERNELS", VGPU_TEST_KERNEL_LIB, 0);
    setenv("VGPU_SIM_NODE", "vgpu-test-sim-module-api", 0);
    ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
  }
  void SetUp() override {
    ASSERT_EQ(cuDeviceGet(&dev_, 0), CUDA_SUCCESS);
    ASSERT_EQ(cuDevicePrimaryCtxRetain(&ctx_, dev_), CUDA_SUCCESS);
    ASSERT_EQ(cuCtxSetCurrent(ctx_), CUDA_SUCCESS);
  }
  void TearDown() override {
    EXPECT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
    cuDevicePrimaryCtxRelease(dev_);
  }

  CUdevice dev_ = 0;
  CUcontext ctx_ = nullptr;
};

TEST_F(SimModuleApi, BuiltinKernels) {
  CUmodule mod;
  ASSERT_EQ(cuModuleLoad(&mod, "@builtin"), CUDA_SUCCESS);
  CUfunction fill, add, checksum;
  ASSERT_EQ(cuModuleGetFunction(&fill, mod, "vgpu_sim_fill_u32"), CUDA_SUCCESS);
  ASSERT_EQ(cuModuleGetFunction(&add, mod, "vgpu_sim_add_u32"), CUDA_SUCCESS);
  ASSERT_EQ(cuModuleGetFunction(&checksum, mod, "vgpu_sim_checksum"), CUDA_SUCCESS);
  CUdeviceptr p, out;
  uint64_t count = 1000;
  ASSERT_EQ(cuMemAlloc(&p, count * 4), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAlloc(&out, 8), CUDA_SUCCESS);
  uint32_t five = 5, two = 2;
  void* fill_args[] = {&p, &five, &count};
  void* add_args[] = {&p, &two, &count};
  void* sum_args[] = {&p, &count, &out};
  ASSERT_EQ(cuLaunchKernel(fill, 4, 1, 1, 256, 1, 1, 0, nullptr, fill_args, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuLaunchKernel(add, 4, 1, 1, 256, 1, 1, 0, nullptr, add_args, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(cuLaunchKernel(checksum, 1, 1, 1, 1, 1, 1, 0, nullptr, sum_args, nullptr),
            CUDA_SUCCESS);
  uint64_t got = 0, want = 0xcbf29ce484222325ull;
  for (uint64_t i = 0; i < count; ++i) want = (want ^ 7u) * 0x100000001b3ull;
  ASSERT_EQ(cuMemcpyDtoH(&got, out, 8), CUDA_SUCCESS);
  EXPECT_EQ(got, want);

  // The same launch through CU_LAUNCH_PARAM_BUFFER_POINTER.
  struct {
    CUdeviceptr p;
    uint32_t value;
    uint64_t count;
  } packed = {p, 9, count};
  size_t size = sizeof packed;
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &packed, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                   CU_LAUNCH_PARAM_END};
  ASSERT_EQ(cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, extra), CUDA_SUCCESS);
  uint32_t last = 0;
  ASSERT_EQ(cuMemcpyDtoH(&last, p + (count - 1) * 4, 4), CUDA_SUCCESS);
  EXPECT_EQ(last, 9u);
  EXPECT_EQ(cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, nullptr, fill_args, extra),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemFree(p), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFree(out), CUDA_SUCCESS);
  EXPECT_EQ(cuModuleUnload(mod), CUDA_SUCCESS);
}

TEST_F(SimModuleApi, CubinKernelsGlobalsAndAttributes) {
  std::vector<char> image = ReadFixture("fixture_sm90.cubin");
  CUmodule mod;
  ASSERT_EQ(cuModuleLoadData(&mod, image.data()), CUDA_SUCCESS);
  CUdeviceptr counter, table, scale;
  size_t bytes = 0;
  ASSERT_EQ(cuModuleGetGlobal(&counter, &bytes, mod, "g_counter"), CUDA_SUCCESS);
  EXPECT_EQ(bytes, 4u);
  ASSERT_EQ(cuModuleGetGlobal(&table, &bytes, mod, "g_table"), CUDA_SUCCESS);
  float values[4];
  ASSERT_EQ(cuMemcpyDtoH(values, table, sizeof values), CUDA_SUCCESS);
  EXPECT_EQ(values[2], 3.0f);
  ASSERT_EQ(cuModuleGetGlobal(&scale, nullptr, mod, "c_scale"), CUDA_SUCCESS);
  EXPECT_EQ(cuModuleGetGlobal(&scale, nullptr, mod, "nope"), CUDA_ERROR_NOT_FOUND);

  CUfunction grad;
  ASSERT_EQ(cuModuleGetFunction(&grad, mod, "grad"), CUDA_SUCCESS);
  size_t offset = 0, size = 0;
  ASSERT_EQ(cuFuncGetParamInfo(grad, 3, &offset, &size), CUDA_SUCCESS);
  EXPECT_EQ(offset, 20u);
  EXPECT_EQ(size, 1u);
  EXPECT_EQ(cuFuncGetParamInfo(grad, 4, &offset, &size), CUDA_ERROR_INVALID_VALUE);
  const char* name = nullptr;
  ASSERT_EQ(cuFuncGetName(&name, grad), CUDA_SUCCESS);
  EXPECT_STREQ(name, "grad");
  CUmodule owner;
  ASSERT_EQ(cuFuncGetModule(&owner, grad), CUDA_SUCCESS);
  EXPECT_EQ(owner, mod);

  int32_t counter_value = 5;
  ASSERT_EQ(cuMemcpyHtoD(counter, &counter_value, 4), CUDA_SUCCESS);
  CUdeviceptr x, y;
  ASSERT_EQ(cuMemAlloc(&x, 4), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAlloc(&y, 8), CUDA_SUCCESS);
  float xv = 1.5f;
  ASSERT_EQ(cuMemcpyHtoD(x, &xv, 4), CUDA_SUCCESS);
  int n = 1;
  char c = 2;
  void* args[] = {&x, &y, &n, &c};
  ASSERT_EQ(cuLaunchKernel(grad, 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr), CUDA_SUCCESS);
  double yv = 0;
  ASSERT_EQ(cuMemcpyDtoH(&yv, y, 8), CUDA_SUCCESS);
  EXPECT_EQ(yv, 8.5);

  int value = 0;
  CUfunction with_struct, bounded;
  ASSERT_EQ(cuModuleGetFunction(&with_struct, mod, "_Z11with_struct4PaircsPd"), CUDA_SUCCESS);
  ASSERT_EQ(cuModuleGetFunction(&bounded, mod, "bounded"), CUDA_SUCCESS);
  ASSERT_EQ(cuFuncGetAttribute(&value, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, with_struct),
            CUDA_SUCCESS);
  EXPECT_EQ(value, 256);
  ASSERT_EQ(cuFuncGetAttribute(&value, CU_FUNC_ATTRIBUTE_NUM_REGS, grad), CUDA_SUCCESS);
  EXPECT_GT(value, 0);
  ASSERT_EQ(cuFuncGetAttribute(&value, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, bounded),
            CUDA_SUCCESS);
  EXPECT_EQ(value, 256);
  ASSERT_EQ(cuFuncGetAttribute(&value, CU_FUNC_ATTRIBUTE_BINARY_VERSION, grad), CUDA_SUCCESS);
  EXPECT_EQ(value, 90);
  EXPECT_EQ(cuFuncSetAttribute(grad, CU_FUNC_ATTRIBUTE_NUM_REGS, 1), CUDA_ERROR_INVALID_VALUE);

  unsigned count = 0;
  ASSERT_EQ(cuModuleGetFunctionCount(&count, mod), CUDA_SUCCESS);
  EXPECT_EQ(count, 6u);
  EXPECT_EQ(cuMemFree(x), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFree(y), CUDA_SUCCESS);
  EXPECT_EQ(cuModuleUnload(mod), CUDA_SUCCESS);
  EXPECT_EQ(cuFuncGetName(&name, grad), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuLaunchKernel(grad, 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr),
            CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuModuleUnload(mod), CUDA_ERROR_INVALID_HANDLE);
}

TEST_F(SimModuleApi, KernelWithoutHostImplementation) {
  CUmodule mod;
  ASSERT_EQ(cuModuleLoad(&mod, Fixture("fixture.fatbin").c_str()), CUDA_SUCCESS);
  CUfunction f;
  ASSERT_EQ(cuModuleGetFunction(&f, mod, "_Z11with_struct4PaircsPd"), CUDA_SUCCESS);
  EXPECT_EQ(cuModuleGetFunction(&f, mod, "with_struct"), CUDA_ERROR_NOT_FOUND);
  ASSERT_EQ(cuModuleGetFunction(&f, mod, "_Z11with_struct4PaircsPd"), CUDA_SUCCESS);
  struct {
    int a;
    double b;
  } pair = {1, 2};
  char c = 0;
  short s = 0;
  CUdeviceptr out = 0;
  void* args[] = {&pair, &c, &s, &out};
  testing::internal::CaptureStderr();
  EXPECT_EQ(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr), CUDA_ERROR_NOT_FOUND);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("_Z11with_struct4PaircsPd"), std::string::npos) << err;
  EXPECT_NE(err.find("vgpu_sim_kernel__Z11with_struct4PaircsPd"), std::string::npos) << err;
  EXPECT_NE(err.find("VGPU_SIM_KERNELS"), std::string::npos) << err;
  EXPECT_EQ(cuModuleUnload(mod), CUDA_SUCCESS);
}

TEST_F(SimModuleApi, LaunchLimits) {
  std::vector<char> image = ReadFixture("fixture.ptx");
  CUmodule mod;
  ASSERT_EQ(cuModuleLoadData(&mod, image.data()), CUDA_SUCCESS);
  CUfunction none, bounded, clustered;
  ASSERT_EQ(cuModuleGetFunction(&none, mod, "noparams"), CUDA_SUCCESS);
  ASSERT_EQ(cuModuleGetFunction(&bounded, mod, "bounded"), CUDA_SUCCESS);
  ASSERT_EQ(cuModuleGetFunction(&clustered, mod, "clustered"), CUDA_SUCCESS);
  EXPECT_EQ(cuLaunchKernel(none, 1, 1, 1, 1024, 1, 1, 0, nullptr, nullptr, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(cuLaunchKernel(none, 1, 1, 1, 1025, 1, 1, 0, nullptr, nullptr, nullptr),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuLaunchKernel(none, 1, 1, 1, 1, 1, 65, 0, nullptr, nullptr, nullptr),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuLaunchKernel(none, 0, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuLaunchKernel(none, 1, 1, 1, 1, 1, 1, 64 << 10, nullptr, nullptr, nullptr),
            CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(cuFuncSetAttribute(none, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 64 << 10),
            CUDA_SUCCESS);
  EXPECT_EQ(cuLaunchKernel(none, 1, 1, 1, 1, 1, 1, 64 << 10, nullptr, nullptr, nullptr),
            CUDA_SUCCESS);
  EXPECT_EQ(cuFuncSetAttribute(none, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 1 << 20),
            CUDA_ERROR_INVALID_VALUE);

  CUdeviceptr p = 0;
  void* args[] = {&p};
  testing::internal::CaptureStderr();  // bounded has no host implementation
  EXPECT_EQ(cuLaunchKernel(bounded, 1, 1, 1, 512, 1, 1, 0, nullptr, args, nullptr),
            CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES);
  EXPECT_EQ(cuLaunchKernel(clustered, 3, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr),
            CUDA_ERROR_INVALID_CLUSTER_SIZE);
  testing::internal::GetCapturedStderr();
  EXPECT_EQ(cuFuncSetAttribute(clustered, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH, 4),
            CUDA_ERROR_NOT_PERMITTED);
  EXPECT_EQ(cuLaunchKernel(reinterpret_cast<CUfunction>(&p), 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr,
                           nullptr),
            CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuModuleUnload(mod), CUDA_SUCCESS);
}

TEST_F(SimModuleApi, LibrariesAreContextIndependent) {
  std::vector<char> image = ReadFixture("fixture_zstd.fatbin");
  CUlibrary lib;
  ASSERT_EQ(cuLibraryLoadData(&lib, image.data(), nullptr, nullptr, 0, nullptr, nullptr, 0),
            CUDA_SUCCESS);
  unsigned count = 0;
  ASSERT_EQ(cuLibraryGetKernelCount(&count, lib), CUDA_SUCCESS);
  EXPECT_EQ(count, 6u);
  CUkernel kernel;
  ASSERT_EQ(cuLibraryGetKernel(&kernel, lib, "grad"), CUDA_SUCCESS);
  EXPECT_EQ(cuLibraryGetKernel(&kernel, lib, "nope"), CUDA_ERROR_NOT_FOUND);
  ASSERT_EQ(cuLibraryGetKernel(&kernel, lib, "grad"), CUDA_SUCCESS);
  const char* name = nullptr;
  ASSERT_EQ(cuKernelGetName(&name, kernel), CUDA_SUCCESS);
  EXPECT_STREQ(name, "grad");
  CUlibrary owner;
  ASSERT_EQ(cuKernelGetLibrary(&owner, kernel), CUDA_SUCCESS);
  EXPECT_EQ(owner, lib);

  CUdeviceptr counter;
  ASSERT_EQ(cuLibraryGetGlobal(&counter, nullptr, lib, "g_counter"), CUDA_SUCCESS);
  int32_t counter_value = 10;
  ASSERT_EQ(cuMemcpyHtoD(counter, &counter_value, 4), CUDA_SUCCESS);
  CUdeviceptr x, y;
  ASSERT_EQ(cuMemAlloc(&x, 4), CUDA_SUCCESS);
  ASSERT_EQ(cuMemAlloc(&y, 8), CUDA_SUCCESS);
  float xv = 0.5f;
  ASSERT_EQ(cuMemcpyHtoD(x, &xv, 4), CUDA_SUCCESS);
  int n = 1;
  char c = 1;
  void* args[] = {&x, &y, &n, &c};
  // A CUkernel is launched as is, in the current context.
  ASSERT_EQ(cuLaunchKernel(reinterpret_cast<CUfunction>(kernel), 1, 1, 1, 1, 1, 1, 0, nullptr, args,
                           nullptr),
            CUDA_SUCCESS);
  double yv = 0;
  ASSERT_EQ(cuMemcpyDtoH(&yv, y, 8), CUDA_SUCCESS);
  EXPECT_EQ(yv, 11.5);

  CUfunction f;
  ASSERT_EQ(cuKernelGetFunction(&f, kernel), CUDA_SUCCESS);
  ASSERT_EQ(
      cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 1000, kernel, dev_),
      CUDA_SUCCESS);
  int value = 0;
  ASSERT_EQ(cuFuncGetAttribute(&value, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, f),
            CUDA_SUCCESS);
  EXPECT_EQ(value, 1000);
  EXPECT_EQ(cuKernelGetAttribute(&value, CU_FUNC_ATTRIBUTE_NUM_REGS, kernel, 99),
            CUDA_ERROR_INVALID_DEVICE);
  CUmodule mod;
  ASSERT_EQ(cuLibraryGetModule(&mod, lib), CUDA_SUCCESS);
  EXPECT_EQ(cuModuleUnload(mod), CUDA_ERROR_NOT_PERMITTED);

  EXPECT_EQ(cuMemFree(x), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFree(y), CUDA_SUCCESS);
  ASSERT_EQ(cuLibraryUnload(lib), CUDA_SUCCESS);
  EXPECT_EQ(cuKernelGetFunction(&f, kernel), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuKernelGetName(&name, kernel), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuLibraryUnload(lib), CUDA_ERROR_INVALID_HANDLE);
}

TEST_F(SimModuleApi, LoadErrors) {
  CUmodule mod;
  const char garbage[] = "\x13garbage";
  EXPECT_EQ(cuModuleLoadData(&mod, garbage), CUDA_ERROR_INVALID_IMAGE);
  char log[128] = {};
  CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void* values[] = {log, reinterpret_cast<void*>(sizeof log)};
  EXPECT_EQ(cuModuleLoadDataEx(&mod, garbage, 2, options, values), CUDA_ERROR_INVALID_IMAGE);
  EXPECT_NE(std::string(log).find("not a cubin"), std::string::npos) << log;
  EXPECT_EQ(cuModuleLoad(&mod, "/nonexistent/module.cubin"), CUDA_ERROR_FILE_NOT_FOUND);
  EXPECT_EQ(cuModuleLoad(&mod, "/"), CUDA_ERROR_FILE_NOT_FOUND);
  EXPECT_EQ(cuModuleLoad(nullptr, "@builtin"), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuModuleLoadData(&mod, nullptr), CUDA_ERROR_INVALID_VALUE);
  std::vector<char> sm80 = ReadFixture("fixture_sm80.cubin");
  EXPECT_EQ(cuModuleLoadData(&mod, sm80.data()), CUDA_ERROR_NO_BINARY_FOR_GPU);
  CUfunction f;
  EXPECT_EQ(cuModuleGetFunction(&f, nullptr, "grad"), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuModuleGetFunction(&f, reinterpret_cast<CUmodule>(&f), "grad"),
            CUDA_ERROR_INVALID_HANDLE);
  CUlibrary lib;
  EXPECT_EQ(cuLibraryLoadFromFile(&lib, "/nonexistent/lib.fatbin", nullptr, nullptr, 0, nullptr,
                                  nullptr, 0),
            CUDA_ERROR_FILE_NOT_FOUND);

  // Without a current context: modules need one, libraries do not.
  ASSERT_EQ(cuCtxSetCurrent(nullptr), CUDA_SUCCESS);
  EXPECT_EQ(cuModuleLoad(&mod, "@builtin"), CUDA_ERROR_INVALID_CONTEXT);
  ASSERT_EQ(cuLibraryLoadFromFile(&lib, "@builtin", nullptr, nullptr, 0, nullptr, nullptr, 0),
            CUDA_SUCCESS);
  CUkernel kernel;
  ASSERT_EQ(cuLibraryGetKernel(&kernel, lib, "vgpu_sim_sleep"), CUDA_SUCCESS);
  EXPECT_EQ(cuKernelGetFunction(&f, kernel), CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_EQ(cuLibraryUnload(lib), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSetCurrent(ctx_), CUDA_SUCCESS);
}

TEST_F(SimModuleApi, ConcurrentLoadLaunchUnload) {
  std::vector<char> image = ReadFixture("fixture.fatbin");
  CUlibrary lib;
  ASSERT_EQ(cuLibraryLoadData(&lib, "@builtin", nullptr, nullptr, 0, nullptr, nullptr, 0),
            CUDA_SUCCESS);
  CUkernel shared_fill;
  ASSERT_EQ(cuLibraryGetKernel(&shared_fill, lib, "vgpu_sim_fill_u32"), CUDA_SUCCESS);
  std::atomic<CUfunction> latest{nullptr};
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      auto check = [&](CUresult r) { failures += r != CUDA_SUCCESS; };
      check(cuCtxSetCurrent(ctx_));
      CUstream stream;
      check(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
      CUdeviceptr p;
      check(cuMemAlloc(&p, 4096));
      for (int i = 0; i < 50; ++i) {
        CUmodule builtin, fixture;
        CUfunction fill;
        check(cuModuleLoad(&builtin, "@builtin"));
        check(cuModuleGetFunction(&fill, builtin, "vgpu_sim_fill_u32"));
        uint32_t v = i;
        uint64_t n = 1024;
        void* args[] = {&p, &v, &n};
        check(cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, stream, args, nullptr));
        check(cuLaunchKernel(reinterpret_cast<CUfunction>(shared_fill), 1, 1, 1, 1, 1, 1, 0, stream,
                             args, nullptr));
        latest.store(fill);
        // Another thread's function may be unloaded meanwhile: valid or invalid, never a crash.
        int value;
        const CUresult r =
            cuFuncGetAttribute(&value, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, latest.load());
        failures += r != CUDA_SUCCESS && r != CUDA_ERROR_INVALID_HANDLE;
        check(cuModuleLoadData(&fixture, image.data()));
        check(cuModuleUnload(fixture));
        check(cuModuleUnload(builtin));
      }
      check(cuStreamSynchronize(stream));
      check(cuStreamDestroy(stream));
      check(cuMemFree(p));
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(cuLibraryUnload(lib), CUDA_SUCCESS);
}

}  // namespace
