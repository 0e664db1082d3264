// vgpud's configuration: command-line flags and the keys of a JSON config
// file (--config FILE), one table of both (docs/vgpud.md, "Configuration").
// Flags override the file; every value is validated and a bad one is refused
// with a one-line error naming the key.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace vgpu::vgpud {

struct DaemonConfig {
  std::string run_dir;                   // empty: the agents' run directory (ctl::RunDir())
  int64_t quantum_ms = 30000;            // time slice of jobs rotated on a full device
  std::string metrics_listen = "127.0.0.1:9400";  // HOST:PORT; "off": no HTTP server
  uint64_t host_budget = 0;              // bytes of host RAM for suspended jobs; 0: half of RAM
  bool oversubscribe = true;             // time-slice devices whose jobs do not fit together
  int64_t grace_ms = 60000;              // a job vgpud suspended resumes by itself after this
  std::string checkpoint_dir;            // where jobs past the host budget are checkpointed
  std::string admin_group;               // members may act on any job (besides root)
  std::string state_file;                // empty: <run_dir>/vgpud.state
  int64_t tick_ms = 200;                 // how often vgpud looks at the node
  std::string log_level = "info";
};

// The keys as they appear in the file and as flags (--quantum ...).
struct ConfigKey {
  const char* key;
  const char* flag;
  const char* help;
};
const std::vector<ConfigKey>& ConfigKeys();

// Reads a JSON object of config keys from `path` into *out (unknown keys and
// wrong types are refused, naming the key).
Status LoadConfigFile(const std::string& path, DaemonConfig* out);
// Applies one key's textual value (flags use this as well).
Status ApplyConfigValue(const std::string& key, const std::string& value, DaemonConfig* out);
// <run_dir>/vgpud.state unless state_file names another.
std::string StateFilePath(const DaemonConfig& c);

// Checks the values together (quantum > tick, listen address form, ...).
Status ValidateConfig(const DaemonConfig& c);

}  // namespace vgpu::vgpud
