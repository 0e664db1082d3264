#include "ctl/control/protocol.h"

#include <algorithm>
#include <limits>

#include "common/parse.h"

namespace vgpu::ctl {
namespace {

using nlohmann::json;


Status Invalid(const std::string& field, const std::string& what) {
  return Status::Error(ErrorCode::kInval, "invalid argument '" + field + "': " + what);
}

// Reads an optional field of args with a type check. Returns true if present.
bool Has(const json& args, const char* key) {
  return args.is_object() && args.contains(key) && !args.at(key).is_null();
}

Status GetString(const json& args, const char* key, std::string* out) {
  if (!Has(args, key)) return Status::Ok();
  const json& v = args.at(key);
  if (!v.is_string()) return Invalid(key, "expected a string");
  *out = v.get<std::string>();
  return Status::Ok();
}

Status GetAbsolutePath(const json& args, const char* key, std::string* out) {
  Status s = GetString(args, key, out);
  if (!s.ok()) return s;
  // The agent's working directory is not the caller's: relative paths would
  // silently name another place. An empty path is not "the default" (that is
  // an absent field): a script whose variable came out empty must not have
  // its images go, unnoticed, to the default directory.
  if (Has(args, key) && out->empty()) return Invalid(key, "empty path");
  if (!out->empty() && (*out)[0] != '/') return Invalid(key, "expected an absolute path");
  if (out->find('\0') != std::string::npos) return Invalid(key, "contains a NUL byte");
  return Status::Ok();
}

Status GetBool(const json& args, const char* key, bool* out) {
  if (!Has(args, key)) return Status::Ok();
  const json& v = args.at(key);
  if (!v.is_boolean()) return Invalid(key, "expected true or false");
  *out = v.get<bool>();
  return Status::Ok();
}

template <typename T>
Status GetInteger(const json& args, const char* key, int64_t min, uint64_t max,
                  std::optional<T>* out) {
  if (!Has(args, key)) return Status::Ok();
  const json& v = args.at(key);
  if (v.is_number_unsigned()) {
    // nlohmann reads every non-negative literal as unsigned, so the lower
    // bound is checked here too (a share of 0 would never run a kernel).
    uint64_t u = v.get<uint64_t>();
    if ((min > 0 && u < static_cast<uint64_t>(min)) || u > max) return Invalid(key, "out of range");
    *out = static_cast<T>(u);
    return Status::Ok();
  }
  if (v.is_number_integer()) {
    int64_t i = v.get<int64_t>();
    if (i < min || (i > 0 && static_cast<uint64_t>(i) > max)) return Invalid(key, "out of range");
    *out = static_cast<T>(i);
    return Status::Ok();
  }
  return Invalid(key, "expected an integer");
}

// A share in percent (above 0, at most 100; "12.5" as well as "30") as
// permille, the unit the scheduler counts in.
Status GetSharePermille(const json& args, const char* key, std::optional<uint32_t>* out) {
  if (!Has(args, key)) return Status::Ok();
  const json& v = args.at(key);
  if (!v.is_number()) return Invalid(key, "expected a number");
  double pct = v.get<double>();
  if (!(pct > 0 && pct <= 100)) return Invalid(key, "out of range");
  *out = std::max<uint32_t>(1, static_cast<uint32_t>(pct * 10 + 0.5));
  return Status::Ok();
}

Status RequireObject(const json& args) {
  if (!args.is_object()) return Invalid("args", "expected an object");
  return Status::Ok();
}

// Typed field readers for results (client side).
Status ReadInt(const json& j, const char* key, int64_t* out) {
  if (!Has(j, key)) return Status::Ok();
  if (!j.at(key).is_number_integer()) return Invalid(key, "expected an integer");
  *out = j.at(key).get<int64_t>();
  return Status::Ok();
}

Status ReadU64(const json& j, const char* key, uint64_t* out) {
  if (!Has(j, key)) return Status::Ok();
  if (!j.at(key).is_number_unsigned()) return Invalid(key, "expected a non-negative integer");
  *out = j.at(key).get<uint64_t>();
  return Status::Ok();
}

Status ParseDevice(const json& j, DeviceInfo* d) {
  if (!j.is_object()) return Invalid("devices", "expected objects");
  int64_t index = 0;
  Status s = ReadInt(j, "index", &index);
  if (s.ok()) s = GetString(j, "uuid", &d->uuid);
  if (s.ok()) s = ReadU64(j, "used", &d->used);
  if (s.ok() && Has(j, "quota")) {
    uint64_t q = 0;
    s = ReadU64(j, "quota", &q);
    d->quota = q;
  }
  if (s.ok() && Has(j, "compute_share")) {
    if (!j.at("compute_share").is_number()) return Invalid("compute_share", "expected a number");
    d->compute_share = j.at("compute_share").get<double>();
  }
  d->index = static_cast<int>(index);
  return s;
}

// "counters": an object of non-negative integers; absent (an older agent): none.
Status ParseCounters(const json& j, std::vector<std::pair<std::string, uint64_t>>* out) {
  if (!Has(j, "counters")) return Status::Ok();
  if (!j.at("counters").is_object()) return Invalid("counters", "expected an object");
  for (const auto& [name, value] : j.at("counters").items()) {
    if (!value.is_number_unsigned()) return Invalid("counters." + name, "expected a count");
    out->emplace_back(name, value.get<uint64_t>());
  }
  return Status::Ok();
}

}  // namespace

bool IsKnownCommand(std::string_view cmd) {
  return std::find(std::begin(kCommands), std::end(kCommands), cmd) != std::end(kCommands);
}

Response Response::Ok(json result) {
  Response r;
  r.result = std::move(result);
  return r;
}

Response Response::Error(ErrorCode code, std::string message) {
  Response r;
  r.ok = false;
  r.result = nullptr;
  r.code = code == ErrorCode::kOk ? ErrorCode::kIo : code;
  r.error = std::move(message);
  return r;
}

Status ParseCheckpointArgs(const json& args, CheckpointArgs* out) {
  Status s = RequireObject(args);
  if (s.ok()) s = GetAbsolutePath(args, "dir", &out->dir);
  if (s.ok()) s = GetBool(args, "leave_running", &out->leave_running);
  return s;
}

Status ParseRestoreArgs(const json& args, RestoreArgs* out) {
  Status s = RequireObject(args);
  if (s.ok()) s = GetAbsolutePath(args, "from", &out->from);
  return s;
}

Status ParseSetArgs(const json& args, SetArgs* out) {
  Status s = RequireObject(args);
  if (s.ok()) s = GetInteger(args, "device", 0, 1023, &out->device);
  if (s.ok()) {
    s = GetInteger(args, "memory_limit", 0, std::numeric_limits<uint64_t>::max(),
                   &out->memory_limit);
  }
  if (s.ok()) s = GetSharePermille(args, "compute_share", &out->share_permille);
  if (s.ok()) s = GetInteger(args, "weight", 1, kMaxComputeWeight, &out->weight);
  if (s.ok()) s = GetBool(args, "as_tenant", &out->as_tenant);
  if (s.ok() && Has(args, "priority")) {
    std::string p;
    s = GetString(args, "priority", &p);
    if (s.ok() &&
        std::find(std::begin(kPriorities), std::end(kPriorities), p) == std::end(kPriorities)) {
      s = Invalid("priority", "expected high, normal or low");
    }
    if (s.ok()) out->priority = p;
  }
  if (s.ok() && !out->memory_limit && !out->share_permille && !out->weight && !out->priority) {
    s = Invalid("args", "nothing to set (memory_limit, compute_share, weight or priority)");
  }
  return s;
}

Status ValidateArgs(const std::string& cmd, const json& args) {
  if (cmd == "checkpoint") {
    CheckpointArgs a;
    return ParseCheckpointArgs(args, &a);
  }
  if (cmd == "restore") {
    RestoreArgs a;
    return ParseRestoreArgs(args, &a);
  }
  if (cmd == "set") {
    SetArgs a;
    return ParseSetArgs(args, &a);
  }
  return RequireObject(args);
}

json ToJson(const CheckpointArgs& a) {
  json j = {{"leave_running", a.leave_running}};
  if (!a.dir.empty()) j["dir"] = a.dir;
  return j;
}

json ToJson(const RestoreArgs& a) {
  json j = json::object();
  if (!a.from.empty()) j["from"] = a.from;
  return j;
}

json ToJson(const SetArgs& a) {
  json j = json::object();
  if (a.device) j["device"] = *a.device;
  if (a.memory_limit) j["memory_limit"] = *a.memory_limit;
  if (a.share_permille) j["compute_share"] = *a.share_permille / 10.0;
  if (a.weight) j["weight"] = *a.weight;
  if (a.priority) j["priority"] = *a.priority;
  return j;
}

json ToJson(const InfoResult& r) {
  json devices = json::array();
  for (const DeviceInfo& d : r.devices) {
    devices.push_back(
        {{"index", d.index},
         {"uuid", d.uuid},
         {"quota", d.quota ? json(*d.quota) : json(nullptr)},
         {"used", d.used},
         {"compute_share", d.compute_share ? json(*d.compute_share) : json(nullptr)}});
  }
  json counters = json::object();
  for (const auto& [name, value] : r.counters) counters[name] = value;
  return {{"pid", r.pid},
          {"uid", r.uid},
          {"version", r.version},
          {"group", r.group},
          {"state", r.state},
          {"command", r.command},
          {"priority", r.priority},
          {"weight", r.weight},
          {"compute_policy", r.compute_policy},
          {"devices", devices},
          {"counters", counters},
          {"claim", r.claim},
          {"pod", r.pod},
          {"slurm_job", r.slurm_job},
          {"preemptible", r.preemptible},
          {"placed", r.placed}};
}

json ToJson(const CheckpointResult& r) {
  return {{"path", r.path}, {"bytes", r.bytes}, {"seconds", r.seconds}};
}

Response ProcessListOf(Response info) {
  if (info.ok) info.result = {{"processes", json::array({std::move(info.result)})}};
  return info;
}

Status ParseInfoResult(const json& j, InfoResult* out) {
  if (!j.is_object()) return Invalid("result", "expected an object");
  Status s = ReadInt(j, "pid", &out->pid);
  if (s.ok()) s = ReadInt(j, "uid", &out->uid);
  if (s.ok()) s = GetString(j, "version", &out->version);
  if (s.ok()) s = GetString(j, "group", &out->group);
  if (s.ok()) s = GetString(j, "state", &out->state);
  if (s.ok()) s = GetString(j, "command", &out->command);
  // An agent older than runtime settings sends none: the defaults stand.
  if (s.ok()) s = GetString(j, "priority", &out->priority);
  if (s.ok()) s = ReadInt(j, "weight", &out->weight);
  if (s.ok()) s = GetString(j, "compute_policy", &out->compute_policy);
  if (s.ok()) s = ParseCounters(j, &out->counters);
  // An agent older than these sends none: no labels, preemptible.
  if (s.ok()) s = GetString(j, "claim", &out->claim);
  if (s.ok()) s = GetString(j, "pod", &out->pod);
  if (s.ok()) s = GetString(j, "slurm_job", &out->slurm_job);
  if (s.ok()) s = GetBool(j, "preemptible", &out->preemptible);
  if (s.ok()) s = GetBool(j, "placed", &out->placed);
  if (!s.ok() || !Has(j, "devices")) return s;
  if (!j.at("devices").is_array()) return Invalid("devices", "expected an array");
  for (const json& d : j.at("devices")) {
    DeviceInfo info;
    s = ParseDevice(d, &info);
    if (!s.ok()) return s;
    out->devices.push_back(std::move(info));
  }
  return s;
}

Status ParseCheckpointResult(const json& j, CheckpointResult* out) {
  if (!j.is_object()) return Invalid("result", "expected an object");
  Status s = GetString(j, "path", &out->path);
  if (s.ok()) s = ReadU64(j, "bytes", &out->bytes);
  if (s.ok() && Has(j, "seconds")) {
    if (!j.at("seconds").is_number()) return Invalid("seconds", "expected a number");
    out->seconds = j.at("seconds").get<double>();
  }
  return s;
}

int JsonDepth(std::string_view text) {
  int depth = 0, max_depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') in_string = true;
    if (c == '[' || c == '{') max_depth = std::max(max_depth, ++depth);
    if (c == ']' || c == '}') --depth;
  }
  return max_depth;
}

