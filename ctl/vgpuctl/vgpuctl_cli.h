// Shared pieces of vgpuctl: exit codes, the commands' option structs, output
// helpers.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ctl/control/protocol.h"

namespace vgpu::ctl::cli {

// Exit codes scripts can rely on (docs/control-protocol.md, "vgpuctl").
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;      // the agent ran the operation and it failed
inline constexpr int kExitUsage = 2;       // bad command line
inline constexpr int kExitNotFound = 3;    // no such process, or it has no agent
inline constexpr int kExitPermission = 4;  // not allowed to talk to that agent
inline constexpr int kExitBusy = 5;        // wrong state or another operation in progress
inline constexpr int kExitComm = 6;        // timeout or protocol error talking to the agent
inline constexpr int kExitUntrusted = 7;   // unsafe run directory, or an impostor on the socket

// The options every command that talks to an agent or to vgpud accepts.
// Each command's own options are a struct derived from it; vgpuctl.cc declares
// them to CLI11 with the value parsers of common/parse.h.
struct CommonOptions {
  bool json = false;
  bool quiet = false;   // -q: no progress display
  std::string run_dir;  // --run-dir: where agent sockets live
  std::optional<int> timeout_ms;
};

struct PidCommand : CommonOptions {
  pid_t pid = 0;
};
struct InfoCommand : PidCommand {
  bool allocations = false;
};
struct CheckpointCommand : PidCommand {
  std::string dir;  // absolute; empty: the agent's default
  bool leave_running = false;
};
struct RestoreCommand : PidCommand {
  std::string from;           // absolute; empty: the agent's most recent image
  std::optional<int> device;  // onto GPU N (node index)
};
struct MigrateCommand : PidCommand {
  std::string to;   // DEVICE (index or UUID)
  std::string map;  // OLD:NEW,...
};
// set: a PID or --group G, and what to change.
struct SetCommand : CommonOptions {
  std::optional<pid_t> pid;
  std::string group;
  SetArgs args;
};
struct TopCommand : CommonOptions {
  bool once = false;  // one frame, no screen clearing
};
struct DrainCommand : CommonOptions {
  std::string device;  // index or UUID
};

// Turns a path given on the command line into an absolute one: the agent's
// working directory is not ours.
std::string AbsolutePath(const std::string& path);

// `s` padded with spaces to `width` columns (as printf's %-Ns, for values of
// any length).
std::string PadRight(const std::string& s, size_t width);

// Exit code for a transport failure / an agent's error response.
int ExitCodeFor(ErrorCode code, bool from_agent);

// Prints an error to stderr (or, with --json, a JSON object to stdout) and
// returns the matching exit code.
int ReportFailure(const CommonOptions& o, int64_t pid, const Status& status, bool from_agent);

// Shows progress on stderr: a redrawn bar when stderr is a terminal, else a
// plain line every 10% (or every 2 s).
class ProgressDisplay {
 public:
  ProgressDisplay(std::string verb, bool enabled);
  ~ProgressDisplay();
  void Update(const Progress& p);
  void Finish();

 private:
  std::string verb_;
  bool enabled_;
  bool tty_;
  bool drawn_ = false;
  int last_decile_ = -1;
  int64_t last_ms_ = 0;
};

}  // namespace vgpu::ctl::cli
