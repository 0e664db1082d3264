#include "ctl/control/client.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "ctl/control/run_dir.h"

namespace vgpu::ctl {
namespace {

using Clock = std::chrono::steady_clock;

// Closes the descriptor on every path out.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  Fd& operator=(Fd&& other) noexcept {
    std::swap(fd_, other.fd_);
    return *this;
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

// A socket path longer than sockaddr_un holds (a container's directory under
// a long run directory: its id alone is 64 characters) is reached through a
// descriptor of its directory, "/proc/self/fd/N/NAME".
Status ShortSocketPath(const std::string& path, Fd* dir, std::string* out) {
  if (path.size() < sizeof(sockaddr_un{}.sun_path)) return *out = path, Status::Ok();
  const size_t slash = path.rfind('/');
  if (slash != std::string::npos) {
    *dir = Fd(open(path.substr(0, slash).c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  }
  if (dir->get() < 0) return Status::Error(ErrorCode::kInval, "socket path too long: " + path);
  *out = "/proc/self/fd/" + std::to_string(dir->get()) + path.substr(slash);
  if (out->size() >= sizeof(sockaddr_un{}.sun_path)) {
    return Status::Error(ErrorCode::kInval, "socket name too long: " + path);
  }
  return Status::Ok();
}

Status Connect(const std::string& path, int* out) {
  sockaddr_un addr{};
  Fd dir;
  std::string short_path;
  if (Status st = ShortSocketPath(path, &dir, &short_path); !st.ok()) return st;
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, short_path.c_str(), short_path.size() + 1);
  // Non-blocking for the connect only: a blocking connect to a listener that
  // no longer accepts (a stuck agent whose backlog is full) waits for ever,
  // and vgpud, which probes every agent, would wait with it.
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return Status::Error(ErrorCode::kIo, std::string("socket: ") + strerror(errno));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    const int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
      close(fd);
      return Status::Error(ErrorCode::kIo, std::string("fcntl: ") + strerror(errno));
    }
    *out = fd;
    return Status::Ok();
  }
  int err = errno;
  if (err == EAGAIN) {
    close(fd);
    return Status::Error(ErrorCode::kTimedOut,
                         path + ": not accepting connections (its backlog is full)");
  }
  close(fd);
  std::string why = path + ": " + strerror(err);
  if (err == EACCES || err == EPERM) {
    return Status::Error(ErrorCode::kPerm, "permission denied: cannot connect to " + why);
  }
  if (err == ENOENT || err == ECONNREFUSED) return Status::Error(ErrorCode::kNoEnt, why);
  return Status::Error(ErrorCode::kIo, "cannot connect to " + why);
}

bool SendAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// recv that keeps the descriptors a response may carry (SCM_RIGHTS).
ssize_t Receive(int fd, char* data, size_t size, std::vector<int>* fds) {
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 8)];
  iovec iov{data, size};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
  for (cmsghdr* c = n > 0 ? CMSG_FIRSTHDR(&msg) : nullptr; c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int d;
      std::memcpy(&d, CMSG_DATA(c) + i * sizeof(int), sizeof d);
      fds->push_back(d);
    }
  }
  return n;
}

// Reads one line (without '\n') with a silence timeout; descriptors that
// arrive with it are appended to *fds.
Status ReadLine(int fd, std::string* buf, std::string* line, int timeout_ms,
                std::vector<int>* fds) {
  for (;;) {
    size_t nl = buf->find('\n');
    if (nl != std::string::npos) {
      *line = buf->substr(0, nl);
      buf->erase(0, nl + 1);
      return Status::Ok();
    }
    if (buf->size() > (16u << 20)) {
      return Status::Error(ErrorCode::kProto, "agent sent an overlong line");
    }
    pollfd p{fd, POLLIN, 0};
    int r = poll(&p, 1, timeout_ms);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) {
      char text[64];
      std::snprintf(text, sizeof text, "no answer from the agent within %g s", timeout_ms / 1000.0);
      return Status::Error(ErrorCode::kTimedOut, text);
    }
    char chunk[8192];
    ssize_t n = Receive(fd, chunk, sizeof chunk, fds);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return Status::Error(ErrorCode::kIo, "the agent closed the connection before answering");
    }
    buf->append(chunk, static_cast<size_t>(n));
  }
}

