// vgpu configuration (libvgpu, vgpuctl, and next vgpud and the container
// hook): every option is declared once, in kOptions (options.cc),
// with its environment variable, HAMi-core aliases, JSON key, default and
// documentation; docs/configuration.md is checked against that table by a test.
//
// Sources, lowest to highest precedence: defaults, the JSON file named by
// VGPU_CONFIG (a container hook writes it), environment variables. A malformed
// value anywhere is an error naming the variable or key, and the caller fails
// closed (no unlimited access by accident).
//
// Above them, the admin's files (the node file, the container limits the hook
// writes; docs/configuration.md, "Ceilings") set ceilings: the tenant's own
// values may tighten a limit, share, weight or priority, never raise it; a
// value above a ceiling is refused with a one-line message and the ceiling
// applies.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common/container_paths.h"
#include "common/log.h"
#include "common/status.h"

namespace vgpu {

// The admin files libvgpu reads, in order; each one's values are ceilings.
inline constexpr const char* kAdminConfigFiles[] = {kNodeConfigFile, kContainerLimitsFile};

struct Config;
// An admin file's values, in force as ceilings.
struct ConfigCeiling {
  std::string source;  // "admin file '/etc/vgpu/node.json'"
  std::shared_ptr<const Config> limits;
};

struct Config {
  static constexpr uint64_t kNoLimit = UINT64_MAX;
  static constexpr int kMaxDevices = 16;  // as many as the quota ledger holds

  // VGPU_VISIBLE_DEVICES: physical devices by index ("0", "2") or UUID
  // ("GPU-8c6e...", normalized to lower-case hex), in the order the process
  // will see them. Only meaningful when visible_devices_set: unset means all
  // devices; set and empty (VGPU_VISIBLE_DEVICES=) means none, as with
  // CUDA_VISIBLE_DEVICES.
  std::vector<std::string> visible_devices;
  bool visible_devices_set = false;
  // VGPU_DEVICE_MEMORY_LIMIT (+ HAMi CUDA_DEVICE_MEMORY_LIMIT and
  // CUDA_DEVICE_MEMORY_LIMIT_<i>): per *visible* device, bytes. One value
  // (memory_limit_all) applies to all devices; a list (memory_limits) gives
  // one per device; CUDA_DEVICE_MEMORY_LIMIT_<i> overrides device i. Use
  // LimitFor() after ValidateAgainstDeviceCount().
  std::vector<uint64_t> memory_limits;  // one per visible device, or empty
  uint64_t memory_limit_all = kNoLimit;
  std::vector<std::pair<int, uint64_t>> memory_limit_by_index;  // sorted by index
  std::string memory_limit_source;       // where the list came from, for messages
  std::string group;                     // VGPU_GROUP; empty: the process alone
  LogLevel log_level = LogLevel::kWarn;  // VGPU_LOG_LEVEL
  std::string log_file;                  // VGPU_LOG_FILE; empty: no log; "stderr" allowed
  std::string real_libcuda;              // VGPU_REAL_LIBCUDA; empty: soname lookup
  std::string real_libnvml;              // VGPU_REAL_LIBNVML
  std::string config_file;               // VGPU_CONFIG; empty: none
  // Compute share (docs/configuration.md, "Compute share").
  enum class ComputePolicy { kAuto, kNative, kFixed, kWeighted };
  uint32_t compute_share_permille = 0;  // VGPU_COMPUTE_SHARE / CUDA_DEVICE_SM_LIMIT; 0: unset
  // CUDA_DEVICE_SM_LIMIT_<i>: visible device i's share, overriding the one
  // above (0: no cap on that device); sorted by index.
  std::vector<std::pair<int, uint32_t>> compute_share_by_index;
  uint32_t compute_weight = 0;  // VGPU_COMPUTE_WEIGHT; 0: unset (1)
  // VGPU_PRIORITY (CUDA_TASK_PRIORITY=0 is high). The compute scheduler knows
  // high and normal; low is normal to it and tells the coordinator whom to
  // suspend first.
  enum class Priority { kLow, kNormal, kHigh };
  Priority priority = Priority::kNormal;
  bool high_priority() const { return priority == Priority::kHigh; }
  ComputePolicy compute_policy = ComputePolicy::kAuto;  // VGPU_COMPUTE_POLICY
  std::string sched_region;  // VGPU_SCHED_REGION; empty: the node's (kNodeSchedRegion)
  // VGPU_PREEMPTIBLE: false asks vgpud never to suspend, rotate, park or
  // move the process for another job; a ceiling (only an admin file may set
  // false).
  bool preemptible = true;
  // VGPU_SUSPEND_ON_SIGTSTP: SIGTSTP suspends the process's device memory to
  // host and SIGCONT brings it back (residency/stop_signals.h); fixed by an
  // admin file that sets it.
  bool suspend_on_sigtstp = false;
  // VGPU_CLAIM, VGPU_POD: labels only ("namespace/name"; empty: none), for
  // vgpuctl ps and vgpud's metrics. Fixed by an admin file that sets them.
  std::string claim;
  std::string pod;
  // VGPU_SLURM_JOB: the Slurm job id the process runs in (a label; the Slurm
  // plugin's job file fixes it).
  std::string slurm_job;
  bool vmm = true;           // VGPU_VMM: device allocations VMM-backed (suspend/checkpoint)
  bool trace_allocations = false;  // VGPU_TRACE_ALLOCATIONS: live bytes per call site
  // The control path (ctl/control): empty means the default, computed where
  // it is used (run_dir.h RunDir(); the agent's per-process checkpoint dir).
  std::string run_dir;         // VGPU_RUN_DIR
  std::string checkpoint_dir;  // VGPU_CHECKPOINT_DIR
  // The policy in force: explicit, else fixed with a share, weighted with a
  // weight or high priority, else native (memory isolation only).
  // For the process: fixed when any device has a share.
  ComputePolicy EffectivePolicy() const;
  // The share (permille, 0: none) and the policy on visible device i.
  uint32_t ShareFor(int visible_index) const;
  ComputePolicy EffectivePolicyFor(int visible_index) const;
  bool configured = false;               // any policy option set (else pure pass-through)

