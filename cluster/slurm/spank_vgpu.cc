// spank_vgpu.so: the Slurm SPANK plugin (docs/slurm.md). In slurmstepd it
// turns a step's GPUs and gres/shard count into the job's admin file
// (/run/vgpu-slurm/job-<jobid>.<uid>.json, read by libvgpu as ceilings) and
// preloads libvgpu into the step's tasks; at the job's end on the node it
// removes that file and the job's quota ledger.
//
// A C ABI boundary: every hook catches everything (an exception must not
// unwind into slurmstepd) and reports through slurm_error.
#include <dlfcn.h>
#include <unistd.h>

// spank.h declares the hooks (slurm_spank_init, ...) outside its extern "C"
// block: they are C symbols, which slurmstepd looks up by name.
extern "C" {
#include <slurm/spank.h>
}

#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "cluster/slurm/job_files.h"
#include "cluster/slurm/job_limits.h"
#include "common/container_paths.h"

// SPANK_PLUGIN defines these as const arrays, which C++ gives internal
// linkage unless declared extern first: the plugin loader looks them up.
extern "C" {
#define VGPU_EXPORT __attribute__((visibility("default")))
VGPU_EXPORT extern const char plugin_name[];
VGPU_EXPORT extern const char plugin_type[];
VGPU_EXPORT extern const unsigned int plugin_version;
VGPU_EXPORT extern const unsigned int spank_plugin_version;
SPANK_PLUGIN(vgpu, 1)
}

namespace {

using vgpu::Status;
namespace vs = vgpu::slurm;

// The job's options as the callbacks parsed them (one step per slurmstepd,
// one command per srun/sbatch: process-wide state is per job step).
vs::JobOptions g_options;

int OptionCallback(int val, const char* optarg, int remote);

// What the step's limits held at a ceiling, for the job's stderr.
std::vector<std::string> g_messages;

// The --vgpu-* options, registered in every context (srun, sbatch/salloc,
// slurmstepd), so that a malformed value fails at submission already and
// the value reaches slurmstepd.
char kMemName[] = "vgpu-mem";
char kComputeName[] = "vgpu-compute";
char kPriorityName[] = "vgpu-priority";
char kSizeInfo[] = "SIZE";
char kPercentInfo[] = "PERCENT";
char kPriorityInfo[] = "low|normal|high";
char kMemUsage[] = "vgpu: device memory per GPU, at most what the job's shards give (8GiB, 512MiB)";
char kComputeUsage[] = "vgpu: compute share per GPU in percent, at most what the shards give";
char kPriorityUsage[] = "vgpu: priority on the GPU, at most the partition's or QOS's";

spank_option g_option_table[] = {
    {kMemName, kSizeInfo, kMemUsage, 1, 0, OptionCallback},
    {kComputeName, kPercentInfo, kComputeUsage, 1, 1, OptionCallback},
    {kPriorityName, kPriorityInfo, kPriorityUsage, 1, 2, OptionCallback},
};

int OptionCallback(int val, const char* optarg, int /*remote*/) {
  try {
    if (val < 0 || val > 2 || optarg == nullptr) return -1;
    Status st = vs::ParseJobOption(g_option_table[val].name, optarg, &g_options);
    if (!st.ok()) {
      slurm_error("%s", st.message.c_str());
      return -1;
    }
    return 0;
  } catch (...) {
    return -1;
  }
}

std::vector<std::string> Args(int ac, char** av) {
  std::vector<std::string> out;
  for (int i = 0; i < ac; ++i) out.emplace_back(av[i] != nullptr ? av[i] : "");
  return out;
}

std::optional<std::string> Env(spank_t sp, const char* name) {
  std::vector<char> buf(4096);
  for (int tries = 0; tries < 3; ++tries) {
    const spank_err_t rc = spank_getenv(sp, name, buf.data(), static_cast<int>(buf.size()));
    if (rc == ESPANK_SUCCESS) return std::string(buf.data());
    if (rc != ESPANK_NOSPACE) return std::nullopt;
    buf.resize(buf.size() * 16);
  }
  return std::nullopt;
}

// libvgpu.so beside this plugin (installed and in the build tree alike).
std::string DefaultLib() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&DefaultLib), &info) == 0 || info.dli_fname == nullptr) {
    return "";
  }
  std::string self = info.dli_fname;
  const size_t slash = self.rfind('/');
  return slash == std::string::npos ? "" : self.substr(0, slash) + "/libvgpu.so";
}

int Fail(const std::string& message) {
  slurm_error("%s", message.c_str());
  return -1;
}

