#include "ctl/cdi/cdi_spec.h"

#include <algorithm>
#include <array>
#include <set>

namespace vgpu::cdi {
namespace {

using nlohmann::json;

// Released CDI spec versions, oldest first (the CDI repository's
// specs-go/version.go). Device names may start with a digit from 0.5.0 on.
constexpr std::array<std::string_view, 10> kVersions = {
    "0.1.0", "0.2.0", "0.3.0", "0.4.0", "0.5.0", "0.6.0", "0.7.0", "0.8.0", "1.0.0", "1.1.0"};
constexpr int kDigitNamesSince = 4;  // index of 0.5.0

constexpr std::array<std::string_view, 6> kHookNames = {
    "prestart", "createRuntime", "createContainer", "startContainer", "poststart", "poststop"};

constexpr std::string_view kVisibleVar = "VGPU_VISIBLE_DEVICES=";

// Read-only, and no device files or setuid binaries through our mounts.
const json kReadOnlyBind = {"ro", "nosuid", "nodev", "bind"};
// The shared node files: every tenant writes them (docs/security.md).
const json kSharedBind = {"rw", "nosuid", "nodev", "noexec", "bind"};

std::string Basename(const std::string& path) { return path.substr(path.rfind('/') + 1); }

json DeviceNode(const std::string& host_path) {
  json node = {{"path", "/dev/" + Basename(host_path)}};
  if (node["path"] != host_path) node["hostPath"] = host_path;
  return node;
}

json Mount(const std::string& host, const std::string& container, const json& options) {
  return {{"hostPath", host}, {"containerPath", container}, {"options", options}};
}

std::string DriverPath(std::string_view name) {
  return std::string(kContainerDriverDir) + "/" + std::string(name);
}

// A GPU is named to libvgpu by UUID when known: an index depends on the
// driver's enumeration order (and on CUDA_VISIBLE_DEVICES).
std::string VisibleName(const Gpu& gpu) {
  return gpu.uuid.empty() ? std::to_string(gpu.index) : gpu.uuid;
}

json GpuDevice(const Gpu& gpu) {
  json edits = {{"env", {std::string(kVisibleVar) + VisibleName(gpu)}}};
  if (!gpu.device_node.empty()) edits["deviceNodes"] = {DeviceNode(gpu.device_node)};
  return {{"name", std::to_string(gpu.index)}, {"containerEdits", edits}};
}

// "all" names every GPU by index: all of them in any order is the same set.
json AllDevice(const std::vector<Gpu>& gpus) {
  std::string visible;
  json nodes = json::array();
  for (const Gpu& g : gpus) {
    visible += (visible.empty() ? "" : ",") + std::to_string(g.index);
    if (!g.device_node.empty()) nodes.push_back(DeviceNode(g.device_node));
  }
  json edits = {{"env", {std::string(kVisibleVar) + visible}}};
  if (!nodes.empty()) edits["deviceNodes"] = nodes;
  return {{"name", "all"}, {"containerEdits", edits}};
}

json HookArgs(const Inventory& inv, const std::string& claim_file) {
  json args = {std::string(kHookName), "--cdi", "--preload", std::string(kContainerLibvgpu)};
  if (!inv.run_dir.empty()) args.insert(args.end(), {"--run-dir", inv.run_dir});
  if (!claim_file.empty()) args.insert(args.end(), {"--claim", claim_file});
  return args;
}

json CommonEdits(const Inventory& inv, const std::string& claim_file = "") {
  json env = {"LD_PRELOAD=" + std::string(kContainerLibvgpu),
              "VGPU_REAL_LIBCUDA=" + DriverPath(kLibcuda)};
  json mounts = {Mount(inv.libvgpu, std::string(kContainerLibvgpu), kReadOnlyBind),
                 Mount(inv.libcuda, DriverPath(kLibcuda), kReadOnlyBind)};
  if (!inv.libnvml.empty()) {
    env.push_back("VGPU_REAL_LIBNVML=" + DriverPath(kLibnvml));
    mounts.push_back(Mount(inv.libnvml, DriverPath(kLibnvml), kReadOnlyBind));
  }
  for (const std::string& dep : inv.driver_deps) {
    mounts.push_back(Mount(dep, DriverPath(Basename(dep)), kReadOnlyBind));
  }
  // Like a device node: the same file at the same path, whatever the
  // container's own IPC namespace and /dev/shm.
  for (const std::string& f : inv.shared_files) mounts.push_back(Mount(f, f, kSharedBind));
  if (!inv.node_config.empty()) {
    mounts.push_back(Mount(inv.node_config, kNodeConfigFile, kReadOnlyBind));
  }
  // The run directory is not mounted: the hook mounts the container's own
  // directory under it at its path (docs/containers.md).
  if (!inv.run_dir.empty()) env.push_back("VGPU_RUN_DIR=" + inv.run_dir);
  json edits = {{"env", env}, {"mounts", mounts}};
  json nodes = json::array();
  for (const std::string& n : inv.common_nodes) nodes.push_back(DeviceNode(n));
  if (!nodes.empty()) edits["deviceNodes"] = nodes;
  if (!inv.hook.empty()) {
    // Only with the hook: libvgpu refuses a VGPU_CONFIG file that is missing,
    // and the hook is what writes it.
    edits["env"].push_back("VGPU_CONFIG=" + std::string(kContainerConfig));
    edits["hooks"] = {
        {{"hookName", "createContainer"}, {"path", inv.hook}, {"args", HookArgs(inv, claim_file)}}};
    if (!inv.run_dir.empty()) {
      edits["hooks"].push_back(
          {{"hookName", "poststop"},
           {"path", inv.hook},
           {"args", {std::string(kHookName), "--poststop", "--run-dir", inv.run_dir}}});
    }
  }
  return edits;
}

// --- validation ---

bool IsLetter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool IsAlnum(char c) { return IsLetter(c) || (c >= '0' && c <= '9'); }

// CDI's rule for both halves of a kind: a letter first, a letter or digit
// last, letters, digits, '_', '-', '.' between.
bool ValidQualifierPart(std::string_view s) {
  if (s.empty() || !IsLetter(s.front()) || !IsAlnum(s.back())) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return IsAlnum(c) || c == '_' || c == '-' || c == '.'; });
}