Status Exchange(int fd, const Request& request, const ProgressCallback& on_progress,
                Response* response, int timeout_ms, int deadline_ms = 0,
                const std::function<bool()>& give_up = {}) {
  constexpr int kGiveUpPollMs = 250;
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(deadline_ms);
  if (!SendAll(fd, SerializeRequest(request))) {
    // The agent may have refused us before reading (SO_PEERCRED): its answer
    // is still in the socket.
  }
  auto past_deadline = [&] {
    char text[80];
    std::snprintf(text, sizeof text, "the agent did not finish within %g s", deadline_ms / 1000.0);
    return Status::Error(ErrorCode::kTimedOut, text);
  };
  std::string buf, line;
  std::vector<int> fds;
  // Descriptors of a response that is not handed out are closed.
  struct Closer {
    std::vector<int>* v;
    ~Closer() {
      for (int d : *v) close(d);
    }
  } closer{&fds};
  for (;;) {
    int wait_ms = timeout_ms;
    bool deadline_first = false;  // the deadline comes before the silence limit
    if (deadline_ms > 0) {
      const auto left =
          std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) return past_deadline();
      deadline_first = left < wait_ms;
      wait_ms = static_cast<int>(std::min<int64_t>(wait_ms, left));
    }
    Status st;
    if (give_up) {  // the same silence limit, in slices with a question between them
      for (int silent_ms = 0;;) {
        const int slice = std::min(kGiveUpPollMs, wait_ms - silent_ms);
        st = ReadLine(fd, &buf, &line, slice, &fds);
        if (st.code != ErrorCode::kTimedOut) break;
        silent_ms += slice;
        if (silent_ms >= wait_ms) break;
        if (give_up()) {
          return Status::Error(ErrorCode::kBusy, "gave up waiting: the agent's process is stopped");
        }
      }
      if (st.code == ErrorCode::kTimedOut) {
        char text[64];
        std::snprintf(text, sizeof text, "no answer from the agent within %g s", wait_ms / 1000.0);
        st = Status::Error(ErrorCode::kTimedOut, text);
      }
    } else {
      st = ReadLine(fd, &buf, &line, wait_ms, &fds);
    }
    if (st.code == ErrorCode::kTimedOut && deadline_first) return past_deadline();
    if (!st.ok()) return st;
    ServerLine sl;
    st = ParseServerLine(line, &sl);
    if (!st.ok()) return st;
    if (!sl.is_progress) {
      *response = std::move(sl.response);
      response->fds = std::exchange(fds, {});
      return Status::Ok();
    }
    if (on_progress) on_progress(sl.progress);
  }
}

// The effective uid of process `pid` (the one its agent runs as), from
// /proc/<pid>/status; false if it cannot be read (the process is gone).
bool ProcessEuid(pid_t pid, uid_t* out) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line)) {
    if (!line.starts_with("Uid:")) continue;
    std::istringstream fields(line.substr(4));
    long long real = -1, effective = -1;
    if (!(fields >> real >> effective) || effective < 0) return false;
    *out = static_cast<uid_t>(effective);
    return true;
  }
  return false;
}

// Whose agent we may talk to about `pid`: our own uid's; for root, the uid
// the process runs as (root may control every job).
bool ExpectedAgentUid(pid_t pid, uid_t* out) {
  if (geteuid() != 0) {
    *out = geteuid();
    return true;
  }
  return ProcessEuid(pid, out);
}

