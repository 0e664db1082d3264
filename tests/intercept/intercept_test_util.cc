#include "intercept_test_util.h"
#include "common/config/config.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

extern char** environ;

namespace vgpu::itest {

double NowMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

void Output::Parse(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    lines.emplace_back(line.substr(0, eq), line.substr(eq + 1));
  }
}

std::string Output::Get(const std::string& key) const {
  for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
    if (it->first == key) return it->second;
  }
  return "";
}

bool Output::Has(const std::string& key) const {
  for (auto& l : lines) {
    if (l.first == key) return true;
  }
  return false;
}

std::vector<std::string> Output::All(const std::string& key) const {
  std::vector<std::string> v;
  for (auto& l : lines) {
    if (l.first == key) v.push_back(l.second);
  }
  return v;
}

long long Output::Int(const std::string& key) const {
  if (!Has(key)) return LLONG_MIN;
  return std::strtoll(Get(key).c_str(), nullptr, 10);
}

Proc::~Proc() {
  if (pid_ > 0) Kill();
  if (!err_path_.empty()) unlink(err_path_.c_str());
}

bool Proc::Start(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  int in_pipe[2], out_pipe[2];
  if (pipe2(in_pipe, O_CLOEXEC) != 0) return false;
  if (pipe2(out_pipe, O_CLOEXEC) != 0) return false;
  char tmpl[] = "/tmp/vgpu-itest-err-XXXXXX";
  int err_fd = mkostemp(tmpl, O_CLOEXEC);
  if (err_fd < 0) return false;
  err_path_ = tmpl;
  std::vector<std::string> a = argv, e = env;
  std::vector<char*> av, ev;
  for (auto& s : a) av.push_back(s.data());
  av.push_back(nullptr);
  for (auto& s : e) ev.push_back(s.data());
  ev.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in_pipe[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err_fd, 2);
  int rc = posix_spawn(&pid_, a[0].c_str(), &fa, nullptr, av.data(), ev.data());
  posix_spawn_file_actions_destroy(&fa);
  close(in_pipe[0]);
  close(out_pipe[1]);
  close(err_fd);
  if (rc != 0) {
    pid_ = -1;
    close(in_pipe[1]);
    close(out_pipe[0]);
    return false;
  }
  in_ = in_pipe[1];
  out_fd_ = out_pipe[0];
  return true;
}

bool Proc::ReadSome(int timeout_ms) {
  if (out_fd_ < 0) return false;
  pollfd p{out_fd_, POLLIN, 0};
  int r;
  do {
    r = poll(&p, 1, timeout_ms < 0 ? 0 : timeout_ms);
  } while (r < 0 && errno == EINTR);
  if (r <= 0) return false;
  char b[8192];
  ssize_t n;
  do {
    n = read(out_fd_, b, sizeof b);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) {
    close(out_fd_);
    out_fd_ = -1;
    return false;
  }
  buf_.append(b, static_cast<size_t>(n));
  text_.append(b, static_cast<size_t>(n));
  return true;
}

void Proc::TakeLines() {
  size_t nl;
  while ((nl = buf_.find('\n')) != std::string::npos) {
    out_.Parse(buf_.substr(0, nl + 1));
    buf_.erase(0, nl + 1);
  }
}

bool Proc::WaitKey(const std::string& key, std::string* value, int timeout_ms) {
  double deadline = NowMs() + timeout_ms;
  for (;;) {
    TakeLines();
    for (; scanned_ < out_.lines.size(); ++scanned_) {
      if (out_.lines[scanned_].first == key) {
        if (value != nullptr) *value = out_.lines[scanned_].second;
        ++scanned_;
        return true;
      }
    }
    int left = static_cast<int>(deadline - NowMs());
    if (left <= 0 || !ReadSome(left)) return false;
  }
}

bool Proc::Send(const std::string& line) {
  if (in_ < 0) return false;
  std::string s = line + "\n";
  return write(in_, s.data(), s.size()) == static_cast<ssize_t>(s.size());
}

int Proc::Finish(int timeout_ms) {
  if (in_ >= 0) close(in_);
  in_ = -1;
  double deadline = NowMs() + timeout_ms;
  while (out_fd_ >= 0) {
    int left = static_cast<int>(deadline - NowMs());
    if (left <= 0) break;
    ReadSome(left);
  }
  TakeLines();
  if (!buf_.empty()) {
    out_.Parse(buf_);
    buf_.clear();
  }
  int status = -1;
  for (;;) {
    pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) break;
    if (r < 0 && errno != EINTR) break;
    if (NowMs() > deadline) {
      timed_out_ = true;
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      break;
    }
    usleep(2000);
  }
  pid_ = -1;
  if (out_fd_ >= 0) close(out_fd_);
  out_fd_ = -1;
  return status;
}

void Proc::Kill() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  int status;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
  if (in_ >= 0) close(in_);
  if (out_fd_ >= 0) close(out_fd_);
  in_ = out_fd_ = -1;
}

std::string Proc::StderrText() const {
  std::ifstream in(err_path_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool RunResult::ExitedZero() const { return !timed_out && WIFEXITED(status) && WEXITSTATUS(status) == 0; }

std::string RunResult::Describe() const {
  std::ostringstream o;
  o << "status=" << status;
  if (WIFSIGNALED(status)) o << " (signal " << WTERMSIG(status) << ")";
  if (WIFEXITED(status)) o << " (exit " << WEXITSTATUS(status) << ")";
  if (timed_out) o << " TIMED OUT";
  o << "\n--- stdout\n" << stdout_text << "--- stderr\n" << stderr_text << "---";
  return o.str();
}

RunResult RunToEnd(const std::vector<std::string>& argv, const std::vector<std::string>& env, int timeout_ms) {
  RunResult r;
  Proc p;
  if (!p.Start(argv, env)) {
    r.stderr_text = "spawn failed: " + argv[0];
    return r;
  }
  r.status = p.Finish(timeout_ms);
  r.timed_out = p.timed_out();
  r.out = p.out();
  r.stdout_text = p.stdout_text();
  r.stderr_text = p.StderrText();
  return r;
}

std::vector<std::string> CleanEnv(const std::vector<std::string>& extra) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv = *e;
    if (kv.rfind("VGPU_", 0) == 0 || vgpu::IsConfigVariable(kv.substr(0, kv.find('='))) ||
        kv.rfind("CUDA_VISIBLE_DEVICES=", 0) == 0 || kv.rfind("LD_PRELOAD=", 0) == 0 ||
        kv.rfind("LD_LIBRARY_PATH=", 0) == 0) {
      continue;
    }
    env.push_back(kv);
  }
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

void UnlinkSimNode(const std::string& node) { shm_unlink(("/vgpu-sim-" + node).c_str()); }

std::string LedgerPath(const std::string& group) {
  return "/dev/shm/vgpu-ledger-" + std::to_string(geteuid()) + "-" + group;
}

void UnlinkLedger(const std::string& group) {
  shm_unlink(("/vgpu-ledger-" + std::to_string(geteuid()) + "-" + group).c_str());
}

}  // namespace vgpu::itest
