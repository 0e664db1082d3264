// What the Slurm plugin (spank_vgpu.so, docs/slurm.md) decides for one job
// step: its plugstack.conf arguments, the job's --vgpu-* options and the
// step's GRES environment turned into the job's admin file (libvgpu's JSON
// keys, read as ceilings: docs/configuration.md "Ceilings"). Pure: no Slurm
// headers, no file system; spank_vgpu.cc does the rest.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

namespace vgpu::slurm {

// vgpu's priorities, in order (libvgpu's words).
enum class Priority { kLow = 0, kNormal = 1, kHigh = 2 };
const char* PriorityWord(Priority p);
bool ParsePriorityWord(const std::string& text, Priority* out);

// The plugin's arguments (the words after the plugin's path on its
// plugstack.conf line), each key=value:
//   lib=PATH                    libvgpu.so to preload (default: beside the plugin)
//   shard_mem=SIZE              device memory per shard (8GiB, 512MiB, ...)
//   shard_compute=PERCENT       compute share per shard (0 < p <= 100)
//   devices=UUID,UUID,...       GRES gpu index i -> GPU UUID
//   priority_partition=P:PRIO,... and priority_qos=Q:PRIO,...  (low|normal|high)
//   suspend=on|off              suspend_on_sigtstp (default on)
//   weight_per_shard=on|off     compute_weight = shards (default off)
struct PluginArgs {
  std::string lib;                      // empty: the default
  uint64_t shard_mem = 0;               // 0: not given
  uint32_t shard_compute_permille = 0;  // 0: not given
  std::vector<std::string> devices;     // canonical "GPU-..." UUIDs
  std::vector<std::pair<std::string, Priority>> priority_partition, priority_qos;
  bool suspend = true;
  bool weight_per_shard = false;
};

// Every argument checked; kInval naming the argument otherwise ("vgpu:
// plugstack argument 'shard_mem=8X': ...").
Status ParsePluginArgs(const std::vector<std::string>& args, PluginArgs* out);

// The job's options (srun/sbatch/salloc --vgpu-mem=SIZE, --vgpu-compute=PCT,
// --vgpu-priority=low|normal|high): they may only lower what the job's
// shards and the admin's maps give.
struct JobOptions {
  std::optional<uint64_t> mem;
  std::optional<uint32_t> compute_permille;
  std::optional<Priority> priority;
};
inline constexpr const char* kOptMem = "vgpu-mem";
inline constexpr const char* kOptCompute = "vgpu-compute";
inline constexpr const char* kOptPriority = "vgpu-priority";

// One option by its name (without "--"); kInval naming "--<name>" otherwise.
Status ParseJobOption(const std::string& name, const std::string& value, JobOptions* out);

// Slurm's step ids of the batch script and the interactive step (slurm.h's
// SLURM_BATCH_SCRIPT, SLURM_INTERACTIVE_STEP), whose GPUs slurmstepd names in
// SLURM_JOB_GPUS; every other step's are in SLURM_STEP_GPUS.
inline constexpr uint32_t kBatchStep = 0xfffffffb;
inline constexpr uint32_t kInteractiveStep = 0xfffffffa;

// What the plugin reads of the step (spank_get_item, spank_getenv). An
// unset variable is nullopt.
struct JobInfo {
  uint32_t job_id = 0;
  uint32_t step_id = 0;
  uint32_t uid = 0;
  std::optional<std::string> shards_on_node;  // SLURM_SHARDS_ON_NODE
  std::optional<std::string> job_gpus;        // SLURM_JOB_GPUS
  std::optional<std::string> step_gpus;       // SLURM_STEP_GPUS
  std::optional<std::string> partition;       // SLURM_JOB_PARTITION
  std::optional<std::string> qos;             // SLURM_JOB_QOS
};

struct JobLimits {
  bool applies = false;               // false: no GPU and no shard, nothing to do
  nlohmann::json admin;               // the admin file's content
  std::vector<std::string> messages;  // for the job's stderr (an option held at a ceiling)
  // The step's environment defaults (set where the job has not set them):
  // an admin file's priority and weight are ceilings only, which a process
  // that names none would not reach (it runs at normal, weight 1).
  std::vector<std::pair<std::string, std::string>> env_defaults;
};

// The step's limits: device_memory_limit = shards x shard_mem, compute_share
// = min(100, shards x shard_compute), visible_devices = the UUIDs of its GRES
// indices (devices=; the indices themselves without it), group
// "slurm-<jobid>", priority from the maps (QOS over partition, default
// normal), slurm_job, suspend_on_sigtstp; then the job's options where they
// are lower. kInval with a message for the job otherwise.
Status ComputeJobLimits(const PluginArgs& args, const JobOptions& opts, const JobInfo& job,
                        JobLimits* out);

// The job's quota group (and so its ledger, /dev/shm/vgpu-ledger-<uid>-<group>).
std::string JobGroup(uint32_t job_id);

}  // namespace vgpu::slurm
