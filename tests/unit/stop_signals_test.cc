// Suspend on SIGTSTP (residency/stop_signals.h): the decisions of
// StopSignals::Step on a fake suspender and a fake host, with the signals
// noted in the orders Slurm and a shell produce them; then the POSIX plumbing
// once in this process (a program handler, so that the test process is never
// stopped).
#include "residency/stop_signals.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace vgpu::residency {
namespace {

// Records every call in one log, in order.
struct Fake final : Suspender, StopSignalHost {
  std::vector<std::string> log;
  Disposition disposition = Disposition::kDefault;
  Status suspend_result = Status::Ok();
  int resume_failures = 0;               // Resume fails this many times first
  std::function<void()> during_suspend;  // e.g. a SIGCONT noted mid-suspend
  std::function<void()> during_stop;     // the SIGCONT that ends the stop
  std::function<void()> during_sleep;

  Status Suspend() override {
    log.push_back("suspend");
    if (during_suspend) during_suspend();
    return suspend_result;
  }
  Status Resume() override {
    log.push_back("resume");
    if (resume_failures > 0) {
      --resume_failures;
      return Status::Error(ErrorCode::kIo, "no room");
    }
    return Status::Ok();
  }
  Disposition TstpDisposition() override { return disposition; }
  void StopProcess() override {
    log.push_back("stop");
    if (during_stop) during_stop();
  }
  void CallProgramTstpHandler() override { log.push_back("program_handler"); }
  void SleepMs(int ms) override {
    log.push_back("sleep " + std::to_string(ms));
    if (during_sleep) during_sleep();
  }
};

using Log = std::vector<std::string>;

TEST(StopSignalsTest, TstpSuspendsThenStopsAndContResumes) {
  Fake f;
  StopSignals s(&f, &f);
  s.NoteTstp();
  s.Step();
  EXPECT_EQ(f.log, (Log{"suspend", "stop"})) << "the memory goes before the process stops";
  EXPECT_TRUE(s.suspended());
  s.NoteCont();
  s.Step();
  EXPECT_EQ(f.log, (Log{"suspend", "stop", "resume"}));
  EXPECT_FALSE(s.suspended());
  s.Step();
  EXPECT_EQ(f.log.size(), 3u) << "nothing new, nothing done";
}

TEST(StopSignalsTest, ContWithNothingSuspendedDoesNothing) {
  Fake f;
  StopSignals s(&f, &f);
  s.NoteCont();
  s.Step();
  EXPECT_TRUE(f.log.empty());
}

TEST(StopSignalsTest, StopMidSuspendThenContFinishesAndResumesWithoutStopping) {
  // Slurm's SIGSTOP stopped the thread inside Suspend; the SIGCONT handler
  // ran before the thread went on.
  Fake f;
  StopSignals s(&f, &f);
  f.during_suspend = [&] { s.NoteCont(); };
  s.NoteTstp();
  s.Step();
  EXPECT_EQ(f.log, (Log{"suspend", "resume"}))
      << "stopping after the SIGCONT would stop the job for good";
  EXPECT_FALSE(s.suspended());
}

TEST(StopSignalsTest, TstpAndContBeforeTheThreadRanSuspendsNothing) {
  Fake f;
  StopSignals s(&f, &f);
  s.NoteTstp();
  s.NoteCont();
  s.Step();
  EXPECT_TRUE(f.log.empty()) << "already continued: no suspend, no stop";
}

TEST(StopSignalsTest, AProgramHandlerIsCalledAfterTheSuspend) {
  Fake f;
  f.disposition = StopSignalHost::Disposition::kHandler;
  StopSignals s(&f, &f);
  s.NoteTstp();
  s.Step();
  EXPECT_EQ(f.log, (Log{"suspend", "program_handler"}));
  f.disposition = StopSignalHost::Disposition::kIgnore;
  s.NoteCont();
  s.Step();
  s.NoteTstp();
  s.Step();
  EXPECT_EQ(f.log, (Log{"suspend", "program_handler", "resume", "suspend"}))
      << "an ignored SIGTSTP still releases the memory (Slurm's SIGSTOP follows)";
}

TEST(StopSignalsTest, AFailedSuspendStillStopsAndContResumesNothing) {
  Fake f;
  f.suspend_result = Status::Error(ErrorCode::kBusy, "process is already suspended");
  StopSignals s(&f, &f);
  s.NoteTstp();
  s.Step();
  EXPECT_EQ(f.log, (Log{"suspend", "stop"}));
  EXPECT_FALSE(s.suspended());
  s.NoteCont();
  s.Step();
  EXPECT_EQ(f.log, (Log{"suspend", "stop"})) << "not ours to resume (e.g. vgpuctl suspend)";
}

TEST(StopSignalsTest, ASecondTstpWhileSuspendedDoesNotSuspendTwice) {
  Fake f;
  StopSignals s(&f, &f);
  s.NoteTstp();
  s.Step();
  s.NoteTstp();
  s.Step();
  EXPECT_EQ(f.log, (Log{"suspend", "stop", "stop"}));
}

TEST(StopSignalsTest, ResumeRetriesWithBackoffUntilTheMemoryIsBack) {
  Fake f;
  f.resume_failures = 3;
  StopSignals s(&f, &f);
  s.NoteTstp();
  s.Step();
  s.NoteCont();
  s.Step();
  EXPECT_EQ(f.log, (Log{"suspend", "stop", "resume", "sleep 50", "resume", "sleep 100", "resume",
                        "sleep 200", "resume"}));
  EXPECT_FALSE(s.suspended());
}

TEST(StopSignalsTest, ATstpWhileWaitingForMemoryLeavesItSuspended) {
  Fake f;
  f.resume_failures = 100;
  StopSignals s(&f, &f);
  s.NoteTstp();
  s.Step();
  s.NoteCont();
  f.during_sleep = [&] { s.NoteTstp(); };
  s.Step();
  s.Step();  // the new SIGTSTP's wake-up
  EXPECT_TRUE(s.suspended());
  EXPECT_EQ(f.log, (Log{"suspend", "stop", "resume", "sleep 50", "resume", "stop"}))
      << "the new SIGTSTP stops it again without a second suspend";
}

// --- the POSIX plumbing, once in this process ---

std::atomic<int> g_program_tstp{0};
std::atomic<int> g_program_cont{0};
void ProgramTstp(int) { g_program_tstp.fetch_add(1); }
void ProgramCont(int) { g_program_cont.fetch_add(1); }

struct CountingSuspender final : Suspender {
  std::atomic<int> suspends{0};
  std::atomic<int> resumes{0};
  Status Suspend() override {
    suspends.fetch_add(1);
    return Status::Ok();
  }
  Status Resume() override {
    resumes.fetch_add(1);
    return Status::Ok();
  }
};

bool WaitFor(const std::function<bool()>& done) {
  for (int i = 0; i < 500 && !done(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

TEST(StopSignalsPosixTest, HandlersChainTheProgramsAndWakeTheThread) {
  signal(SIGTSTP, ProgramTstp);
  signal(SIGCONT, ProgramCont);
  static CountingSuspender suspender;  // lives for ever, as the handlers do
  EXPECT_FALSE(SuspendedByStopSignal()) << "nothing installed yet";
  ASSERT_TRUE(InstallPosixStopSignals(&suspender).ok());
  ASSERT_TRUE(InstallPosixStopSignals(&suspender).ok()) << "a second install does nothing";
  raise(SIGTSTP);
  ASSERT_TRUE(WaitFor([] { return g_program_tstp.load() == 1; }));
  EXPECT_EQ(suspender.suspends.load(), 1) << "the program's handler runs after the suspend";
  EXPECT_TRUE(SuspendedByStopSignal());
  raise(SIGCONT);
  ASSERT_TRUE(WaitFor([] { return suspender.resumes.load() == 1; }));
  EXPECT_TRUE(WaitFor([] { return !SuspendedByStopSignal(); }));
  EXPECT_EQ(g_program_cont.load(), 1);
  EXPECT_EQ(g_program_tstp.load(), 1);
}

}  // namespace
}  // namespace vgpu::residency
