// The control protocol spoken between vgpuctl (or vgpud) and the agent inside
// every interposed process: newline-delimited JSON over a Unix stream socket.
// docs/control-protocol.md is the reference; this header is its typed form.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace vgpu::ctl {

inline constexpr int kProtocolVersion = 1;
// A request line longer than this is refused (E2BIG) and the connection closed:
// it bounds the agent's memory per client.
inline constexpr size_t kMaxRequestBytes = 64 * 1024;
// Nesting deeper than this is refused before parsing (no request needs it).
inline constexpr int kMaxJsonDepth = 32;

// Errors are vgpu's one error type (common/status.h): errno-named codes,
// which is how they travel on the wire; kOk never appears on the wire.
using ::vgpu::ErrorCode;
using ::vgpu::ErrorCodeFromName;
using ::vgpu::ErrorCodeName;
using ::vgpu::Status;

// The commands this protocol version defines.
// "make_room" and "events" are vgpud's (docs/vgpud.md); an agent answers ENOSYS.
inline constexpr const char* kCommands[] = {
    "ping",    "ps",    "info",      "suspend",    "resume",          "checkpoint",
    "restore", "set",   "make_room", "events",     "migrate_prepare", "migrate_finish",
    "migrate", "drain", "undrain",   "ipc_export", "ipc_close"};
bool IsKnownCommand(std::string_view cmd);

struct Request {
  int v = kProtocolVersion;
  int64_t id = 0;  // echoed in progress lines and the response
  std::string cmd;
  nlohmann::json args = nlohmann::json::object();
  // Not on the wire: the caller's uid as the agent authenticated it
  // (SO_PEERCRED), for the handler's logs and policies; -1 if unknown.
  int64_t peer_uid = -1;
  int64_t peer_pid = -1;  // likewise, the caller's pid (in the agent's pid namespace)
};

struct Response {
  int64_t id = 0;
  bool ok = true;
  nlohmann::json result = nlohmann::json::object();  // when ok
  std::string error;                                 // when !ok: human-readable
  ErrorCode code = ErrorCode::kOk;                   // when !ok
  // Not in the JSON: descriptors that travel with the response line
  // (SCM_RIGHTS on its first byte; "ipc_export"). The server closes its
  // copies once sent (or not); the client owns what it receives.
  std::vector<int> fds;

  static Response Ok(nlohmann::json result = nlohmann::json::object());
  static Response Error(ErrorCode code, std::string message);
  static Response Error(const Status& status) { return Error(status.code, status.message); }
};

struct Progress {
  uint64_t done = 0;
  uint64_t total = 0;  // 0: unknown
  std::string phase;   // optional: "copy", "compress", "write", ...
};

// --- Typed arguments and results. Parse* functions check types and return
// EINVAL with a message naming the field; unknown fields are ignored. ---

struct CheckpointArgs {
  std::string dir;  // absolute; empty: the agent's default directory
  bool leave_running = false;
};
struct RestoreArgs {
  std::string from;  // absolute; empty: the agent's most recent checkpoint
};
struct SetArgs {
  std::optional<int> device;             // visible index; absent: every device
  std::optional<uint64_t> memory_limit;  // bytes; 0 = unlimited
  // On the wire "compute_share", in percent: above 0, at most 100 ("12.5").
  std::optional<uint32_t> share_permille;
  std::optional<int> weight;             // 1..kMaxComputeWeight (VGPU_COMPUTE_WEIGHT's)
  std::optional<std::string> priority;   // one of kPriorities
  // Set by vgpud (root) when it forwards a request of a job's owner who is not
  // an admin: the admin's ceilings apply as if the owner had asked directly.
  bool as_tenant = false;
};
// The priorities a process may have (VGPU_PRIORITY), highest first.
inline constexpr const char* kPriorities[] = {"high", "normal", "low"};

Status ParseCheckpointArgs(const nlohmann::json& args, CheckpointArgs* out);
Status ParseRestoreArgs(const nlohmann::json& args, RestoreArgs* out);
Status ParseSetArgs(const nlohmann::json& args, SetArgs* out);
// Checks the args of any known command (commands without args accept any object).
Status ValidateArgs(const std::string& cmd, const nlohmann::json& args);

nlohmann::json ToJson(const CheckpointArgs& a);
nlohmann::json ToJson(const RestoreArgs& a);
nlohmann::json ToJson(const SetArgs& a);

struct DeviceInfo {
  int index = 0;                  // as the process sees it (0..n-1)
  std::string uuid;               // of the physical GPU
  std::optional<uint64_t> quota;  // bytes; nullopt = unlimited
  uint64_t used = 0;              // bytes this process holds
  // Percent of the device's time (may be fractional); nullopt = no share set.
  std::optional<double> compute_share;
};
struct InfoResult {
  int64_t pid = 0;
  int64_t uid = 0;
  std::string version;            // libvgpu version
  std::string group;              // quota group; empty = none (per-process quota)
  std::string state = "running";  // "running" | "suspended"
  std::string command;            // /proc/<pid>/comm of the process
  std::string priority = "normal";        // one of kPriorities
  int64_t weight = 1;                     // compute weight, 1..1000
  std::string compute_policy = "native";  // "fixed" | "weighted" | "native"
  std::vector<DeviceInfo> devices;
  // The process's counters (common/counters.h) by wire name. Read from JSON
  // they come in name order; a name this build does not know is kept.
  std::vector<std::pair<std::string, uint64_t>> counters;
  // VGPU_CLAIM, VGPU_POD (labels, "namespace/name"; empty: none) and
  // VGPU_PREEMPTIBLE: false, vgpud never makes it give way to another job.
  std::string claim;
  std::string pod;
  std::string slurm_job;
  bool preemptible = true;
  // Its GPUs were given by a scheduler (an admin file fixes its visible
  // devices: a Slurm job's GRES, a DRA claim's device): vgpud may suspend it
  // but never moves it to another GPU, which that scheduler may have given to
  // another job.
  bool placed = false;
};
struct CheckpointResult {
  std::string path;
  uint64_t bytes = 0;
  double seconds = 0;
};

// "ps" as one process's agent answers it: its "info" result as a list of one
// (the shape vgpud answers for many). An error response passes through.
Response ProcessListOf(Response info);

nlohmann::json ToJson(const InfoResult& r);
nlohmann::json ToJson(const CheckpointResult& r);
// Tolerant readers for the client: missing fields keep their defaults, wrong
// types are an error.
Status ParseInfoResult(const nlohmann::json& j, InfoResult* out);
Status ParseCheckpointResult(const nlohmann::json& j, CheckpointResult* out);

// --- Framing: one JSON document per line, no embedded newlines. ---

// Parses one request line (without its '\n'). On failure out->id holds the
// request id when it could be read, so the error response can echo it.
Status ParseRequest(std::string_view line, Request* out);
std::string SerializeRequest(const Request& r);  // ends with '\n'

std::string SerializeResponse(const Response& r);              // ends with '\n'
std::string SerializeProgress(int64_t id, const Progress& p);  // ends with '\n'

// A line the client receives: either progress or the final response.
struct ServerLine {
  bool is_progress = false;
  Progress progress;
  Response response;
};
Status ParseServerLine(std::string_view line, ServerLine* out);

// Dumps JSON on one line; invalid UTF-8 in strings is replaced, never thrown.
std::string DumpLine(const nlohmann::json& j);

// Maximum nesting of '[' / '{' outside strings (cheap pre-parse guard).
int JsonDepth(std::string_view text);

}  // namespace vgpu::ctl
