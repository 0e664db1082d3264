// The option table: every option vgpu reads, declared once, with the parser
// that turns its value into Config fields. The generic value parsers are in
// value_parsers.cc; reading the environment and the JSON file is in config.cc
// and config_file.cc.
#include <algorithm>
#include <cctype>
#include <cstring>
#include <iterator>

#include "common/config/option_table.h"
#include "common/log_level.h"
#include "common/parse.h"

namespace vgpu::config_internal {
namespace {

constexpr size_t kMaxGroupChars = 100;
// A Kubernetes "namespace/name": a namespace (a DNS label, at most 63) and a
// name (a DNS subdomain, at most 253); 253 on each side leaves room for
// whatever an orchestrator other than Kubernetes writes.
constexpr size_t kMaxLabelChars = 253 + 1 + 253;

// ---------------------------------------------------------------------------
// VGPU_VISIBLE_DEVICES

Status ParseDeviceId(const Input& in, const std::string& item, std::string* out) {
  int index = 0;
  if (ParseIndex(item, Config::kMaxDevices - 1, &index)) {
    *out = std::to_string(index);
    return Status::Ok();
  }
  if (ParseUuid(item, out)) return Status::Ok();
  if (Lower(item.substr(0, 4)) == "mig-") {
    return FailItem(in, item,
                    "is a MIG device, which vgpu does not virtualize: give GPU indices or "
                    "GPU-... UUIDs");
  }
  return FailItem(in, item,
                  "is not a device: expected a comma-separated list of indices 0..15 or UUIDs "
                  "like GPU-8c6e1a2b-0f3d-4e5a-9b7c-1d2e3f4a5b6c");
}

Status ParseVisibleDevices(const Input& in, Config* cfg) {
  if (in.items.size() > Config::kMaxDevices) {
    return Fail(in, "lists more than 16 devices");
  }
  std::vector<std::string> ids;
  for (const auto& item : in.items) {
    std::string id;
    if (Status s = ParseDeviceId(in, item, &id); !s.ok()) return s;
    if (std::find(ids.begin(), ids.end(), id) != ids.end()) {
      return FailItem(in, item, "is listed twice: each device may appear once");
    }
    ids.push_back(id);
  }
  cfg->visible_devices = std::move(ids);
  cfg->visible_devices_set = true;
  return Status::Ok();
}

// ---------------------------------------------------------------------------
// VGPU_DEVICE_MEMORY_LIMIT, CUDA_DEVICE_MEMORY_LIMIT, CUDA_DEVICE_MEMORY_LIMIT_<i>

Status ParseMemoryLimit(const Input& in, Config* cfg) {
  if (in.items.empty()) return Fail(in, std::string("is empty: ") + kSizeExpected);
  if (in.items.size() > Config::kMaxDevices) {
    return Fail(in, "lists more than 16 limits");
  }
  std::vector<uint64_t> limits;
  for (const auto& item : in.items) {
    uint64_t v = 0;
    if (Status s = ParseLimit(in, item, &v); !s.ok()) return s;
    limits.push_back(v);
  }
  cfg->memory_limit_all = limits.size() == 1 ? limits[0] : Config::kNoLimit;
  if (limits.size() == 1) limits.clear();
  cfg->memory_limits = std::move(limits);
  cfg->memory_limit_source = in.source;
  return Status::Ok();
}

Status ParseMemoryLimitForIndex(int index, const Input& in, Config* cfg) {
  uint64_t v = 0;
  if (Trim(in.text).empty()) return Fail(in, std::string("is empty: ") + kSizeExpected);
  if (Status s = ParseLimit(in, in.text, &v); !s.ok()) return s;
  SetForIndex(&cfg->memory_limit_by_index, index, v);
  return Status::Ok();
}

// ---------------------------------------------------------------------------
// Scalars

Status ParseGroup(const Input& in, Config* cfg) {
  const std::string& g = in.text;
  bool ok = !g.empty() && g.size() <= kMaxGroupChars;
  for (char c : g) {
    ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-');
  }
  if (!ok) return Fail(in, "is not a group name: use 1-100 characters from [A-Za-z0-9._-]");
  cfg->group = g;
  return Status::Ok();
}

// VGPU_CLAIM and VGPU_POD: names that only label the job (vgpuctl ps, vgpud's
// metrics), so any printable text; no white space, so that a ps column and a
// metrics label stay one token.
Status ParseLabel(const Input& in, std::string* out) {
  const std::string& v = in.text;
  bool ok = !v.empty() && v.size() <= kMaxLabelChars;
  for (char c : v) ok = ok && c > ' ' && c < 0x7f;
  if (!ok) {
    return Fail(in,
                "is not a label: expected 1-507 printable characters without spaces, "
                "e.g. namespace/name");
  }
  *out = v;
  return Status::Ok();
}

Status ParseClaim(const Input& in, Config* cfg) { return ParseLabel(in, &cfg->claim); }

Status ParsePod(const Input& in, Config* cfg) { return ParseLabel(in, &cfg->pod); }

Status ParseSlurmJob(const Input& in, Config* cfg) { return ParseLabel(in, &cfg->slurm_job); }

Status ParsePreemptible(const Input& in, Config* cfg) { return ParseSwitch(in, &cfg->preemptible); }

Status ParseSuspendOnSigtstp(const Input& in, Config* cfg) {
  return ParseSwitch(in, &cfg->suspend_on_sigtstp);
}

Status ParseLogLevel(const Input& in, Config* cfg) {
  if (ParseLogLevelName(Lower(Trim(in.text)), &cfg->log_level)) return Status::Ok();
  return Fail(in, "is not a log level: expected off, error, warn, info or debug");
}

Status ParseLogFile(const Input& in, Config* cfg) {
  if (in.text.empty()) {
    return Fail(in, "is empty: expected a file path or 'stderr' (unset it for no log)");
  }
  return ParsePath(in, &cfg->log_file);
}

Status ParseConfigPath(const Input& in, Config* cfg) { return ParsePath(in, &cfg->config_file); }

Status ParseRealLibcuda(const Input& in, Config* cfg) { return ParsePath(in, &cfg->real_libcuda); }

Status ParseRealLibnvml(const Input& in, Config* cfg) { return ParsePath(in, &cfg->real_libnvml); }

Status ParseRunDir(const Input& in, Config* cfg) { return ParseOptionalDir(in, &cfg->run_dir); }

Status ParseCheckpointDir(const Input& in, Config* cfg) {
  return ParseOptionalDir(in, &cfg->checkpoint_dir);
}

// ---------------------------------------------------------------------------
// Compute share

Status ParseComputeShare(const Input& in, Config* cfg) {
  return ParseSharePermille(in, &cfg->compute_share_permille);
}

Status ParseComputeShareForIndex(int index, const Input& in, Config* cfg) {
  uint32_t permille = 0;
  if (Status s = ParseSharePermille(in, &permille); !s.ok()) return s;
  SetForIndex(&cfg->compute_share_by_index, index, permille);
  return Status::Ok();
}

Status ParseComputeWeight(const Input& in, Config* cfg) {
  if (!vgpu::ParseComputeWeight(in.text, &cfg->compute_weight)) {
    return Fail(in, "is not a weight: expected an integer from 1 to 1000");
  }
  return Status::Ok();
}

Status ParseVmm(const Input& in, Config* cfg) { return ParseSwitch(in, &cfg->vmm); }

Status ParseTraceAllocations(const Input& in, Config* cfg) {
  return ParseSwitch(in, &cfg->trace_allocations);
}

Status ParsePriority(const Input& in, Config* cfg) {
  std::string v = Lower(Trim(in.text));
  // HAMi-core's CUDA_TASK_PRIORITY is a number: 0 is its high priority, 1 (its
  // default) and above are lower ones. vgpu has two levels, so 0 maps to high
  // and every other level to normal.
  if (in.source == "CUDA_TASK_PRIORITY") {
    if (!IsDigits(v) || v.size() > 3) {
      return Fail(in, "is not a HAMi task priority: expected 0 (high) or 1 (normal)");
    }
    cfg->priority = std::strtol(v.c_str(), nullptr, 10) == 0 ? Config::Priority::kHigh
                                                             : Config::Priority::kNormal;
    return Status::Ok();
  }
  if (!ParsePriorityName(v, &cfg->priority)) {
    return Fail(in, "is not a priority: expected high, normal or low");
  }
  return Status::Ok();
}

Status ParseComputePolicy(const Input& in, Config* cfg) {
  static constexpr std::pair<const char*, Config::ComputePolicy> kPolicies[] = {
      {"fixed", Config::ComputePolicy::kFixed},
      {"weighted", Config::ComputePolicy::kWeighted},
      {"native", Config::ComputePolicy::kNative},
  };
  std::string v = Lower(Trim(in.text));
  for (const auto& [name, policy] : kPolicies) {
    if (v == name) {
      cfg->compute_policy = policy;
      return Status::Ok();
    }
  }
  return Fail(in, "is not a policy: expected fixed, weighted or native");
}

Status ParseSchedRegion(const Input& in, Config* cfg) {
  const std::string& v = in.text;
  bool ok = v.size() >= 2 && v.size() <= 100 && v[0] == '/';
  for (size_t i = 1; i < v.size(); ++i) {
    char c = v[i];
    ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-');
  }
  if (!ok) {
    return Fail(in, "is not a shared-memory name: expected /name with [A-Za-z0-9._-]");
  }
  cfg->sched_region = v;
  return Status::Ok();
}

// ---------------------------------------------------------------------------
// The table. Adding an option is one entry here, its parser, and a Config
// field; docs/configuration.md must then document it (a unit test checks).

constexpr OptionSpec kOptions[] = {
    {{"VGPU_VISIBLE_DEVICES", "", "visible_devices", "all devices",
      "Physical devices the process sees, as indices or GPU UUIDs, in the order it sees them; "
      "an empty value hides every device."},
     Kind::kList,
     true,
     ParseVisibleDevices,
     nullptr},
    {{"VGPU_DEVICE_MEMORY_LIMIT", "CUDA_DEVICE_MEMORY_LIMIT,CUDA_DEVICE_MEMORY_LIMIT_<i>",
      "device_memory_limit", "no limit",
      "Device-memory quota per visible device, one size for all or one per device; "
      "CUDA_DEVICE_MEMORY_LIMIT_<i> sets visible device i."},
     Kind::kList,
     true,
     ParseMemoryLimit,
     ParseMemoryLimitForIndex},
    {{"VGPU_GROUP", "", "group", "the process alone",
      "Processes with the same group name share one memory quota (1-100 characters from "
      "[A-Za-z0-9._-])."},
     Kind::kScalar,
     true,
     ParseGroup,
     nullptr},
    {{"VGPU_COMPUTE_SHARE", "CUDA_DEVICE_SM_LIMIT,CUDA_DEVICE_SM_LIMIT_<i>", "compute_share",
      "none (no cap)",
      "Compute share of each device in percent (above 0, at most 100): a cap with the fixed "
      "policy, the guaranteed part with the weighted one; CUDA_DEVICE_SM_LIMIT_<i> sets visible "
      "device i (0 or 100 and above: no cap there, as in HAMi-core)."},
     Kind::kScalar,
     true,
     ParseComputeShare,
     ParseComputeShareForIndex},
    {{"VGPU_COMPUTE_WEIGHT", "", "compute_weight", "1",
      "Weight (1-1000) with the weighted policy: idle capacity is split among active tenants "
      "in proportion to their weights."},
     Kind::kScalar,
     true,
     ParseComputeWeight,
     nullptr},
    {{"VGPU_PRIORITY", "CUDA_TASK_PRIORITY", "priority", "normal",
      "high: the tenant runs as if alone while it is active and every normal tenant of the "
      "device yields; normal otherwise; low: normal to the compute scheduler, first to give way "
      "for the node coordinator (HAMi-core's CUDA_TASK_PRIORITY: 0 is high, 1 and above "
      "normal)."},
     Kind::kScalar,
     true,
     ParsePriority,
     nullptr},
    {{"VGPU_COMPUTE_POLICY", "", "compute_policy",
      "fixed with a share, weighted with a weight or high priority, else native",
      "fixed (never above the share, even on an idle GPU), weighted (work-conserving by "
      "weight) or native (memory isolation only, no compute scheduling)."},
     Kind::kScalar,
     true,
     ParseComputePolicy,
     nullptr},
    {{"VGPU_SCHED_REGION", "", "sched_region", "/vgpu-sched",
      "Shared-memory region of the compute scheduler, one per node (every uid and container; "
      "the CDI spec mounts it); a region of its own schedules only its own members."},
     Kind::kScalar,
     false,
     ParseSchedRegion,
     nullptr},
    {{"VGPU_PREEMPTIBLE", "", "preemptible", "true",
      "false: vgpud never suspends, rotates, parks or moves the job for another; under an "
      "admin file only the admin may set false (on/off, true/false, 1/0)."},
     Kind::kScalar,
     false,
     ParsePreemptible,
     nullptr},
    {{"VGPU_SUSPEND_ON_SIGTSTP", "", "suspend_on_sigtstp", "false",
      "on: SIGTSTP (Slurm's suspend) first moves the process's device memory to host memory, "
      "then stops the process as before; SIGCONT brings the memory back (on/off, true/false, "
      "1/0); fixed by an admin file that sets it."},
     Kind::kScalar,
     false,
     ParseSuspendOnSigtstp,
     nullptr},
    {{"VGPU_CLAIM", "", "claim", "none",
      "The Kubernetes ResourceClaim the process runs under, namespace/name: a label shown by "
      "vgpuctl ps and on vgpud's metrics."},
     Kind::kScalar,
     false,
     ParseClaim,
     nullptr},
    {{"VGPU_POD", "", "pod", "none",
      "The pod the process runs in, namespace/name: a label shown by vgpuctl ps and on "
      "vgpud's metrics."},
     Kind::kScalar,
     false,
     ParsePod,
     nullptr},
    {{"VGPU_SLURM_JOB", "", "slurm_job", "none",
      "The Slurm job the process runs in (its id): a label shown by vgpuctl ps and on vgpud's "
      "metrics; the Slurm plugin's job file sets it."},
     Kind::kScalar,
     false,
     ParseSlurmJob,
     nullptr},
    {{"VGPU_VMM", "", "", "on",
      "on: device allocations live at stable VMM-backed addresses, so the process can be "
      "suspended, checkpointed and restored; off: the driver's own allocator (a complete "
      "pass-through when no other option is set)."},
     Kind::kScalar,
     false,
     ParseVmm,
     nullptr},
    {{"VGPU_TRACE_ALLOCATIONS", "", "", "off",
      "on: device memory is attributed to the call sites that allocated it (vgpuctl info "
      "--allocations), and a quota refusal's log line names its call site; off costs nothing."},
     Kind::kScalar,
     false,
     ParseTraceAllocations,
     nullptr},
    {{"VGPU_LOG_LEVEL", "", "log_level", "warn",
      "Least severe message logged: off, error, warn, info or debug."},
     Kind::kScalar,
     false,
     ParseLogLevel,
     nullptr},
    {{"VGPU_LOG_FILE", "", "log_file", "none (no log output)",
      "File that log lines are appended to; the value stderr writes to the application's "
      "stderr."},
     Kind::kScalar,
     false,
     ParseLogFile,
     nullptr},
    {{"VGPU_CONFIG", "", "", "none (/etc/vgpu/container.json if it exists)",
      "Path of a JSON file holding any of the other options, which environment variables "
      "override; unset, /etc/vgpu/container.json when that file exists (vgpu-oci-hook writes "
      "it in a container, for processes that clear their environment)."},
     Kind::kScalar,
     false,
     ParseConfigPath,
     nullptr},
    {{"VGPU_REAL_LIBCUDA", "", "real_libcuda", "libcuda.so.1 (found by soname)",
      "Path of the real CUDA driver library that calls are forwarded to."},
     Kind::kScalar,
     false,
     ParseRealLibcuda,
     nullptr},
    {{"VGPU_REAL_LIBNVML", "", "real_libnvml", "libnvidia-ml.so.1 (found by soname)",
      "Path of the real NVML library that calls are forwarded to."},
     Kind::kScalar,
     false,
     ParseRealLibnvml,
     nullptr},
    {{"VGPU_RUN_DIR", "", "", "$XDG_RUNTIME_DIR/vgpu, /run/vgpu as root, else /tmp/vgpu-<uid>",
      "Directory of the control sockets (agent-<pid>.sock) where agents listen and vgpuctl "
      "looks; both sides check it; empty: the default."},
     Kind::kScalar,
     false,
     ParseRunDir,
     nullptr},
    {{"VGPU_CHECKPOINT_DIR", "", "", "$TMPDIR/vgpu-checkpoints-<uid>/<pid> (/tmp without TMPDIR)",
      "Directory where a checkpoint without an explicit directory writes its image; empty: the "
      "default."},
     Kind::kScalar,
     false,
     ParseCheckpointDir,
     nullptr},
};

}  // namespace

std::span<const OptionSpec> OptionTable() { return kOptions; }

size_t OptionIndex(const char* env) {
  for (size_t i = 0; i < std::size(kOptions); ++i) {
    if (std::strcmp(kOptions[i].info.env, env) == 0) return i;
  }
  return std::size(kOptions);
}

Status Apply(size_t option, Input in, LoadState* st) {
  const OptionSpec& spec = kOptions[option];
  if (spec.kind == Kind::kScalar) {
    in.items = {in.text};
  }
  if (Status s = spec.parse(in, st->cfg); !s.ok()) return s;
  MarkSet(option, in, st);
  return Status::Ok();
}

void MarkSet(size_t option, const Input& in, LoadState* st) {
  st->set[option] = true;
  st->origin[option] = in.source;
  st->text[option] = in.text;
}

std::vector<std::string> AliasList(const OptionSpec& spec) { return SplitList(spec.info.aliases); }

bool IsIndexedAlias(const std::string& alias) {
  return alias.size() > 4 && alias.compare(alias.size() - 4, 4, "_<i>") == 0;
}

}  // namespace vgpu::config_internal

