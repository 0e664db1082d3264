// Loading the configuration: the environment (VGPU_* names, HAMi aliases and
// their per-device NAME_<i> forms) over the JSON file (config_file.cc), each
// value parsed by its entry in the option table (options.cc); and the Config
// queries.
#include "common/config/config.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>

#include "common/config/ceilings.h"
#include "common/config/config_file.h"
#include "common/config/option_table.h"
#include "common/config/slurm_job.h"

extern char** environ;  // NOLINT: POSIX

namespace vgpu {
namespace {

using config_internal::AliasList;
using config_internal::Apply;
using config_internal::ApplyJsonFile;
using config_internal::Input;
using config_internal::IsIndexedAlias;
using config_internal::Kind;
using config_internal::LoadState;
using config_internal::MarkSet;
using config_internal::OptionIndex;
using config_internal::OptionSpec;
using config_internal::OptionTable;
using config_internal::ParseIndex;
using config_internal::Printable;
using config_internal::SplitList;

// The Slurm plugin's admin file for this process's job, "" when it runs in
// none or its job has none (slurm_job.h).
Status SlurmJobFileOfProcess(const EnvLookup& getenv_fn, std::string* path) {
  std::ifstream in("/proc/self/cgroup");
  const std::string cgroup((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  uint32_t job_id = 0;
  if (Status s = SlurmJobIdOf(cgroup, getenv_fn("SLURM_JOB_ID"), &job_id); !s.ok()) return s;
  return SlurmJobAdminFile(job_id, static_cast<uint32_t>(getuid()), path);
}

// The env name (primary first, then plain aliases) that is set, or "".
std::string FindEnvName(const OptionSpec& spec, const EnvLookup& getenv_fn) {
  if (getenv_fn(spec.info.env) != nullptr) return spec.info.env;
  for (const auto& alias : AliasList(spec)) {
    if (!IsIndexedAlias(alias) && getenv_fn(alias.c_str()) != nullptr) return alias;
  }
  return "";
}

Input EnvInput(const std::string& name, const char* value, Kind kind) {
  Input in{name, value, {}};
  if (kind == Kind::kList) in.items = SplitList(in.text);
  return in;
}

Status ApplyEnvOption(size_t option, const EnvLookup& getenv_fn, LoadState* st) {
  const OptionSpec& spec = OptionTable()[option];
  std::string name = FindEnvName(spec, getenv_fn);
  if (name.empty()) return Status::Ok();
  return Apply(option, EnvInput(name, getenv_fn(name.c_str()), spec.kind), st);
}

// NAME_<i> for i in 0..15, and a rejection of any other NAME_* that is set.
Status ApplyIndexedAlias(size_t option, const std::string& alias, const EnvLookup& getenv_fn,
                         const std::vector<std::string>& env_names, LoadState* st) {
  const OptionSpec& spec = OptionTable()[option];
  const std::string prefix = alias.substr(0, alias.size() - 3);  // "NAME_"
  for (const auto& name : env_names) {
    int index = 0;
    if (name.compare(0, prefix.size(), prefix) != 0 || getenv_fn(name.c_str()) == nullptr) continue;
    if (!ParseIndex(name.substr(prefix.size()), Config::kMaxDevices - 1, &index)) {
      return Status::Error(ErrorCode::kInval,
                           Printable(name) + " is not a per-device variable: the suffix after " +
                               prefix + " must be a device index 0..15");
    }
  }
  for (int i = 0; i < Config::kMaxDevices; ++i) {
    std::string name = prefix + std::to_string(i);
    const char* value = getenv_fn(name.c_str());
    if (value == nullptr) continue;
    const Input in = EnvInput(name, value, Kind::kScalar);
    if (Status s = spec.parse_indexed(i, in, st->cfg); !s.ok()) return s;
    MarkSet(option, in, st);
  }
  return Status::Ok();
}

Status ApplyIndexedAliases(size_t option, const EnvLookup& getenv_fn,
                           const std::vector<std::string>& env_names, LoadState* st) {
  for (const auto& alias : AliasList(OptionTable()[option])) {
    if (!IsIndexedAlias(alias)) continue;
    if (Status s = ApplyIndexedAlias(option, alias, getenv_fn, env_names, st); !s.ok()) return s;
  }
  return Status::Ok();
}

// --- the whole ---

std::vector<std::string> EnvironNames() {
  std::vector<std::string> names;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const char* eq = std::strchr(*e, '=');
    names.emplace_back(*e, eq != nullptr ? static_cast<size_t>(eq - *e) : std::strlen(*e));
  }
  return names;
}

Status LoadConfigOrFail(const EnvLookup& getenv_fn, const std::vector<std::string>& env_names,
                        const char* fallback_file, std::span<const char* const> admin_files,
                        Config* out) {
  LoadState st{out};
  const auto table = OptionTable();
  const size_t config_option = OptionIndex("VGPU_CONFIG");
  // The file first (lowest precedence after the defaults), then the environment.
  if (Status s = ApplyEnvOption(config_option, getenv_fn, &st); !s.ok()) return s;
  if (getenv_fn("VGPU_CONFIG") == nullptr && fallback_file != nullptr &&
      access(fallback_file, F_OK) == 0) {
    out->config_file = fallback_file;
  }
  if (!out->config_file.empty()) {
    if (Status s = ApplyJsonFile(out->config_file, &st); !s.ok()) return s;
  }
  for (size_t i = 0; i < table.size(); ++i) {
    Status s = i != config_option ? ApplyEnvOption(i, getenv_fn, &st) : Status::Ok();
    if (!s.ok()) return s;
    s = ApplyIndexedAliases(i, getenv_fn, env_names, &st);
    if (!s.ok()) return s;
  }
  for (size_t i = 0; i < table.size(); ++i) {
    out->configured = out->configured || (st.set[i] && table[i].policy);
  }
  for (const char* path : admin_files) {
    if (path == nullptr || access(path, F_OK) != 0) continue;
    if (Status s = config_internal::ApplyCeilingFile(path, &st); !s.ok()) return s;
  }
  // The node's own files (not a test's): a Slurm job's file applies too.
  if (admin_files.data() == std::data(kAdminConfigFiles)) {
    std::string job_file;
    if (Status s = SlurmJobFileOfProcess(getenv_fn, &job_file); !s.ok()) return s;
    if (!job_file.empty()) {
      if (Status s = config_internal::ApplyCeilingFile(job_file, &st); !s.ok()) return s;
    }
  }
  out->origins = st.origin;
  out->texts = st.text;
  for (std::string& o : out->origins) {
    if (o.empty()) o = "default";
  }
  return Status::Ok();
}

// The message every load failure that is not the configuration's own says.
Status InternalError() {
  return Status::Error(ErrorCode::kIo, "vgpu configuration could not be read (internal error)");
}

}  // namespace

uint64_t Config::LimitFor(int visible_index) const {
  uint64_t limit = RequestedLimitFor(visible_index);
  for (const ConfigCeiling& c : ceilings) {
    limit = std::min(limit, c.limits->LimitFor(visible_index));
  }
  return limit;
}

Config::Ceilings Config::CeilingsFor(int visible_index) const {
  Ceilings out;
  for (const ConfigCeiling& c : ceilings) {
    const Config& a = *c.limits;
    if (a.LimitFor(visible_index) < out.memory_limit) {
      out.memory_limit = a.LimitFor(visible_index);
      out.memory_source = c.source;
    }
    const uint32_t share = a.ShareFor(visible_index);
    if (share != 0 && (out.share_permille == 0 || share < out.share_permille)) {
      out.share_permille = share;
      out.share_source = c.source;
    }
    // An admin file that names no weight or priority allows the defaults.
    if (a.WeightCeiling() < out.weight) {
      out.weight = a.WeightCeiling();
      out.weight_source = c.source;
    }
    if (a.priority < out.priority || out.priority_source.empty()) {
      out.priority = std::min(out.priority, a.priority);
      out.priority_source = c.source;
    }
  }
  return out;
}

uint64_t Config::RequestedLimitFor(int visible_index) const {
  if (visible_index < 0) return 0;
  for (const auto& [index, limit] : memory_limit_by_index) {
    if (index == visible_index) return limit;
  }
  if (memory_limits.empty()) return memory_limit_all;
  if (static_cast<size_t>(visible_index) >= memory_limits.size()) return 0;
  return memory_limits[visible_index];
}

Status Config::ValidateAgainstDeviceCount(int device_count) const {
  for (const ConfigCeiling& c : ceilings) {
    if (Status s = c.limits->ValidateAgainstDeviceCount(device_count); !s.ok()) {
      return Status::Error(s.code, c.source + ": " + s.message);
    }
  }
  std::string n = std::to_string(device_count);
  if (!memory_limits.empty() && memory_limits.size() != static_cast<size_t>(device_count)) {
    return Status::Error(ErrorCode::kInval,
                         memory_limit_source + " lists " + std::to_string(memory_limits.size()) +
                             " limits but the process sees " + n +
                             " devices: give one limit for all devices or exactly one per device");
  }
  std::vector<std::pair<const char*, int>> indexed;
  for (const auto& entry : memory_limit_by_index) {
    indexed.emplace_back("CUDA_DEVICE_MEMORY_LIMIT_", entry.first);
  }
  for (const auto& entry : compute_share_by_index) {
    indexed.emplace_back("CUDA_DEVICE_SM_LIMIT_", entry.first);
  }
  for (const auto& [prefix, index] : indexed) {
    if (index >= device_count) {
      return Status::Error(ErrorCode::kInval, prefix + std::to_string(index) +
                                                  " is set but the process sees only " + n +
                                                  " devices (indices 0.." +
                                                  std::to_string(device_count - 1) + ")");
    }
  }
  return Status::Ok();
}

Status LoadEnvOption(const char* env, const EnvLookup& getenv_fn, Config* out) {
  try {
    const size_t option = OptionIndex(env);
    if (option < OptionTable().size()) {
      LoadState st{out};
      return ApplyEnvOption(option, getenv_fn, &st);
    }
    return Status::Error(ErrorCode::kInval, std::string("unknown option ") + env);
  } catch (...) {
    return InternalError();
  }
}

Status LoadConfig(const EnvLookup& getenv_fn, Config* out,
                  const std::vector<std::string>* env_names, const char* fallback_file,
                  std::span<const char* const> admin_files) {
  try {
    *out = Config{};
    Status s = env_names != nullptr
                   ? LoadConfigOrFail(getenv_fn, *env_names, fallback_file, admin_files, out)
                   : LoadConfigOrFail(getenv_fn, EnvironNames(), fallback_file, admin_files, out);
    if (!s.ok()) *out = Config{};
    return s;
  } catch (...) {
    // Nothing may escape into the application (bad_alloc, a throwing getenv_fn).
    return InternalError();
  }
}

Config::ComputePolicy Config::EffectivePolicy() const {
  if (compute_policy != ComputePolicy::kAuto) return compute_policy;
  bool any_share = compute_share_permille != 0;
  for (const auto& [index, permille] : compute_share_by_index) {
    any_share = any_share || permille != 0;
  }
  for (const ConfigCeiling& c : ceilings) {
    any_share = any_share || c.limits->EffectivePolicy() == ComputePolicy::kFixed;
  }
  if (any_share) return ComputePolicy::kFixed;
  if (compute_weight != 0 || high_priority()) return ComputePolicy::kWeighted;
  return ComputePolicy::kNative;
}

uint32_t Config::ShareFor(int visible_index) const {
  uint32_t share = RequestedShareFor(visible_index);
  for (const ConfigCeiling& c : ceilings) {
    const uint32_t cap = c.limits->ShareFor(visible_index);
    if (cap != 0) share = share == 0 ? cap : std::min(share, cap);
  }
  return share;
}

uint32_t Config::RequestedShareFor(int visible_index) const {
  for (const auto& [index, permille] : compute_share_by_index) {
    if (index == visible_index) return permille;
  }
  return compute_share_permille;
}

Config::ComputePolicy Config::EffectivePolicyFor(int visible_index) const {
  if (compute_policy != ComputePolicy::kAuto) return compute_policy;
  if (ShareFor(visible_index) != 0) return ComputePolicy::kFixed;
  if (compute_weight != 0 || high_priority()) return ComputePolicy::kWeighted;
  return ComputePolicy::kNative;
}

const char* PriorityName(Config::Priority p) {
  switch (p) {
    case Config::Priority::kHigh:
      return "high";
    case Config::Priority::kLow:
      return "low";
    case Config::Priority::kNormal:
      break;
  }
  return "normal";
}

bool ParsePriorityName(const std::string& text, Config::Priority* out) {
  const std::string v = config_internal::Lower(config_internal::Trim(text));
  for (auto p : {Config::Priority::kHigh, Config::Priority::kNormal, Config::Priority::kLow}) {
    if (v == PriorityName(p)) {
      *out = p;
      return true;
    }
  }
  return false;
}

}  // namespace vgpu
