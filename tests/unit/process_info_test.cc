// Liveness of other processes (common/process_info.h): the rule every shared
// table (quota ledger, scheduler region, simulated node) uses to reap slots.
#include "common/process_info.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

namespace vgpu {
namespace {

// A pid that named a process which has exited and been waited for.
pid_t DeadPid() {
  pid_t pid = fork();
  if (pid == 0) _exit(0);
  waitpid(pid, nullptr, 0);
  return pid;
}

TEST(ProcessAliveTest, ThisProcessIsAliveByStartTimeAndByExistence) {
  uint64_t start = ProcessStartTime(getpid());
  ASSERT_NE(start, 0u);
  EXPECT_TRUE(ProcessAlive(getpid(), start));
  EXPECT_TRUE(ProcessAlive(getpid(), 0)) << "start time unknown: existence decides";
}

TEST(ProcessAliveTest, AnotherStartTimeIsAnotherProcess) {
  // What a reused pid looks like to the holder of the old record.
  EXPECT_FALSE(ProcessAlive(getpid(), ProcessStartTime(getpid()) + 1));
}

TEST(ProcessAliveTest, AnExitedProcessIsDead) {
  pid_t dead = DeadPid();
  EXPECT_FALSE(ProcessAlive(dead, 0));
  EXPECT_FALSE(ProcessAlive(dead, ProcessStartTime(getpid())));
}

TEST(ProcessAliveTest, AProcessWeMayNotSignalIsAlive) {
  // Without a recorded start time, EPERM from kill() still proves existence.
  // As root, a child that drops to nobody checks its root parent.
  pid_t child = fork();
  if (child == 0) {
    if (geteuid() == 0 && setresuid(65534, 65534, 65534) != 0) _exit(2);
    _exit(ProcessAlive(getppid(), 0) ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(ProcessAliveTest, NoProcessGroupIsEverAddressed) {
  // kill(0, 0) and kill(-1, 0) would succeed: they address groups.
  EXPECT_FALSE(ProcessAlive(0, 0));
  EXPECT_FALSE(ProcessAlive(-1, 0));
}

}  // namespace
}  // namespace vgpu
