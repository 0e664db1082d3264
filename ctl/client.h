// The client side of the control protocol: what vgpuctl (and later vgpud)
// uses to talk to the agents of interposed processes.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include "ctl/protocol.h"

namespace vgpu::ctl {

using ProgressCallback = std::function<void(const Progress&)>;

struct ClientOptions {
  std::string run_dir;  // empty: RunDir()
  // Longest silence tolerated from the agent (progress lines reset it).
  int timeout_ms = 30000;
};

// Sends `request` to the agent of `pid` and waits for the final response,
// passing progress lines to `on_progress` (may be empty). The returned Status
// describes the transport: not ok means no response was received —
//   ENOENT     no such process, or it has no agent (not interposed, or it has
//              not used CUDA yet); stale sockets of dead processes are removed
//   EPERM      the socket cannot be opened by this user
//   ETIMEDOUT  the agent stayed silent longer than options.timeout_ms
//   EPROTO/EIO the agent sent garbage or closed the connection early
// When ok, *response holds the agent's answer, which may itself be an error
// (response->ok == false, e.g. EPERM from the SO_PEERCRED check).
Status Call(pid_t pid, const Request& request, const ProgressCallback& on_progress,
            Response* response, const ClientOptions& options = {});

// The same, addressing a socket by path.
Status CallSocket(const std::string& socket_path, const Request& request,
                  const ProgressCallback& on_progress, Response* response, int timeout_ms);

struct AgentEntry {
  pid_t pid = 0;
  std::string socket_path;
};

// The agents in `run_dir` (empty: RunDir()), sorted by pid. Sockets of dead
// processes are removed, and so are sockets nobody listens on any more
// (a crashed agent whose pid was reused). `removed`, if given, receives the
// paths removed.
std::vector<AgentEntry> ListAgents(const std::string& run_dir = "",
                                   std::vector<std::string>* removed = nullptr);

}  // namespace vgpu::ctl
