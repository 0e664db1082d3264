// Where agents put their sockets, and how their names are formed.
// Location (first that applies): $VGPU_RUN_DIR, $XDG_RUNTIME_DIR/vgpu,
// /run/vgpu when running as root, /tmp/vgpu-<uid>. Sockets are
// "agent-<pid>.sock". See docs/control-protocol.md.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>

#include "ctl/control/protocol.h"

namespace vgpu::ctl {

// The run directory this process uses (computed from the environment; not
// created).
std::string RunDir();

// Checks that an existing `dir` is safe to hold the sockets of agents running
// as `owner`: a real directory (not a symlink) owned by `owner` or root, and
// not writable by group/others unless sticky. ENOENT if it does not exist,
// EPERM (with the reason) if it is not safe. The agent checks the directory
// it listens in, clients the one they look in: the same rule on both sides.
Status CheckRunDir(const std::string& dir, uid_t owner);

// Creates `dir` (mode 0700) if missing, else CheckRunDir(dir, geteuid()).
// Fails closed with a message.
Status EnsureRunDir(const std::string& dir);

// Containers' agents listen in a directory of their own under the host's run
// directory, "<dir>/containers/<container id>", which vgpu-oci-hook mounts at
// the run directory's path inside the container: a container sees only its
// own agents, and the host finds them all (docs/containers.md).
inline constexpr const char* kContainersSubdir = "containers";
// vgpud's tenant socket's directory under the run directory, the one part of
// vgpud's that containers see (ctl/vgpud/daemon_server.h).
inline constexpr const char* kTenantSubdir = "tenant";
std::string ContainersDir(const std::string& run_dir);

// "<dir>/agent-<pid>.sock". Fails if it would not fit sockaddr_un.sun_path.
Status SocketPath(const std::string& dir, pid_t pid, std::string* out);

// The pid in an "agent-<pid>.sock" file name, or nullopt for other names.
std::optional<pid_t> PidFromSocketName(std::string_view name);

// True if no process `pid` exists (kill(pid, 0) fails with ESRCH). A process
// of another uid counts as alive.
bool ProcessIsDead(pid_t pid);

// Removes sockets of dead processes in `dir`. Returns how many were removed.
int RemoveStaleSockets(const std::string& dir);

}  // namespace vgpu::ctl
