#include "common/config/config.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <future>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace vgpu {
namespace {

constexpr uint64_t kGiB = 1ull << 30;
constexpr uint64_t kMiB = 1ull << 20;
constexpr const char* kUuid = "GPU-8c6e1a2b-0f3d-4e5a-9b7c-1d2e3f4a5b6c";

class ConfigTest : public ::testing::Test {
 protected:
  bool Load() {
    std::vector<std::string> names;
    for (const auto& [name, value] : env_) names.push_back(name);
    Status s = LoadConfig(
        [this](const char* name) -> const char* {
          auto it = env_.find(name);
          return it == env_.end() ? nullptr : it->second.c_str();
        },
        &cfg_, &names, fallback_.empty() ? nullptr : fallback_.c_str());
    error_ = s.message;
    return s.ok();
  }

  // Loads, expecting success.
  void LoadOk() { ASSERT_TRUE(Load()) << error_; }

  // Loads, expecting a one-line error; returns it.
  std::string LoadError() {
    EXPECT_FALSE(Load());
    EXPECT_FALSE(error_.empty());
    EXPECT_EQ(error_.find('\n'), std::string::npos) << error_;
    return error_;
  }

  // The error for `name`=`value` alone in the environment.
  std::string ErrorFor(const std::string& name, const std::string& value) {
    env_ = {{name, value}};
    return LoadError();
  }

  // Writes a JSON file and points VGPU_CONFIG at it.
  std::string UseFile(const std::string& content) {
    std::string path = ::testing::TempDir() + "vgpu_config_test_" +
                       ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".json";
    std::ofstream(path) << content;
    env_["VGPU_CONFIG"] = path;
    return path;
  }

