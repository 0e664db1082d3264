// Process helpers of the libvgpu integration tests: start intercept_client
// (or any program) with a chosen environment, with or without
// LD_PRELOAD=libvgpu.so, and read its `key=value` output.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

namespace vgpu::itest {

inline constexpr unsigned long long kMiB = 1ull << 20;

// Parsed `key=value` lines, in order.
struct Output {
  std::vector<std::pair<std::string, std::string>> lines;
  // Last value of key, "" (and has=false) if absent.
  std::string Get(const std::string& key) const;
  bool Has(const std::string& key) const;
  std::vector<std::string> All(const std::string& key) const;
  long long Int(const std::string& key) const;  // LLONG_MIN if absent
  void Parse(const std::string& text);
};

// A running child: stdin and stdout are pipes, stderr goes to a file.
class Proc {
 public:
  Proc() = default;
  Proc(const Proc&) = delete;
  Proc& operator=(const Proc&) = delete;
  ~Proc();

  // argv[0] is the program path. env: the complete environment.
  bool Start(const std::vector<std::string>& argv, const std::vector<std::string>& env);
  // Reads lines until one starts with "key=" (after the line the previous
  // WaitKey matched); returns its value; false on EOF/timeout. Every line
  // read is added to out().
  bool WaitKey(const std::string& key, std::string* value, int timeout_ms);
  bool Send(const std::string& line);
  // Closes stdin, reads the rest of stdout, waits (SIGKILL after timeout).
  // Returns the raw wait status; timed_out() tells if it had to be killed.
  int Finish(int timeout_ms);
  void Kill();  // SIGKILL + waitpid
  pid_t pid() const { return pid_; }
  const Output& out() const { return out_; }
  const std::string& stdout_text() const { return text_; }
  std::string StderrText() const;
  bool timed_out() const { return timed_out_; }

 private:
  bool ReadSome(int timeout_ms);
  void TakeLines();
  pid_t pid_ = -1;
  int in_ = -1, out_fd_ = -1;
  std::string buf_, text_, err_path_;
  Output out_;
  size_t scanned_ = 0;  // lines of out_ that WaitKey has looked at
  bool timed_out_ = false;
};

// Result of a run to completion.
struct RunResult {
  int status = -1;
  bool timed_out = false;
  Output out;
  std::string stdout_text, stderr_text;
  bool ExitedZero() const;
  std::string Describe() const;  // status + outputs, for failure messages
};

RunResult RunToEnd(const std::vector<std::string>& argv, const std::vector<std::string>& env,
             int timeout_ms = 30000);

// The environment of this process minus everything that configures libvgpu
// or the loader's preload list (VGPU_*, CUDA_DEVICE_MEMORY_LIMIT*,
// CUDA_VISIBLE_DEVICES, LD_PRELOAD, LD_LIBRARY_PATH), plus `extra` ("K=V").
std::vector<std::string> CleanEnv(const std::vector<std::string>& extra);

// /dev/shm cleanup.
void UnlinkSimNode(const std::string& node);
void UnlinkLedger(const std::string& group);
std::string LedgerPath(const std::string& group);  // "/dev/shm/vgpu-ledger-<uid>-<group>"

double NowMs();

}  // namespace vgpu::itest
