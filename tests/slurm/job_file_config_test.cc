// The job's admin file as libvgpu reads it: what ComputeJobLimits writes,
// loaded by vgpu_config (LoadConfig with the file as its admin file), holds
// the tenant to the job's shards. Label unit.
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <fstream>
#include <map>

#include "cluster/slurm/job_limits.h"
#include "common/config/config.h"

namespace vgpu::slurm {
namespace {

class JobFileConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/vgpu-slurm-cfg-XXXXXX";
    const int fd = mkstemp(tmpl);
    ASSERT_GE(fd, 0);
    close(fd);
    path_ = tmpl;
  }
  void TearDown() override { unlink(path_.c_str()); }

  // Loads the job's file as libvgpu would, with `env` as the tenant's.
  Status Load(const JobLimits& l, const std::map<std::string, std::string>& env, Config* cfg) {
    std::ofstream(path_) << l.admin.dump();
    const std::array<const char*, 1> files = {path_.c_str()};
    return LoadConfig(
        [&env](const char* name) -> const char* {
          auto it = env.find(name);
          return it == env.end() ? nullptr : it->second.c_str();
        },
        cfg, nullptr, nullptr, files);
  }
  std::string path_;
};

JobLimits ShardJob(const std::vector<std::string>& words, const std::string& shards) {
  PluginArgs a;
  EXPECT_TRUE(ParsePluginArgs(words, &a).ok());
  JobInfo j;
  j.job_id = 42;
  j.step_id = kBatchStep;
  j.shards_on_node = shards;
  j.job_gpus = "0";
  j.partition = "gpu";
  JobLimits l;
  Status st = ComputeJobLimits(a, {}, j, &l);
  EXPECT_TRUE(st.ok()) << st.message;
  return l;
}

TEST_F(JobFileConfigTest, LibvgpuReadsTheJobsCeilings) {
  JobLimits l =
      ShardJob({"shard_mem=1GiB", "shard_compute=12.5", "weight_per_shard=on",
                "devices=GPU-00000000-1111-2222-3333-444444444444", "priority_partition=gpu:high"},
               "3");
  // Priority and weight are ceilings: the job reaches them through the
  // environment defaults the plugin sets.
  ASSERT_EQ(l.env_defaults.size(), 2u);
  std::map<std::string, std::string> env(l.env_defaults.begin(), l.env_defaults.end());
  EXPECT_EQ(env["VGPU_COMPUTE_WEIGHT"], "3");
  EXPECT_EQ(env["VGPU_PRIORITY"], "high");
  Config cfg;
  Status st = Load(l, env, &cfg);
  ASSERT_TRUE(st.ok()) << st.message;
  EXPECT_EQ(cfg.group, "slurm-42");
  EXPECT_EQ(cfg.slurm_job, "42");
  ASSERT_EQ(cfg.visible_devices.size(), 1u);
  EXPECT_EQ(cfg.visible_devices[0], "GPU-00000000-1111-2222-3333-444444444444");
  EXPECT_EQ(cfg.LimitFor(0), 3ull << 30);
  EXPECT_EQ(cfg.ShareFor(0), 375u);
  EXPECT_EQ(cfg.compute_weight, 3u);
  EXPECT_EQ(cfg.priority, Config::Priority::kHigh);
  EXPECT_TRUE(cfg.refusals.empty());
  // Without them: the ceilings alone, at the defaults below them.
  cfg = Config{};
  ASSERT_TRUE(Load(l, {}, &cfg).ok());
  EXPECT_EQ(cfg.priority, Config::Priority::kNormal);
  EXPECT_EQ(cfg.LimitFor(0), 3ull << 30) << "memory and share need no default";
}

TEST_F(JobFileConfigTest, TheTenantsEnvironmentOnlyLowers) {
  JobLimits l = ShardJob({"shard_mem=1GiB", "shard_compute=10"}, "2");
  Config cfg;
  Status st = Load(l,
                   {{"VGPU_DEVICE_MEMORY_LIMIT", "8GiB"},
                    {"VGPU_COMPUTE_SHARE", "90"},
                    {"VGPU_GROUP", "mine"},
                    {"VGPU_PRIORITY", "high"}},
                   &cfg);
  ASSERT_TRUE(st.ok()) << st.message;
  EXPECT_EQ(cfg.LimitFor(0), 2ull << 30);
  EXPECT_EQ(cfg.ShareFor(0), 200u);
  EXPECT_EQ(cfg.group, "slurm-42");
  EXPECT_EQ(cfg.priority, Config::Priority::kNormal);
  EXPECT_EQ(cfg.refusals.size(), 4u);
  cfg = Config{};
  ASSERT_TRUE(Load(l, {{"VGPU_DEVICE_MEMORY_LIMIT", "512MiB"}}, &cfg).ok());
  EXPECT_EQ(cfg.LimitFor(0), 512ull << 20);
}

}  // namespace
}  // namespace vgpu::slurm