Status ValidateKind(const std::string& kind) {
  size_t slash = kind.find('/');
  bool ok = slash != std::string::npos && ValidQualifierPart(kind.substr(0, slash)) &&
            ValidQualifierPart(kind.substr(slash + 1));
  // The vendor is a domain name: no empty label.
  if (ok && kind.substr(0, slash).find("..") != std::string::npos) ok = false;
  if (ok) return Status::Ok();
  return Status::Error(ErrorCode::kInval,
                       "kind '" + kind + "' is not vendor/class (e.g. vgpu.io/gpu)");
}

Status ValidateDeviceName(const std::string& name, int version) {
  bool ok = !name.empty() && IsAlnum(name.front()) && IsAlnum(name.back()) &&
            std::all_of(name.begin(), name.end(), [](char c) {
              return IsAlnum(c) || c == '_' || c == '-' || c == '.' || c == ':';
            });
  if (!ok) return Status::Error(ErrorCode::kInval, "device name '" + name + "' is not valid");
  if (!IsLetter(name.front()) && version < kDigitNamesSince) {
    return Status::Error(ErrorCode::kInval,
                         "device name '" + name + "' starts with a digit: needs cdiVersion 0.5.0+");
  }
  return Status::Ok();
}

// The string at key, or nullptr if it is missing or not a string.
const std::string* StringAt(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? &it->get_ref<const std::string&>() : nullptr;
}

