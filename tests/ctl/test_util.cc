#include "tests/ctl/test_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace vgpu::ctl::testing {

Agent& TestAgent() {
  static Agent* agent = [] {
    auto* a = new Agent();  // never destroyed: the exit handler stops it
    pthread_atfork([] { TestAgent().ForkPrepare(); }, [] { TestAgent().ForkParent(); },
                   [] { TestAgent().ForkChild(); });
    std::atexit([] { TestAgent().Stop(); });
    return a;
  }();
  return *agent;
}
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

Response Transfer(const Request& r, ProgressSink* progress, int steps, int sleep_ms,
                  const std::string& path) {
  constexpr uint64_t kBytes = 5ull << 20;
  for (int i = 0; i <= steps; ++i) {
    progress->Report({kBytes * i / std::max(steps, 1), kBytes, "copy"});
    std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
  }
  return Response::Ok(ToJson(CheckpointResult{path, kBytes, 0.25}));
}

}  // namespace

Response FakeHandler::Handle(const Request& r, ProgressSink* progress) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    requests_.push_back(r);
  }
  struct Done {
    std::atomic<int>& n;
    ~Done() { ++n; }
  } done{completed};
  std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms.load()));
  if (r.args.contains("throw")) throw std::runtime_error("fake handler exploded");
  if (r.cmd == "info" || r.cmd == "ps") {
    InfoResult info{
        getpid(),        getuid(), "0.1.0-fake", "ctr-42", suspended ? "suspended" : "running",
        "ctl_agent_test"};
    info.devices = {{0, "GPU-fake-0", 4ull << 30, 1536ull << 20},
                    {1, "GPU-fake-1", std::nullopt, 0}};
    Response resp = Response::Ok(ToJson(info));
    return r.cmd == "ps" ? ProcessListOf(std::move(resp)) : resp;
  }
  if (r.cmd == "suspend" || r.cmd == "resume") {
    bool want = r.cmd == "suspend";
    if (suspended.exchange(want) == want) {
      return Response::Error(ErrorCode::kBusy,
                             std::string("already ") + (want ? "suspended" : "running"));
    }
    return Response::Ok(
        {{"state", want ? "suspended" : "running"}, {"bytes", 1 << 20}, {"seconds", 0.01}});
  }
  if (r.cmd == "checkpoint") {
    CheckpointArgs a;
    ParseCheckpointArgs(r.args, &a);
    if (a.dir == "/nonexistent-fail") return Response::Error(ErrorCode::kIo, "disk on fire");
    Response resp = Transfer(r, progress, progress_steps, step_sleep_ms, a.dir + FakeImageName());
    resp.result["state"] = a.leave_running ? "running" : "suspended";
    return resp;
  }
  if (r.cmd == "restore") {
    RestoreArgs a;
    ParseRestoreArgs(r.args, &a);
    if (a.from == "/no-image") return Response::Error(ErrorCode::kNoEnt, "no image in /no-image");
    return Transfer(r, progress, progress_steps, step_sleep_ms, a.from + FakeImageName());
  }
  if (r.cmd == "set") return Response::Ok(r.args);
  return Response::Error(ErrorCode::kNoSys, "fake: " + r.cmd);
}

std::vector<Request> FakeHandler::requests() {
  std::lock_guard<std::mutex> lock(mu_);
  return requests_;
}

Request FakeHandler::last(const std::string& cmd) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = requests_.rbegin(); it != requests_.rend(); ++it) {
    if (it->cmd == cmd) return *it;
  }
  return {};
}

void FakeHandler::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  requests_.clear();
}

TempDir::TempDir() {
  char tmpl[] = "/tmp/vgpu-ctl-test-XXXXXX";
  path_ = mkdtemp(tmpl);
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

RunResult RunProcess(const std::vector<std::string>& argv, int timeout_ms, int uid) {
  TempDir io;
  std::string out = io.path() + "/out", err = io.path() + "/err";
  if (uid >= 0) chmod(io.path().c_str(), 0777);
  pid_t pid = fork();
  if (pid == 0) {
    if (uid >= 0 && (setgroups(0, nullptr) != 0 || setgid(uid) != 0 || setuid(uid) != 0)) {
      _exit(120);
    }
    int o = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0666);
    int e = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0666);
    dup2(o, 1);
    dup2(e, 2);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  RunResult result;
  int status = 0;
  Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (Clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      ADD_FAILURE() << "timed out: " << argv[0];
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  result.out = ReadFile(out);
  result.err = ReadFile(err);
  return result;
}

// Another uid may not be able to reach the build tree (a clone in a 0700
// directory): it runs a copy in a world-readable temporary directory, so that
// only the agent's SO_PEERCRED check can refuse it.
std::string VgpuctlFor(int uid) {
  if (uid < 0) return VGPUCTL_PATH;
  static const std::string copy = [] {
    char tmpl[] = "/tmp/vgpuctl-test-XXXXXX";
    std::string dir = mkdtemp(tmpl) != nullptr ? tmpl : "/tmp";
    chmod(dir.c_str(), 0755);
    std::string path = dir + "/vgpuctl";
    std::filesystem::copy_file(VGPUCTL_PATH, path,
                               std::filesystem::copy_options::overwrite_existing);
    chmod(path.c_str(), 0755);
    static std::string created = dir;
    std::atexit([] { std::filesystem::remove_all(created); });
    return path;
  }();
  return copy;
}

RunResult Vgpuctl(const std::vector<std::string>& args, int uid) {
  std::vector<std::string> argv = {VgpuctlFor(uid)};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunProcess(argv, 15000, uid);
}

RawClient::RawClient(const std::string& path) {
  fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  if (connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) Close();
}

RawClient::~RawClient() { Close(); }

void RawClient::Close() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

bool RawClient::Send(std::string_view data) {
  while (!data.empty()) {
    ssize_t n = send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

std::string RawClient::ReadLine(int timeout_ms, bool* eof) {
  if (eof != nullptr) *eof = false;
  for (;;) {
    size_t nl = buf_.find('\n');
    if (nl != std::string::npos) {
      std::string line = buf_.substr(0, nl);
      buf_.erase(0, nl + 1);
      return line;
    }
    pollfd p{fd_, POLLIN, 0};
    char chunk[4096];
    ssize_t n = poll(&p, 1, timeout_ms) == 1 ? recv(fd_, chunk, sizeof chunk, 0) : -1;
    if (n <= 0) {
      if (eof != nullptr) *eof = true;
      return "";
    }
    buf_.append(chunk, static_cast<size_t>(n));
  }
}

bool RawClient::WaitForClose(int timeout_ms) {
  Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  char chunk[65536];
  while (Clock::now() < deadline) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, 50) != 1) continue;
    ssize_t n = recv(fd_, chunk, sizeof chunk, 0);
    if (n <= 0) return true;
  }
  return false;
}

json RoundTrip(const std::string& socket_path, const std::string& line) {
  RawClient c(socket_path);
  EXPECT_TRUE(c.connected());
  EXPECT_TRUE(c.Send(line));
  for (;;) {
    bool eof = false;
    std::string reply = c.ReadLine(10000, &eof);
    if (eof) {
      ADD_FAILURE() << "no response to " << line.substr(0, 100);
      return json();
    }
    json j = json::parse(reply, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << reply;
    if (!j.contains("progress")) return j;
  }
}

std::string FakeImageName() { return "/vgpu-" + std::to_string(getpid()) + "-1.vgpuckpt"; }

int ThreadCount() {
  int n = 0;
  DIR* d = opendir("/proc/self/task");
  while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

}  // namespace vgpu::ctl::testing