// The step's limits: read, computed, written, preloaded.
int SetUpStep(spank_t sp, int ac, char** av) {
  vs::PluginArgs args;
  if (Status st = vs::ParsePluginArgs(Args(ac, av), &args); !st.ok()) return Fail(st.message);
  vs::JobInfo job;
  uid_t uid = 0;
  if (spank_get_item(sp, S_JOB_ID, &job.job_id) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_STEPID, &job.step_id) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS) {
    return Fail("vgpu: cannot read the step's job id, step id or uid");
  }
  job.uid = uid;
  job.shards_on_node = Env(sp, "SLURM_SHARDS_ON_NODE");
  job.job_gpus = Env(sp, "SLURM_JOB_GPUS");
  job.step_gpus = Env(sp, "SLURM_STEP_GPUS");
  job.partition = Env(sp, "SLURM_JOB_PARTITION");
  job.qos = Env(sp, "SLURM_JOB_QOS");
  vs::JobLimits limits;
  if (Status st = vs::ComputeJobLimits(args, g_options, job, &limits); !st.ok()) {
    return Fail(st.message);
  }
  if (!limits.applies) return 0;  // no GPU, no shard: not ours
  // slurmstepd's own log: slurm_info here does not reach the job; the step's
  // first task prints them (slurm_spank_task_init).
  for (const std::string& m : limits.messages) slurm_info("%s", m.c_str());
  g_messages = limits.messages;
  const std::string lib = args.lib.empty() ? DefaultLib() : args.lib;
  if (lib.empty() || access(lib.c_str(), R_OK) != 0) {
    return Fail("vgpu: libvgpu.so not found at '" + lib + "': give lib=PATH in plugstack.conf");
  }
  if (Status st = vs::PrepareJobDir(vgpu::kSlurmJobDir); !st.ok()) return Fail(st.message);
  const std::string file = vgpu::SlurmJobFile(job.job_id, job.uid);
  if (Status st = vs::WriteFileAtomic(file, limits.admin.dump(2) + "\n"); !st.ok()) {
    return Fail(st.message);
  }
  for (const auto& [name, value] : limits.env_defaults) {
    // 0: the job's own value stays (libvgpu holds it to the file's ceiling).
    const spank_err_t rc = spank_setenv(sp, name.c_str(), value.c_str(), 0);
    if (rc != ESPANK_SUCCESS && rc != ESPANK_ENV_EXISTS) {
      return Fail("vgpu: cannot set the step's " + name);
    }
  }
  const std::string preload = vs::PrependPreload(Env(sp, "LD_PRELOAD").value_or(""), lib);
  if (spank_setenv(sp, "LD_PRELOAD", preload.c_str(), 1) != ESPANK_SUCCESS) {
    return Fail("vgpu: cannot set the step's LD_PRELOAD");
  }
  return 0;
}

}  // namespace

extern "C" {

// Every context: the options. In slurmd's own context (its start) nothing
// else: a malformed argument fails the contexts of jobs, not the daemon.
VGPU_EXPORT int slurm_spank_init(spank_t sp, int ac, char** av) {
  try {
    g_options = {};  // the hooks of one process serve one command or step
    g_messages.clear();
    const spank_context_t ctx = spank_context();
    if (ctx == S_CTX_SLURMD || ctx == S_CTX_JOB_SCRIPT) return 0;
    for (spank_option& o : g_option_table) {
      if (spank_option_register(sp, &o) != ESPANK_SUCCESS) {
        return Fail(std::string("vgpu: cannot register --") + o.name);
      }
    }
    // Checked where a user sees it (srun, sbatch) and where it counts.
    vs::PluginArgs args;
    if (Status st = vs::ParsePluginArgs(Args(ac, av), &args); !st.ok()) return Fail(st.message);
    return 0;
  } catch (...) {
    return Fail("vgpu: internal error in slurm_spank_init");
  }
}

// slurmstepd, as root, once per step, after the options' callbacks ran and
// before any task exists. The GRES environment is there: slurmstepd sets it
// (gres_g_job_set_env for the batch and interactive steps,
// gres_g_step_set_env for the others) before it calls spank_init. The
// LD_PRELOAD set here is the environment every task of the step starts with
// (task_init_privileged would run once per task, and after the step's
// environment was copied for it).
VGPU_EXPORT int slurm_spank_init_post_opt(spank_t sp, int ac, char** av) {
  try {
    if (spank_remote(sp) != 1) return 0;
    return SetUpStep(sp, ac, av);
  } catch (...) {
    return Fail("vgpu: internal error in slurm_spank_init_post_opt");
  }
}

// In each task, as the job's user, with the task's stdio in place: the one
// hook whose stderr is the job's (slurm_info in slurmstepd goes to slurmd's
// log). The step's first task tells what its options could not have.
VGPU_EXPORT int slurm_spank_task_init(spank_t sp, int /*ac*/, char** /*av*/) {
  try {
    uint32_t task = 0;
    if (g_messages.empty() || spank_get_item(sp, S_TASK_GLOBAL_ID, &task) != ESPANK_SUCCESS ||
        task != 0) {
      return 0;
    }
    for (const std::string& m : g_messages) std::fprintf(stderr, "%s\n", m.c_str());
    std::fflush(stderr);
    return 0;
  } catch (...) {
    return 0;
  }
}

// The job's end on the node: slurmd runs it as root in its epilog, whether
// or not an Epilog= script is configured (22.05: prep/script's slurmd_script
// runs the SPANK epilog when spank_has_epilog(), and slurmd waits for it
// before the job leaves "completing"). Every step's file is the job's one.
VGPU_EXPORT int slurm_spank_job_epilog(spank_t sp, int /*ac*/, char** /*av*/) {
  try {
    uint32_t job_id = 0;
    uid_t uid = 0;
    if (spank_get_item(sp, S_JOB_ID, &job_id) != ESPANK_SUCCESS ||
        spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS) {
      return Fail("vgpu: epilog: cannot read the job id or uid");
    }
    int removed = 0;
    Status st = vs::RemoveJobFiles(vgpu::kSlurmJobDir, "/dev/shm", job_id, uid, &removed);
    if (!st.ok()) return Fail(st.message);
    return 0;
  } catch (...) {
    return Fail("vgpu: internal error in slurm_spank_job_epilog");
  }
}

}  // extern "C"
