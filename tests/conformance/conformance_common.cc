#include "conformance_common.h"

#include <cuda.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>

extern char** environ;

namespace vgpu::conformance {
namespace {

std::string g_node_name;
bool g_node_existed = true;

void CleanupNode() {
  if (!g_node_existed && !g_node_name.empty()) UnlinkNodeShm(g_node_name);
}

}  // namespace

std::string NodeShmName(const std::string& node_name) { return "/vgpu-sim-" + node_name; }

bool NodeShmExists(const std::string& node_name) {
  struct stat st;
  return stat(("/dev/shm" + NodeShmName(node_name)).c_str(), &st) == 0;
}

bool UnlinkNodeShm(const std::string& node_name) {
  return shm_unlink(NodeShmName(node_name).c_str()) == 0;
}

void PrepareSimEnvironment(const char* default_kernels_library) {
  const char* node = getenv("VGPU_SIM_NODE");
  if (node == nullptr || *node == '\0') {
    std::string name = "conf-" + std::to_string(getpid());
    setenv("VGPU_SIM_NODE", name.c_str(), 1);
  }
  g_node_name = getenv("VGPU_SIM_NODE");
  g_node_existed = NodeShmExists(g_node_name);
  if (default_kernels_library != nullptr && getenv("VGPU_SIM_KERNELS") == nullptr)
    setenv("VGPU_SIM_KERNELS", default_kernels_library, 1);
  // A peer path between devices 0 and 1, so the peer-access tests see both
  // answers (0-1 linked; a device is never its own peer). A real driver ignores it.
  setenv("VGPU_SIM_P2P", "0-1", 0);
  // Registered before cuInit, so it runs after the simulator's own exit handlers.
  atexit(CleanupNode);
}

bool DriverLibraryIsSim() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&cuInit), &info) == 0 || info.dli_fname == nullptr)
    return false;
  return strstr(info.dli_fname, "/vgpu/sim/") != nullptr;
}

uint64_t MonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
}

double NowMs() { return MonotonicNs() / 1e6; }

bool SpawnChild(const std::string& path, const std::vector<std::string>& args,
                const std::vector<std::string>& extra_env, Child* out, int pass_fd) {
  int in_pipe[2], out_pipe[2];
  if (pipe2(in_pipe, O_CLOEXEC) != 0) return false;
  if (pipe2(out_pipe, O_CLOEXEC) != 0) {
    close(in_pipe[0]);
    close(in_pipe[1]);
    return false;
  }
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv = *e;
    size_t eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const std::string& kv : extra_env) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos) continue;
    std::string key = kv.substr(0, eq), value = kv.substr(eq + 1);
    if (value.empty())
      env.erase(key);
    else
      env[key] = value;
  }
  std::vector<std::string> env_strings;
  for (auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_strings{path};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in_pipe[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out_pipe[1], 1);
  if (pass_fd >= 0) posix_spawn_file_actions_adddup2(&fa, pass_fd, 3);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, path.c_str(), &fa, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  close(in_pipe[0]);
  close(out_pipe[1]);
  if (rc != 0) {
    close(in_pipe[1]);
    close(out_pipe[0]);
    return false;
  }
  out->pid = pid;
  out->to_child = in_pipe[1];
  out->from_child = out_pipe[0];
  out->buffered.clear();
  return true;
}

namespace {
// Reads more of the child's output into c->buffered; false on EOF or timeout.
bool Fill(Child* c, int timeout_ms) {
  if (c->from_child < 0) return false;
  pollfd p{c->from_child, POLLIN, 0};
  int r;
  do {
    r = poll(&p, 1, timeout_ms);
  } while (r < 0 && errno == EINTR);
  if (r <= 0) return false;
  char buf[4096];
  ssize_t n;
  do {
    n = read(c->from_child, buf, sizeof buf);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) return false;
  c->buffered.append(buf, static_cast<size_t>(n));
  return true;
}
}  // namespace

bool ReadLine(Child* c, std::string* line, int timeout_ms) {
  double deadline = NowMs() + timeout_ms;
  for (;;) {
    size_t nl = c->buffered.find('\n');
    if (nl != std::string::npos) {
      *line = c->buffered.substr(0, nl);
      c->buffered.erase(0, nl + 1);
      return true;
    }
    int left = static_cast<int>(deadline - NowMs());
    if (left <= 0 || !Fill(c, left)) return false;
  }
}

std::string ReadRest(Child* c, int timeout_ms) {
  double deadline = NowMs() + timeout_ms;
  for (;;) {
    int left = static_cast<int>(deadline - NowMs());
    if (left <= 0 || !Fill(c, left)) break;
  }
  std::string all = std::move(c->buffered);
  c->buffered.clear();
  return all;
}

bool WriteLine(Child* c, const std::string& line) {
  std::string s = line + "\n";
  return write(c->to_child, s.data(), s.size()) == static_cast<ssize_t>(s.size());
}

int WaitChild(Child* c) {
  if (c->to_child >= 0) close(c->to_child);
  c->to_child = -1;
  int status = -1;
  if (c->pid > 0) {
    while (waitpid(c->pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  c->pid = -1;
  if (c->from_child >= 0) close(c->from_child);
  c->from_child = -1;
  return status;
}

void KillChild(Child* c) {
  if (c->pid > 0) kill(c->pid, SIGKILL);
  WaitChild(c);
}

bool SendFd(int sock, int fd) {
  char byte = 'F';
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* cm = CMSG_FIRSTHDR(&msg);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(cm), &fd, sizeof(int));
  return sendmsg(sock, &msg, 0) == 1;
}

int ReceiveFd(int sock) {
  char byte;
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  if (recvmsg(sock, &msg, 0) != 1) return -1;
  cmsghdr* cm = CMSG_FIRSTHDR(&msg);
  if (cm == nullptr || cm->cmsg_type != SCM_RIGHTS) return -1;
  int fd;
  memcpy(&fd, CMSG_DATA(cm), sizeof(int));
  return fd;
}

}  // namespace vgpu::conformance