// The socket must be answered by the target process itself, as the uid we
// expect. Anyone who could create the socket file (a planted run directory)
// can listen on it, but only the target's own agent has its pid.
Status CheckPeer(int fd, const std::string& path, pid_t pid, uid_t uid) {
  ucred cred{};
  socklen_t len = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    return Status::Error(ErrorCode::kUntrusted,
                         "cannot tell who serves " + path + ": " + strerror(errno));
  }
  if (cred.pid != pid) {
    return Status::Error(ErrorCode::kUntrusted,
                         "refusing to talk to " + path + ": it is served by pid " +
                             std::to_string(cred.pid) + " (uid " + std::to_string(cred.uid) +
                             "), not by process " + std::to_string(pid) +
                             "; another process may be impersonating its agent");
  }
  if (cred.uid != uid) {
    return Status::Error(ErrorCode::kPerm, "permission denied: process " + std::to_string(pid) +
                                               " runs as uid " + std::to_string(cred.uid) +
                                               ", not as uid " + std::to_string(uid));
  }
  return Status::Ok();
}

Status CheckDir(const std::string& dir, uid_t owner) {
  Status st = CheckRunDir(dir, owner);
  if (st.code == ErrorCode::kPerm) {
    st.code = ErrorCode::kUntrusted;
    st.message = "refusing to use it: " + st.message;
  }
  return st;
}

}  // namespace

Status CheckAgentDir(const std::string& dir) {
  uid_t owner = geteuid();
  struct stat st {};
  // Root may look into every user's directory; each agent found there is
  // then checked by its peer credentials.
  if (owner == 0 && lstat(dir.c_str(), &st) == 0) owner = st.st_uid;
  return CheckDir(dir, owner);
}

Status CallSocket(const std::string& socket_path, const Request& request,
                  const ProgressCallback& on_progress, Response* response, int timeout_ms) {
  int raw = -1;
  Status st = Connect(socket_path, &raw);
  if (!st.ok()) return st;
  Fd fd(raw);
  return Exchange(fd.get(), request, on_progress, response, timeout_ms);
}

std::string DaemonSocketPath(const std::string& run_dir) {
  const std::string dir = run_dir.empty() ? RunDir() : run_dir;
  std::string main = dir + "/vgpud.sock";
  // In a container only vgpud's tenant directory is mounted (the hook does):
  // its socket serves a job's own make_room (docs/security.md).
  std::string tenant = dir + "/" + kTenantSubdir + "/vgpud.sock";
  struct stat st {};
  if (stat(main.c_str(), &st) != 0 && stat(tenant.c_str(), &st) == 0) return tenant;
  return main;
}

Status CallDaemon(const std::string& run_dir, const Request& request,
                  const ProgressCallback& on_progress, Response* response, int timeout_ms) {
  const std::string path = DaemonSocketPath(run_dir);
  int raw = -1;
  Status st = Connect(path, &raw);
  if (!st.ok()) return st;
  Fd fd(raw);
  ucred cred{};
  socklen_t len = sizeof cred;
  if (getsockopt(fd.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    return Status::Error(ErrorCode::kUntrusted, path + ": peer credentials unavailable");
  }
  if (cred.uid != 0 && cred.uid != geteuid()) {
    return Status::Error(ErrorCode::kUntrusted, path + " is served by uid " +
                                                    std::to_string(cred.uid) +
                                                    ", neither root nor us: not vgpud");
  }
  return Exchange(fd.get(), request, on_progress, response, timeout_ms);
}

namespace {

// Visits the agent sockets of `dir` that are answered, with the pid their
// name gives and the connected descriptor. A socket nobody listens on (the
// agents rename a socket into place only once it listens, so a refused
// connection means it is stale), or one whose named pid `dead` says is gone,
// is removed.
template <typename Dead, typename Visit>
void ScanAgentDir(const std::string& dir, std::vector<std::string>* removed, Dead dead,
                  Visit visit) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return;
  while (dirent* e = readdir(d)) {
    std::optional<pid_t> pid = PidFromSocketName(e->d_name);
    if (!pid) continue;
    std::string path = dir + "/" + e->d_name;
    int raw = -1;
    if (dead(*pid) || Connect(path, &raw).code == ErrorCode::kNoEnt) {
      if (raw >= 0) close(raw);
      if (unlink(path.c_str()) == 0 && removed != nullptr) removed->push_back(path);
      continue;
    }
    Fd fd(raw);
    visit(*pid, path, fd.get());
  }
  closedir(d);
}

// The agents of one container's directory, by the pid their peer has in our
// namespace (names carry the container's pids; 0, not visible to us: skipped).
void ListContainerAgents(const std::string& dir, const std::string& container,
                         std::vector<AgentEntry>* out, std::vector<std::string>* removed) {
  ScanAgentDir(
      dir, removed, [](pid_t) { return false; },
      [&](pid_t, const std::string& path, int fd) {
        ucred cred{};
        socklen_t len = sizeof cred;
        if (fd < 0 || getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || cred.pid <= 0)
          return;
        out->push_back({cred.pid, path, container});
      });
}

// Every container directory under `run_dir` that passes CheckAgentDir.
void ListAllContainerAgents(const std::string& run_dir, std::vector<AgentEntry>* out,
                            std::vector<std::string>* removed) {
  const std::string base = ContainersDir(run_dir);
  if (!CheckAgentDir(base).ok()) return;
  DIR* d = opendir(base.c_str());
  if (d == nullptr) return;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    const std::string dir = base + "/" + e->d_name;
    if (CheckAgentDir(dir).ok()) ListContainerAgents(dir, e->d_name, out, removed);
  }
  closedir(d);
}

}  // namespace

