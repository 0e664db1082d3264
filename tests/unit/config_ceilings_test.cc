// The admin's files as ceilings (config.h, docs/configuration.md "Ceilings"):
// a tenant's own environment, HAMi names or VGPU_CONFIG file may tighten a
// limit, share, weight or priority, never raise it; a refused value is named
// in one line with the ceiling's source; options the admin fixes (group,
// devices, scheduler region, compute policy) cannot be changed; and without
// an admin file nothing changes.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "common/config/config.h"

namespace vgpu {
namespace {

constexpr uint64_t kGiB = 1ull << 30;

class CeilingsTest : public ::testing::Test {
 protected:
  std::string File(const std::string& name, const std::string& json) {
    std::string path = ::testing::TempDir() + "vgpu_ceilings_" +
                       ::testing::UnitTest::GetInstance()->current_test_info()->name() + "_" +
                       name + ".json";
    std::ofstream(path) << json;
    return path;
  }
  void Admin(const std::string& json) {
    admin_.push_back(File("admin" + std::to_string(admin_.size()), json));
  }

  bool Load() {
    std::vector<std::string> names;
    for (const auto& [name, value] : env_) names.push_back(name);
    std::vector<const char*> admin;
    for (const std::string& p : admin_) admin.push_back(p.c_str());
    Status s = LoadConfig(
        [this](const char* name) -> const char* {
          auto it = env_.find(name);
          return it == env_.end() ? nullptr : it->second.c_str();
        },
        &cfg_, &names, nullptr, admin);
    error_ = s.message;
    return s.ok();
  }
  void LoadOk() { ASSERT_TRUE(Load()) << error_; }
  std::string Refusals() const {
    std::string all;
    for (const std::string& r : cfg_.refusals) all += r + "\n";
    return all;
  }
  std::string Origin(const char* env) const {
    const auto& options = Options();
    for (size_t i = 0; i < options.size(); ++i) {
      if (std::string(options[i].env) == env) return cfg_.origins.at(i);
    }
    return "?";
  }