namespace vgpu {

using config_internal::AliasList;
using config_internal::IsDigits;
using config_internal::IsIndexedAlias;
using config_internal::OptionTable;

std::vector<std::string> ProcessAliases(const OptionInfo& o) {
  std::vector<std::string> out;
  for (const auto& alias : config_internal::SplitList(o.aliases)) {
    if (!IsIndexedAlias(alias)) out.push_back(alias);
  }
  return out;
}

const std::vector<OptionInfo>& Options() {
  static const std::vector<OptionInfo> options = [] {
    std::vector<OptionInfo> v;
    for (const auto& spec : OptionTable()) v.push_back(spec.info);
    return v;
  }();
  return options;
}

bool IsConfigVariable(const std::string& name) {
  for (const auto& spec : OptionTable()) {
    if (name == spec.info.env) return true;
    for (const auto& alias : AliasList(spec)) {
      if (!IsIndexedAlias(alias)) {
        if (name == alias) return true;
        continue;
      }
      const std::string prefix = alias.substr(0, alias.size() - 3);  // "NAME_"
      if (name.size() > prefix.size() && name.compare(0, prefix.size(), prefix) == 0 &&
          IsDigits(name.substr(prefix.size()))) {
        return true;
      }
    }
  }
  return false;
}

}  // namespace vgpu