std::string DumpLine(const json& j) {
  // dump() throws on invalid UTF-8 by default; a message built from a bad
  // request must still be sendable.
  return j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

Status ParseRequest(std::string_view line, Request* out) {
  if (JsonDepth(line) > kMaxJsonDepth) {
    return Status::Error(ErrorCode::kInval, "request nested too deeply");
  }
  json j = json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::Error(ErrorCode::kInval, "request is not valid JSON");
  if (!j.is_object()) return Status::Error(ErrorCode::kInval, "request must be a JSON object");
  if (j.contains("id")) {
    if (!j["id"].is_number_integer()) return Invalid("id", "expected an integer");
    out->id = j["id"].get<int64_t>();
  }
  if (!j.contains("v")) return Status::Error(ErrorCode::kProto, "missing protocol version 'v'");
  if (!j["v"].is_number_integer() || j["v"].get<int64_t>() != kProtocolVersion) {
    return Status::Error(
        ErrorCode::kProto,
        "unsupported protocol version " +
            j["v"].dump(-1, ' ', false, json::error_handler_t::replace).substr(0, 32) +
            " (this agent speaks 1)");
  }
  if (!j.contains("cmd") || !j["cmd"].is_string()) {
    return Invalid("cmd", "expected a string");
  }
  out->cmd = j["cmd"].get<std::string>();
  if (j.contains("args") && !j["args"].is_null()) out->args = std::move(j["args"]);
  return Status::Ok();
}

std::string SerializeRequest(const Request& r) {
  return DumpLine({{"v", r.v}, {"id", r.id}, {"cmd", r.cmd}, {"args", r.args}});
}

std::string SerializeResponse(const Response& r) {
  json j = {{"v", kProtocolVersion}, {"id", r.id}, {"ok", r.ok}};
  if (r.ok) {
    j["result"] = r.result.is_null() ? json::object() : r.result;
  } else {
    j["error"] = r.error;
    j["code"] = ErrorCodeName(r.code);
  }
  return DumpLine(j);
}

std::string SerializeProgress(int64_t id, const Progress& p) {
  json progress = {{"done", p.done}, {"total", p.total}};
  if (!p.phase.empty()) progress["phase"] = p.phase;
  return DumpLine({{"v", kProtocolVersion}, {"id", id}, {"progress", progress}});
}

Status ParseServerLine(std::string_view line, ServerLine* out) {
  // The same bound as on requests: a deeply nested answer (from a process
  // that may be someone else's) would otherwise be copied recursively below
  // and overflow the stack of vgpuctl or vgpud.
  if (JsonDepth(line) > kMaxJsonDepth) {
    return Status::Error(ErrorCode::kProto, "agent sent a line nested too deeply");
  }
  json j = json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return Status::Error(ErrorCode::kProto, "agent sent a line that is not a JSON object");
  }
  if (j.contains("v") && j["v"] != kProtocolVersion) {
    return Status::Error(ErrorCode::kProto, "agent speaks an unsupported protocol version");
  }
  if (j.contains("progress")) {
    const json& p = j["progress"];
    out->is_progress = true;
    Status s = ReadU64(p, "done", &out->progress.done);
    if (s.ok()) s = ReadU64(p, "total", &out->progress.total);
    if (s.ok()) s = GetString(p, "phase", &out->progress.phase);
    if (!s.ok()) return Status::Error(ErrorCode::kProto, "bad progress line: " + s.message);
    return s;
  }
  if (!j.contains("ok") || !j["ok"].is_boolean()) {
    return Status::Error(ErrorCode::kProto, "agent response lacks 'ok'");
  }
  Response& r = out->response;
  if (j.contains("id") && j["id"].is_number_integer()) r.id = j["id"].get<int64_t>();
  r.ok = j["ok"].get<bool>();
  if (r.ok) {
    r.result = j.contains("result") ? j["result"] : json::object();
    return Status::Ok();
  }
  r.result = nullptr;
  r.error = j.contains("error") && j["error"].is_string() ? j["error"].get<std::string>()
                                                          : "unspecified error";
  r.code = j.contains("code") && j["code"].is_string()
               ? ErrorCodeFromName(j["code"].get<std::string>())
               : ErrorCode::kIo;
  return Status::Ok();
}

}  // namespace vgpu::ctl
