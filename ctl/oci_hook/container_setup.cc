#include "ctl/oci_hook/container_setup.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <poll.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string_view>

#include "common/container_paths.h"
#include "ctl/control/run_dir.h"
#include "ctl/oci_hook/oci_state.h"
#include "ctl/oci_hook/preload_file.h"

namespace vgpu::oci_hook {
namespace {

Status Errno(const std::string& what, int err) {
  return Status::Error(ErrorCode::kIo, what + ": " + std::strerror(err));
}

// Longest the loader-cache rebuild may take: the image is untrusted (a FIFO
// where a library should be would block ldconfig), and the runtime waits for
// the hook before the container starts.
constexpr int kLdconfigTimeoutMs = 30000;

// Collects the child's stderr until it closes or the deadline passes; false
// on the deadline.
bool ReadUntilClosed(int fd, std::string* err) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(kLdconfigTimeoutMs);
  char buf[512];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    pollfd p{fd, POLLIN, 0};
    if (left <= 0 || poll(&p, 1, static_cast<int>(left)) == 0) return false;
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return true;
    if (err->size() < 4096) err->append(buf, static_cast<size_t>(n));
  }
}

// Runs the host's ldconfig (static, so it needs nothing of the image) chrooted
// into the rootfs, killed past kLdconfigTimeoutMs. Its stderr becomes the
// message when it fails.
Status RunLdconfig(const std::string& rootfs) {
  const char* bin = access("/sbin/ldconfig", X_OK) == 0 ? "/sbin/ldconfig" : "/usr/sbin/ldconfig";
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) return Errno("pipe", errno);
  pid_t pid = fork();
  if (pid == 0) {
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0) dup2(null, STDOUT_FILENO);
    dup2(pipe_fds[1], STDERR_FILENO);
    execl(bin, "ldconfig", "-r", rootfs.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  const int fork_errno = errno;
  close(pipe_fds[1]);
  Fd err_pipe(pipe_fds[0]);
  if (pid < 0) return Errno("fork", fork_errno);
  std::string err;
  const bool finished = ReadUntilClosed(err_pipe.get(), &err);
  if (!finished) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!finished) {
    return Status::Error(ErrorCode::kTimedOut, std::string(bin) + " -r <rootfs> took longer than " +
                                                   std::to_string(kLdconfigTimeoutMs / 1000) +
                                                   " s: killed");
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return Status::Ok();
  return Status::Error(ErrorCode::kIo,
                       std::string(bin) + " -r <rootfs> failed (" +
                           (WIFEXITED(status) ? "exit " + std::to_string(WEXITSTATUS(status))
                                              : std::string("killed")) +
                           "): " + Printable(err));
}

// The id names a directory of the host: one component, no dot first.
bool ValidDirName(std::string_view id) {
  if (id.empty() || id.size() > 128 || id[0] == '.') return false;
  for (char c : id) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_' || c == '.';
    if (!ok) return false;
  }
  return true;
}

// Opens directory `name` under `parent` (AT_FDCWD: an absolute path), creating
// it with `mode` if missing; it must be ours (root's) and not a symlink.
Status OpenOwnDir(int parent, const std::string& name, mode_t mode, Fd* out) {
  if (mkdirat(parent, name.c_str(), mode) != 0 && errno != EEXIST) {
    return Errno("cannot create " + name, errno);
  }
  int fd = openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return Errno(name + " (a symlink or not a directory?)", errno);
  *out = Fd(fd);
  struct stat st {};
  if (fstat(fd, &st) != 0) return Errno(name, errno);
  if (st.st_uid != geteuid()) {
    return Status::Error(ErrorCode::kPerm, name + " is owned by uid " + std::to_string(st.st_uid) +
                                               ", not by the hook's: refused");
  }
  return Status::Ok();
}

std::string FdPath(int fd) { return "/proc/self/fd/" + std::to_string(fd); }

