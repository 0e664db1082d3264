#include "common/config/config.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>

#include "common/byte_size.h"

extern char** environ;  // NOLINT: POSIX

namespace vgpu {
namespace {

using Json = nlohmann::json;

constexpr size_t kMaxConfigFileBytes = 1 << 20;
constexpr size_t kMaxGroupChars = 100;
constexpr const char* kSizeExpected = "expected e.g. 8GiB, 512MiB, 1g or a byte count";

// ---------------------------------------------------------------------------
// Values as the parsers see them.

// One value of one option, from the environment or from the JSON file.
struct Input {
  std::string source;              // "VGPU_GROUP" or "/etc/vgpu.json: group"
  std::string text;                // the value as written (JSON arrays: joined)
  std::vector<std::string> items;  // list options: the comma-separated items
};

using ParseFn = bool (*)(const Input& in, Config* cfg, std::string* error);
// For an alias NAME_<i>: the value for visible device `index`.
using IndexedParseFn = bool (*)(int index, const Input& in, Config* cfg, std::string* error);

// How a value is written: a scalar is one string; a list is comma-separated in
// the environment and a string or an array of strings/integers in JSON.
enum class Kind { kScalar, kList };

struct OptionSpec {
  OptionInfo info;
  Kind kind;
  bool policy;  // setting it makes libvgpu more than a pass-through
  ParseFn parse;
  IndexedParseFn parse_indexed;  // for the alias ending in "_<i>", else null
};

// A value fit for a one-line message: control characters escaped, truncated.
std::string Printable(const std::string& s, size_t max_chars = 120) {
  std::string out;
  for (unsigned char c : s) {
    if (out.size() >= max_chars) return out + "...";
    if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out;
}

// "<source>='<value>' <problem>"
bool Fail(const Input& in, const std::string& problem, std::string* error) {
  *error = in.source + "='" + Printable(in.text) + "' " + problem;
  return false;
}

// As Fail, naming the offending item when the value is a list of several.
bool FailItem(const Input& in, const std::string& item, const std::string& problem,
              std::string* error) {
  if (in.items.size() <= 1) return Fail(in, problem, error);
  return Fail(in, "has item '" + Printable(item) + "' that " + problem, error);
}

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

// "" -> {}; "a, b" -> {"a", "b"}; "a,,b" -> {"a", "", "b"}.
std::vector<std::string> SplitList(const std::string& s) {
  std::vector<std::string> out;
  if (Trim(s).empty()) return out;
  size_t start = 0;
  while (true) {
    size_t comma = s.find(',', start);
    out.push_back(Trim(s.substr(start, comma - start)));
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Canonical decimal 0..max ("0", "15"); no sign, no leading zeros.
bool ParseIndex(const std::string& s, int max, int* out) {
  if (s.empty() || s.size() > 3 || (s.size() > 1 && s[0] == '0')) return false;
  int v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  if (v > max) return false;
  *out = v;
  return true;
}

bool HasControlChar(const std::string& s) {
  return std::any_of(s.begin(), s.end(), [](unsigned char c) { return c < 0x20 || c == 0x7f; });
}

// ---------------------------------------------------------------------------
// VGPU_VISIBLE_DEVICES

bool IsHex(const std::string& s, size_t from, size_t n) {
  for (size_t i = from; i < from + n; ++i) {
    if (!std::isxdigit(static_cast<unsigned char>(s[i]))) return false;
  }
  return true;
}

// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (any case) -> "GPU-" + lower-case.
bool ParseUuid(const std::string& s, std::string* out) {
  if (s.size() != 40 || Lower(s.substr(0, 4)) != "gpu-") return false;
  static constexpr size_t kGroups[] = {8, 4, 4, 4, 12};
  size_t pos = 4;
  for (size_t i = 0; i < 5; ++i) {
    if (!IsHex(s, pos, kGroups[i])) return false;
    pos += kGroups[i];
    if (i < 4 && s[pos++] != '-') return false;
  }
  *out = "GPU-" + Lower(s.substr(4));
  return true;
}

bool ParseDeviceId(const Input& in, const std::string& item, std::string* out, std::string* error) {
  int index = 0;
  if (ParseIndex(item, Config::kMaxDevices - 1, &index)) {
    *out = std::to_string(index);
    return true;
  }
  if (ParseUuid(item, out)) return true;
  if (Lower(item.substr(0, 4)) == "mig-") {
    return FailItem(in, item,
                    "is a MIG device, which vgpu does not virtualize: give GPU indices or "
                    "GPU-... UUIDs",
                    error);
  }
  return FailItem(in, item,
                  "is not a device: expected a comma-separated list of indices 0..15 or UUIDs "
                  "like GPU-8c6e1a2b-0f3d-4e5a-9b7c-1d2e3f4a5b6c",
                  error);
}

bool ParseVisibleDevices(const Input& in, Config* cfg, std::string* error) {
  if (in.items.size() > Config::kMaxDevices) {
    return Fail(in, "lists more than 16 devices", error);
  }
  std::vector<std::string> ids;
  for (const auto& item : in.items) {
    std::string id;
    if (!ParseDeviceId(in, item, &id, error)) return false;
    if (std::find(ids.begin(), ids.end(), id) != ids.end()) {
      return FailItem(in, item, "is listed twice: each device may appear once", error);
    }
    ids.push_back(id);
  }
  cfg->visible_devices = std::move(ids);
  cfg->visible_devices_set = true;
  return true;
}

// ---------------------------------------------------------------------------
// VGPU_DEVICE_MEMORY_LIMIT, CUDA_DEVICE_MEMORY_LIMIT, CUDA_DEVICE_MEMORY_LIMIT_<i>

bool ParseLimit(const Input& in, const std::string& item, uint64_t* out, std::string* error) {
  if (!ParseByteSize(item, out)) {
    return FailItem(in, item, std::string("is not a size: ") + kSizeExpected, error);
  }
  if (*out == 0) {
    return FailItem(in, item,
                    "is not a usable limit: 0 bytes would fail every allocation (unset the "
                    "variable for no limit)",
                    error);
  }
  return true;
}

bool ParseMemoryLimit(const Input& in, Config* cfg, std::string* error) {
  if (in.items.empty()) return Fail(in, std::string("is empty: ") + kSizeExpected, error);
  if (in.items.size() > Config::kMaxDevices) {
    return Fail(in, "lists more than 16 limits", error);
  }
  std::vector<uint64_t> limits;
  for (const auto& item : in.items) {
    uint64_t v = 0;
    if (!ParseLimit(in, item, &v, error)) return false;
    limits.push_back(v);
  }
  cfg->memory_limit_all = limits.size() == 1 ? limits[0] : Config::kNoLimit;
  if (limits.size() == 1) limits.clear();
  cfg->memory_limits = std::move(limits);
  cfg->memory_limit_source = in.source;
  return true;
}

// Sets device `index`'s value in a list kept sorted by index.
template <typename T>
void SetForIndex(std::vector<std::pair<int, T>>* by_index, int index, T v) {
  auto it = std::find_if(by_index->begin(), by_index->end(),
                         [index](const auto& p) { return p.first >= index; });
  if (it != by_index->end() && it->first == index) {
    it->second = v;
  } else {
    by_index->insert(it, {index, v});
  }
}

bool ParseMemoryLimitForIndex(int index, const Input& in, Config* cfg, std::string* error) {
  uint64_t v = 0;
  if (Trim(in.text).empty()) return Fail(in, std::string("is empty: ") + kSizeExpected, error);
  if (!ParseLimit(in, in.text, &v, error)) return false;
  SetForIndex(&cfg->memory_limit_by_index, index, v);
  return true;
}

// ---------------------------------------------------------------------------
// Scalars

bool ParseGroup(const Input& in, Config* cfg, std::string* error) {
  const std::string& g = in.text;
  bool ok = !g.empty() && g.size() <= kMaxGroupChars;
  for (char c : g) {
    ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-');
  }
  if (!ok) return Fail(in, "is not a group name: use 1-100 characters from [A-Za-z0-9._-]", error);
  cfg->group = g;
  return true;
}

bool ParseLogLevel(const Input& in, Config* cfg, std::string* error) {
  static constexpr std::pair<const char*, LogLevel> kLevels[] = {
      {"off", LogLevel::kOff},   {"error", LogLevel::kError}, {"warn", LogLevel::kWarn},
      {"info", LogLevel::kInfo}, {"debug", LogLevel::kDebug},
  };
  std::string v = Lower(Trim(in.text));
  for (const auto& [name, level] : kLevels) {
    if (v == name) {
      cfg->log_level = level;
      return true;
    }
  }
  return Fail(in, "is not a log level: expected off, error, warn, info or debug", error);
}

bool ParsePath(const Input& in, std::string* out, std::string* error) {
  if (in.text.empty()) return Fail(in, "is empty: expected a file path", error);
  if (HasControlChar(in.text)) return Fail(in, "contains control characters", error);
  *out = in.text;
  return true;
}

bool ParseLogFile(const Input& in, Config* cfg, std::string* error) {
  if (in.text.empty()) {
    return Fail(in, "is empty: expected a file path or 'stderr' (unset it for no log)", error);
  }
  return ParsePath(in, &cfg->log_file, error);
}

bool ParseConfigPath(const Input& in, Config* cfg, std::string* error) {
  return ParsePath(in, &cfg->config_file, error);
}

bool ParseRealLibcuda(const Input& in, Config* cfg, std::string* error) {
  return ParsePath(in, &cfg->real_libcuda, error);
}

bool ParseRealLibnvml(const Input& in, Config* cfg, std::string* error) {
  return ParsePath(in, &cfg->real_libnvml, error);
}

// An empty value means the default, as it did before these joined the table:
// a unit file that writes VGPU_RUN_DIR= must not make libvgpu fail closed.
bool ParseOptionalDir(const Input& in, std::string* out, std::string* error) {
  if (in.text.empty()) {
    out->clear();
    return true;
  }
  return ParsePath(in, out, error);
}

bool ParseRunDir(const Input& in, Config* cfg, std::string* error) {
  return ParseOptionalDir(in, &cfg->run_dir, error);
}

bool ParseCheckpointDir(const Input& in, Config* cfg, std::string* error) {
  return ParseOptionalDir(in, &cfg->checkpoint_dir, error);
}

// ---------------------------------------------------------------------------
// Compute share

// Digits with at most one '.', at least one digit ("30", "12.5"). strtod alone
// would also take a sign, hex ("0x1e"), exponents ("1e2") and "inf", which
// nobody writes as a percentage: such a value is a mistake, not a share.
bool IsPlainDecimal(const std::string& s) {
  size_t digits = 0;
  size_t dots = 0;
  for (char c : s) {
    if (c >= '0' && c <= '9') {
      ++digits;
    } else if (c == '.') {
      ++dots;
    } else {
      return false;
    }
  }
  return digits > 0 && dots <= 1;
}

bool IsDigits(const std::string& s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](unsigned char c) { return c >= '0' && c <= '9'; });
}

// A share in permille; 0: no cap.
bool ParseSharePermille(const Input& in, uint32_t* permille, std::string* error) {
  std::string v = Trim(in.text);
  if (!v.empty() && v.back() == '%') v.pop_back();
  double pct = IsPlainDecimal(v) ? std::strtod(v.c_str(), nullptr) : -1;
  // HAMi-core reads 0 and anything at or above 100 in its variables
  // (CUDA_DEVICE_SM_LIMIT and CUDA_DEVICE_SM_LIMIT_<i>) as "no limit"; a HAMi
  // deployment moved over keeps its meaning.
  if (in.source.rfind("CUDA_DEVICE_SM_LIMIT", 0) == 0 && (pct == 0 || pct >= 100)) {
    *permille = 0;
    return true;
  }
  if (!(pct > 0 && pct <= 100)) {
    return Fail(in, "is not a share: expected a percentage above 0 and at most 100, e.g. 30", error);
  }
  *permille = std::max<uint32_t>(1, static_cast<uint32_t>(pct * 10 + 0.5));
  return true;
}

bool ParseComputeShare(const Input& in, Config* cfg, std::string* error) {
  return ParseSharePermille(in, &cfg->compute_share_permille, error);
}

bool ParseComputeShareForIndex(int index, const Input& in, Config* cfg, std::string* error) {
  uint32_t permille = 0;
  if (!ParseSharePermille(in, &permille, error)) return false;
  SetForIndex(&cfg->compute_share_by_index, index, permille);
  return true;
}

bool ParseComputeWeight(const Input& in, Config* cfg, std::string* error) {
  std::string v = Trim(in.text);
  // Digits only: strtol would also take a sign and leading white space.
  long w = IsDigits(v) ? std::strtol(v.c_str(), nullptr, 10) : 0;
  if (w < 1 || w > 1000) {
    return Fail(in, "is not a weight: expected an integer from 1 to 1000", error);
  }
  cfg->compute_weight = static_cast<uint32_t>(w);
  return true;
}

bool ParseSwitch(const Input& in, bool* out, std::string* error) {
  std::string v = Lower(Trim(in.text));
  if (v == "on" || v == "1" || v == "true") {
    *out = true;
  } else if (v == "off" || v == "0" || v == "false") {
    *out = false;
  } else {
    return Fail(in, "is not a switch: expected on or off", error);
  }
  return true;
}

bool ParseVmm(const Input& in, Config* cfg, std::string* error) {
  return ParseSwitch(in, &cfg->vmm, error);
}

bool ParseTraceAllocations(const Input& in, Config* cfg, std::string* error) {
  return ParseSwitch(in, &cfg->trace_allocations, error);
}

bool ParsePriority(const Input& in, Config* cfg, std::string* error) {
  std::string v = Lower(Trim(in.text));
  // HAMi-core's CUDA_TASK_PRIORITY is a number: 0 is its high priority, 1 (its
  // default) and above are lower ones. vgpu has two levels, so 0 maps to high
  // and every other level to normal.
  if (in.source == "CUDA_TASK_PRIORITY") {
    if (!IsDigits(v) || v.size() > 3) {
      return Fail(in, "is not a HAMi task priority: expected 0 (high) or 1 (normal)", error);
    }
    cfg->high_priority = std::strtol(v.c_str(), nullptr, 10) == 0;
    return true;
  }
  if (v != "high" && v != "normal") return Fail(in, "is not a priority: expected high or normal", error);
  cfg->high_priority = v == "high";
  return true;
}

bool ParseComputePolicy(const Input& in, Config* cfg, std::string* error) {
  static constexpr std::pair<const char*, Config::ComputePolicy> kPolicies[] = {
      {"fixed", Config::ComputePolicy::kFixed},
      {"weighted", Config::ComputePolicy::kWeighted},
      {"native", Config::ComputePolicy::kNative},
  };
  std::string v = Lower(Trim(in.text));
  for (const auto& [name, policy] : kPolicies) {
    if (v == name) {
      cfg->compute_policy = policy;
      return true;
    }
  }
  return Fail(in, "is not a policy: expected fixed, weighted or native", error);
}

bool ParseSchedRegion(const Input& in, Config* cfg, std::string* error) {
  const std::string& v = in.text;
  bool ok = v.size() >= 2 && v.size() <= 100 && v[0] == '/';
  for (size_t i = 1; i < v.size(); ++i) {
    char c = v[i];
    ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-');
  }
  if (!ok) return Fail(in, "is not a shared-memory name: expected /name with [A-Za-z0-9._-]", error);
  cfg->sched_region = v;
  return true;
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
      "device yields; normal otherwise (HAMi-core's CUDA_TASK_PRIORITY: 0 is high, 1 and "
      "above normal)."},
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
    {{"VGPU_SCHED_REGION", "", "sched_region", "/vgpu-sched-<uid>",
      "Shared-memory region of the compute scheduler; processes that share GPUs must name the "
      "same one."},
     Kind::kScalar,
     false,
     ParseSchedRegion,
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
    {{"VGPU_CONFIG", "", "", "none",
      "Path of a JSON file holding any of the other options; environment variables override "
      "it."},
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
constexpr size_t kNumOptions = std::size(kOptions);

// ---------------------------------------------------------------------------
// Loading

// What LoadConfig has set so far, per kOptions entry.
struct LoadState {
  Config* cfg;
  bool set[kNumOptions] = {};
};

bool Apply(size_t option, Input in, LoadState* st, std::string* error) {
  const OptionSpec& spec = kOptions[option];
  if (spec.kind == Kind::kScalar) {
    in.items = {in.text};
  }
  if (!spec.parse(in, st->cfg, error)) return false;
  st->set[option] = true;
  return true;
}

std::vector<std::string> AliasList(const OptionSpec& spec) { return SplitList(spec.info.aliases); }

bool IsIndexedAlias(const std::string& alias) {
  return alias.size() > 4 && alias.compare(alias.size() - 4, 4, "_<i>") == 0;
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

bool ApplyEnvOption(size_t option, const EnvLookup& getenv_fn, LoadState* st, std::string* error) {
  std::string name = FindEnvName(kOptions[option], getenv_fn);
  if (name.empty()) return true;
  return Apply(option, EnvInput(name, getenv_fn(name.c_str()), kOptions[option].kind), st, error);
}

// NAME_<i> for i in 0..15, and a rejection of any other NAME_* that is set.
bool ApplyIndexedAlias(size_t option, const std::string& alias, const EnvLookup& getenv_fn,
                       const std::vector<std::string>& env_names, LoadState* st,
                       std::string* error) {
  const std::string prefix = alias.substr(0, alias.size() - 3);  // "NAME_"
  for (const auto& name : env_names) {
    int index = 0;
    if (name.compare(0, prefix.size(), prefix) != 0 || getenv_fn(name.c_str()) == nullptr) continue;
    if (!ParseIndex(name.substr(prefix.size()), Config::kMaxDevices - 1, &index)) {
      *error = Printable(name) + " is not a per-device variable: the suffix after " + prefix +
               " must be a device index 0..15";
      return false;
    }
  }
  for (int i = 0; i < Config::kMaxDevices; ++i) {
    std::string name = prefix + std::to_string(i);
    const char* value = getenv_fn(name.c_str());
    if (value == nullptr) continue;
    if (!kOptions[option].parse_indexed(i, EnvInput(name, value, Kind::kScalar), st->cfg, error)) {
      return false;
    }
    st->set[option] = true;
  }
  return true;
}

bool ApplyIndexedAliases(size_t option, const EnvLookup& getenv_fn,
                         const std::vector<std::string>& env_names, LoadState* st,
                         std::string* error) {
  for (const auto& alias : AliasList(kOptions[option])) {
    if (!IsIndexedAlias(alias)) continue;
    if (!ApplyIndexedAlias(option, alias, getenv_fn, env_names, st, error)) return false;
  }
  return true;
}

// --- the JSON file ---

std::string FileSource(const std::string& path) { return "VGPU_CONFIG file '" + path + "'"; }

// Opens `path` only if it is a regular file. O_NONBLOCK keeps the open of a
// FIFO (which would wait for a writer for ever, inside cuInit) from blocking;
// the type is checked on the opened descriptor, so a swap after a stat cannot
// slip a FIFO or a device in.
FILE* OpenRegularFile(const std::string& path, std::string* error) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    *error = "VGPU_CONFIG='" + Printable(path) + "' cannot be read: " + std::strerror(errno);
    return nullptr;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    *error = "VGPU_CONFIG='" + Printable(path) + "' is not a regular file";
    ::close(fd);
    return nullptr;
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  FILE* f = ::fdopen(fd, "r");
  if (f == nullptr) {
    *error = "VGPU_CONFIG='" + Printable(path) + "' cannot be read: " + std::strerror(errno);
    ::close(fd);
  }
  return f;
}

bool ReadFile(const std::string& path, std::string* text, std::string* error) {
  FILE* f = OpenRegularFile(path, error);
  if (f == nullptr) return false;
  char buf[4096];
  size_t n = 0;
  errno = 0;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0 && text->size() <= kMaxConfigFileBytes) {
    text->append(buf, n);
  }
  int read_errno = std::ferror(f) != 0 ? (errno != 0 ? errno : EIO) : 0;
  std::fclose(f);
  if (read_errno != 0) {
    *error = "VGPU_CONFIG='" + Printable(path) + "' cannot be read: " + std::strerror(read_errno);
    return false;
  }
  if (text->size() > kMaxConfigFileBytes) {
    *error = FileSource(Printable(path)) + " is larger than 1 MiB";
    return false;
  }
  return true;
}

// Parses `text` as one JSON object whose keys appear once each.
bool ParseJsonObject(const std::string& path, const std::string& text, Json* out,
                     std::string* error) {
  std::string duplicate;
  auto callback = [&duplicate, seen = std::set<std::string>()](int depth, Json::parse_event_t event,
                                                               Json& parsed) mutable {
    if (event == Json::parse_event_t::key && depth == 1 && parsed.is_string() &&
        !seen.insert(parsed.get<std::string>()).second && duplicate.empty()) {
      duplicate = parsed.get<std::string>();
    }
    return true;
  };
  try {
    *out = Json::parse(text, callback);
  } catch (const std::exception& e) {
    *error = FileSource(Printable(path)) + " is not valid JSON: " + Printable(e.what(), 400);
    return false;
  }
  if (!out->is_object()) {
    *error = FileSource(Printable(path)) + " must hold a JSON object, e.g. {\"group\": \"job42\"}";
    return false;
  }
  if (!duplicate.empty()) {
    *error = FileSource(Printable(path)) + " has key '" + Printable(duplicate) + "' twice";
    return false;
  }
  return true;
}

std::string JsonKeyList() {
  std::string out;
  for (const auto& spec : kOptions) {
    if (spec.info.json_key[0] == '\0') continue;
    out += (out.empty() ? "" : ", ") + std::string(spec.info.json_key);
  }
  return out;
}

int OptionForJsonKey(const std::string& key) {
  for (size_t i = 0; i < kNumOptions; ++i) {
    if (kOptions[i].info.json_key[0] != '\0' && key == kOptions[i].info.json_key) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

// One element of a JSON list value: a string or a non-negative integer.
bool JsonItem(const Json& v, std::string* out) {
  if (v.is_string()) {
    *out = v.get<std::string>();
    return true;
  }
  if (v.is_number_unsigned()) {
    *out = std::to_string(v.get<uint64_t>());
    return true;
  }
  return false;
}

bool JsonListInput(const Json& v, Input* in) {
  std::string item;
  if (!v.is_array()) {
    if (!JsonItem(v, &in->text)) return false;
    in->items = SplitList(in->text);
    return true;
  }
  for (const auto& element : v) {
    if (!JsonItem(element, &item)) return false;
    in->text += (in->items.empty() ? "" : ",") + item;
    in->items.push_back(Trim(item));
  }
  return true;
}

// The JSON value of an option as parser input; false if its type is wrong.
bool JsonInput(const OptionSpec& spec, const Json& v, Input* in) {
  if (spec.kind == Kind::kList) return JsonListInput(v, in);
  if (!v.is_string()) return false;
  in->text = v.get<std::string>();
  return true;
}

std::string JsonTypeExpected(Kind kind) {
  return kind == Kind::kList ? "a string or an array of strings and non-negative integers"
                             : "a string";
}

bool ApplyJsonKey(const std::string& path, const std::string& key, const Json& value, LoadState* st,
                  std::string* error) {
  int option = OptionForJsonKey(key);
  std::string source = FileSource(Printable(path));
  if (option < 0) {
    *error = source + " has unknown key '" + Printable(key) + "': expected " + JsonKeyList();
    return false;
  }
  const OptionSpec& spec = kOptions[option];
  Input in{source + ": " + key, "", {}};
  if (!JsonInput(spec, value, &in)) {
    *error = source + ": " + key + " is " + value.type_name() + ": expected " +
             JsonTypeExpected(spec.kind);
    return false;
  }
  return Apply(static_cast<size_t>(option), std::move(in), st, error);
}

bool ApplyJsonFile(const std::string& path, LoadState* st, std::string* error) {
  std::string text;
  Json root;
  if (!ReadFile(path, &text, error) || !ParseJsonObject(path, text, &root, error)) return false;
  for (const auto& [key, value] : root.items()) {
    if (!ApplyJsonKey(path, key, value, st, error)) return false;
  }
  return true;
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

size_t ConfigOption() {
  for (size_t i = 0; i < kNumOptions; ++i) {
    if (std::strcmp(kOptions[i].info.env, "VGPU_CONFIG") == 0) return i;
  }
  return kNumOptions;  // unreachable: the table has it
}

bool LoadConfigOrFail(const EnvLookup& getenv_fn, const std::vector<std::string>& env_names,
                      Config* out, std::string* error) {
  LoadState st{out};
  // The file first (lowest precedence after the defaults), then the environment.
  if (!ApplyEnvOption(ConfigOption(), getenv_fn, &st, error)) return false;
  if (!out->config_file.empty() && !ApplyJsonFile(out->config_file, &st, error)) return false;
  for (size_t i = 0; i < kNumOptions; ++i) {
    if (i != ConfigOption() && !ApplyEnvOption(i, getenv_fn, &st, error)) return false;
    if (!ApplyIndexedAliases(i, getenv_fn, env_names, &st, error)) return false;
  }
  for (size_t i = 0; i < kNumOptions; ++i) {
    out->configured = out->configured || (st.set[i] && kOptions[i].policy);
  }
  return true;
}

}  // namespace

uint64_t Config::LimitFor(int visible_index) const {
  if (visible_index < 0) return 0;
  for (const auto& [index, limit] : memory_limit_by_index) {
    if (index == visible_index) return limit;
  }
  if (memory_limits.empty()) return memory_limit_all;
  if (static_cast<size_t>(visible_index) >= memory_limits.size()) return 0;
  return memory_limits[visible_index];
}

bool Config::ValidateAgainstDeviceCount(int device_count, std::string* error) const {
  std::string n = std::to_string(device_count);
  if (!memory_limits.empty() && memory_limits.size() != static_cast<size_t>(device_count)) {
    *error = memory_limit_source + " lists " + std::to_string(memory_limits.size()) +
             " limits but the process sees " + n +
             " devices: give one limit for all devices or exactly one per device";
    return false;
  }
  std::vector<std::pair<const char*, int>> indexed;
  for (const auto& entry : memory_limit_by_index) indexed.emplace_back("CUDA_DEVICE_MEMORY_LIMIT_", entry.first);
  for (const auto& entry : compute_share_by_index) indexed.emplace_back("CUDA_DEVICE_SM_LIMIT_", entry.first);
  for (const auto& [prefix, index] : indexed) {
    if (index >= device_count) {
      *error = prefix + std::to_string(index) + " is set but the process sees only " + n +
               " devices (indices 0.." + std::to_string(device_count - 1) + ")";
      return false;
    }
  }
  return true;
}

const std::vector<OptionInfo>& Options() {
  static const std::vector<OptionInfo> options = [] {
    std::vector<OptionInfo> v;
    for (const auto& spec : kOptions) v.push_back(spec.info);
    return v;
  }();
  return options;
}

bool IsConfigVariable(const std::string& name) {
  for (const auto& spec : kOptions) {
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

bool LoadEnvOption(const char* env, const EnvLookup& getenv_fn, Config* out,
                   std::string* error) {
  try {
    for (size_t i = 0; i < kNumOptions; ++i) {
      if (std::strcmp(kOptions[i].info.env, env) != 0) continue;
      LoadState st{out};
      return ApplyEnvOption(i, getenv_fn, &st, error);
    }
    *error = std::string("unknown option ") + env;
  } catch (...) {
    *error = "vgpu configuration could not be read (internal error)";
  }
  return false;
}

bool LoadConfig(const EnvLookup& getenv_fn, Config* out, std::string* error,
                const std::vector<std::string>* env_names) {
  try {
    *out = Config{};
    bool ok = env_names != nullptr ? LoadConfigOrFail(getenv_fn, *env_names, out, error)
                                   : LoadConfigOrFail(getenv_fn, EnvironNames(), out, error);
    if (!ok) *out = Config{};
    return ok;
  } catch (...) {
    // Nothing may escape into the application (bad_alloc, a throwing getenv_fn).
    *error = "vgpu configuration could not be read (internal error)";
    return false;
  }
}

}  // namespace vgpu

namespace vgpu {

Config::ComputePolicy Config::EffectivePolicy() const {
  if (compute_policy != ComputePolicy::kAuto) return compute_policy;
  bool any_share = compute_share_permille != 0;
  for (const auto& [index, permille] : compute_share_by_index) any_share = any_share || permille != 0;
  if (any_share) return ComputePolicy::kFixed;
  if (compute_weight != 0 || high_priority) return ComputePolicy::kWeighted;
  return ComputePolicy::kNative;
}

uint32_t Config::ShareFor(int visible_index) const {
  for (const auto& [index, permille] : compute_share_by_index) {
    if (index == visible_index) return permille;
  }
  return compute_share_permille;
}

Config::ComputePolicy Config::EffectivePolicyFor(int visible_index) const {
  if (compute_policy != ComputePolicy::kAuto) return compute_policy;
  if (ShareFor(visible_index) != 0) return ComputePolicy::kFixed;
  if (compute_weight != 0 || high_priority) return ComputePolicy::kWeighted;
  return ComputePolicy::kNative;
}

}  // namespace vgpu
