#include "ctl/oci_hook/oci_state.h"

#include <array>
#include <cstdio>
#include <exception>
#include <nlohmann/json.hpp>
#include <utility>

#include "common/config/config.h"
#include "common/container_paths.h"

namespace vgpu::oci_hook {
namespace {

using json = nlohmann::json;

// Deeper nesting than any real state or config.json: refused before it costs
// stack or time.
constexpr int kMaxJsonDepth = 64;
constexpr size_t kMaxIdChars = 1024;

struct TooDeep : std::exception {};

// The annotations the hook understands, and the option each one sets.
struct AnnotationOption {
  std::string_view suffix;  // after "vgpu.io/"
  const char* env;          // the option's VGPU_* name (common/config)
};
constexpr std::array<AnnotationOption, 4> kAnnotationOptions = {{
    {"memory-limit", "VGPU_DEVICE_MEMORY_LIMIT"},
    {"compute-share", "VGPU_COMPUTE_SHARE"},
    {"compute-weight", "VGPU_COMPUTE_WEIGHT"},
    {"priority", "VGPU_PRIORITY"},
}};

Status Invalid(std::string message) { return Status::Error(ErrorCode::kInval, std::move(message)); }

// Parses one JSON object; `what` names the input in messages.
Status ParseObject(std::string_view text, const char* what, json* out) {
  auto limit_depth = [](int depth, json::parse_event_t, json&) {
    if (depth > kMaxJsonDepth) throw TooDeep();
    return true;
  };
  try {
    *out = json::parse(text.begin(), text.end(), limit_depth);
  } catch (const TooDeep&) {
    return Invalid(std::string(what) + " is nested deeper than " + std::to_string(kMaxJsonDepth));
  } catch (const std::exception& e) {
    return Invalid(std::string(what) + " is not valid JSON: " + Printable(e.what(), 200));
  }
  if (!out->is_object()) return Invalid(std::string(what) + " is not a JSON object");
  return Status::Ok();
}

// A string member; absent is fine unless `required`.
Status StringField(const json& obj, const char* key, const std::string& where, bool required,
                   std::string* out) {
  auto it = obj.find(key);
  if (it == obj.end()) {
    return required ? Invalid(where + " has no \"" + key + "\"") : Status::Ok();
  }
  if (!it->is_string()) return Invalid(where + ": \"" + key + "\" is not a string");
  *out = it->get<std::string>();
  return Status::Ok();
}

Status ParseAnnotations(const json& obj, const std::string& where, Annotations* out) {
  auto it = obj.find("annotations");
  if (it == obj.end() || it->is_null()) return Status::Ok();
  if (!it->is_object()) return Invalid(where + ": \"annotations\" is not an object");
  for (const auto& [key, value] : it->items()) {
    if (!value.is_string()) {
      return Invalid(where + ": annotation '" + Printable(key) + "' is not a string");
    }
    (*out)[key] = value.get<std::string>();
  }
  return Status::Ok();
}

Status ParseEnv(const json& config, std::vector<std::string>* out) {
  auto process = config.find("process");
  if (process == config.end() || process->is_null()) return Status::Ok();
  if (!process->is_object()) return Invalid("config.json: \"process\" is not an object");
  auto env = process->find("env");
  if (env == process->end() || env->is_null()) return Status::Ok();
  if (!env->is_array()) return Invalid("config.json: \"process.env\" is not an array");
  for (const auto& entry : *env) {
    if (!entry.is_string())
      return Invalid("config.json: an entry of \"process.env\" is not a string");
    out->push_back(entry.get<std::string>());
  }
  return Status::Ok();
}

// process.user.uid/gid: unsigned 32-bit numbers, 0 when absent.
Status ParseUser(const json& config, BundleConfig* out) {
  auto process = config.find("process");
  if (process == config.end() || !process->is_object()) return Status::Ok();
  auto user = process->find("user");
  if (user == process->end() || user->is_null()) return Status::Ok();
  if (!user->is_object()) return Invalid("config.json: \"process.user\" is not an object");
  for (auto [key, field] : {std::pair{"uid", &out->uid}, std::pair{"gid", &out->gid}}) {
    auto v = user->find(key);
    if (v == user->end()) continue;
    if (!v->is_number_unsigned() || v->get<unsigned long long>() > 0xfffffffeULL) {
      return Invalid(std::string("config.json: process.user.") + key + " is not a user id");
    }
    *field = v->get<long long>();
  }
  return Status::Ok();
}

bool HasControlChar(std::string_view s) {
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f) return true;
  }
  return false;
}

