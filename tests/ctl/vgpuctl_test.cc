// vgpuctl (spawned) against an agent served in this process with a fake
// handler: output formats, arguments reaching the handler, progress, exit
// codes. Label integration.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "ctl/control/agent_server.h"
#include "ctl/control/run_dir.h"
#include "tests/ctl/test_util.h"

namespace vgpu::ctl {
namespace {

using nlohmann::json;
using testing::FakeHandler;
using testing::RunResult;
using testing::TestAgent;
using testing::Vgpuctl;

class VgpuctlTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    setenv("VGPU_RUN_DIR", (dir_->path() + "/run").c_str(), 1);
    handler_ = new FakeHandler();
    ASSERT_TRUE(TestAgent().Start(handler_).ok());
  }
  static void TearDownTestSuite() {
    TestAgent().Stop();
    delete dir_;
  }
  void SetUp() override {
    handler_->suspended = false;
    handler_->delay_ms = 0;
    pid_ = std::to_string(getpid());
  }
  static json ParseJson(const RunResult& r) {
    json j = json::parse(r.out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << r.out;
    return j;
  }
  static testing::TempDir* dir_;
  static FakeHandler* handler_;
  std::string pid_;
};
testing::TempDir* VgpuctlTest::dir_ = nullptr;
FakeHandler* VgpuctlTest::handler_ = nullptr;

TEST_F(VgpuctlTest, PsListsThisProcess) {
  RunResult r = Vgpuctl({"ps"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("PID"), std::string::npos);
  EXPECT_NE(r.out.find(pid_ + " "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ctr-42"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1536 MiB"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("unlimited"), std::string::npos) << r.out;
}

TEST_F(VgpuctlTest, PsJson) {
  RunResult r = Vgpuctl({"ps", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json j = ParseJson(r);
  ASSERT_EQ(j["processes"].size(), 1u) << r.out;
  EXPECT_EQ(j["processes"][0]["pid"], getpid());
  EXPECT_EQ(j["processes"][0]["devices"][0]["quota"], 4ull << 30);
}

TEST_F(VgpuctlTest, PsWithNoAgentsAndAMissingDirectory) {
  RunResult r = Vgpuctl({"ps", "--json", "--run-dir", dir_->path() + "/nothing-here"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ParseJson(r)["processes"].size(), 0u);
}

TEST_F(VgpuctlTest, Info) {
  RunResult r = Vgpuctl({"info", pid_});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("state     running"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("GPU-fake-0"), std::string::npos) << r.out;
  r = Vgpuctl({"info", pid_, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json j = ParseJson(r);
  EXPECT_EQ(j["ok"], true);
  EXPECT_EQ(j["result"]["uid"], getuid());
}

TEST_F(VgpuctlTest, SuspendAndResume) {
  RunResult r = Vgpuctl({"suspend", pid_});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("suspended " + pid_, 0), 0u) << r.out;
  EXPECT_TRUE(handler_->suspended);
  EXPECT_EQ(Vgpuctl({"suspend", pid_}).exit_code, 5) << "already suspended: EBUSY";
  EXPECT_NE(Vgpuctl({"ps"}).out.find("suspended"), std::string::npos);
  r = Vgpuctl({"resume", pid_, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ParseJson(r)["result"]["state"], "running");
  EXPECT_FALSE(handler_->suspended);
}

TEST_F(VgpuctlTest, CheckpointPassesArgumentsAndShowsProgress) {
  RunResult r = Vgpuctl({"checkpoint", pid_, "--dir", "rel/ckpt", "--leave-running"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  CheckpointArgs a;
  ASSERT_TRUE(ParseCheckpointArgs(handler_->last("checkpoint").args, &a).ok());
  std::string expected = (std::filesystem::current_path() / "rel/ckpt").string();
  EXPECT_EQ(a.dir, expected) << "relative to vgpuctl's working directory, made absolute";
  EXPECT_TRUE(a.leave_running);
  EXPECT_NE(r.out.find(expected + testing::FakeImageName()), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("5 MiB"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("running"), std::string::npos) << r.out;
  // stderr is a file here: plain progress lines, ending at 100%.
  EXPECT_NE(r.err.find("checkpoint " + pid_ + ": 0%"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("100% (5 MiB / 5 MiB) copy"), std::string::npos) << r.err;

  r = Vgpuctl({"checkpoint", pid_, "--dir=/abs", "--json", "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "") << "--quiet";
  json j = ParseJson(r);
  EXPECT_EQ(j["result"]["path"], "/abs" + testing::FakeImageName());
  EXPECT_EQ(j["result"]["bytes"], 5u << 20);
  ASSERT_TRUE(ParseCheckpointArgs(handler_->last("checkpoint").args, &a).ok());
  EXPECT_FALSE(a.leave_running);
}

TEST_F(VgpuctlTest, Restore) {
  RunResult r = Vgpuctl({"restore", pid_, "--from", "/images/x"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(handler_->last("restore").args["from"], "/images/x");
  EXPECT_NE(r.out.find("restored " + pid_ + " from /images/x" + testing::FakeImageName()),
            std::string::npos)
      << r.out;
  r = Vgpuctl({"restore", pid_});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(handler_->last("restore").args.contains("from")) << "the agent's default";
}

TEST_F(VgpuctlTest, Set) {
  RunResult r = Vgpuctl({"set", pid_, "--memory-limit", "4GiB", "--compute-share", "50", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json args = handler_->last("set").args;
  EXPECT_EQ(args["memory_limit"], 4ull << 30);
  EXPECT_EQ(args["compute_share"], 50);
  EXPECT_FALSE(args.contains("device"));
  EXPECT_EQ(Vgpuctl({"set", pid_}).exit_code, 2) << "nothing to set";
  r = Vgpuctl({"set", pid_, "--weight", "7", "--priority", "low", "--device=1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  args = handler_->last("set").args;
  EXPECT_EQ(args["weight"], 7);
  EXPECT_EQ(args["priority"], "low");
  EXPECT_EQ(args["device"], 1);
  EXPECT_FALSE(args.contains("memory_limit"));
  EXPECT_EQ(r.out.rfind("set " + pid_ + ": ", 0), 0u) << r.out;
}

// --compute-share reads a share as VGPU_COMPUTE_SHARE does (common/parse.h).
TEST_F(VgpuctlTest, SetTakesSharesAsTheEnvironmentWritesThem) {
  for (const auto& [text, pct] : std::vector<std::pair<std::string, double>>{
           {"12.5", 12.5}, {"30%", 30}, {"100", 100}, {"0.05", 0.1}}) {
    RunResult r = Vgpuctl({"set", pid_, "--compute-share", text});
    ASSERT_EQ(r.exit_code, 0) << text << ": " << r.err;
    EXPECT_DOUBLE_EQ(handler_->last("set").args["compute_share"].get<double>(), pct) << text;
  }
  for (const char* bad : {"0", "100.5", "-3", "1e1", "half"}) {
    RunResult r = Vgpuctl({"set", pid_, "--compute-share", bad});
    EXPECT_EQ(r.exit_code, 2) << bad;
    EXPECT_NE(r.err.find("--compute-share"), std::string::npos) << r.err;
  }
}

// --group G: every agent whose info names group G (the fake's is ctr-42).
TEST_F(VgpuctlTest, SetGroup) {
  handler_->clear();
  RunResult r = Vgpuctl({"set", "--group", "ctr-42", "--priority", "high"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(handler_->last("set").args["priority"], "high");
  EXPECT_NE(r.out.find("set " + pid_ + " (group ctr-42): "), std::string::npos) << r.out;
  handler_->clear();
  r = Vgpuctl({"set", "--group", "other", "--priority", "high"});
  EXPECT_EQ(r.exit_code, 3) << "no member: not found";
  EXPECT_NE(r.err.find("no process of quota group 'other'"), std::string::npos) << r.err;
  for (const Request& req : handler_->requests()) EXPECT_NE(req.cmd, "set");
  EXPECT_EQ(Vgpuctl({"set", pid_, "--group", "ctr-42", "--weight", "2"}).exit_code, 2)
      << "a PID and a group";
  EXPECT_EQ(Vgpuctl({"set", "--group=", "--weight", "2"}).exit_code, 2) << "an empty group";
}

TEST_F(VgpuctlTest, OperationFailuresExitOne) {
  RunResult r = Vgpuctl({"checkpoint", pid_, "--dir", "/nonexistent-fail"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("disk on fire"), std::string::npos) << r.err;
  r = Vgpuctl({"restore", pid_, "--from", "/no-image", "--json"});
  EXPECT_EQ(r.exit_code, 1);
  json j = ParseJson(r);
  EXPECT_EQ(j["ok"], false);
  EXPECT_EQ(j["code"], "ENOENT");
}

TEST_F(VgpuctlTest, UsageErrorsExitTwo) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"suspend"},
                                             {"suspend", "abc"},
                                             {"suspend", "-5"},
                                             {"suspend", pid_, "extra"},
                                             {"checkpoint", pid_, "--bogus"},
                                             {"checkpoint", pid_, "--dir"},
                                             {"restore", pid_, "--dir", "/x"},
                                             {"suspend", pid_, "--leave-running"},
                                             {"ps", "--timeout", "0"},
                                             {"set", pid_, "--compute-share", "500"},
                                             {"set", pid_, "--weight", "0"},
                                             {"set", pid_, "--weight", "1001"},
                                             {"set", pid_, "--priority", "urgent"},
                                             {"set", pid_, "--memory-limit", "lots"},
                                             {"restore", pid_, "--device", "-1"},
                                             {"drain"},
                                             {"quota"},
                                             {"no-such-command"}}) {
    RunResult r = Vgpuctl(args);
    EXPECT_EQ(r.exit_code, 2) << args[0] << " " << (args.size() > 1 ? args.back() : "") << r.err;
  }
}

// A script's unset variable must not send images to the default directory.
TEST(Vgpuctl, EmptyPathsAreUsageErrors) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"checkpoint", "1", "--dir", ""},
                                             {"checkpoint", "1", "--dir="},
                                             {"restore", "1", "--from", ""},
                                             {"info", "1", "--run-dir", ""}}) {
    RunResult r = Vgpuctl(args);
    EXPECT_EQ(r.exit_code, 2) << args[2] << " " << r.err;
    EXPECT_NE(r.err.find("not an empty string"), std::string::npos) << r.err;
  }
}

pid_t DeadPid() {
  pid_t pid = fork();
  if (pid == 0) _exit(0);
  waitpid(pid, nullptr, 0);
  return pid;
}

TEST_F(VgpuctlTest, NoSuchProcessOrAgentExitsThree) {
  RunResult r = Vgpuctl({"suspend", std::to_string(DeadPid())});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.err.find("no such process"), std::string::npos) << r.err;
  r = Vgpuctl({"info", "1", "--json"});  // alive, no agent
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(ParseJson(r)["code"], "ENOENT");
}

TEST_F(VgpuctlTest, SilentAgentExitsSix) {
  handler_->delay_ms = 2000;
  RunResult r = Vgpuctl({"resume", pid_, "--timeout", "1"});
  EXPECT_EQ(r.exit_code, 6);
  EXPECT_NE(r.err.find("no answer"), std::string::npos) << r.err;
}

TEST_F(VgpuctlTest, ExistingCommandsStillWork) {
  EXPECT_EQ(Vgpuctl({"version"}).exit_code, 0);
  EXPECT_EQ(Vgpuctl({"quota", "no-such-group-ctl-test"}).exit_code, 3);
  EXPECT_EQ(Vgpuctl({}).exit_code, 2);
  RunResult r = Vgpuctl({"help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("checkpoint PID"), std::string::npos);
}

}  // namespace
}  // namespace vgpu::ctl
