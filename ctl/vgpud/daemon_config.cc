#include "ctl/vgpud/daemon_config.h"

#include <cctype>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/byte_size.h"
#include "common/log_level.h"
#include "common/parse.h"

namespace vgpu::vgpud {
namespace {

Status Bad(const std::string& key, const std::string& why) {
  return Status::Error(ErrorCode::kInval, "config key '" + key + "': " + why);
}

}  // namespace

const std::vector<ConfigKey>& ConfigKeys() {
  static const std::vector<ConfigKey> keys = {
      {"run_dir", "--run-dir", "directory of the agents' sockets and vgpud.sock"},
      {"quantum", "--quantum", "time slice of rotated jobs (e.g. 30s, 500ms)"},
      {"metrics_listen", "--metrics-listen", "HOST:PORT of /metrics, or off"},
      {"host_budget", "--host-budget", "host RAM for suspended jobs (e.g. 16GiB); 0: half of RAM"},
      {"oversubscribe", "--oversubscribe", "time-slice devices whose jobs do not fit (on|off)"},
      {"grace", "--grace", "a job vgpud suspended resumes by itself after this without vgpud"},
      {"checkpoint_dir", "--checkpoint-dir", "images of jobs suspended past the host budget"},
      {"admin_group", "--admin-group", "group whose members may act on any job"},
      {"state_file", "--state-file", "vgpud's state (default <run_dir>/vgpud.state)"},
      {"tick", "--tick", "how often vgpud looks at the node (e.g. 200ms)"},
      {"log_level", "--log-level", "off|error|warn|info|debug"},
  };
  return keys;
}

Status ApplyConfigValue(const std::string& key, const std::string& value, DaemonConfig* out) {
  auto duration = [&](int64_t* field) {
    return ParseDuration(value, field) ? Status::Ok()
                                       : Bad(key, "'" + value + "' is not a duration (30s, 500ms)");
  };
  if (key == "run_dir" || key == "checkpoint_dir" || key == "state_file") {
    if (value.empty() || value[0] != '/') return Bad(key, "must be an absolute path");
    (key == "run_dir" ? out->run_dir : key == "checkpoint_dir" ? out->checkpoint_dir
                                                                : out->state_file) = value;
    return Status::Ok();
  }
  if (key == "quantum") return duration(&out->quantum_ms);
  if (key == "grace") return duration(&out->grace_ms);
  if (key == "tick") return duration(&out->tick_ms);
  if (key == "metrics_listen") {
    out->metrics_listen = value;
    return Status::Ok();
  }
  if (key == "host_budget") {
    return ParseByteSize(value, &out->host_budget)
               ? Status::Ok()
               : Bad(key, "'" + value + "' is not a size (16GiB, 512MiB)");
  }
  if (key == "oversubscribe") {
    return ParseSwitch(value, &out->oversubscribe) ? Status::Ok() : Bad(key, "expects on or off");
  }
  if (key == "admin_group") {
    out->admin_group = value;
    return Status::Ok();
  }
  if (key == "log_level") {
    LogLevel level;
    if (ParseLogLevelName(value, &level)) {
      out->log_level = value;
      return Status::Ok();
    }
    return Bad(key, "expects off, error, warn, info or debug");
  }
  return Status::Error(ErrorCode::kInval, "unknown config key '" + key + "'");
}

Status LoadConfigFile(const std::string& path, DaemonConfig* out) {
  std::ifstream f(path);
  if (!f) return Status::Error(ErrorCode::kNoEnt, "cannot read config file " + path);
  nlohmann::json j = nlohmann::json::parse(f, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::Error(ErrorCode::kInval, path + ": not valid JSON");
  if (!j.is_object()) return Status::Error(ErrorCode::kInval, path + ": expects a JSON object");
  for (const auto& [key, v] : j.items()) {
    std::string text;
    if (v.is_string()) text = v.get<std::string>();
    else if (v.is_boolean()) text = v.get<bool>() ? "on" : "off";
    else if (v.is_number_unsigned() || v.is_number_integer()) text = v.dump();  // seconds / bytes
    else return Status::Error(ErrorCode::kInval, path + ": config key '" + key + "': wrong type");
    if (Status s = ApplyConfigValue(key, text, out); !s.ok()) {
      return Status::Error(s.code, path + ": " + s.message);
    }
  }
  return Status::Ok();
}

std::string StateFilePath(const DaemonConfig& c) {
  return c.state_file.empty() ? c.run_dir + "/vgpud.state" : c.state_file;
}

Status ValidateConfig(const DaemonConfig& c) {
  if (c.tick_ms < 10 || c.tick_ms > 10000) return Bad("tick", "must be between 10ms and 10s");
  if (c.quantum_ms < c.tick_ms) return Bad("quantum", "must be at least the tick");
  if (c.grace_ms < c.tick_ms) return Bad("grace", "must be at least the tick");
  if (c.metrics_listen != "off") {
    size_t colon = c.metrics_listen.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == c.metrics_listen.size()) {
      return Bad("metrics_listen", "expects HOST:PORT or off");
    }
    const std::string port = c.metrics_listen.substr(colon + 1);
    for (char ch : port) {
      if (!std::isdigit(static_cast<unsigned char>(ch))) return Bad("metrics_listen", "bad port");
    }
    if (port.size() > 5 || std::stoi(port) > 65535) return Bad("metrics_listen", "bad port");
  }
  return Status::Ok();
}

}  // namespace vgpu::vgpud