  std::map<std::string, std::string> env_;
  std::vector<std::string> admin_;
  Config cfg_;
  std::string error_;
};

TEST_F(CeilingsTest, ATenantCannotRaiseItsMemoryLimit) {
  Admin(R"({"device_memory_limit": "1GiB"})");
  env_ = {{"VGPU_DEVICE_MEMORY_LIMIT", "16GiB"}};
  LoadOk();
  EXPECT_EQ(cfg_.LimitFor(0), kGiB);
  EXPECT_EQ(cfg_.LimitFor(3), kGiB);
  EXPECT_EQ(cfg_.RequestedLimitFor(0), 16 * kGiB);
  ASSERT_EQ(cfg_.refusals.size(), 1u) << Refusals();
  const std::string& r = cfg_.refusals[0];
  EXPECT_NE(r.find("VGPU_DEVICE_MEMORY_LIMIT='16GiB' refused"), std::string::npos) << r;
  EXPECT_NE(r.find("ceiling '1GiB'"), std::string::npos) << r;
  EXPECT_NE(r.find("admin file '" + admin_[0] + "'"), std::string::npos) << r;
  EXPECT_EQ(r.find('\n'), std::string::npos);
  // HAMi's names are raises too.
  env_ = {{"CUDA_DEVICE_MEMORY_LIMIT", "64g"}};
  LoadOk();
  EXPECT_EQ(cfg_.LimitFor(0), kGiB);
  EXPECT_EQ(cfg_.refusals.size(), 1u) << Refusals();
  env_ = {{"CUDA_DEVICE_MEMORY_LIMIT_1", "8GiB"}};
  LoadOk();
  EXPECT_EQ(cfg_.LimitFor(1), kGiB);
  EXPECT_EQ(cfg_.refusals.size(), 1u) << Refusals();
}

TEST_F(CeilingsTest, ATenantMayLowerItsLimits) {
  Admin(R"({"device_memory_limit": "4GiB", "compute_share": "50"})");
  env_ = {{"VGPU_DEVICE_MEMORY_LIMIT", "1GiB,2GiB"}, {"VGPU_COMPUTE_SHARE", "20"}};
  LoadOk();
  EXPECT_TRUE(cfg_.refusals.empty()) << Refusals();
  EXPECT_EQ(cfg_.LimitFor(0), kGiB);
  EXPECT_EQ(cfg_.LimitFor(1), 2 * kGiB);
  EXPECT_EQ(cfg_.ShareFor(0), 200u);
  Status s = cfg_.ValidateAgainstDeviceCount(2);
  EXPECT_TRUE(s.ok()) << s.message;
}

TEST_F(CeilingsTest, TheSharePolicyWeightAndPriorityAreCeilings) {
  Admin(R"({"compute_share": "30"})");
  env_ = {{"VGPU_COMPUTE_SHARE", "70"},
          {"VGPU_COMPUTE_POLICY", "native"},
          {"VGPU_COMPUTE_WEIGHT", "5"},
          {"VGPU_PRIORITY", "high"}};
  LoadOk();
  EXPECT_EQ(cfg_.ShareFor(0), 300u);
  EXPECT_EQ(cfg_.EffectivePolicyFor(0), Config::ComputePolicy::kFixed)
      << "native would escape the admin's share";
  EXPECT_EQ(cfg_.compute_weight, 1u) << "an admin file without a weight allows 1";
  EXPECT_EQ(cfg_.priority, Config::Priority::kNormal) << "... and normal priority";
  EXPECT_EQ(cfg_.refusals.size(), 4u) << Refusals();
  // Unset by the tenant: the admin's share applies without a message.
  env_ = {};
  LoadOk();
  EXPECT_EQ(cfg_.ShareFor(2), 300u);
  EXPECT_TRUE(cfg_.configured) << "an admin's share alone governs the process";
  EXPECT_TRUE(cfg_.refusals.empty()) << Refusals();
  // A per-device uncap (0) is a raise.
  env_ = {{"CUDA_DEVICE_SM_LIMIT_0", "0"}};
  LoadOk();
  EXPECT_EQ(cfg_.ShareFor(0), 300u);
  EXPECT_EQ(cfg_.refusals.size(), 1u) << Refusals();
}

// The policy the admin's share implies, named explicitly, is no change;
// another one is refused.
TEST_F(CeilingsTest, NamingThePolicyInForceIsNotARaise) {
  Admin(R"({"compute_share": "30"})");
  env_ = {{"VGPU_COMPUTE_POLICY", "fixed"}, {"VGPU_COMPUTE_SHARE", "20"}};
  LoadOk();
  EXPECT_TRUE(cfg_.refusals.empty()) << Refusals();
  EXPECT_EQ(cfg_.EffectivePolicyFor(0), Config::ComputePolicy::kFixed);
  EXPECT_EQ(cfg_.ShareFor(0), 200u) << "lowered";
  env_ = {{"VGPU_COMPUTE_POLICY", "weighted"}};
  LoadOk();
  EXPECT_EQ(cfg_.refusals.size(), 1u) << Refusals();
  EXPECT_EQ(cfg_.EffectivePolicyFor(0), Config::ComputePolicy::kFixed);
}

TEST_F(CeilingsTest, TheAdminMayGrantHighPriorityAndWeight) {
  Admin(R"({"priority": "high", "compute_weight": "4"})");
  env_ = {{"VGPU_PRIORITY", "high"}, {"VGPU_COMPUTE_WEIGHT", "3"}};
  LoadOk();
  EXPECT_TRUE(cfg_.refusals.empty()) << Refusals();
  EXPECT_EQ(cfg_.priority, Config::Priority::kHigh);
  EXPECT_EQ(cfg_.compute_weight, 3u);
  env_ = {{"VGPU_PRIORITY", "low"}};
  LoadOk();
  EXPECT_EQ(cfg_.priority, Config::Priority::kLow) << "lowering is always allowed";
}

TEST_F(CeilingsTest, FixedOptionsTakeTheAdminsValue) {
  Admin(R"({"group": "ctr-1", "sched_region": "/vgpu-sched-node", "visible_devices": "1"})");
  env_ = {{"VGPU_GROUP", "mine"},
          {"VGPU_SCHED_REGION", "/vgpu-sched-mine"},
          {"VGPU_VISIBLE_DEVICES", "0,1"}};
  LoadOk();
  EXPECT_EQ(cfg_.group, "ctr-1") << "a group of its own would be a fresh quota";
  EXPECT_EQ(cfg_.sched_region, "/vgpu-sched-node") << "a region of its own escapes the scheduler";
  EXPECT_EQ(cfg_.visible_devices, std::vector<std::string>{"1"});
  EXPECT_EQ(cfg_.refusals.size(), 3u) << Refusals();
  EXPECT_NE(Origin("VGPU_GROUP").find("admin file"), std::string::npos) << Origin("VGPU_GROUP");
}

TEST_F(CeilingsTest, ClaimAndPodLabelsAreFixedByTheAdmin) {
  Admin(R"({"claim": "default/gpu-a", "pod": "default/train-0"})");
  env_ = {{"VGPU_CLAIM", "other/gpu-b"}, {"VGPU_POD", "other/pod"}};
  LoadOk();
  EXPECT_EQ(cfg_.claim, "default/gpu-a") << "a tenant must not pass for another claim";
  EXPECT_EQ(cfg_.pod, "default/train-0");
  EXPECT_EQ(cfg_.refusals.size(), 2u) << Refusals();
  // An admin file that names none leaves the tenant's own labels.
  admin_ = {File("none", "{}")};
  LoadOk();
  EXPECT_EQ(cfg_.claim, "other/gpu-b");
  EXPECT_TRUE(cfg_.refusals.empty()) << Refusals();
}

TEST_F(CeilingsTest, SlurmJobLabelIsFixedByTheAdmin) {
  Admin(R"({"slurm_job": "42", "group": "slurm-42"})");
  env_ = {{"VGPU_SLURM_JOB", "43"}, {"VGPU_GROUP", "slurm-43"}};
  LoadOk();
  EXPECT_EQ(cfg_.slurm_job, "42") << "a job must not pass for another Slurm job";
  EXPECT_EQ(cfg_.group, "slurm-42") << "nor join another job's quota";
  EXPECT_EQ(cfg_.refusals.size(), 2u) << Refusals();
}

TEST_F(CeilingsTest, OnlyTheAdminMakesAJobNonPreemptible) {
  // Without an admin file the tenant's own value applies.
  env_ = {{"VGPU_PREEMPTIBLE", "false"}};
  LoadOk();
  EXPECT_FALSE(cfg_.preemptible);
  // An admin file that does not name it: the tenant's false is refused.
  Admin(R"({"device_memory_limit": "1GiB"})");
  LoadOk();
  EXPECT_TRUE(cfg_.preemptible);
  ASSERT_EQ(cfg_.refusals.size(), 1u) << Refusals();
  EXPECT_NE(cfg_.refusals[0].find("VGPU_PREEMPTIBLE='false' refused"), std::string::npos)
      << Refusals();
  // The tenant's true is no raise.
  env_ = {{"VGPU_PREEMPTIBLE", "true"}};
  LoadOk();
  EXPECT_TRUE(cfg_.preemptible);
  EXPECT_TRUE(cfg_.refusals.empty()) << Refusals();
}

TEST_F(CeilingsTest, TheAdminsPreemptibleIsFixed) {
  Admin(R"({"preemptible": "false"})");
  LoadOk();
  EXPECT_FALSE(cfg_.preemptible) << "the admin may exempt a job";
  EXPECT_NE(Origin("VGPU_PREEMPTIBLE").find("admin file"), std::string::npos);
  env_ = {{"VGPU_PREEMPTIBLE", "true"}};
  LoadOk();
  EXPECT_FALSE(cfg_.preemptible);
  EXPECT_EQ(cfg_.refusals.size(), 1u) << Refusals();
  admin_ = {File("yes", R"({"preemptible": "true"})")};
  env_ = {{"VGPU_PREEMPTIBLE", "off"}};
  LoadOk();
  EXPECT_TRUE(cfg_.preemptible);
  EXPECT_EQ(cfg_.refusals.size(), 1u) << Refusals();
}

TEST_F(CeilingsTest, TheAdminsSuspendOnSigtstpIsFixed) {
  Admin(R"({"suspend_on_sigtstp": "on"})");
  env_ = {{"VGPU_SUSPEND_ON_SIGTSTP", "off"}};
  LoadOk();
  EXPECT_TRUE(cfg_.suspend_on_sigtstp) << "a tenant may not keep its memory through a suspend";
  EXPECT_EQ(cfg_.refusals.size(), 1u) << Refusals();
  EXPECT_NE(Origin("VGPU_SUSPEND_ON_SIGTSTP").find("admin file"), std::string::npos);
  // An admin file that names none leaves the tenant's own choice.
  admin_ = {File("none", "{}")};
  env_ = {{"VGPU_SUSPEND_ON_SIGTSTP", "on"}};
  LoadOk();
  EXPECT_TRUE(cfg_.suspend_on_sigtstp);
  EXPECT_TRUE(cfg_.refusals.empty()) << Refusals();
}

TEST_F(CeilingsTest, TheTenantsOwnFileIsNoAdminSource) {
  Admin(R"({"device_memory_limit": "1GiB"})");
  const std::string mine = File("mine", R"({"device_memory_limit": "8GiB", "priority": "high"})");
  env_ = {{"VGPU_CONFIG", mine}};
  LoadOk();
  EXPECT_EQ(cfg_.LimitFor(0), kGiB);
  EXPECT_EQ(cfg_.priority, Config::Priority::kNormal);
  EXPECT_EQ(cfg_.refusals.size(), 2u) << Refusals();
}

TEST_F(CeilingsTest, TheTightestOfSeveralAdminFilesApplies) {
  Admin(R"({"device_memory_limit": "2GiB", "compute_share": "20"})");
  Admin(R"({"device_memory_limit": "4GiB", "compute_share": "50"})");
  LoadOk();
  EXPECT_EQ(cfg_.LimitFor(0), 2 * kGiB);
  EXPECT_EQ(cfg_.ShareFor(0), 200u);
  const Config::Ceilings c = cfg_.CeilingsFor(0);
  EXPECT_EQ(c.memory_limit, 2 * kGiB);
  EXPECT_EQ(c.memory_source, "admin file '" + admin_[0] + "'");
  EXPECT_EQ(c.share_permille, 200u);
  EXPECT_EQ(c.weight, 1u);
  EXPECT_EQ(c.priority, Config::Priority::kNormal);
}

TEST_F(CeilingsTest, OriginsNameEachValuesSource) {
  Admin(R"({"device_memory_limit": "1GiB"})");
  env_ = {{"VGPU_LOG_LEVEL", "info"}, {"CUDA_DEVICE_SM_LIMIT", "40"}};
  LoadOk();
  EXPECT_EQ(Origin("VGPU_LOG_LEVEL"), "VGPU_LOG_LEVEL");
  EXPECT_EQ(Origin("VGPU_COMPUTE_SHARE"), "CUDA_DEVICE_SM_LIMIT");
  EXPECT_NE(Origin("VGPU_DEVICE_MEMORY_LIMIT").find("admin file"), std::string::npos);
  EXPECT_EQ(Origin("VGPU_GROUP"), "default");
}

TEST_F(CeilingsTest, AMalformedAdminFileFailsClosed) {
  Admin(R"({"device_memory_limit": "lots"})");
  EXPECT_FALSE(Load());
  EXPECT_NE(error_.find("admin file '" + admin_[0] + "'"), std::string::npos) << error_;
  admin_ = {File("bad", "not json")};
  EXPECT_FALSE(Load());
}

TEST_F(CeilingsTest, WithoutAnAdminFileNothingChanges) {
  env_ = {{"VGPU_DEVICE_MEMORY_LIMIT", "16GiB"},
          {"VGPU_PRIORITY", "high"},
          {"VGPU_COMPUTE_WEIGHT", "9"}};
  LoadOk();
  EXPECT_EQ(cfg_.LimitFor(0), 16 * kGiB);
  EXPECT_TRUE(cfg_.high_priority());
  EXPECT_EQ(cfg_.compute_weight, 9u);
  EXPECT_TRUE(cfg_.refusals.empty());
  EXPECT_TRUE(cfg_.ceilings.empty());
  admin_ = {::testing::TempDir() + "no-such-admin-file.json"};
  LoadOk();
  EXPECT_TRUE(cfg_.ceilings.empty()) << "an absent admin file sets nothing";
}

}  // namespace
}  // namespace vgpu
