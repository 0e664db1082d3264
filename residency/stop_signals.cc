#include "residency/stop_signals.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "common/log.h"

namespace vgpu::residency {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

void StopSignals::Step() {
  const uint64_t tstp = tstp_seq_.load();
  if (tstp > handled_tstp_) {
    handled_tstp_ = tstp;
    OnTstp(tstp);
  }
  const uint64_t cont = cont_seq_.load();
  if (cont > handled_cont_) {
    handled_cont_ = cont;
    // A SIGCONT with nothing suspended does nothing; one older than the last
    // SIGTSTP was for an earlier stop.
    if (suspended_.load() && cont > tstp_seq_.load()) ResumeUntilBack(cont);
  }
}

void StopSignals::OnTstp(uint64_t tstp) {
  if (cont_seq_.load() > tstp) {
    VGPU_LOG(kInfo, "SIGTSTP: continued before the suspend began; device memory stays");
  } else if (!suspended_.load()) {
    const auto t0 = std::chrono::steady_clock::now();
    const Status s = suspender_->Suspend();
    if (s.ok()) {
      suspended_.store(true);
      VGPU_LOG(kInfo, "SIGTSTP: device memory suspended to host in {:.3f} s", SecondsSince(t0));
    } else {
      VGPU_LOG(kWarn, "SIGTSTP: device memory not suspended: {}", s.message);
    }
  }
  // The signal keeps its meaning for the program.
  switch (host_->TstpDisposition()) {
    case StopSignalHost::Disposition::kDefault:
      // Not when a SIGCONT came meanwhile (a SIGSTOP stopped the suspend
      // midway and the job was continued): stopping now would stop it for good.
      if (cont_seq_.load() < tstp) {
        VGPU_LOG(kInfo, "SIGTSTP: stopping the process");
        host_->StopProcess();
      }
      break;
    case StopSignalHost::Disposition::kHandler:
      host_->CallProgramTstpHandler();
      break;
    case StopSignalHost::Disposition::kIgnore:
      break;
  }
}

void StopSignals::ResumeUntilBack(uint64_t cont) {
  const auto t0 = std::chrono::steady_clock::now();
  int wait_ms = kFirstRetryMs;
  bool warned = false;
  for (;;) {
    const Status s = suspender_->Resume();
    if (s.ok()) {
      suspended_.store(false);
      VGPU_LOG(kInfo, "SIGCONT: device memory resumed in {:.3f} s", SecondsSince(t0));
      return;
    }
    if (tstp_seq_.load() > cont) {  // stopped again while waiting: stays suspended
      VGPU_LOG(kInfo, "SIGCONT: SIGTSTP again before the memory came back; stays suspended");
      return;
    }
    if (!warned) {
      VGPU_LOG(kWarn, "SIGCONT: device memory not back yet ({}); retrying until it is", s.message);
      warned = true;
    }
    host_->SleepMs(wait_ms);
    wait_ms = std::min(wait_ms * 2, kMaxRetryMs);
  }
}

// ---------------------------------------------------------------------------
// POSIX plumbing

namespace {

class PosixHost final : public StopSignalHost {
 public:
  Disposition TstpDisposition() override {
    if ((old_tstp.sa_flags & SA_SIGINFO) != 0) return Disposition::kHandler;
    if (old_tstp.sa_handler == SIG_DFL) return Disposition::kDefault;
    if (old_tstp.sa_handler == SIG_IGN) return Disposition::kIgnore;
    return Disposition::kHandler;
  }
  void StopProcess() override { kill(getpid(), SIGSTOP); }  // this thread stops before returning
  void CallProgramTstpHandler() override {
    if ((old_tstp.sa_flags & SA_SIGINFO) != 0) {
      siginfo_t info = tstp_info;
      old_tstp.sa_sigaction(SIGTSTP, &info, nullptr);  // no signal context: no ucontext
    } else {
      old_tstp.sa_handler(SIGTSTP);
    }
  }
  void SleepMs(int ms) override { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

  struct sigaction old_tstp {};
  struct sigaction old_cont {};
  siginfo_t tstp_info{};  // the last SIGTSTP's, for a program's SA_SIGINFO handler
};

struct Plumbing {
  PosixHost host;
  std::unique_ptr<StopSignals> signals;
  pid_t owner = 0;
  int wake_read = -1;
  int wake_write = -1;
};

// Set once before the handlers are installed; never destroyed (a handler may
// run at any time until exit).
std::atomic<Plumbing*> g_plumbing{nullptr};  // lock-free: read in the handlers

// What the program's own disposition does (a forked child: no thread there).
void ActAsProgram(const struct sigaction& old, int signo, siginfo_t* info, void* uc) {
  if ((old.sa_flags & SA_SIGINFO) != 0) {
    if (old.sa_sigaction != nullptr) old.sa_sigaction(signo, info, uc);
  } else if (old.sa_handler == SIG_DFL) {
    if (signo == SIGTSTP) kill(getpid(), SIGSTOP);  // SIGCONT's default: continued already
  } else if (old.sa_handler != SIG_IGN) {
    old.sa_handler(signo);
  }
}

void Wake(Plumbing* p) {
  const char c = 0;
  ssize_t w = write(p->wake_write, &c, 1);  // full pipe: a wake-up is pending anyway
  (void)w;
}

void OnTstpSignal(int signo, siginfo_t* info, void* uc) {
  const int saved = errno;
  Plumbing* p = g_plumbing.load();
  if (getpid() != p->owner) {
    ActAsProgram(p->host.old_tstp, signo, info, uc);
  } else {
    if (info != nullptr) p->host.tstp_info = *info;
    p->signals->NoteTstp();
    Wake(p);
  }
  errno = saved;
}

void OnContSignal(int signo, siginfo_t* info, void* uc) {
  const int saved = errno;
  Plumbing* p = g_plumbing.load();
  if (getpid() == p->owner) {
    p->signals->NoteCont();
    Wake(p);
  }
  ActAsProgram(p->host.old_cont, signo, info, uc);
  errno = saved;
}

void Loop(Plumbing* p) {
  char buf[64];
  for (;;) {
    const ssize_t n = read(p->wake_read, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      VGPU_LOG(kError, "suspend on SIGTSTP: wake-up pipe failed; SIGTSTP no longer suspends");
      return;
    }
    p->signals->Step();
  }
}

}  // namespace

Status InstallPosixStopSignals(Suspender* suspender) {
  if (g_plumbing.load() != nullptr) return Status::Ok();
  auto p = std::make_unique<Plumbing>();
  p->owner = getpid();
  p->signals = std::make_unique<StopSignals>(suspender, &p->host);
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    return Status::Error(ErrorCode::kIo, std::string("pipe2: ") + std::strerror(errno));
  }
  p->wake_read = fds[0];
  p->wake_write = fds[1];
  fcntl(p->wake_write, F_SETFL, O_NONBLOCK);
  // The thread takes no signal: the handlers run on the program's threads.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  Plumbing* raw = p.get();
  try {
    std::thread(Loop, raw).detach();
  } catch (const std::exception& e) {
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    close(fds[0]);
    close(fds[1]);
    return Status::Error(ErrorCode::kNoMem, std::string("no thread: ") + e.what());
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  g_plumbing.store(p.release());
  struct sigaction sa {};
  sa.sa_sigaction = OnTstpSignal;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTSTP, &sa, &raw->host.old_tstp);
  sa.sa_sigaction = OnContSignal;
  sigaction(SIGCONT, &sa, &raw->host.old_cont);
  return Status::Ok();
}

bool SuspendedByStopSignal() {
  const Plumbing* p = g_plumbing.load();
  return p != nullptr && p->signals->suspended();
}

}  // namespace vgpu::residency
