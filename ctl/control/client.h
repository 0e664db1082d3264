// The client side of the control protocol: what vgpuctl (and later vgpud)
// uses to talk to the agents of interposed processes.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include "ctl/control/protocol.h"

namespace vgpu::ctl {

using ProgressCallback = std::function<void(const Progress&)>;

struct ClientOptions {
  std::string run_dir;  // empty: RunDir()
  // Longest silence tolerated from the agent (progress lines reset it).
  int timeout_ms = 30000;
  // Longest the whole call may take, progress or not (0: no limit). vgpud
  // sets it: an agent that keeps reporting progress must not hold it for ever.
  int deadline_ms = 0;
  // Asked every 250 ms while the agent is silent (empty: never); true ends the
  // call at once with EBUSY. vgpud gives up on an agent whose process was
  // stopped (SIGSTOP) mid-request, which would answer nothing until continued.
  std::function<bool()> give_up;
};

// Sends `request` to the agent of `pid` and waits for the final response,
// passing progress lines to `on_progress` (may be empty). Nothing is sent
// unless the run directory passes CheckRunDir for the uid the agent must run
// as (ours; for root, the process's) and the socket is answered (SO_PEERCRED)
// by process `pid` itself, running as that uid. The returned Status
// describes the transport: not ok means no response was received —
//   ENOENT     no such process, or it has no agent (not interposed, or it has
//              not used CUDA yet); stale sockets of dead processes are removed
//   EUNTRUSTED the run directory is unsafe (owner, mode, symlink), or another
//              process answers on the socket: possibly a planted impostor
//   EPERM      the socket cannot be opened by this user, or the process runs
//              as another uid
//   ETIMEDOUT  the agent stayed silent longer than options.timeout_ms, or did
//              not answer within options.deadline_ms
//   EPROTO/EIO the agent sent garbage or closed the connection early
// When ok, *response holds the agent's answer, which may itself be an error
// (response->ok == false, e.g. EPERM from the SO_PEERCRED check).
Status Call(pid_t pid, const Request& request, const ProgressCallback& on_progress,
            Response* response, const ClientOptions& options = {});

// The same, addressing a socket by path: no directory or peer checks (the
// caller chose the socket).
Status CallSocket(const std::string& socket_path, const Request& request,
                  const ProgressCallback& on_progress, Response* response, int timeout_ms);

// vgpud's socket in `run_dir` (empty: RunDir()); where only its tenant
// socket is there (in a container), that one.
std::string DaemonSocketPath(const std::string& run_dir);
// Sends `request` to vgpud. The daemon must run as root or as our own uid
// (SO_PEERCRED), else EUNTRUSTED: a socket planted by another user is never
// believed. ENOENT when no vgpud listens.
Status CallDaemon(const std::string& run_dir, const Request& request,
                  const ProgressCallback& on_progress, Response* response, int timeout_ms);

struct AgentEntry {
  pid_t pid = 0;  // in our pid namespace (a container's agent: its host pid)
  std::string socket_path;
  std::string container;  // the container id, for an agent under containers/
};

// CheckRunDir for a directory about to be searched for agents: owned by us or
// root (for root callers, by anyone: each agent is checked when called).
// ENOENT if it does not exist, EUNTRUSTED with the reason if it is unsafe.
Status CheckAgentDir(const std::string& dir);

// The agents in `run_dir` (empty: RunDir()) and in its containers'
// directories (ContainersDir; a container's agent names its socket by its pid
// in the container, and is listed by the pid SO_PEERCRED gives us), sorted by
// pid; none if the directory fails CheckAgentDir. Sockets of dead
// processes are removed, and so are sockets nobody listens on any more
// (a crashed agent whose pid was reused). `removed`, if given, receives the
// paths removed.
std::vector<AgentEntry> ListAgents(const std::string& run_dir = "",
                                   std::vector<std::string>* removed = nullptr);

}  // namespace vgpu::ctl