  std::map<std::string, std::string> env_;
  std::string fallback_;  // the container file read without VGPU_CONFIG; empty: none
  Config cfg_;
  std::string error_;
};

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// --- defaults and the pass-through ---

TEST_F(ConfigTest, NothingSetIsAPassThrough) {
  LoadOk();
  EXPECT_FALSE(cfg_.configured);
  EXPECT_FALSE(cfg_.visible_devices_set);
  EXPECT_TRUE(cfg_.visible_devices.empty());
  EXPECT_EQ(cfg_.LimitFor(0), Config::kNoLimit);
  EXPECT_EQ(cfg_.LimitFor(15), Config::kNoLimit);
  EXPECT_EQ(cfg_.group, "");
  EXPECT_EQ(cfg_.log_level, LogLevel::kWarn);
  EXPECT_EQ(cfg_.log_file, "");
  EXPECT_EQ(cfg_.real_libcuda, "");
  EXPECT_EQ(cfg_.real_libnvml, "");
  EXPECT_EQ(cfg_.config_file, "");
  Status s = cfg_.ValidateAgainstDeviceCount(4);
  EXPECT_TRUE(s.ok()) << s.message;
}

TEST_F(ConfigTest, NonPolicyOptionsLeaveItAPassThrough) {
  env_ = {{"VGPU_LOG_LEVEL", "debug"},
          {"VGPU_LOG_FILE", "/tmp/vgpu.log"},
          {"VGPU_REAL_LIBCUDA", "/opt/cuda/libcuda.so.1"},
          {"VGPU_REAL_LIBNVML", "/opt/nvml/libnvidia-ml.so.1"}};
  LoadOk();
  EXPECT_FALSE(cfg_.configured);
  EXPECT_EQ(cfg_.real_libcuda, "/opt/cuda/libcuda.so.1");
  EXPECT_EQ(cfg_.real_libnvml, "/opt/nvml/libnvidia-ml.so.1");
}

TEST_F(ConfigTest, EachPolicyOptionConfigures) {
  for (const auto& [name, value] :
       std::map<std::string, std::string>{{"VGPU_VISIBLE_DEVICES", "0"},
                                          {"VGPU_DEVICE_MEMORY_LIMIT", "1g"},
                                          {"CUDA_DEVICE_MEMORY_LIMIT", "1g"},
                                          {"CUDA_DEVICE_MEMORY_LIMIT_0", "1g"},
                                          {"VGPU_GROUP", "job"},
                                          {"VGPU_COMPUTE_SHARE", "30"},
                                          {"CUDA_DEVICE_SM_LIMIT", "30"},
                                          {"VGPU_COMPUTE_WEIGHT", "2"},
                                          {"VGPU_PRIORITY", "normal"},
                                          {"VGPU_COMPUTE_POLICY", "native"}}) {
    env_ = {{name, value}};
    LoadOk();
    EXPECT_TRUE(cfg_.configured) << name;
  }
}

// --- VGPU_VISIBLE_DEVICES ---

TEST_F(ConfigTest, VisibleDevicesIndicesAndUuids) {
  env_ = {{"VGPU_VISIBLE_DEVICES", " 2 , GPU-8C6E1A2B-0F3D-4E5A-9B7C-1D2E3F4A5B6C,0"}};
  LoadOk();
  EXPECT_TRUE(cfg_.visible_devices_set);
  EXPECT_EQ(cfg_.visible_devices, (std::vector<std::string>{"2", kUuid, "0"}));
}

TEST_F(ConfigTest, VisibleDevicesEmptyHidesAll) {
  env_ = {{"VGPU_VISIBLE_DEVICES", ""}};
  LoadOk();
  EXPECT_TRUE(cfg_.configured);
  EXPECT_TRUE(cfg_.visible_devices_set);
  EXPECT_TRUE(cfg_.visible_devices.empty());
}

TEST_F(ConfigTest, VisibleDevicesSixteenIsTheMaximum) {
  std::string all = "0";
  for (int i = 1; i < 16; ++i) all += "," + std::to_string(i);
  env_ = {{"VGPU_VISIBLE_DEVICES", all}};
  LoadOk();
  EXPECT_EQ(cfg_.visible_devices.size(), 16u);
  EXPECT_TRUE(Contains(ErrorFor("VGPU_VISIBLE_DEVICES", all + "," + kUuid), "more than 16"));
}

TEST_F(ConfigTest, VisibleDevicesRejectsMalformed) {
  for (const char* bad :
       {"a", "-1", "16", "1.0", "0x1", "01", "0,,1", "0,", ",0", "GPU-",
        "GPU-8c6e1a2b-0f3d-4e5a-9b7c-1d2e3f4a5b6", "8c6e1a2b-0f3d-4e5a-9b7c-1d2e3f4a5b6c",
        "GPU-8c6e1a2b-0f3d-4e5a-9b7c-1d2e3f4a5b6g", "GPU-8c6e1a2b_0f3d-4e5a-9b7c-1d2e3f4a5b6c"}) {
    std::string e = ErrorFor("VGPU_VISIBLE_DEVICES", bad);
    EXPECT_TRUE(Contains(e, "VGPU_VISIBLE_DEVICES='")) << e;
    EXPECT_TRUE(Contains(e, "expected")) << e;
  }
  EXPECT_EQ(ErrorFor("VGPU_VISIBLE_DEVICES", "x"),
            "VGPU_VISIBLE_DEVICES='x' is not a device: expected a comma-separated list of "
            "indices 0..15 or UUIDs like GPU-8c6e1a2b-0f3d-4e5a-9b7c-1d2e3f4a5b6c");
}

TEST_F(ConfigTest, VisibleDevicesRejectsMig) {
  std::string e = ErrorFor("VGPU_VISIBLE_DEVICES", "0,MIG-8c6e1a2b-0f3d-4e5a-9b7c-1d2e3f4a5b6c");
  EXPECT_TRUE(Contains(e, "MIG")) << e;
  EXPECT_TRUE(Contains(e, "'MIG-8c6e1a2b")) << e;
}

TEST_F(ConfigTest, VisibleDevicesRejectsDuplicates) {
  EXPECT_TRUE(Contains(ErrorFor("VGPU_VISIBLE_DEVICES", "1,0,1"), "twice"));
  std::string upper = "GPU-8C6E1A2B-0F3D-4E5A-9B7C-1D2E3F4A5B6C";
  EXPECT_TRUE(
      Contains(ErrorFor("VGPU_VISIBLE_DEVICES", std::string(kUuid) + "," + upper), "twice"));
}

// --- VGPU_DEVICE_MEMORY_LIMIT and its aliases ---

TEST_F(ConfigTest, MemoryLimitUnits) {
  const std::map<std::string, uint64_t> cases = {
      {"8GiB", 8 * kGiB},   {"512MiB", 512 * kMiB}, {"1g", kGiB},
      {"512m", 512 * kMiB}, {"1073741824", kGiB},   {"1048576k", kGiB},
      {"2G", 2 * kGiB},     {" 4GiB ", 4 * kGiB},   {"1", 1},
      {"1TiB", 1024 * kGiB}};
  for (const auto& [text, bytes] : cases) {
    env_ = {{"VGPU_DEVICE_MEMORY_LIMIT", text}};
    LoadOk();
    EXPECT_EQ(cfg_.LimitFor(0), bytes) << text;
    EXPECT_EQ(cfg_.LimitFor(7), bytes) << text;
    EXPECT_TRUE(cfg_.memory_limits.empty());
  }
}

TEST_F(ConfigTest, MemoryLimitPerDeviceList) {
  env_ = {{"VGPU_DEVICE_MEMORY_LIMIT", "8GiB, 4GiB"}};
  LoadOk();
  EXPECT_EQ(cfg_.LimitFor(0), 8 * kGiB);
  EXPECT_EQ(cfg_.LimitFor(1), 4 * kGiB);
  EXPECT_EQ(cfg_.LimitFor(2), 0u);  // not covered: fail closed
  EXPECT_EQ(cfg_.LimitFor(-1), 0u);
  Status s = cfg_.ValidateAgainstDeviceCount(2);
  EXPECT_TRUE(s.ok()) << s.message;
  s = cfg_.ValidateAgainstDeviceCount(3);
  EXPECT_EQ(s.code, ErrorCode::kInval);
  EXPECT_EQ(s.message,
            "VGPU_DEVICE_MEMORY_LIMIT lists 2 limits but the process sees 3 devices: give one "
            "limit for all devices or exactly one per device");
  EXPECT_FALSE(cfg_.ValidateAgainstDeviceCount(1).ok());
}

TEST_F(ConfigTest, MemoryLimitErrorMessageIsTheDocumentedOne) {
  EXPECT_EQ(ErrorFor("VGPU_DEVICE_MEMORY_LIMIT", "8GB?"),
            "VGPU_DEVICE_MEMORY_LIMIT='8GB?' is not a size: expected e.g. 8GiB, 512MiB, 1g or a "
            "byte count");
}

TEST_F(ConfigTest, MemoryLimitRejectsMalformed) {
  for (const char* bad :
       {"", " ", "-1", "0", "0GiB", "8GB?", "1.5g", "0x10", "g", "8 GiB x", "99999999999999999999",
        "17179869184GiB", "8GiB,,4GiB", "8GiB,", "8GiB,0", "8GiB,-4GiB", "1e9"}) {
    std::string e = ErrorFor("VGPU_DEVICE_MEMORY_LIMIT", bad);
    EXPECT_TRUE(Contains(e, "VGPU_DEVICE_MEMORY_LIMIT='" + std::string(bad) + "'")) << e;
  }
  EXPECT_TRUE(Contains(ErrorFor("VGPU_DEVICE_MEMORY_LIMIT", "0"), "0 bytes"));
  EXPECT_TRUE(Contains(ErrorFor("VGPU_DEVICE_MEMORY_LIMIT", "8GiB,x"), "item 'x'"));
  std::string many = "1g";
  for (int i = 0; i < 16; ++i) many += ",1g";
  EXPECT_TRUE(Contains(ErrorFor("VGPU_DEVICE_MEMORY_LIMIT", many), "more than 16"));
}

TEST_F(ConfigTest, HamiAliasAcceptsHamiValues) {
  for (const auto& [text, bytes] : std::map<std::string, uint64_t>{
           {"1g", kGiB}, {"1024m", kGiB}, {"1048576k", kGiB}, {"1073741824", kGiB}}) {
    env_ = {{"CUDA_DEVICE_MEMORY_LIMIT", text}};
    LoadOk();
    EXPECT_EQ(cfg_.LimitFor(0), bytes) << text;
  }
}

TEST_F(ConfigTest, HamiAliasErrorsNameTheAlias) {
  EXPECT_EQ(ErrorFor("CUDA_DEVICE_MEMORY_LIMIT", "lots"),
            "CUDA_DEVICE_MEMORY_LIMIT='lots' is not a size: expected e.g. 8GiB, 512MiB, 1g or a "
            "byte count");
  EXPECT_TRUE(Contains(ErrorFor("CUDA_DEVICE_MEMORY_LIMIT", "0"), "CUDA_DEVICE_MEMORY_LIMIT='0'"));
}

TEST_F(ConfigTest, PrimaryNameWinsOverAlias) {
  env_ = {{"VGPU_DEVICE_MEMORY_LIMIT", "2g"}, {"CUDA_DEVICE_MEMORY_LIMIT", "1g"}};
  LoadOk();
  EXPECT_EQ(cfg_.LimitFor(0), 2 * kGiB);
}

TEST_F(ConfigTest, PerIndexAliasOverridesOneDevice) {
  env_ = {{"VGPU_DEVICE_MEMORY_LIMIT", "8g"},
          {"CUDA_DEVICE_MEMORY_LIMIT_1", "2g"},
          {"CUDA_DEVICE_MEMORY_LIMIT_15", "1g"}};
  LoadOk();
  EXPECT_EQ(cfg_.LimitFor(0), 8 * kGiB);
  EXPECT_EQ(cfg_.LimitFor(1), 2 * kGiB);
  EXPECT_EQ(cfg_.LimitFor(2), 8 * kGiB);
  EXPECT_EQ(cfg_.LimitFor(15), kGiB);
  Status s = cfg_.ValidateAgainstDeviceCount(16);
  EXPECT_TRUE(s.ok()) << s.message;
  s = cfg_.ValidateAgainstDeviceCount(2);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.message,
            "CUDA_DEVICE_MEMORY_LIMIT_15 is set but the process sees only 2 devices (indices "
            "0..1)");
}

