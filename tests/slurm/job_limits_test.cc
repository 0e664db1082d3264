// The Slurm plugin's rules (cluster/slurm/job_limits.h): plugstack.conf
// arguments, the job's --vgpu-* options and the job's admin file. Label unit.
#include "cluster/slurm/job_limits.h"

#include <gtest/gtest.h>

namespace vgpu::slurm {
namespace {

constexpr const char* kUuid0 = "GPU-00000000-1111-2222-3333-444444444444";
constexpr const char* kUuid1 = "GPU-AAAAAAAA-1111-2222-3333-444444444444";

PluginArgs Args(const std::vector<std::string>& words) {
  PluginArgs a;
  Status st = ParsePluginArgs(words, &a);
  EXPECT_TRUE(st.ok()) << st.message;
  return a;
}

std::string ArgError(const std::vector<std::string>& words) {
  PluginArgs a;
  Status st = ParsePluginArgs(words, &a);
  EXPECT_FALSE(st.ok());
  return st.message;
}

JobInfo ShardJob(const std::string& shards, const std::string& gpus = "0") {
  JobInfo j;
  j.job_id = 42;
  j.step_id = kBatchStep;
  j.uid = 1000;
  j.shards_on_node = shards;
  j.job_gpus = gpus;
  return j;
}

JobLimits Compute(const PluginArgs& a, const JobOptions& o, const JobInfo& j) {
  JobLimits l;
  Status st = ComputeJobLimits(a, o, j, &l);
  EXPECT_TRUE(st.ok()) << st.message;
  return l;
}

JobOptions Options(const std::vector<std::pair<std::string, std::string>>& given) {
  JobOptions o;
  for (const auto& [name, value] : given) {
    Status st = ParseJobOption(name, value, &o);
    EXPECT_TRUE(st.ok()) << st.message;
  }
  return o;
}

TEST(SlurmPluginArgs, ParsesEveryKey) {
  PluginArgs a = Args({"lib=/opt/vgpu/lib/libvgpu.so", "shard_mem=1GiB", "shard_compute=12.5",
                       std::string("devices=") + kUuid0 + "," + kUuid1,
                       "priority_partition=gpu:high,debug:low", "priority_qos=urgent:high",
                       "suspend=off", "weight_per_shard=on"});
  EXPECT_EQ(a.lib, "/opt/vgpu/lib/libvgpu.so");
  EXPECT_EQ(a.shard_mem, 1ull << 30);
  EXPECT_EQ(a.shard_compute_permille, 125u);
  ASSERT_EQ(a.devices.size(), 2u);
  EXPECT_EQ(a.devices[1], "GPU-aaaaaaaa-1111-2222-3333-444444444444") << "canonical lower case";
  ASSERT_EQ(a.priority_partition.size(), 2u);
  EXPECT_EQ(a.priority_partition[1].first, "debug");
  EXPECT_EQ(a.priority_partition[1].second, Priority::kLow);
  EXPECT_EQ(a.priority_qos[0].second, Priority::kHigh);
  EXPECT_FALSE(a.suspend);
  EXPECT_TRUE(a.weight_per_shard);
}

TEST(SlurmPluginArgs, Defaults) {
  PluginArgs a = Args({});
  EXPECT_TRUE(a.lib.empty());
  EXPECT_EQ(a.shard_mem, 0u);
  EXPECT_TRUE(a.suspend);
  EXPECT_FALSE(a.weight_per_shard);
}

TEST(SlurmPluginArgs, MalformedArgumentsNameTheArgument) {
  EXPECT_NE(ArgError({"shard_mem=8X"}).find("plugstack argument 'shard_mem=8X'"),
            std::string::npos);
  EXPECT_NE(ArgError({"shard_mem=0"}).find("'shard_mem=0'"), std::string::npos);
  EXPECT_NE(ArgError({"shard_compute=150"}).find("'shard_compute=150'"), std::string::npos);
  EXPECT_NE(ArgError({"devices=GPU-1,x"}).find("'GPU-1' is not a GPU UUID"), std::string::npos);
  EXPECT_NE(ArgError({std::string("devices=") + kUuid0 + "," + kUuid0}).find("listed twice"),
            std::string::npos);
  EXPECT_NE(ArgError({"priority_qos=urgent:top"}).find("low, normal or high"), std::string::npos);
  EXPECT_NE(ArgError({"priority_partition=gpu"}).find("NAME:PRIO"), std::string::npos);
  EXPECT_NE(ArgError({"suspend=maybe"}).find("'suspend=maybe': expected on or off"),
            std::string::npos);
  EXPECT_NE(ArgError({"lib=libvgpu.so"}).find("absolute path"), std::string::npos);
  EXPECT_NE(ArgError({"shard_size=1g"}).find("unknown key"), std::string::npos);
  EXPECT_NE(ArgError({"shard_mem"}).find("expected key=value"), std::string::npos);
  EXPECT_NE(ArgError({"shard_mem="}).find("wants a value"), std::string::npos);
  EXPECT_NE(ArgError({"shard_mem=1g", "shard_mem=2g"}).find("given twice"), std::string::npos);
}

TEST(SlurmJobOptions, MalformedOptionsNameTheOption) {
  JobOptions o;
  Status st = ParseJobOption(kOptMem, "lots", &o);
  EXPECT_NE(st.message.find("--vgpu-mem='lots'"), std::string::npos) << st.message;
  st = ParseJobOption(kOptCompute, "0", &o);
  EXPECT_NE(st.message.find("--vgpu-compute='0'"), std::string::npos) << st.message;
  st = ParseJobOption(kOptPriority, "urgent", &o);
  EXPECT_NE(st.message.find("--vgpu-priority='urgent': expected low, normal or high"),
            std::string::npos)
      << st.message;
  EXPECT_FALSE(o.mem || o.compute_permille || o.priority);
}

TEST(SlurmJobLimits, ShardsTimesSize) {
  PluginArgs a = Args({"shard_mem=1GiB", "shard_compute=10", std::string("devices=") + kUuid0});
  JobLimits l = Compute(a, {}, ShardJob("3"));
  ASSERT_TRUE(l.applies);
  EXPECT_EQ(l.admin["device_memory_limit"], std::to_string(3ull << 30));
  EXPECT_EQ(l.admin["compute_share"], "30%");
  EXPECT_EQ(l.admin["visible_devices"], "GPU-00000000-1111-2222-3333-444444444444");
  EXPECT_EQ(l.admin["group"], "slurm-42");
  EXPECT_EQ(l.admin["slurm_job"], "42");
  EXPECT_EQ(l.admin["priority"], "normal");
  EXPECT_EQ(l.admin["suspend_on_sigtstp"], "true");
  EXPECT_FALSE(l.admin.contains("compute_weight"));
  EXPECT_TRUE(l.messages.empty());
  ASSERT_EQ(l.env_defaults.size(), 1u);
  EXPECT_EQ(l.env_defaults[0].first, "VGPU_PRIORITY");
  EXPECT_EQ(l.env_defaults[0].second, "normal");
}

TEST(SlurmJobLimits, ComputeShareIsCappedAt100) {
  PluginArgs a = Args({"shard_mem=1GiB", "shard_compute=40"});
  EXPECT_EQ(Compute(a, {}, ShardJob("3")).admin["compute_share"], "100%");
  // Without shard_compute no share at all.
  EXPECT_FALSE(Compute(Args({"shard_mem=1g"}), {}, ShardJob("3")).admin.contains("compute_share"));
}

TEST(SlurmJobLimits, WeightPerShardAndSuspendOff) {
  PluginArgs a = Args({"shard_mem=1GiB", "weight_per_shard=on", "suspend=off"});
  JobLimits l = Compute(a, {}, ShardJob("5"));
  EXPECT_EQ(l.admin["compute_weight"], "5");
  ASSERT_EQ(l.env_defaults.size(), 2u);
  EXPECT_EQ(l.env_defaults[0].first, "VGPU_COMPUTE_WEIGHT");
  EXPECT_EQ(l.env_defaults[0].second, "5");
  EXPECT_EQ(l.admin["suspend_on_sigtstp"], "false");
}

TEST(SlurmJobLimits, OptionsLower) {
  PluginArgs a = Args({"shard_mem=1GiB", "shard_compute=25", "priority_partition=gpu:high"});
  JobInfo j = ShardJob("4");
  j.partition = "gpu";
  JobLimits l =
      Compute(a, Options({{kOptMem, "512MiB"}, {kOptCompute, "10"}, {kOptPriority, "low"}}), j);
  EXPECT_EQ(l.admin["device_memory_limit"], std::to_string(512ull << 20));
  EXPECT_EQ(l.admin["compute_share"], "10%");
  EXPECT_EQ(l.admin["priority"], "low");
  EXPECT_TRUE(l.messages.empty());
}

TEST(SlurmJobLimits, OptionsAboveAreHeldAtTheCeiling) {
  PluginArgs a = Args({"shard_mem=1GiB", "shard_compute=25"});
  JobLimits l = Compute(
      a, Options({{kOptMem, "8GiB"}, {kOptCompute, "60"}, {kOptPriority, "high"}}), ShardJob("2"));
  EXPECT_EQ(l.admin["device_memory_limit"], std::to_string(2ull << 30));
  EXPECT_EQ(l.admin["compute_share"], "50%");
  EXPECT_EQ(l.admin["priority"], "normal");
  ASSERT_EQ(l.messages.size(), 3u);
  EXPECT_NE(l.messages[0].find("--vgpu-mem=8 GiB is above the job's 2 GiB"), std::string::npos)
      << l.messages[0];
  EXPECT_NE(l.messages[1].find("--vgpu-compute=60% is above the job's 50%"), std::string::npos)
      << l.messages[1];
  EXPECT_NE(l.messages[2].find("--vgpu-priority=high is above the job's normal"), std::string::npos)
      << l.messages[2];
}

TEST(SlurmJobLimits, QosOverPartition) {
  PluginArgs a = Args({"shard_mem=1g", "priority_partition=gpu:low,big:high",
                       "priority_qos=urgent:high,scavenger:low"});
  JobInfo j = ShardJob("1");
  j.partition = "gpu";
  EXPECT_EQ(Compute(a, {}, j).admin["priority"], "low");
  j.qos = "urgent";
  EXPECT_EQ(Compute(a, {}, j).admin["priority"], "high") << "the QOS's entry wins";
  j.partition = "big";
  j.qos = "scavenger";
  EXPECT_EQ(Compute(a, {}, j).admin["priority"], "low");
  j.qos = "normal";  // no entry: the partition's
  EXPECT_EQ(Compute(a, {}, j).admin["priority"], "high");
  j.partition = "other";
  EXPECT_EQ(Compute(a, {}, j).admin["priority"], "normal") << "default";
}

TEST(SlurmJobLimits, WholeGpuJobHasNoMemoryCeiling) {
  PluginArgs a =
      Args({"shard_mem=1GiB", "shard_compute=10", std::string("devices=") + kUuid0 + "," + kUuid1});
  JobInfo j = ShardJob("", "0,1");
  j.shards_on_node.reset();
  JobLimits l = Compute(a, {}, j);
  ASSERT_TRUE(l.applies);
  EXPECT_FALSE(l.admin.contains("device_memory_limit"));
  EXPECT_FALSE(l.admin.contains("compute_share"));
  EXPECT_EQ(l.admin["visible_devices"],
            "GPU-00000000-1111-2222-3333-444444444444,GPU-aaaaaaaa-1111-2222-3333-444444444444");
  EXPECT_EQ(l.admin["group"], "slurm-42");
  // Its own options set what it asks for (nothing to hold them at).
  l = Compute(a, Options({{kOptMem, "4GiB"}, {kOptCompute, "50"}}), j);
  EXPECT_EQ(l.admin["device_memory_limit"], std::to_string(4ull << 30));
  EXPECT_EQ(l.admin["compute_share"], "50%");
  EXPECT_TRUE(l.messages.empty());
}

TEST(SlurmJobLimits, NoShardsNoGpusDoesNothing) {
  JobInfo j;
  j.job_id = 7;
  j.step_id = kBatchStep;
  JobLimits l = Compute(Args({"shard_mem=1g"}), Options({{kOptMem, "1g"}}), j);
  EXPECT_FALSE(l.applies);
  EXPECT_TRUE(l.admin.is_null());
  j.shards_on_node = "0";
  j.job_gpus = "";
  EXPECT_FALSE(Compute(Args({}), {}, j).applies);
}

TEST(SlurmJobLimits, StepsReadTheirOwnVariable) {
  PluginArgs a = Args({"shard_mem=1g", std::string("devices=") + kUuid0 + "," + kUuid1});
  JobInfo j = ShardJob("1", "0");
  j.step_id = 0;  // an srun step: SLURM_STEP_GPUS, not the job's (inherited) list
  j.step_gpus = "1";
  EXPECT_EQ(Compute(a, {}, j).admin["visible_devices"], "GPU-aaaaaaaa-1111-2222-3333-444444444444");
  j.step_gpus.reset();
  j.shards_on_node.reset();
  EXPECT_FALSE(Compute(a, {}, j).applies) << "a step without GPUs";
  j.step_id = kInteractiveStep;
  EXPECT_EQ(Compute(a, {}, j).admin["visible_devices"], "GPU-00000000-1111-2222-3333-444444444444");
}

TEST(SlurmJobLimits, IndicesWithoutDevices) {
  JobLimits l = Compute(Args({"shard_mem=1g"}), {}, ShardJob("2", "1,3"));
  EXPECT_EQ(l.admin["visible_devices"], "1,3");
}

TEST(SlurmJobLimits, Errors) {
  JobLimits l;
  // Shards but no shard_mem=.
  Status st = ComputeJobLimits(Args({}), {}, ShardJob("2"), &l);
  EXPECT_NE(st.message.find("no shard_mem="), std::string::npos) << st.message;
  // An index past devices=.
  st = ComputeJobLimits(Args({"shard_mem=1g", std::string("devices=") + kUuid0}), {},
                        ShardJob("1", "1"), &l);
  EXPECT_NE(st.message.find("GRES gpu index 1 has no UUID in the plugin's devices= (1 listed)"),
            std::string::npos)
      << st.message;
  st = ComputeJobLimits(Args({"shard_mem=1g"}), {}, ShardJob("x"), &l);
  EXPECT_NE(st.message.find("SLURM_SHARDS_ON_NODE='x'"), std::string::npos) << st.message;
  st = ComputeJobLimits(Args({"shard_mem=1g"}), {}, ShardJob("1", "0,a"), &l);
  EXPECT_NE(st.message.find("SLURM_JOB_GPUS='0,a'"), std::string::npos) << st.message;
  JobInfo j = ShardJob("2", "");
  st = ComputeJobLimits(Args({"shard_mem=1g"}), {}, j, &l);
  EXPECT_NE(st.message.find("names no GPU"), std::string::npos) << st.message;
}

}  // namespace
}  // namespace vgpu::slurm
