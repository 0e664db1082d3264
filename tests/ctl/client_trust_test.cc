// The client's checks before it talks to an agent: the run directory must be
// safe (owner, mode, not a symlink) and the socket must be answered by the
// target process itself (SO_PEERCRED). An agent with a fake handler serves in
// this process; vgpuctl is spawned against it. Label integration.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "ctl/control/agent_server.h"
#include "ctl/control/client.h"
#include "ctl/control/run_dir.h"
#include "tests/ctl/test_util.h"

namespace vgpu::ctl {
namespace {

using testing::FakeHandler;
using testing::RunResult;
using testing::TestAgent;
using testing::Vgpuctl;

class ClientTrustTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    run_ = dir_->path() + "/run";
    handler_ = new FakeHandler();
    AgentOptions o;
    o.run_dir = run_;
    ASSERT_TRUE(TestAgent().Start(handler_, o).ok());
  }
  static void TearDownTestSuite() {
    TestAgent().Stop();
    delete dir_;
  }
  void TearDown() override {
    chmod(run_.c_str(), 0700);
    handler_->clear();
  }

  // A ping of this process through `dir`.
  static Status Ping(const std::string& dir, pid_t pid = getpid()) {
    Request req;
    req.cmd = "ping";
    Response resp;
    ClientOptions o;
    o.run_dir = dir;
    o.timeout_ms = 5000;
    return Call(pid, req, nullptr, &resp, o);
  }
  // vgpuctl checkpoint of `pid` through `dir`: must exit 7 having sent nothing.
  static void ExpectVgpuctlRefuses(const std::string& dir, pid_t pid, const std::string& why) {
    RunResult r =
        Vgpuctl({"checkpoint", std::to_string(pid), "--dir", "/victim/ckpt", "--run-dir", dir});
    EXPECT_EQ(r.exit_code, 7) << r.err;
    EXPECT_NE(r.err.find(why), std::string::npos) << r.err;
    EXPECT_EQ(handler_->last("checkpoint").cmd, "") << "the request never reached the socket";
  }

  static testing::TempDir* dir_;
  static std::string run_;
  static FakeHandler* handler_;
};
testing::TempDir* ClientTrustTest::dir_ = nullptr;
std::string ClientTrustTest::run_;
FakeHandler* ClientTrustTest::handler_ = nullptr;

TEST_F(ClientTrustTest, ThePrivateDirectoryAndTheRealAgentAreTrusted) {
  Status st = Ping(run_);
  EXPECT_TRUE(st.ok()) << st.message;
  RunResult r = Vgpuctl({"info", std::to_string(getpid()), "--run-dir", run_});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST_F(ClientTrustTest, DirectoryWritableByOthersIsRefused) {
  ASSERT_EQ(chmod(run_.c_str(), 0777), 0);
  Status st = Ping(run_);
  EXPECT_EQ(st.code, ErrorCode::kUntrusted) << st.message;
  EXPECT_NE(st.message.find("writable by others"), std::string::npos) << st.message;
  ExpectVgpuctlRefuses(run_, getpid(), "writable by others");
  RunResult ps = Vgpuctl({"ps", "--run-dir", run_});
  EXPECT_EQ(ps.exit_code, 7) << ps.err;
  ASSERT_EQ(chmod(run_.c_str(), 0770), 0);
  EXPECT_EQ(Ping(run_).code, ErrorCode::kUntrusted) << "group-writable";
}

TEST_F(ClientTrustTest, SymlinkedDirectoryIsRefused) {
  std::string link = dir_->path() + "/link";
  ASSERT_EQ(symlink(run_.c_str(), link.c_str()), 0);
  Status st = Ping(link);
  EXPECT_EQ(st.code, ErrorCode::kUntrusted) << st.message;
  EXPECT_NE(st.message.find("symbolic link"), std::string::npos) << st.message;
  ExpectVgpuctlRefuses(link, getpid(), "symbolic link");
  unlink(link.c_str());
}

// What another user can do to /tmp/vgpu-<uid>: create it first, as theirs.
TEST_F(ClientTrustTest, DirectoryOwnedByAnotherUserIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give the directory to another uid";
  ASSERT_EQ(chown(run_.c_str(), 65534, 65534), 0);
  Status st = Ping(run_);
  EXPECT_EQ(st.code, ErrorCode::kUntrusted) << st.message;
  EXPECT_NE(st.message.find("owned by uid 65534"), std::string::npos) << st.message;
  ExpectVgpuctlRefuses(run_, getpid(), "owned by uid 65534");
  ASSERT_EQ(chown(run_.c_str(), 0, 0), 0);
  EXPECT_TRUE(Ping(run_).ok()) << "root-owned is fine";
}

// A socket named after another process but served by this one: what a
// planted agent-<victimpid>.sock looks like to the client.
TEST_F(ClientTrustTest, SocketServedByAnotherProcessIsRefused) {
  pid_t victim = fork();
  if (victim == 0) {
    pause();
    _exit(0);
  }
  ASSERT_GT(victim, 0);
  std::string planted;
  ASSERT_TRUE(SocketPath(run_, victim, &planted).ok());
  ASSERT_EQ(link(TestAgent().SocketPath().c_str(), planted.c_str()), 0)
      << "same socket, victim's name";
  Status st = Ping(run_, victim);
  EXPECT_EQ(st.code, ErrorCode::kUntrusted) << st.message;
  EXPECT_NE(st.message.find("served by pid " + std::to_string(getpid())), std::string::npos)
      << st.message;
  ExpectVgpuctlRefuses(run_, victim, "impersonating");
  RunResult j = Vgpuctl({"info", std::to_string(victim), "--run-dir", run_, "--json"});
  EXPECT_EQ(j.exit_code, 7) << j.err;
  EXPECT_NE(j.out.find("\"code\":\"EUNTRUSTED\""), std::string::npos) << j.out;
  EXPECT_TRUE(handler_->requests().empty()) << "nothing reached the impostor";
  unlink(planted.c_str());
  kill(victim, SIGKILL);
  waitpid(victim, nullptr, 0);
}

}  // namespace
}  // namespace vgpu::ctl