Status NeedAbsolute(const json& obj, const char* key, const std::string& where, bool required) {
  const std::string* s = StringAt(obj, key);
  if (s == nullptr && !required && !obj.contains(key)) return Status::Ok();
  if (s == nullptr || s->empty() || s->front() != '/') {
    return Status::Error(ErrorCode::kInval, where + ": " + key + " must be an absolute path");
  }
  return Status::Ok();
}

// Runs `check` on every element of the array at key (absent is fine).
template <typename Check>
Status EachOf(const json& edits, const char* key, const std::string& where, Check check) {
  auto it = edits.find(key);
  if (it == edits.end()) return Status::Ok();
  if (!it->is_array()) return Status::Error(ErrorCode::kInval, where + ": " + key + " not a list");
  for (const json& e : *it) {
    if (Status st = check(e, where + " " + key); !st.ok()) return st;
  }
  return Status::Ok();
}

Status ValidateEnv(const json& e, const std::string& where) {
  size_t eq = e.is_string() ? e.get_ref<const std::string&>().find('=') : std::string::npos;
  if (eq == 0 || eq == std::string::npos) {
    return Status::Error(ErrorCode::kInval, where + ": entries must be NAME=VALUE");
  }
  return Status::Ok();
}

Status ValidateNode(const json& e, const std::string& where) {
  if (!e.is_object()) return Status::Error(ErrorCode::kInval, where + ": not an object");
  if (Status st = NeedAbsolute(e, "path", where, true); !st.ok()) return st;
  return NeedAbsolute(e, "hostPath", where, false);
}

Status ValidateMount(const json& e, const std::string& where) {
  if (!e.is_object()) return Status::Error(ErrorCode::kInval, where + ": not an object");
  if (Status st = NeedAbsolute(e, "hostPath", where, true); !st.ok()) return st;
  return NeedAbsolute(e, "containerPath", where, true);
}

Status ValidateHook(const json& e, const std::string& where) {
  if (!e.is_object()) return Status::Error(ErrorCode::kInval, where + ": not an object");
  const std::string* name = StringAt(e, "hookName");
  if (name == nullptr ||
      std::find(kHookNames.begin(), kHookNames.end(), *name) == kHookNames.end()) {
    return Status::Error(ErrorCode::kInval, where + ": unknown hookName");
  }
  return NeedAbsolute(e, "path", where, true);
}

Status ValidateEdits(const json& edits, const std::string& where) {
  if (!edits.is_object()) {
    return Status::Error(ErrorCode::kInval, where + ": containerEdits is not an object");
  }
  Status st = EachOf(edits, "env", where, ValidateEnv);
  if (st.ok()) st = EachOf(edits, "deviceNodes", where, ValidateNode);
  if (st.ok()) st = EachOf(edits, "mounts", where, ValidateMount);
  if (st.ok()) st = EachOf(edits, "hooks", where, ValidateHook);
  return st;
}

Status ValidateDevices(const json& devices, int version) {
  if (!devices.is_array() || devices.empty()) {
    return Status::Error(ErrorCode::kInval, "devices must be a non-empty list");
  }
  std::set<std::string> seen;
  for (const json& d : devices) {
    const std::string* name = d.is_object() ? StringAt(d, "name") : nullptr;
    if (name == nullptr) return Status::Error(ErrorCode::kInval, "a device has no name");
    if (Status st = ValidateDeviceName(*name, version); !st.ok()) return st;
    if (!seen.insert(*name).second) {
      return Status::Error(ErrorCode::kInval, "device '" + *name + "' is listed twice");
    }
    auto edits = d.find("containerEdits");
    if (edits == d.end() || edits->empty()) {
      return Status::Error(ErrorCode::kInval, "device '" + *name + "' has no containerEdits");
    }
    if (Status st = ValidateEdits(*edits, "device '" + *name + "'"); !st.ok()) return st;
  }
  return Status::Ok();
}

