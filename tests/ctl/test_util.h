// Helpers shared by the control tests: a fake handler, a raw socket client,
// running vgpuctl, temporary directories.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "ctl/control/agent_server.h"

namespace vgpu::ctl::testing {

// Records every request and answers like a small libvgpu would.
class FakeHandler : public Handler {
 public:
  Response Handle(const Request& request, ProgressSink* progress) override;

  std::vector<Request> requests();  // snapshot
  Request last(const std::string& cmd);
  void clear();

  std::atomic<bool> suspended{false};
  std::atomic<int> delay_ms{0};        // every request sleeps this long first
  std::atomic<int> progress_steps{5};  // progress lines of checkpoint/restore
  std::atomic<int> step_sleep_ms{1};
  std::atomic<int> completed{0};  // handler calls that returned

 private:
  std::mutex mu_;
  std::vector<Request> requests_;
};

// The test process's agent, owned as libvgpu's Runtime owns its own: fork
// and exit handlers registered once, at first use.
Agent& TestAgent();

// A temporary directory, removed (with its files) at destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

struct RunResult {
  int exit_code = -1;  // -1: killed by a signal or timed out
  std::string out, err;
};

// Runs `argv` (argv[0] a path) with a deadline, capturing stdout and stderr.
// If uid >= 0 the child switches to that uid/gid before exec.
RunResult RunProcess(const std::vector<std::string>& argv, int timeout_ms = 15000, int uid = -1);
RunResult Vgpuctl(const std::vector<std::string>& args, int uid = -1);

// A raw connection to an agent socket.
class RawClient {
 public:
  explicit RawClient(const std::string& path);
  ~RawClient();
  bool connected() const { return fd_ >= 0; }
  bool Send(std::string_view data);
  // Next line without '\n'; "" with *eof = true on EOF, *timed_out on timeout.
  std::string ReadLine(int timeout_ms = 5000, bool* eof = nullptr);
  // True if the peer closes the connection within timeout_ms (data is skipped).
  bool WaitForClose(int timeout_ms);
  void Close();
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
  std::string buf_;
};

// Connects, sends one line, returns the parsed final response line (skipping
// progress). Fails the calling test on transport errors.
nlohmann::json RoundTrip(const std::string& socket_path, const std::string& line);

int ThreadCount();  // entries of /proc/self/task

// "/vgpu-<pid>-1.vgpuckpt": what FakeHandler names its images after a
// directory (libvgpu's naming, with a made-up start time).
std::string FakeImageName();

}  // namespace vgpu::ctl::testing
