// GoogleTest helpers and fixtures of the conformance suite.
#pragma once

#include <cuda.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "conformance_common.h"

namespace vgpu::conformance {

// "CUDA_ERROR_OUT_OF_MEMORY (2)".
std::string CuName(CUresult r);

::testing::AssertionResult CuResultIs(const char* expected_expr, const char* actual_expr,
                                      CUresult expected, CUresult actual);

#define ASSERT_CU(expected, expr) \
  ASSERT_PRED_FORMAT2(::vgpu::conformance::CuResultIs, expected, expr)
#define EXPECT_CU(expected, expr) \
  EXPECT_PRED_FORMAT2(::vgpu::conformance::CuResultIs, expected, expr)
#define ASSERT_CU_OK(expr) ASSERT_CU(CUDA_SUCCESS, expr)
#define EXPECT_CU_OK(expr) EXPECT_CU(CUDA_SUCCESS, expr)

// True when running on the simulator (cuDeviceGetName of device 0 starts with
// "vgpu-sim"); calls cuInit.
bool IsSim();
// VGPU_CONFORMANCE_TARGET=gpu: the `gpu` copy of the tests, which must run on
// a real driver and skips itself on the simulator.
bool GpuTarget();

#define SKIP_UNLESS_SIM()                                                     \
  do {                                                                        \
    if (!::vgpu::conformance::IsSim()) GTEST_SKIP() << "simulator-only test"; \
  } while (0)

// Base fixture: cuInit and device 0. Skips the `gpu` copy on the simulator.
class DriverTest : public ::testing::Test {
 protected:
  void SetUp() override;
  CUdevice dev_ = 0;
};

// Primary context of device 0 current on the calling thread.
class ContextTest : public DriverTest {
 protected:
  void SetUp() override;
  void TearDown() override;
  CUcontext ctx_ = nullptr;
};

// The suite's nvcc-built kernels (conformance_kernels.cu) loaded as a module.
class KernelTest : public ContextTest {
 protected:
  void SetUp() override;
  void TearDown() override;

  CUresult Fill(CUstream s, CUdeviceptr p, uint32_t value, uint64_t count);
  CUresult Add(CUstream s, CUdeviceptr p, uint32_t value, uint64_t count);
  CUresult Sleep(CUstream s, uint64_t ns);

  CUmodule module_ = nullptr;
  CUfunction fill_ = nullptr, add_ = nullptr, sleep_ = nullptr;
};

// Launches f(p, value, count) with a grid-stride configuration.
CUresult LaunchArrayKernel(CUfunction f, CUstream s, CUdeviceptr p, uint32_t value, uint64_t count);
CUresult LaunchSleepKernel(CUfunction f, CUstream s, uint64_t ns);

std::vector<uint8_t> ReadFile(const std::string& path);

// Copies `count` u32 values from device memory (synchronous).
std::vector<uint32_t> ReadU32(CUdeviceptr p, size_t count);

inline constexpr uint64_t kMs = 1000000ull;  // ns per ms

// Runs conformance_child with the given arguments; waits for it and returns
// its whole stdout. *status receives the raw wait status.
std::string RunChild(const std::vector<std::string>& args, const std::vector<std::string>& env,
                     int* status, int timeout_ms = 20000);

}  // namespace vgpu::conformance