Status ValidateUnchecked(const json& spec) {
  if (!spec.is_object()) return Status::Error(ErrorCode::kInval, "not a JSON object");
  const std::string* version = StringAt(spec, "cdiVersion");
  auto known = version == nullptr ? kVersions.end()
                                  : std::find(kVersions.begin(), kVersions.end(), *version);
  if (known == kVersions.end()) {
    return Status::Error(ErrorCode::kInval, "cdiVersion is missing or not a known CDI version");
  }
  const std::string* kind = StringAt(spec, "kind");
  if (kind == nullptr) return Status::Error(ErrorCode::kInval, "kind is missing");
  if (Status st = ValidateKind(*kind); !st.ok()) return st;
  auto devices = spec.find("devices");
  if (devices == spec.end()) return Status::Error(ErrorCode::kInval, "devices is missing");
  Status st = ValidateDevices(*devices, static_cast<int>(known - kVersions.begin()));
  if (st.ok() && spec.contains("containerEdits")) {
    st = ValidateEdits(spec["containerEdits"], "spec");
  }
  return st;
}

std::string VisibleOf(const json& device) {
  const json& env = device["containerEdits"].value("env", json::array());
  for (const json& e : env) {
    std::string_view s = e.get_ref<const std::string&>();
    if (s.starts_with(kVisibleVar)) return std::string(s.substr(kVisibleVar.size()));
  }
  return "";
}

}  // namespace

json BuildSpec(const Inventory& inv) {
  json devices = json::array();
  for (const Gpu& g : inv.gpus) devices.push_back(GpuDevice(g));
  devices.push_back(AllDevice(inv.gpus));
  return {{"cdiVersion", kCdiVersion},
          {"kind", kKind},
          {"devices", devices},
          {"containerEdits", CommonEdits(inv)}};
}

json BuildClaimSpec(const Inventory& inv, const ClaimSpecDevice& d) {
  std::string visible;
  json nodes = json::array();
  for (const Gpu& g : d.gpus) {
    visible += (visible.empty() ? "" : ",") + VisibleName(g);
    if (!g.device_node.empty()) nodes.push_back(DeviceNode(g.device_node));
  }
  json edits = {{"env", {std::string(kVisibleVar) + visible}}};
  if (!nodes.empty()) edits["deviceNodes"] = nodes;
  return {{"cdiVersion", kCdiVersion},
          {"kind", d.kind},
          {"devices", {{{"name", d.name}, {"containerEdits", edits}}}},
          {"containerEdits", CommonEdits(inv, d.claim_file)}};
}

Status ValidateSpec(const json& spec) {
  try {
    return ValidateUnchecked(spec);
  } catch (const std::exception& e) {  // a check missed a type: still a bad spec
    return Status::Error(ErrorCode::kInval, std::string("malformed spec: ") + e.what());
  }
}

Status ParseSpec(std::string_view text, ParsedSpec* out) {
  json spec = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (spec.is_discarded()) return Status::Error(ErrorCode::kInval, "not valid JSON");
  // Another vendor's spec is not ours to judge: our checks are stricter than
  // CDI's (absolute paths), and its devices are not listed anyway.
  if (const std::string* kind = spec.is_object() ? StringAt(spec, "kind") : nullptr;
      kind != nullptr && *kind != kKind) {
    *out = ParsedSpec{*kind, {}};
    return Status::Ok();
  }
  if (Status st = ValidateSpec(spec); !st.ok()) return st;
  try {
    out->kind = spec["kind"].get<std::string>();
    out->devices.clear();
    for (const json& d : spec["devices"]) {
      out->devices.push_back({d["name"].get<std::string>(), VisibleOf(d)});
    }
  } catch (const std::exception& e) {
    return Status::Error(ErrorCode::kInval, std::string("malformed spec: ") + e.what());
  }
  return Status::Ok();
}

}  // namespace vgpu::cdi