TEST_F(ConfigTest, PerIndexAliasAloneLimitsOnlyThatDevice) {
  env_ = {{"CUDA_DEVICE_MEMORY_LIMIT_0", "512m"}, {"CUDA_DEVICE_MEMORY_LIMIT", "4g"}};
  LoadOk();
  EXPECT_EQ(cfg_.LimitFor(0), 512 * kMiB);
  EXPECT_EQ(cfg_.LimitFor(1), 4 * kGiB);
  env_ = {{"CUDA_DEVICE_MEMORY_LIMIT_1", "512m"}};
  LoadOk();
  EXPECT_EQ(cfg_.LimitFor(0), Config::kNoLimit);
  EXPECT_EQ(cfg_.LimitFor(1), 512 * kMiB);
}

TEST_F(ConfigTest, PerIndexAliasOverridesAList) {
  env_ = {{"VGPU_DEVICE_MEMORY_LIMIT", "8g,4g"}, {"CUDA_DEVICE_MEMORY_LIMIT_0", "1g"}};
  LoadOk();
  EXPECT_EQ(cfg_.LimitFor(0), kGiB);
  EXPECT_EQ(cfg_.LimitFor(1), 4 * kGiB);
}

TEST_F(ConfigTest, PerIndexAliasRejectsBadNamesAndValues) {
  for (const char* name : {"CUDA_DEVICE_MEMORY_LIMIT_16", "CUDA_DEVICE_MEMORY_LIMIT_x",
                           "CUDA_DEVICE_MEMORY_LIMIT_01", "CUDA_DEVICE_MEMORY_LIMIT_",
                           "CUDA_DEVICE_MEMORY_LIMIT_-1", "CUDA_DEVICE_MEMORY_LIMIT_1_"}) {
    std::string e = ErrorFor(name, "1g");
    EXPECT_EQ(e, std::string(name) +
                     " is not a per-device variable: the suffix after CUDA_DEVICE_MEMORY_LIMIT_ "
                     "must be a device index 0..15");
  }
  for (const char* bad : {"", "0", "-1g", "1gg"}) {
    std::string e = ErrorFor("CUDA_DEVICE_MEMORY_LIMIT_3", bad);
    EXPECT_TRUE(Contains(e, "CUDA_DEVICE_MEMORY_LIMIT_3='" + std::string(bad) + "'")) << e;
  }
}

// --- VGPU_GROUP ---

TEST_F(ConfigTest, Group) {
  for (const std::string& good :
       std::vector<std::string>{"job42", "team-a.job_7", "A", std::string(100, 'x')}) {
    env_ = {{"VGPU_GROUP", good}};
    LoadOk();
    EXPECT_EQ(cfg_.group, good);
  }
  for (const std::string& bad : std::vector<std::string>{
           "", "a b", "a/b", "../x", "job:1", std::string(101, 'x'), std::string("a\nb")}) {
    std::string e = ErrorFor("VGPU_GROUP", bad);
    EXPECT_TRUE(Contains(e, "VGPU_GROUP='")) << e;
    EXPECT_TRUE(Contains(e, "[A-Za-z0-9._-]")) << e;
  }
  EXPECT_EQ(ErrorFor("VGPU_GROUP", "a\nb"),
            "VGPU_GROUP='a\\nb' is not a group name: use 1-100 characters from [A-Za-z0-9._-]");
}

// --- logging ---

TEST_F(ConfigTest, LogLevel) {
  const std::map<std::string, LogLevel> levels = {
      {"off", LogLevel::kOff},   {"error", LogLevel::kError}, {"warn", LogLevel::kWarn},
      {"info", LogLevel::kInfo}, {"debug", LogLevel::kDebug}, {"DEBUG", LogLevel::kDebug}};
  for (const auto& [text, level] : levels) {
    env_ = {{"VGPU_LOG_LEVEL", text}};
    LoadOk();
    EXPECT_EQ(cfg_.log_level, level) << text;
  }
  for (const char* bad : {"", "verbose", "3", "warning"}) {
    EXPECT_EQ(ErrorFor("VGPU_LOG_LEVEL", bad),
              "VGPU_LOG_LEVEL='" + std::string(bad) +
                  "' is not a log level: expected off, error, warn, info or debug");
  }
}

TEST_F(ConfigTest, LogFile) {
  for (const char* good : {"/var/log/vgpu.log", "stderr", "relative.log"}) {
    env_ = {{"VGPU_LOG_FILE", good}};
    LoadOk();
    EXPECT_EQ(cfg_.log_file, good);
  }
  EXPECT_TRUE(Contains(ErrorFor("VGPU_LOG_FILE", ""), "VGPU_LOG_FILE='' is empty"));
  EXPECT_TRUE(Contains(ErrorFor("VGPU_LOG_FILE", "a\tb"), "control characters"));
}

TEST_F(ConfigTest, RealLibraryPaths) {
  EXPECT_TRUE(Contains(ErrorFor("VGPU_REAL_LIBCUDA", ""), "VGPU_REAL_LIBCUDA='' is empty"));
  EXPECT_TRUE(Contains(ErrorFor("VGPU_REAL_LIBNVML", ""), "VGPU_REAL_LIBNVML='' is empty"));
}

// --- compute share ---

TEST_F(ConfigTest, ComputeDefaultsAreUnsetAndNative) {
  LoadOk();
  EXPECT_EQ(cfg_.compute_share_permille, 0u);
  EXPECT_EQ(cfg_.compute_weight, 0u);
  EXPECT_FALSE(cfg_.high_priority());
  EXPECT_EQ(cfg_.priority, Config::Priority::kNormal);
  EXPECT_EQ(cfg_.compute_policy, Config::ComputePolicy::kAuto);
  EXPECT_EQ(cfg_.EffectivePolicy(), Config::ComputePolicy::kNative);
  EXPECT_EQ(cfg_.sched_region, "");
  EXPECT_TRUE(cfg_.vmm);
}

TEST_F(ConfigTest, ComputeShareInPercent) {
  const std::map<std::string, uint32_t> shares = {
      {"30", 300}, {"30%", 300}, {" 30 ", 300},   {"12.5", 125}, {"100", 1000}, {"100%", 1000},
      {"0.5", 5},  {"0.01", 1},  {"99.96", 1000}, {"7.", 70},    {".5", 5},     {"030", 300}};
  for (const auto& [text, permille] : shares) {
    env_ = {{"VGPU_COMPUTE_SHARE", text}};
    LoadOk();
    EXPECT_EQ(cfg_.compute_share_permille, permille) << text;
    EXPECT_EQ(cfg_.EffectivePolicy(), Config::ComputePolicy::kFixed) << text;
  }
}