// Mounts only in the container's mount namespace, never in the runtime's (a
// runtime that ran this hook at another stage would have it mount on the
// host). The container's /proc, mounted by the runtime in that namespace
// before createContainer, is the sign: in the host's namespace <rootfs>/proc
// is an empty directory. (The namespace files of the container's process
// cannot be compared: runc's init is not dumpable.)
Status CheckContainerMountNamespace(int rootfs_fd) {
  Fd proc(openat(rootfs_fd, "proc", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  struct statfs fs {};
  if (proc.get() >= 0 && fstatfs(proc.get(), &fs) == 0 && fs.f_type == PROC_SUPER_MAGIC) {
    return Status::Ok();
  }
  return Status::Error(ErrorCode::kPerm,
                       "the hook does not run in the container's mount namespace (no /proc "
                       "mounted in its root file system): it must run at createContainer to "
                       "give the container its run directory");
}

// vgpud's tenant directory (<run>/tenant, created here if vgpud has not yet:
// a later vgpud's socket appears through the bind) at <run>/tenant in the
// container, read-only: its socket lets the container's jobs wait for memory
// as host jobs do, and nothing else (ctl/vgpud/daemon_server.h).
Status ExposeTenantSocket(int host_run_fd, int container_run_fd) {
  Fd tenant, point;
  Status s = OpenOwnDir(host_run_fd, ctl::kTenantSubdir, 0755, &tenant);
  if (s.ok()) s = OpenOwnDir(container_run_fd, ctl::kTenantSubdir, 0755, &point);
  if (!s.ok()) return s;
  if (mount(FdPath(tenant.get()).c_str(), FdPath(point.get()).c_str(), nullptr, MS_BIND, nullptr) !=
      0) {
    return Errno("cannot mount vgpud's tenant directory", errno);
  }
  Fd mounted(openat(container_run_fd, ctl::kTenantSubdir,
                    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (mounted.get() < 0 ||
      mount(nullptr, FdPath(mounted.get()).c_str(), nullptr,
            MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) {
    return Errno("cannot make vgpud's tenant directory read-only", errno);
  }
  return Status::Ok();
}

}  // namespace

Status MakeDriverFindable(int rootfs_fd, const std::string& rootfs) {
  Fd driver;
  Status s = OpenContainerDir(rootfs_fd, kContainerDriverDir, false, &driver);
  if (s.code == ErrorCode::kNoEnt) return Status::Ok();
  if (s.ok())
    s = WriteContainerFile(rootfs_fd, kContainerLdConf, std::string(kContainerDriverDir) + "\n");
  if (!s.ok()) return s;
  s = CheckRegularFile(rootfs_fd, "/etc/ld.so.conf");
  if (s.code == ErrorCode::kNoEnt) {
    s = WriteContainerFile(rootfs_fd, "/etc/ld.so.conf", "include /etc/ld.so.conf.d/*.conf\n");
  }
  if (!s.ok()) return s;
  return RunLdconfig(rootfs);
}

Status ExposeRunDir(const std::string& host_run_dir, const std::string& id, uid_t uid, gid_t gid,
                    int rootfs_fd) {
  if (host_run_dir.empty() || host_run_dir[0] != '/') {
    return Status::Error(ErrorCode::kInval,
                         "run directory '" + Printable(host_run_dir) + "' is not an absolute path");
  }
  if (!ValidDirName(id)) {
    return Status::Error(ErrorCode::kInval,
                         "container id '" + Printable(id) + "' cannot name a directory");
  }
  Status s = CheckContainerMountNamespace(rootfs_fd);
  Fd run, containers, own, target;
  if (s.ok()) s = OpenOwnDir(AT_FDCWD, host_run_dir, 0700, &run);
  if (s.ok()) s = OpenOwnDir(run.get(), ctl::kContainersSubdir, 0700, &containers);
  if (s.ok()) s = OpenOwnDir(containers.get(), id, 0700, &own);
  if (!s.ok()) return s;
  if (fchown(own.get(), uid, gid) != 0 || fchmod(own.get(), 0700) != 0) {
    return Errno("cannot give the container its run directory", errno);
  }
  s = OpenContainerDir(rootfs_fd, host_run_dir, true, &target);
  if (!s.ok()) return s;
  if (mount(FdPath(own.get()).c_str(), FdPath(target.get()).c_str(), nullptr, MS_BIND, nullptr) !=
      0) {
    return Errno("cannot mount the container's run directory at " + host_run_dir, errno);
  }
  // The bind is on top of `target` now: reopen the path to reach it.
  Fd mounted;
  s = OpenContainerDir(rootfs_fd, host_run_dir, false, &mounted);
  if (s.ok() && mount(nullptr, FdPath(mounted.get()).c_str(), nullptr,
                      MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) {
    s = Errno("cannot restrict the container's run directory", errno);
  }
  if (s.ok()) s = ExposeTenantSocket(run.get(), mounted.get());
  return s;
}

Status RemoveRunDir(const std::string& host_run_dir, const std::string& id) {
  if (!ValidDirName(id)) {
    return Status::Error(ErrorCode::kInval,
                         "container id '" + Printable(id) + "' cannot name a directory");
  }
  const std::string containers = ctl::ContainersDir(host_run_dir);
  Fd parent(open(containers.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (parent.get() < 0) return errno == ENOENT ? Status::Ok() : Errno(containers, errno);
  Fd own(openat(parent.get(), id.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (own.get() < 0) return errno == ENOENT ? Status::Ok() : Errno(containers + "/" + id, errno);
  // Only the agents' sockets: anything else the container put there stays,
  // and so does the directory.
  if (DIR* d = fdopendir(dup(own.get()))) {
    while (dirent* e = readdir(d)) {
      if (ctl::PidFromSocketName(e->d_name)) unlinkat(own.get(), e->d_name, 0);
    }
    closedir(d);
  }
  unlinkat(own.get(), ctl::kTenantSubdir, AT_REMOVEDIR);  // the tenant socket's mount point
  if (unlinkat(parent.get(), id.c_str(), AT_REMOVEDIR) != 0 && errno != ENOTEMPTY) {
    return Errno("cannot remove " + containers + "/" + id, errno);
  }
  return Status::Ok();
}

}  // namespace vgpu::oci_hook
