// Suspend on SIGTSTP (VGPU_SUSPEND_ON_SIGTSTP, docs/vmm.md "Suspend on
// SIGTSTP"): Slurm suspends a job step with SIGTSTP, 2 s later SIGSTOP, and
// resumes it with SIGCONT. A stopped process would keep its device memory; with
// this on, SIGTSTP first moves the memory to host (the same suspend as `vgpuctl
// suspend`) and then keeps the signal's meaning (the process stops, or the
// program's own handler runs), and SIGCONT brings it back.
//
// The signal handlers only count the signal and wake a thread of the
// StopSignals (async-signal-safe: atomics and write(2)); the thread does the
// work in Step(). A SIGSTOP in the middle of a suspend stops that thread with
// the rest of the process: after SIGCONT it finishes the suspend, sees the
// SIGCONT and resumes. What it reaches comes through two seams, so that the
// decisions run on fakes (tests/unit/stop_signals_test.cc): a Suspender (the
// memory: libvgpu's residency engine) and a StopSignalHost (the signals: POSIX
// in production, InstallPosixStopSignals below).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"

namespace vgpu::residency {

// The memory a stop releases.
class Suspender {
 public:
  virtual ~Suspender() = default;
  // OK: the device memory is released. An error (already suspended by hand,
  // non-migratable memory...) leaves the memory where it is.
  virtual Status Suspend() = 0;
  // OK: the memory is back. An error (no room on the device yet) is retried.
  virtual Status Resume() = 0;
};

// The process's side of a stop.
class StopSignalHost {
 public:
  virtual ~StopSignalHost() = default;
  // What SIGTSTP did before the handler was installed.
  enum class Disposition { kDefault, kIgnore, kHandler };
  virtual Disposition TstpDisposition() = 0;
  // SIG_DFL's meaning: stops the whole process (SIGSTOP); returns once continued.
  virtual void StopProcess() = 0;
  // Calls the program's own SIGTSTP handler (kHandler), on the calling thread.
  virtual void CallProgramTstpHandler() = 0;
  virtual void SleepMs(int ms) = 0;
};

class StopSignals {
 public:
  StopSignals(Suspender* suspender, StopSignalHost* host) : suspender_(suspender), host_(host) {}

  // From the signal handlers: async-signal-safe (atomic stores only). The
  // caller wakes the thread that runs Step().
  void NoteTstp() noexcept { tstp_seq_.store(seq_.fetch_add(1) + 1); }
  void NoteCont() noexcept { cont_seq_.store(seq_.fetch_add(1) + 1); }

  // The thread's work after a wake-up: handles every signal noted since the
  // last Step, in order. Idempotent when nothing new was noted.
  void Step();

  // Device memory released by a SIGTSTP and not yet back.
  bool suspended() const { return suspended_.load(); }

  // Resume retries while there is no room: first after this many ms, doubling
  // up to 1 s.
  static constexpr int kFirstRetryMs = 50;
  static constexpr int kMaxRetryMs = 1000;

 private:
  void OnTstp(uint64_t tstp);
  void ResumeUntilBack(uint64_t cont);

  Suspender* suspender_;
  StopSignalHost* host_;
  std::atomic<uint64_t> seq_{0};
  std::atomic<uint64_t> tstp_seq_{0};  // sequence number of the last SIGTSTP
  std::atomic<uint64_t> cont_seq_{0};  // of the last SIGCONT
  uint64_t handled_tstp_ = 0;          // Step's thread only
  uint64_t handled_cont_ = 0;
  std::atomic<bool> suspended_{false};
};

// Production plumbing: installs SIGTSTP and SIGCONT handlers (SA_RESTART)
// that note the signal and wake a thread of its own running Step(), chaining
// the dispositions the program had at install time (the SIGCONT handler calls
// the program's at once; its SIGTSTP handler runs on the thread after the
// suspend). Once per process; `suspender` lives for ever. A handler installed
// by the program afterwards replaces this one (docs/vmm.md). In a forked child
// the handlers act as the program's own would, without a suspend.
Status InstallPosixStopSignals(Suspender* suspender);

// True while a SIGTSTP's suspend holds the process's memory in host RAM (the
// agent's info says "suspended_by": "sigtstp"); false before the install.
bool SuspendedByStopSignal();

}  // namespace vgpu::residency