TEST_F(ConfigTest, ComputeShareRejectsMalformed) {
  for (const char* bad :
       {"",  " ",    "0",      "0%",  "0.0",  "100.1", "101", "-5",    "+30", "30%%",
        "%", "30 %", "thirty", "1e1", "0x1e", "inf",   "nan", "1.2.3", ".",   "30,40"}) {
    EXPECT_EQ(ErrorFor("VGPU_COMPUTE_SHARE", bad),
              "VGPU_COMPUTE_SHARE='" + std::string(bad) +
                  "' is not a share: expected a percentage above 0 and at most 100, e.g. 30");
  }
}

TEST_F(ConfigTest, SmLimitIsTheHamiAliasOfComputeShare) {
  env_ = {{"CUDA_DEVICE_SM_LIMIT", "25"}};
  LoadOk();
  EXPECT_EQ(cfg_.compute_share_permille, 250u);
  EXPECT_EQ(cfg_.EffectivePolicy(), Config::ComputePolicy::kFixed);
  // The primary name wins over the alias, and errors name the alias as set.
  env_ = {{"VGPU_COMPUTE_SHARE", "40"}, {"CUDA_DEVICE_SM_LIMIT", "25"}};
  LoadOk();
  EXPECT_EQ(cfg_.compute_share_permille, 400u);
  std::string e = ErrorFor("CUDA_DEVICE_SM_LIMIT", "half");
  EXPECT_TRUE(Contains(e, "CUDA_DEVICE_SM_LIMIT='half' is not a share")) << e;
  // As in HAMi-core, 0 and values of 100 or more in its variable mean "no limit";
  // our own variable keeps refusing them.
  for (const char* none : {"0", "100", "150"}) {
    env_ = {{"CUDA_DEVICE_SM_LIMIT", none}};
    LoadOk();
    EXPECT_EQ(cfg_.compute_share_permille, 0u) << none;
    EXPECT_EQ(cfg_.EffectivePolicy(), Config::ComputePolicy::kNative) << none;
  }
  EXPECT_FALSE(ErrorFor("VGPU_COMPUTE_SHARE", "0").empty());
}

// HAMi-core's per-device limit: CUDA_DEVICE_SM_LIMIT_<i> caps visible device
// i and overrides CUDA_DEVICE_SM_LIMIT there; 0 or >= 100 uncaps that device.
TEST_F(ConfigTest, PerDeviceSmLimitIsTheHamiAliasForOneDevice) {
  env_ = {{"CUDA_DEVICE_SM_LIMIT", "50"}, {"CUDA_DEVICE_SM_LIMIT_1", "20"},
          {"CUDA_DEVICE_SM_LIMIT_2", "0"}};
  LoadOk();
  EXPECT_TRUE(cfg_.configured);
  EXPECT_EQ(cfg_.ShareFor(0), 500u);
  EXPECT_EQ(cfg_.ShareFor(1), 200u);
  EXPECT_EQ(cfg_.ShareFor(2), 0u);
  EXPECT_EQ(cfg_.EffectivePolicy(), Config::ComputePolicy::kFixed);
  EXPECT_EQ(cfg_.EffectivePolicyFor(1), Config::ComputePolicy::kFixed);
  EXPECT_EQ(cfg_.EffectivePolicyFor(2), Config::ComputePolicy::kNative);
  Status s = cfg_.ValidateAgainstDeviceCount(3);
  EXPECT_TRUE(s.ok()) << s.message;
  s = cfg_.ValidateAgainstDeviceCount(2);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.message,
            "CUDA_DEVICE_SM_LIMIT_2 is set but the process sees only 2 devices (indices 0..1)");
  // Alone, it caps only its device; the others are not scheduled.
  env_ = {{"CUDA_DEVICE_SM_LIMIT_0", "30"}};
  LoadOk();
  EXPECT_EQ(cfg_.EffectivePolicy(), Config::ComputePolicy::kFixed);
  EXPECT_EQ(cfg_.EffectivePolicyFor(0), Config::ComputePolicy::kFixed);
  EXPECT_EQ(cfg_.EffectivePolicyFor(1), Config::ComputePolicy::kNative);
  EXPECT_EQ(ErrorFor("CUDA_DEVICE_SM_LIMIT_0", "lots"),
            "CUDA_DEVICE_SM_LIMIT_0='lots' is not a share: expected a percentage above 0 and at "
            "most 100, e.g. 30");
  EXPECT_TRUE(Contains(ErrorFor("CUDA_DEVICE_SM_LIMIT_x", "30"), "is not a per-device variable"));
  EXPECT_TRUE(IsConfigVariable("CUDA_DEVICE_SM_LIMIT_3"));
}

// HAMi-core's CUDA_TASK_PRIORITY: 0 is high, 1 (its default) and above normal.
TEST_F(ConfigTest, TaskPriorityIsTheHamiAliasOfPriority) {
  for (const auto& [text, high] : std::map<std::string, bool>{{"0", true}, {"1", false}, {" 2 ", false}}) {
    env_ = {{"CUDA_TASK_PRIORITY", text}};
    LoadOk();
    EXPECT_EQ(cfg_.high_priority(), high) << text;
  }
  for (const char* bad : {"", "-1", "high", "1.5", "9999"}) {
    EXPECT_EQ(ErrorFor("CUDA_TASK_PRIORITY", bad),
              "CUDA_TASK_PRIORITY='" + std::string(bad) +
                  "' is not a HAMi task priority: expected 0 (high) or 1 (normal)");
  }
  env_ = {{"VGPU_PRIORITY", "normal"}, {"CUDA_TASK_PRIORITY", "0"}};  // ours wins
  LoadOk();
  EXPECT_FALSE(cfg_.high_priority());
}

TEST_F(ConfigTest, ComputeWeight) {
  for (const auto& [text, weight] : std::map<std::string, uint32_t>{
           {"1", 1}, {"2", 2}, {" 7 ", 7}, {"1000", 1000}, {"0010", 10}}) {
    env_ = {{"VGPU_COMPUTE_WEIGHT", text}};
    LoadOk();
    EXPECT_EQ(cfg_.compute_weight, weight) << text;
    EXPECT_EQ(cfg_.EffectivePolicy(), Config::ComputePolicy::kWeighted) << text;
  }
  for (const char* bad :
       {"", "0", "1001", "-1", "+2", "2.5", "1e2", "0x10", "two", "99999999999999999999999"}) {
    EXPECT_EQ(ErrorFor("VGPU_COMPUTE_WEIGHT", bad),
              "VGPU_COMPUTE_WEIGHT='" + std::string(bad) +
                  "' is not a weight: expected an integer from 1 to 1000");
  }
  EXPECT_TRUE(Contains(ErrorFor("VGPU_COMPUTE_WEIGHT", "\n5"), "is not a weight"));
}