  // Ceilings in force, tightest first applied by LimitFor and ShareFor;
  // weight, priority, compute policy, group, devices and the scheduler region
  // are settled at load.
  std::vector<ConfigCeiling> ceilings;
  // One line per tenant value above a ceiling, which was not applied.
  std::vector<std::string> refusals;
  // Per option (Options() order): where the value in force came from
  // ("default", "VGPU_GROUP", "VGPU_CONFIG file 'x': group", "admin file 'y': ...").
  std::vector<std::string> origins;
  // Per option: its value in force as written ("" where the default holds).
  std::vector<std::string> texts;

  // Limit for visible device i (kNoLimit if none). Fails closed: an index the
  // per-device list does not cover yields 0, so call
  // ValidateAgainstDeviceCount() first.
  uint64_t LimitFor(int visible_index) const;
  // The tightest of the ceilings on visible device i, and who sets each
  // (source empty: no ceiling). For a tenant's runtime changes (vgpuctl set).
  struct Ceilings {
    uint64_t memory_limit = kNoLimit;
    uint32_t share_permille = 0;  // 0: no cap
    uint32_t weight = UINT32_MAX;
    Priority priority = Priority::kHigh;
    std::string memory_source, share_source, weight_source, priority_source;
  };
  Ceilings CeilingsFor(int visible_index) const;
  // As a ceiling, this file's weight: the one it names, or 1 (the default)
  // when it names none.
  uint32_t WeightCeiling() const { return compute_weight == 0 ? 1 : compute_weight; }
  // The process's own limit and share on visible device i, before ceilings.
  uint64_t RequestedLimitFor(int visible_index) const;
  uint32_t RequestedShareFor(int visible_index) const;

  // Checks the per-device settings against the number of devices the process
  // sees: a VGPU_DEVICE_MEMORY_LIMIT list must have exactly that many values,
  // and CUDA_DEVICE_MEMORY_LIMIT_<i> / CUDA_DEVICE_SM_LIMIT_<i> must name one
  // of them. kInval with a one-line message otherwise.
  Status ValidateAgainstDeviceCount(int device_count) const;
};

// "high", "normal", "low" (VGPU_PRIORITY's words, also the control protocol's).
const char* PriorityName(Config::Priority p);
// Parses one of those words (case-insensitive, trimmed); false if it is none.
bool ParsePriorityName(const std::string& text, Config::Priority* out);

struct OptionInfo {
  const char* env;           // VGPU_* name
  const char* aliases;       // comma-separated HAMi-core names, "" if none; a name
                             // ending in "_<i>" is per visible device i (0..15)
  const char* json_key;      // key in the VGPU_CONFIG file, "" if env-only
  const char* default_text;  // as documented
  const char* doc;           // one sentence
};

// The option table, for docs and `vgpuctl config`.
const std::vector<OptionInfo>& Options();

// An option's HAMi-core names that configure the whole process (its
// per-device NAME_<i> forms left out).
std::vector<std::string> ProcessAliases(const OptionInfo& o);

// Whether an environment variable configures libvgpu: an option's VGPU_*
// name or one of its HAMi aliases (NAME_<i> forms included). Benchmarks and
// tests scrub these so that the caller's shell cannot change what they measure.
bool IsConfigVariable(const std::string& name);

// Reads the configuration. `getenv` is injectable for tests. Returns an error
// with a one-line message naming the offending variable or key (kInval for a
// malformed value, kNoEnt/kIo for a file that cannot be read); never throws.
// `env_names` lists the names of the variables in the environment, used only
// to reject malformed indexed names (CUDA_DEVICE_MEMORY_LIMIT_x); null: the
// names in `environ`. A name counts as set only if getenv_fn returns non-null.
using EnvLookup = std::function<const char*(const char*)>;
// `fallback_file` is read when VGPU_CONFIG is unset: by default the file
// vgpu-oci-hook writes in a container it prepares (common/container_paths.h),
// so that a process which cleared its environment (and still loads libvgpu
// through /etc/ld.so.preload) keeps the container's limits (tests: a
// temporary file; nullptr: none). `admin_files`: the node's by default, and
// then also the Slurm job file of the process's job when one exists
// (slurm_job.h); tests pass their own list, which is the whole list.
Status LoadConfig(const EnvLookup& getenv_fn, Config* out,
                  const std::vector<std::string>* env_names = nullptr,
                  const char* fallback_file = kContainerConfigFile,
                  std::span<const char* const> admin_files = kAdminConfigFiles);

// Reads one option (`env`, its VGPU_* name) from the environment alone, into
// the fields of *out it owns: for vgpuctl and the control library, which need
// VGPU_RUN_DIR but must not fail on a malformed libvgpu option they do not
// use. Same parser and messages as LoadConfig; never throws.
Status LoadEnvOption(const char* env, const EnvLookup& getenv_fn, Config* out);

}  // namespace vgpu
