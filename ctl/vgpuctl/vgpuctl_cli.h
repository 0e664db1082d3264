// Shared pieces of vgpuctl: exit codes, option parsing, output helpers.
#pragma once

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

// Options of the process-control commands. Which ones a command accepts is
// checked by ParseOptions.
struct Options {
  bool json = false;
  bool quiet = false;   // no progress display
  std::string run_dir;  // --run-dir: where agent sockets live
  std::optional<int> timeout_ms;
  std::string dir;                       // checkpoint --dir
  bool leave_running = false;            // checkpoint --leave-running
  bool allocations = false;              // info --allocations
  bool once = false;                     // top --once: one frame, no screen clearing
  std::string from;                      // restore --from
  std::optional<uint64_t> memory_limit;  // set --memory-limit
  std::optional<int> compute_share;      // set --compute-share
  std::optional<int> device;             // set --device
  std::optional<int> weight;             // set --weight
  std::optional<std::string> priority;   // set --priority
  std::string group;                     // set --group: every process of a quota group
  std::string to;                        // migrate --to DEVICE
  std::string map;                       // migrate --map OLD:NEW,...
  std::vector<std::string> positional;
};

// Parses args[first..] into *out. `allowed` lists the command's own options
// ("--dir", "--leave-running", ...); --json, --quiet/-q, --run-dir and
// --timeout are always accepted. Returns false with a message on error.
bool ParseOptions(const std::vector<std::string>& args, const std::vector<std::string>& allowed,
                  Options* out, std::string* error);

// Turns a path given on the command line into an absolute one: the agent's
// working directory is not ours.
std::string AbsolutePath(const std::string& path);

// Exit code for a transport failure / an agent's error response.
int ExitCodeFor(ErrorCode code, bool from_agent);

// Prints an error to stderr (or, with --json, a JSON object to stdout) and
// returns the matching exit code.
int ReportFailure(const Options& o, int64_t pid, const Status& status, bool from_agent);

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