TEST_F(ConfigTest, Priority) {
  using P = Config::Priority;
  const std::map<std::string, P> values = {
      {"high", P::kHigh},     {"HIGH", P::kHigh}, {" high ", P::kHigh}, {"normal", P::kNormal},
      {"Normal", P::kNormal}, {"low", P::kLow},   {" LOW", P::kLow}};
  for (const auto& [text, priority] : values) {
    env_ = {{"VGPU_PRIORITY", text}};
    LoadOk();
    EXPECT_EQ(cfg_.priority, priority) << text;
    // Only high asks for scheduling: low is normal to the compute scheduler.
    EXPECT_EQ(cfg_.EffectivePolicy(), priority == P::kHigh ? Config::ComputePolicy::kWeighted
                                                           : Config::ComputePolicy::kNative)
        << text;
  }
  // The words round-trip (the control protocol uses them too).
  for (P p : {P::kHigh, P::kNormal, P::kLow}) {
    P parsed = P::kNormal;
    EXPECT_TRUE(ParsePriorityName(PriorityName(p), &parsed));
    EXPECT_EQ(parsed, p);
  }
  EXPECT_STREQ(PriorityName(P::kLow), "low");
  for (const char* bad : {"", "lowest", "1", "higher", "realtime"}) {
    EXPECT_EQ(
        ErrorFor("VGPU_PRIORITY", bad),
        "VGPU_PRIORITY='" + std::string(bad) + "' is not a priority: expected high, normal or low");
  }
}

TEST_F(ConfigTest, ComputePolicy) {
  const std::map<std::string, Config::ComputePolicy> policies = {
      {"fixed", Config::ComputePolicy::kFixed},
      {"weighted", Config::ComputePolicy::kWeighted},
      {"native", Config::ComputePolicy::kNative},
      {" Weighted ", Config::ComputePolicy::kWeighted}};
  for (const auto& [text, policy] : policies) {
    env_ = {{"VGPU_COMPUTE_POLICY", text}};
    LoadOk();
    EXPECT_EQ(cfg_.compute_policy, policy) << text;
    EXPECT_EQ(cfg_.EffectivePolicy(), policy) << text;
  }
  // "auto" is the default's name in the code only; it is not a value.
  for (const char* bad : {"", "auto", "fair", "fixed,weighted"}) {
    EXPECT_EQ(ErrorFor("VGPU_COMPUTE_POLICY", bad),
              "VGPU_COMPUTE_POLICY='" + std::string(bad) +
                  "' is not a policy: expected fixed, weighted or native");
  }
}

TEST_F(ConfigTest, ExplicitPolicyOverridesTheInferredOne) {
  env_ = {{"VGPU_COMPUTE_SHARE", "30"}, {"VGPU_COMPUTE_POLICY", "weighted"}};
  LoadOk();
  EXPECT_EQ(cfg_.compute_share_permille, 300u);
  EXPECT_EQ(cfg_.EffectivePolicy(), Config::ComputePolicy::kWeighted);
  // A share is inferred to mean fixed even next to a weight or high priority.
  env_ = {{"VGPU_COMPUTE_SHARE", "30"}, {"VGPU_COMPUTE_WEIGHT", "3"}, {"VGPU_PRIORITY", "high"}};
  LoadOk();
  EXPECT_EQ(cfg_.EffectivePolicy(), Config::ComputePolicy::kFixed);
  env_ = {{"VGPU_COMPUTE_WEIGHT", "3"}, {"VGPU_COMPUTE_POLICY", "native"}};
  LoadOk();
  EXPECT_EQ(cfg_.EffectivePolicy(), Config::ComputePolicy::kNative);
}

TEST_F(ConfigTest, ComputeOptionsFromTheJsonFile) {
  UseFile(R"({"compute_share": "20%", "compute_weight": "4", "priority": "high",
              "compute_policy": "weighted", "sched_region": "/vgpu-sched-team-a"})");
  LoadOk();
  EXPECT_TRUE(cfg_.configured);
  EXPECT_EQ(cfg_.compute_share_permille, 200u);
  EXPECT_EQ(cfg_.compute_weight, 4u);
  EXPECT_TRUE(cfg_.high_priority());
  EXPECT_EQ(cfg_.compute_policy, Config::ComputePolicy::kWeighted);
  EXPECT_EQ(cfg_.sched_region, "/vgpu-sched-team-a");
  // The environment overrides the file, option by option.
  env_["VGPU_COMPUTE_WEIGHT"] = "9";
  LoadOk();
  EXPECT_EQ(cfg_.compute_weight, 9u);
  EXPECT_EQ(cfg_.compute_share_permille, 200u);
  // Scalar keys take strings only (docs/configuration.md, "The JSON file").
  std::string path = UseFile(R"({"compute_share": 30})");
  env_ = {{"VGPU_CONFIG", path}};
  EXPECT_EQ(LoadError(),
            "VGPU_CONFIG file '" + path + "': compute_share is number: expected a string");
  UseFile(R"({"compute_weight": "0"})");
  EXPECT_TRUE(Contains(LoadError(), ": compute_weight='0' is not a weight")) << error_;
}

// --- VGPU_VMM ---

TEST_F(ConfigTest, VmmSwitch) {
  const std::map<std::string, bool> values = {{"on", true},   {"ON", true},     {"1", true},
                                              {"true", true}, {" off ", false}, {"off", false},
                                              {"0", false},   {"False", false}};
  for (const auto& [text, on] : values) {
    env_ = {{"VGPU_VMM", text}};
    LoadOk();
    EXPECT_EQ(cfg_.vmm, on) << text;
    // Not a policy option: VGPU_VMM=off alone leaves a complete pass-through.
    EXPECT_FALSE(cfg_.configured) << text;
  }
  for (const char* bad : {"", "yes", "no", "2", "enabled", "o n"}) {
    EXPECT_EQ(ErrorFor("VGPU_VMM", bad),
              "VGPU_VMM='" + std::string(bad) + "' is not a switch: expected on or off");
  }
}

TEST_F(ConfigTest, VmmIsEnvironmentOnly) {
  UseFile(R"({"vmm": "off"})");
  EXPECT_TRUE(Contains(LoadError(), "has unknown key 'vmm'")) << error_;
}

// --- the JSON file ---

TEST_F(ConfigTest, JsonFileSetsEveryKey) {
  UseFile(R"({"visible_devices": ["1", ")" + std::string(kUuid) + R"(", 0],
              "device_memory_limit": ["8GiB", "4GiB", 1073741824],
              "group": "job42", "log_level": "info", "log_file": "/var/log/vgpu.log",
              "real_libcuda": "/drv/libcuda.so.1", "real_libnvml": "/drv/libnvidia-ml.so.1"})");
  LoadOk();
  EXPECT_TRUE(cfg_.configured);
  EXPECT_EQ(cfg_.visible_devices, (std::vector<std::string>{"1", kUuid, "0"}));
  EXPECT_EQ(cfg_.memory_limits, (std::vector<uint64_t>{8 * kGiB, 4 * kGiB, kGiB}));
  EXPECT_EQ(cfg_.group, "job42");
  EXPECT_EQ(cfg_.log_level, LogLevel::kInfo);
  EXPECT_EQ(cfg_.log_file, "/var/log/vgpu.log");
  EXPECT_EQ(cfg_.real_libcuda, "/drv/libcuda.so.1");
  EXPECT_EQ(cfg_.real_libnvml, "/drv/libnvidia-ml.so.1");
}