// Runs one option's value through libvgpu's parser, as if it were the only
// variable set: the hook accepts exactly what libvgpu will.
Status CheckOption(const char* env, const std::string& value, const std::string& source) {
  auto lookup = [env, &value](const char* name) -> const char* {
    return std::string_view(name) == env ? value.c_str() : nullptr;
  };
  const std::vector<std::string> no_names;
  Config cfg;
  // No fallback file: the hook runs on the host, whose files are not the container's.
  if (Status s = LoadConfig(lookup, &cfg, &no_names, nullptr, {}); !s.ok()) {
    return Invalid(source + ": " + s.message);
  }
  return Status::Ok();
}

const char* JsonKeyOf(const char* env) {
  for (const OptionInfo& o : Options()) {
    if (std::string_view(o.env) == env) return o.json_key;
  }
  return "";
}

// The option whose JSON key is `key`; null if none.
const OptionInfo* OptionOfJsonKey(std::string_view key) {
  for (const OptionInfo& o : Options()) {
    if (*o.json_key != '\0' && key == o.json_key) return &o;
  }
  return nullptr;
}

std::string KnownJsonKeys() {
  std::string out;
  for (const OptionInfo& o : Options()) {
    if (*o.json_key != '\0') out += (out.empty() ? "" : ", ") + std::string(o.json_key);
  }
  return out;
}

// The option an annotation vgpu.io/<suffix> sets; null if none.
const AnnotationOption* OptionOfAnnotation(std::string_view key) {
  for (const auto& a : kAnnotationOptions) {
    if (key.substr(kAnnotationPrefix.size()) == a.suffix) return &a;
  }
  return nullptr;
}

std::string KnownAnnotations() {
  std::string out;
  for (const auto& a : kAnnotationOptions) {
    out += (out.empty() ? "" : ", ") + std::string(kAnnotationPrefix) + std::string(a.suffix);
  }
  return out;
}

// The value the container's environment gives option `o` by one of its
// HAMi-core names (not the per-device NAME_<i> ones: the file has no key for
// them, and they keep working in processes that keep their environment).
bool HamiValue(const OptionInfo& o, const std::vector<std::string>& env, std::string* alias,
               std::string* value) {
  for (const std::string& name : ProcessAliases(o)) {
    if (!EnvValue(env, name, value)) continue;
    *alias = name;
    return true;
  }
  return false;
}

// Sets option `env` in `out` to the container's VGPU_* variable if it has
// one, else to `fallback` (from `fallback_source`); checked either way.
Status SetOption(const char* env, const std::vector<std::string>& container_env,
                 const std::string& fallback, const std::string& fallback_source, json* out) {
  std::string value = fallback;
  std::string source = fallback_source;
  if (EnvValue(container_env, env, &value)) source = std::string("process.env ") + env;
  Status s = CheckOption(env, value, source);
  if (s.ok()) (*out)[JsonKeyOf(env)] = value;
  return s;
}

}  // namespace

