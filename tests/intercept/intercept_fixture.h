// The fixture of the libvgpu integration tests (intercept_test.cc,
// vmm_quota_test.cc): each test gets its own simulated node and quota group
// (names include the test process's pid and a counter) and removes their
// /dev/shm objects afterwards. PathTest runs a test once per way a client
// reaches the driver; it is instantiated in intercept_test.cc.
#pragma once

#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <ostream>
#include <string>
#include <vector>

#include "intercept_test_util.h"

namespace vgpu::itest {

inline constexpr int kOutOfMemory = 2;        // CUDA_ERROR_OUT_OF_MEMORY
inline constexpr int kNotInitialized = 3;     // CUDA_ERROR_NOT_INITIALIZED
inline constexpr int kInvalidDevice = 101;    // CUDA_ERROR_INVALID_DEVICE
inline constexpr int kNvmlNotFound = 6;       // NVML_ERROR_NOT_FOUND
inline constexpr unsigned long long k64MiB = 64 * kMiB;

inline std::atomic<int> g_counter{0};

// How a client reaches the driver.
struct PathParam {
  const char* name;
  const char* binary;
  std::vector<std::string> options;
};

inline const PathParam kPaths[] = {
    {"link", ITEST_CLIENT_LINKED, {"--path=link"}},
    {"dlsym", ITEST_CLIENT, {"--path=dlsym"}},
    {"procaddr13000", ITEST_CLIENT, {"--path=procaddr", "--version=13000"}},
    {"procaddr12000", ITEST_CLIENT, {"--path=procaddr", "--version=12000"}},
};

class InterceptTest : public ::testing::Test {
 protected:
  void SetUp() override {
    id_ = "itest-" + std::to_string(getpid()) + "-" + std::to_string(g_counter.fetch_add(1));
    node_ = id_;
    group_ = id_;
  }
  void TearDown() override {
    for (const auto& n : nodes_) UnlinkSimNode(n);
    UnlinkSimNode(node_);
    for (const auto& g : groups_) UnlinkLedger(g);
    UnlinkLedger(group_);
    for (const auto& f : files_) unlink(f.c_str());
  }

  // Environment of a client: the simulated driver on the loader path, our
  // node, libvgpu preloaded (or not), plus `extra`.
  std::vector<std::string> Env(bool preload, std::vector<std::string> extra = {}) const {
    std::vector<std::string> e = {std::string("LD_LIBRARY_PATH=") + ITEST_SIM_DIR, "VGPU_SIM_NODE=" + node_};
    if (preload) e.push_back(std::string("LD_PRELOAD=") + ITEST_LIBVGPU);
    e.insert(e.end(), extra.begin(), extra.end());
    return CleanEnv(e);
  }
  std::string GroupVar() const { return "VGPU_GROUP=" + group_; }

  static std::vector<std::string> Argv(const PathParam& p, const std::vector<std::string>& ops) {
    std::vector<std::string> a{p.binary};
    a.insert(a.end(), p.options.begin(), p.options.end());
    a.insert(a.end(), ops.begin(), ops.end());
    return a;
  }
  RunResult Client(const PathParam& p, const std::vector<std::string>& ops, const std::vector<std::string>& env,
             int timeout_ms = 30000) {
    return RunToEnd(Argv(p, ops), env, timeout_ms);
  }
  std::string TempFile(const std::string& tag) {
    std::string f = "/tmp/" + id_ + "-" + tag;
    files_.push_back(f);
    return f;
  }

  std::string id_, node_, group_;
  std::vector<std::string> nodes_, groups_, files_;
};

class PathTest : public InterceptTest, public ::testing::WithParamInterface<PathParam> {};

inline std::string ParamName(const ::testing::TestParamInfo<PathParam>& i) { return i.param.name; }
inline void PrintTo(const PathParam& p, std::ostream* os) { *os << p.name; }

}  // namespace vgpu::itest

#define ASSERT_CLEAN_EXIT(run) ASSERT_TRUE((run).ExitedZero() && (run).out.Has("done")) << (run).Describe()