TEST_F(ConfigTest, JsonListsMayBeStrings) {
  UseFile(R"({"visible_devices": "0,1", "device_memory_limit": "8GiB"})");
  LoadOk();
  EXPECT_EQ(cfg_.visible_devices, (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(cfg_.LimitFor(1), 8 * kGiB);
  UseFile(R"({"device_memory_limit": ["2GiB"], "visible_devices": []})");
  LoadOk();
  EXPECT_EQ(cfg_.LimitFor(5), 2 * kGiB);  // one value applies to every device
  EXPECT_TRUE(cfg_.visible_devices_set);
  EXPECT_TRUE(cfg_.visible_devices.empty());
  UseFile(R"({"device_memory_limit": 536870912})");
  LoadOk();
  EXPECT_EQ(cfg_.LimitFor(0), 512 * kMiB);
}

TEST_F(ConfigTest, EmptyJsonObjectIsAPassThrough) {
  UseFile("{}");
  LoadOk();
  EXPECT_FALSE(cfg_.configured);
}

// In a container prepared by vgpu-oci-hook, a process that cleared its
// environment still reads the container's file; VGPU_CONFIG, when set, and
// the environment win over it.
TEST_F(ConfigTest, ContainerFileIsReadWhenVgpuConfigIsUnset) {
  fallback_ = ::testing::TempDir() + "vgpu_config_test_container.json";
  std::ofstream(fallback_) << R"({"device_memory_limit": "2GiB", "group": "ctr"})";
  LoadOk();
  EXPECT_EQ(cfg_.config_file, fallback_);
  EXPECT_EQ(cfg_.LimitFor(0), 2 * kGiB);
  EXPECT_EQ(cfg_.group, "ctr");
  EXPECT_TRUE(cfg_.configured);
  env_["VGPU_GROUP"] = "env";
  LoadOk();
  EXPECT_EQ(cfg_.group, "env");
  const std::string named = fallback_;
  fallback_ += ".absent";  // no container file: nothing is read
  env_.erase("VGPU_GROUP");
  LoadOk();
  EXPECT_EQ(cfg_.config_file, "");
  EXPECT_FALSE(cfg_.configured);
  fallback_ = named;
  env_["VGPU_CONFIG"] = UseFile(R"({"device_memory_limit": "4GiB"})");
  LoadOk();
  EXPECT_EQ(cfg_.LimitFor(0), 4 * kGiB);  // the file VGPU_CONFIG names, not the container's
  EXPECT_EQ(cfg_.group, "");
}

TEST_F(ConfigTest, EnvOverridesFileOverridesDefault) {
  UseFile(R"({"device_memory_limit": "8GiB", "group": "file", "log_level": "debug",
              "visible_devices": ["0", "1"]})");
  env_["VGPU_GROUP"] = "env";
  env_["CUDA_DEVICE_MEMORY_LIMIT"] = "1g";
  env_["VGPU_VISIBLE_DEVICES"] = "";
  LoadOk();
  EXPECT_EQ(cfg_.group, "env");
  EXPECT_EQ(cfg_.LimitFor(0), kGiB);
  EXPECT_EQ(cfg_.log_level, LogLevel::kDebug);  // from the file
  EXPECT_TRUE(cfg_.visible_devices.empty());    // env: hide all
  EXPECT_EQ(cfg_.log_file, "");                 // default
}

TEST_F(ConfigTest, EnvSingleValueReplacesFileList) {
  UseFile(R"({"device_memory_limit": ["8GiB", "4GiB"]})");
  env_["VGPU_DEVICE_MEMORY_LIMIT"] = "1g";
  LoadOk();
  EXPECT_TRUE(cfg_.memory_limits.empty());
  EXPECT_EQ(cfg_.LimitFor(3), kGiB);
}

TEST_F(ConfigTest, JsonUnknownKeyIsAnError) {
  std::string path = UseFile(R"({"device_memory_limt": "8GiB"})");
  std::string e = LoadError();
  EXPECT_EQ(
      e, "VGPU_CONFIG file '" + path +
             "' has unknown key 'device_memory_limt': expected visible_devices, "
             "device_memory_limit, group, compute_share, compute_weight, priority, compute_policy, "
             "sched_region, preemptible, suspend_on_sigtstp, claim, pod, slurm_job, "
             "log_level, log_file, real_libcuda, real_libnvml");
}

TEST_F(ConfigTest, JsonConfigKeyIsNotAKey) {
  UseFile(R"({"config": "/etc/other.json"})");
  EXPECT_TRUE(Contains(LoadError(), "unknown key 'config'"));
}

TEST_F(ConfigTest, JsonWrongTypesAreErrors) {
  const std::map<std::string, std::string> cases = {
      {R"({"group": 42})", "group is number: expected a string"},
      {R"({"log_level": ["info"]})", "log_level is array: expected a string"},
      {R"({"log_file": null})", "log_file is null: expected a string"},
      {R"({"device_memory_limit": true})", "device_memory_limit is boolean: expected a string"},
      {R"({"device_memory_limit": 1.5})", "device_memory_limit is number"},
      {R"({"device_memory_limit": -1})", "device_memory_limit is number"},
      {R"({"device_memory_limit": ["1g", false]})", "device_memory_limit is array"},
      {R"({"visible_devices": {"0": 1}})", "visible_devices is object"},
      {R"({"visible_devices": [[0]]})", "visible_devices is array"},
  };
  for (const auto& [json, message] : cases) {
    std::string path = UseFile(json);
    std::string e = LoadError();
    EXPECT_TRUE(Contains(e, "VGPU_CONFIG file '" + path + "': " + message)) << e;
  }
}

TEST_F(ConfigTest, JsonBadValuesNameKeyAndFile) {
  std::string path = UseFile(R"({"device_memory_limit": "8GB?"})");
  EXPECT_EQ(LoadError(), "VGPU_CONFIG file '" + path +
                             "': device_memory_limit='8GB?' is not a size: expected e.g. 8GiB, "
                             "512MiB, 1g or a byte count");
  path = UseFile(R"({"visible_devices": ["0", "0"]})");
  EXPECT_TRUE(Contains(LoadError(), path + "': visible_devices='0,0' has item '0'"));
  UseFile(R"({"device_memory_limit": 0})");
  EXPECT_TRUE(Contains(LoadError(), "0 bytes"));
  UseFile(R"({"group": ""})");
  EXPECT_TRUE(Contains(LoadError(), "group=''"));
}

TEST_F(ConfigTest, JsonFileErrorsFailEvenWhenEnvOverrides) {
  UseFile(R"({"group": "bad name"})");
  env_["VGPU_GROUP"] = "good";
  EXPECT_TRUE(Contains(LoadError(), "group='bad name'"));
}

TEST_F(ConfigTest, MalformedJson) {
  for (const char* text : {"", "{", "{\"group\": \"a\",}", "{group: 1}", "[1, 2]", "\"x\"",
                           "{\"group\": \"a\"}\n{}", "{\"group\":\n\"a\"\n"}) {
    std::string path = UseFile(text);
    std::string e = LoadError();
    EXPECT_TRUE(Contains(e, "VGPU_CONFIG file '" + path + "'")) << e;
  }
  UseFile("[1]");
  EXPECT_TRUE(Contains(LoadError(), "must hold a JSON object"));
  UseFile("{");
  EXPECT_TRUE(Contains(LoadError(), "is not valid JSON"));
}

TEST_F(ConfigTest, JsonDuplicateKeyIsAnError) {
  UseFile(R"({"group": "a", "log_level": "info", "group": "b"})");
  EXPECT_TRUE(Contains(LoadError(), "has key 'group' twice"));
  UseFile(R"({"visible_devices": ["0"], "x": {"group": 1, "group": 2}})");
  EXPECT_TRUE(Contains(LoadError(), "unknown key 'x'"));  // nested keys are not top level
}

TEST_F(ConfigTest, MissingOrEmptyConfigPath) {
  env_ = {{"VGPU_CONFIG", "/nonexistent/vgpu.json"}};
  EXPECT_EQ(LoadError(),
            "VGPU_CONFIG='/nonexistent/vgpu.json' cannot be read: No such file or directory");
  EXPECT_TRUE(Contains(ErrorFor("VGPU_CONFIG", ""), "VGPU_CONFIG='' is empty"));
  env_ = {{"VGPU_CONFIG", ::testing::TempDir()}};  // a directory
  EXPECT_TRUE(Contains(LoadError(), "is not a regular file"));
}

// A FIFO would block the open (and cuInit) until a writer came; a character
// device would be read for ever. Only a regular file is a config file. The
// load runs in a thread so that a regression fails the test instead of
// hanging the suite.
TEST_F(ConfigTest, ConfigPathThatIsNotARegularFileIsRefusedAtOnce) {
  std::string fifo = ::testing::TempDir() + "vgpu_config_test_fifo";
  ::unlink(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  for (const std::string& path : {fifo, std::string("/dev/zero")}) {
    env_ = {{"VGPU_CONFIG", path}};
    auto loaded = std::async(std::launch::async, [this] { return Load(); });
    if (loaded.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
      ADD_FAILURE() << "loading VGPU_CONFIG=" << path << " blocks";
      ::close(::open(fifo.c_str(), O_WRONLY | O_NONBLOCK));  // lets the blocked open return
    }
    EXPECT_FALSE(loaded.get());
    EXPECT_EQ(error_, "VGPU_CONFIG='" + path + "' is not a regular file");
  }
  ::unlink(fifo.c_str());
}

TEST_F(ConfigTest, OversizedJsonFile) {
  UseFile("{\"group\": \"" + std::string(2 << 20, 'a') + "\"}");
  EXPECT_TRUE(Contains(LoadError(), "larger than 1 MiB"));
}

// --- robustness ---

TEST_F(ConfigTest, FailureLeavesADefaultConfig) {
  env_ = {{"VGPU_GROUP", "job"}, {"VGPU_LOG_LEVEL", "loud"}};
  LoadError();
  EXPECT_FALSE(cfg_.configured);
  EXPECT_EQ(cfg_.group, "");
}

TEST_F(ConfigTest, NothingThrows) {
  Config cfg;
  std::vector<std::string> names;
  Status s = LoadConfig([](const char*) -> const char* { throw std::runtime_error("boom"); }, &cfg,
                        &names);
  EXPECT_FALSE(s.ok());
  EXPECT_FALSE(s.message.empty());
}

TEST_F(ConfigTest, DefaultEnvNamesComeFromEnviron) {
  Config cfg;
  Status s = LoadConfig([](const char*) -> const char* { return nullptr; }, &cfg);
  EXPECT_TRUE(s.ok()) << s.message;
  EXPECT_FALSE(cfg.configured);
}

// --- the table and the documentation ---

TEST(ConfigOptionsTest, TableIsWellFormed) {
  std::set<std::string> envs, keys;
  for (const auto& o : Options()) {
    EXPECT_TRUE(std::string(o.env).starts_with("VGPU_")) << o.env;
    EXPECT_TRUE(envs.insert(o.env).second) << o.env;
    if (o.json_key[0] != '\0') {
      EXPECT_TRUE(keys.insert(o.json_key).second) << o.json_key;
    }
    EXPECT_NE(std::string(o.default_text), "") << o.env;
    std::string doc = o.doc;
    EXPECT_TRUE(!doc.empty() && doc.back() == '.') << o.env;
    EXPECT_EQ(doc.find(". "), std::string::npos) << "one sentence: " << o.env;
  }
  for (const char* env :
       {"VGPU_VISIBLE_DEVICES", "VGPU_DEVICE_MEMORY_LIMIT", "VGPU_GROUP", "VGPU_LOG_LEVEL",
        "VGPU_LOG_FILE", "VGPU_CONFIG", "VGPU_REAL_LIBCUDA", "VGPU_REAL_LIBNVML"}) {
    EXPECT_EQ(envs.count(env), 1u) << env;
  }
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, sep)) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

TEST(ConfigOptionsTest, EveryOptionIsDocumented) {
  std::ifstream file(std::string(VGPU_DOCS_DIR) + "/configuration.md");
  ASSERT_TRUE(file.good()) << VGPU_DOCS_DIR "/configuration.md is missing";
  std::vector<std::string> table_rows;
  for (std::string line; std::getline(file, line);) {
    if (line.starts_with("|")) table_rows.push_back(line);
  }
  for (const auto& o : Options()) {
    // The option's row: "| `ENV` | `ALIAS`, ... | `json_key` | ...".
    std::string row;
    for (const auto& r : table_rows) {
      if (r.starts_with("| `" + std::string(o.env) + "`")) row = r;
    }
    ASSERT_FALSE(row.empty()) << o.env << " has no row in docs/configuration.md";
    for (const auto& alias : Split(o.aliases, ',')) {
      EXPECT_TRUE(Contains(row, "`" + alias + "`")) << alias << " is not documented";
    }
    if (o.json_key[0] != '\0') {
      EXPECT_TRUE(Contains(row, "`" + std::string(o.json_key) + "`")) << o.json_key;
    }
  }
}

// --- labels and preemption (VGPU_CLAIM, VGPU_POD, VGPU_PREEMPTIBLE) ---

TEST_F(ConfigTest, ClaimAndPodAreLabelsThatConfigureNoPolicy) {
  LoadOk();
  EXPECT_EQ(cfg_.claim, "");
  EXPECT_TRUE(cfg_.preemptible);
  env_ = {{"VGPU_CLAIM", "default/my-claim"}, {"VGPU_POD", "default/my-pod"}};
  LoadOk();
  EXPECT_EQ(cfg_.claim, "default/my-claim");
  EXPECT_EQ(cfg_.pod, "default/my-pod");
  EXPECT_FALSE(cfg_.configured) << "labels alone leave libvgpu a pass-through";
  const std::string longest(507, 'a');
  env_ = {{"VGPU_CLAIM", longest}};
  LoadOk();
  for (const std::string& bad : {std::string(), std::string(508, 'a'), std::string("a b"),
                                 std::string("a\nb"), std::string("a\x7f")}) {
    EXPECT_TRUE(Contains(ErrorFor("VGPU_POD", bad.c_str()), "is not a label")) << bad;
  }
  env_.clear();
  UseFile(R"({"claim": "ns/c", "pod": "ns/p"})");
  LoadOk();
  EXPECT_EQ(cfg_.claim, "ns/c");
  EXPECT_EQ(cfg_.pod, "ns/p");
}

TEST_F(ConfigTest, PreemptibleIsASwitch) {
  for (const auto& [text, on] : std::map<std::string, bool>{
           {"false", false}, {"off", false}, {"0", false}, {"TRUE", true}, {"on", true}}) {
    env_ = {{"VGPU_PREEMPTIBLE", text}};
    LoadOk();
    EXPECT_EQ(cfg_.preemptible, on) << text;
  }
  EXPECT_EQ(ErrorFor("VGPU_PREEMPTIBLE", "no"),
            "VGPU_PREEMPTIBLE='no' is not a switch: expected on or off");
  env_.clear();
  UseFile(R"({"preemptible": "false"})");
  LoadOk();
  EXPECT_FALSE(cfg_.preemptible);
}

TEST_F(ConfigTest, SuspendOnSigtstpIsASwitchOffByDefault) {
  LoadOk();
  EXPECT_FALSE(cfg_.suspend_on_sigtstp);
  env_ = {{"VGPU_SUSPEND_ON_SIGTSTP", "1"}};
  LoadOk();
  EXPECT_TRUE(cfg_.suspend_on_sigtstp);
  EXPECT_FALSE(cfg_.configured) << "no policy of its own";
  EXPECT_EQ(ErrorFor("VGPU_SUSPEND_ON_SIGTSTP", "maybe"),
            "VGPU_SUSPEND_ON_SIGTSTP='maybe' is not a switch: expected on or off");
  env_.clear();
  UseFile(R"({"suspend_on_sigtstp": "on"})");
  LoadOk();
  EXPECT_TRUE(cfg_.suspend_on_sigtstp);
}

// --- the control path's directories ---

TEST_F(ConfigTest, RunAndCheckpointDirsAreOptionsThatConfigureNoPolicy) {
  LoadOk();
  EXPECT_EQ(cfg_.run_dir, "") << "empty: the default, computed where it is used";
  EXPECT_EQ(cfg_.checkpoint_dir, "");
  env_ = {{"VGPU_RUN_DIR", "/run/user/7/vgpu"}, {"VGPU_CHECKPOINT_DIR", "/var/ckpt"}};
  LoadOk();
  EXPECT_EQ(cfg_.run_dir, "/run/user/7/vgpu");
  EXPECT_EQ(cfg_.checkpoint_dir, "/var/ckpt");
  EXPECT_FALSE(cfg_.configured) << "directories alone leave libvgpu a pass-through";
}

TEST_F(ConfigTest, EmptyRunAndCheckpointDirsMeanTheDefault) {
  env_ = {{"VGPU_RUN_DIR", ""}, {"VGPU_CHECKPOINT_DIR", ""}};
  LoadOk();
  EXPECT_EQ(cfg_.run_dir, "");
  EXPECT_EQ(cfg_.checkpoint_dir, "");
}

TEST_F(ConfigTest, RunDirWithControlCharactersIsRefused) {
  EXPECT_TRUE(Contains(ErrorFor("VGPU_RUN_DIR", "/tmp/a\nb\x01"), "VGPU_RUN_DIR="));
  EXPECT_TRUE(Contains(ErrorFor("VGPU_CHECKPOINT_DIR", "/x\x01"), "control characters"));
}

TEST_F(ConfigTest, RunAndCheckpointDirsHaveNoJsonKey) {
  UseFile(R"({"run_dir": "/x"})");
  EXPECT_TRUE(Contains(LoadError(), "unknown key 'run_dir'"));
}

TEST(LoadEnvOption, ReadsOneOptionAndIgnoresTheOthers) {
  std::map<std::string, std::string> env = {{"VGPU_RUN_DIR", "/r"},
                                            {"VGPU_DEVICE_MEMORY_LIMIT", "lots"}};
  auto lookup = [&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  Config cfg;
  Status s = LoadEnvOption("VGPU_RUN_DIR", lookup, &cfg);
  ASSERT_TRUE(s.ok()) << s.message;
  EXPECT_EQ(cfg.run_dir, "/r");
  EXPECT_EQ(cfg.memory_limit_all, Config::kNoLimit) << "the malformed limit was not read";
  s = LoadEnvOption("VGPU_DEVICE_MEMORY_LIMIT", lookup, &cfg);
  EXPECT_EQ(s.code, ErrorCode::kInval);
  EXPECT_TRUE(Contains(s.message, "VGPU_DEVICE_MEMORY_LIMIT='lots'")) << s.message;
  EXPECT_FALSE(LoadEnvOption("VGPU_NO_SUCH_OPTION", lookup, &cfg).ok());
}

// What benchmarks and tests scrub from the caller's environment.
TEST(ConfigVariables, OptionNamesAndHamiAliasesAreConfigVariables) {
  for (const char* yes : {"VGPU_COMPUTE_SHARE", "VGPU_VMM", "CUDA_DEVICE_SM_LIMIT",
                          "CUDA_DEVICE_MEMORY_LIMIT", "CUDA_DEVICE_MEMORY_LIMIT_3",
                          "CUDA_DEVICE_SM_LIMIT_0", "CUDA_TASK_PRIORITY"}) {
    EXPECT_TRUE(IsConfigVariable(yes)) << yes;
  }
  for (const char* no : {"PATH", "VGPU_SIM_NODE", "CUDA_DEVICE_MEMORY_LIMIT_", "CUDA_DEVICE_MEMORY_LIMIT_x",
                         "CUDA_DEVICE_SM_LIMIT_x", "VGPU_COMPUTE_SHARES"}) {
    EXPECT_FALSE(IsConfigVariable(no)) << no;
  }
}

}  // namespace
}  // namespace vgpu