std::string Printable(std::string_view s, size_t max_chars) {
  std::string out;
  for (unsigned char c : s.substr(0, max_chars)) {
    if (c < 0x20 || c == 0x7f || c == '\\') {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (s.size() > max_chars) out += "...";
  return out;
}

Status ParseClaimFile(std::string_view text, const std::string& path, ClaimOptions* out) {
  *out = ClaimOptions{};
  out->path = path;
  const std::string where = "claim file " + Printable(path);
  try {
    // Keys are checked as they are read: nlohmann keeps only the last of a
    // key given twice, and which of two limits the writer meant is unknown.
    std::string twice;
    auto check = [&twice, seen = std::map<std::string, bool>()](int depth, json::parse_event_t e,
                                                                json& parsed) mutable {
      if (depth > kMaxJsonDepth) throw TooDeep();
      if (e == json::parse_event_t::key && depth == 1 && parsed.is_string() &&
          !seen.emplace(parsed.get<std::string>(), true).second && twice.empty()) {
        twice = parsed.get<std::string>();
      }
      return true;
    };
    json obj;
    try {
      obj = json::parse(text.begin(), text.end(), check);
    } catch (const TooDeep&) {
      return Invalid(where + " is nested too deeply");
    } catch (const json::exception& e) {
      return Invalid(where + " is not valid JSON: " + Printable(e.what(), 200));
    }
    if (!obj.is_object()) return Invalid(where + " is not a JSON object");
    if (!twice.empty()) return Invalid(where + " has key '" + Printable(twice) + "' twice");
    for (const auto& [key, value] : obj.items()) {
      const OptionInfo* o = OptionOfJsonKey(key);
      if (o == nullptr) {
        return Invalid(where + " has unknown key '" + Printable(key) + "': expected " +
                       KnownJsonKeys());
      }
      if (!value.is_string()) {
        return Invalid(where + ": " + key + " is " + value.type_name() + ": expected a string");
      }
      const std::string v = value.get<std::string>();
      // The node's region is fixed for every container (BuildContainerLimits).
      if (key == "sched_region" && v != kNodeSchedRegion) {
        return Invalid(where + ": sched_region '" + Printable(v) + "' is not the node's (" +
                       std::string(kNodeSchedRegion) + ")");
      }
      if (Status s = CheckOption(o->env, v, where + ": " + key); !s.ok()) return s;
      out->values[key] = v;
    }
    return Status::Ok();
  } catch (const std::exception& e) {
    return Status::Error(ErrorCode::kIo, std::string("internal error: ") + Printable(e.what()));
  }
}

Status ParseState(std::string_view text, ContainerState* out) {
  *out = ContainerState{};
  json state;
  Status s = ParseObject(text, "the container state on stdin", &state);
  const std::string where = "the container state";
  if (s.ok()) s = StringField(state, "id", where, true, &out->id);
  if (s.ok()) s = StringField(state, "bundle", where, true, &out->bundle);
  if (s.ok()) s = StringField(state, "status", where, false, &out->status);
  if (s.ok()) s = ParseAnnotations(state, where, &out->annotations);
  if (!s.ok()) return s;
  if (out->id.empty() || out->id.size() > kMaxIdChars || HasControlChar(out->id)) {
    return Invalid("the container state has an invalid id '" + Printable(out->id) + "'");
  }
  if (out->bundle.empty() || out->bundle[0] != '/' || HasControlChar(out->bundle)) {
    return Invalid("the container state's bundle '" + Printable(out->bundle) +
                   "' is not an absolute path");
  }
  auto pid = state.find("pid");
  if (pid != state.end() && !pid->is_null()) {
    if (!pid->is_number_integer()) return Invalid("the container state's pid is not an integer");
    out->pid = pid->get<long long>();
  }
  return Status::Ok();
}

Status ParseBundleConfig(std::string_view text, const std::string& bundle, BundleConfig* out) {
  *out = BundleConfig{};
  json config;
  Status s = ParseObject(text, "config.json", &config);
  if (!s.ok()) return s;
  auto root = config.find("root");
  if (root == config.end() || !root->is_object())
    return Invalid("config.json has no \"root\" object");
  std::string path;
  s = StringField(*root, "path", "config.json: root", true, &path);
  if (!s.ok()) return s;
  if (path.empty() || HasControlChar(path)) {
    return Invalid("config.json: root.path '" + Printable(path) + "' is not a path");
  }
  // The runtime spec: a relative root.path is relative to the bundle.
  out->rootfs = path[0] == '/' ? path : bundle + "/" + path;
  s = ParseEnv(config, &out->env);
  if (s.ok()) s = ParseUser(config, out);
  if (s.ok()) s = ParseAnnotations(config, "config.json", &out->annotations);
  return s;
}

Annotations MergedAnnotations(const ContainerState& state, const BundleConfig& config) {
  Annotations out = state.annotations;
  for (const auto& [key, value] : config.annotations) out[key] = value;
  return out;
}

bool EnvValue(const std::vector<std::string>& env, std::string_view name, std::string* value) {
  bool found = false;
  for (const std::string& entry : env) {
    if (entry.size() > name.size() && entry.compare(0, name.size(), name) == 0 &&
        entry[name.size()] == '=') {
      *value = entry.substr(name.size() + 1);
      found = true;
    }
  }
  return found;
}

bool AsksForVgpu(const Annotations& annotations, const std::vector<std::string>& env) {
  for (const auto& [key, value] : annotations) {
    if (key.starts_with(kAnnotationPrefix)) return true;
  }
  for (const std::string& entry : env) {
    if (entry.starts_with("VGPU_")) return true;
  }
  return false;
}

Status CheckConfigReachable(const Annotations& annotations, const std::vector<std::string>& env,
                            bool claim) {
  // Unset, libvgpu reads kContainerConfig by itself (common/config).
  std::string named;
  if (!EnvValue(env, "VGPU_CONFIG", &named) || named == kContainerConfig) return Status::Ok();
  if (claim) {
    return Invalid("the container runs under a claim but its VGPU_CONFIG=" + Printable(named) +
                   " names another file, so libvgpu would never read the claim's options: "
                   "unset VGPU_CONFIG or set it to " +
                   std::string(kContainerConfig));
  }
  for (const auto& [key, value] : annotations) {
    if (!key.starts_with(kAnnotationPrefix)) continue;
    return Invalid("annotation " + Printable(key) +
                   " is set but the container's VGPU_CONFIG=" + Printable(named) +
                   " names another file, so libvgpu would never read it: "
                   "unset VGPU_CONFIG or set it to " +
                   std::string(kContainerConfig));
  }
  return Status::Ok();
}

Status BuildContainerConfig(const std::string& id, const Annotations& annotations,
                            const std::vector<std::string>& env, std::string* json_text,
                            const ClaimOptions* claim) {
  try {
    json file = json::object();
    for (const auto& [key, value] : annotations) {
      if (!key.starts_with(kAnnotationPrefix)) continue;
      const AnnotationOption* option = OptionOfAnnotation(key);
      // A typo (vgpu.io/memory-limt) must not leave the container unlimited.
      if (option == nullptr) {
        return Invalid("unknown annotation '" + Printable(key) + "': expected " +
                       KnownAnnotations());
      }
      Status s = SetOption(option->env, env, value, "annotation " + key, &file);
      if (!s.ok()) return s;
    }
    // The claim's options are the annotations' kind of ask, the later word.
    const std::string* claim_group = claim != nullptr ? claim->group() : nullptr;
    if (claim != nullptr) {
      for (const auto& [key, value] : claim->values) {
        if (key == "group") continue;  // below, as the default group
        const OptionInfo* o = OptionOfJsonKey(key);
        const std::string source = "claim file " + Printable(claim->path) + ": " + key;
        Status s = o == nullptr ? Invalid(source + " is no option")
                                : SetOption(o->env, env, value, source, &file);
        if (!s.ok()) return s;
      }
    }
    Status s = claim_group != nullptr
                   ? SetOption("VGPU_GROUP", env, *claim_group,
                               "claim file " + Printable(claim->path) + ": group", &file)
                   : SetOption("VGPU_GROUP", env, id,
                               "the container id as quota group (set VGPU_GROUP)", &file);
    if (!s.ok()) return s;
    // The container's other VGPU_* options (the CDI spec's VGPU_REAL_LIBCUDA,
    // limits set as variables): a process that clears its environment keeps them.
    for (const OptionInfo& o : Options()) {
      std::string value, alias;
      if (*o.json_key == '\0') continue;
      if (EnvValue(env, o.env, &value)) {
        if (!file.contains(o.json_key)) s = SetOption(o.env, env, value, "", &file);
      } else if (HamiValue(o, env, &alias, &value)) {
        // As libvgpu takes a HAMi-core name from the environment over the
        // file, its value wins over an annotation here too.
        s = CheckOption(o.env, value, "process.env " + alias);
        if (s.ok()) file[o.json_key] = value;
      }
      if (!s.ok()) return s;
    }
    *json_text = file.dump(2) + "\n";
    return Status::Ok();
  } catch (const std::exception& e) {
    return Status::Error(ErrorCode::kIo, std::string("internal error: ") + Printable(e.what()));
  }
}

Status BuildContainerLimits(const Annotations& annotations, const std::string& id,
                            std::string* json_text, const ClaimOptions* claim) {
  json_text->clear();
  try {
    json limits = json::object();
    for (const auto& [key, value] : annotations) {
      const AnnotationOption* option =
          key.starts_with(kAnnotationPrefix) ? OptionOfAnnotation(key) : nullptr;
      if (option == nullptr) continue;  // BuildContainerConfig refused unknown vgpu.io/ keys
      for (const OptionInfo& o : Options()) {
        if (std::string_view(o.env) == option->env) limits[o.json_key] = value;
      }
    }
    // The claim is the orchestrator's word on this container: over the
    // annotations, which the pod's author writes.
    if (claim != nullptr) {
      for (const auto& [key, value] : claim->values) limits[key] = value;
    }
    // Fixed whatever the annotations: a process that picked another group
    // would get a fresh quota and bucket (or share another container's), one
    // that picked a scheduler region of its own would schedule only itself.
    const std::string* claim_group = claim != nullptr ? claim->group() : nullptr;
    limits["group"] = claim_group != nullptr ? *claim_group : id;
    limits["sched_region"] = kNodeSchedRegion;
    *json_text = limits.dump(2) + "\n";
    return Status::Ok();
  } catch (const std::exception& e) {
    return Status::Error(ErrorCode::kIo, std::string("internal error: ") + Printable(e.what()));
  }
}

}  // namespace vgpu::oci_hook