Status Call(pid_t pid, const Request& request, const ProgressCallback& on_progress,
            Response* response, const ClientOptions& options) {
  std::string dir = options.run_dir.empty() ? RunDir() : options.run_dir;
  std::string path;
  Status st = SocketPath(dir, pid, &path);
  if (!st.ok()) return st;
  uid_t uid = 0;
  if (pid <= 0 || ProcessIsDead(pid) || !ExpectedAgentUid(pid, &uid)) {
    // Stale, if it exists; only where we would trust a socket.
    if (pid > 0 && CheckDir(dir, geteuid()).ok()) unlink(path.c_str());
    return Status::Error(ErrorCode::kNoEnt, "no such process: " + std::to_string(pid));
  }
  // Not ours by name: perhaps a container's agent (checked below, like any
  // socket, by its peer's pid and uid, and its directory by CheckDir). Only
  // for a live process: the search connects to every container's agents.
  if (access(path.c_str(), F_OK) != 0) {
    std::vector<AgentEntry> in_containers;
    ListAllContainerAgents(dir, &in_containers, nullptr);
    for (const AgentEntry& a : in_containers) {
      if (a.pid != pid) continue;
      path = a.socket_path;
      dir = path.substr(0, path.rfind('/'));
      break;
    }
  }
  st = CheckDir(dir, uid);
  int raw = -1;
  if (st.ok()) st = Connect(path, &raw);
  Fd fd(raw);
  if (st.ok()) st = CheckPeer(fd.get(), path, pid, uid);
  if (st.ok()) {
    st = Exchange(fd.get(), request, on_progress, response, options.timeout_ms, options.deadline_ms,
                  options.give_up);
  }
  if (st.code == ErrorCode::kNoEnt) {
    return Status::Error(ErrorCode::kNoEnt,
                         "process " + std::to_string(pid) +
                             " has no vgpu agent (not interposed, or no CUDA use yet; looked "
                             "for " +
                             path + ")");
  }
  if (!st.ok()) st.message = "process " + std::to_string(pid) + ": " + st.message;
  return st;
}

std::vector<AgentEntry> ListAgents(const std::string& run_dir, std::vector<std::string>* removed) {
  std::string dir = run_dir.empty() ? RunDir() : run_dir;
  std::vector<AgentEntry> out;
  if (!CheckAgentDir(dir).ok()) return out;  // nothing in it is removed either
  ScanAgentDir(dir, removed, ProcessIsDead, [&](pid_t pid, const std::string& path, int) {
    out.push_back({pid, path, ""});
  });
  ListAllContainerAgents(dir, &out, removed);
  std::sort(out.begin(), out.end(),
            [](const AgentEntry& a, const AgentEntry& b) { return a.pid < b.pid; });
  return out;
}

}  // namespace vgpu::ctl
