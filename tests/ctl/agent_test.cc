// The agent served in this process with a fake handler, exercised through raw
// sockets (robustness, concurrency, authentication, fork). Label integration.
#include "ctl/control/agent_server.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "ctl/control/client.h"
#include "ctl/control/run_dir.h"
#include "tests/ctl/test_util.h"

namespace vgpu::ctl {
namespace {

using nlohmann::json;
using testing::FakeHandler;
using testing::RawClient;
using testing::RoundTrip;
using testing::TestAgent;

constexpr int kIdleMs = 1000;
constexpr int kRequestMs = 2000;  // a request's total deadline

AgentOptions TestOptions() {
  AgentOptions o;
  o.idle_timeout_ms = kIdleMs;
  o.request_timeout_ms = kRequestMs;
  return o;
}

// ThreadSanitizer runs a thread of its own and cannot start threads in the
// child of a multi-threaded fork; those checks are skipped under it.
#if defined(__SANITIZE_THREAD__)
constexpr bool kTsan = true;
#else
constexpr bool kTsan = false;
#endif

class AgentTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    setenv("VGPU_RUN_DIR", (dir_->path() + "/run").c_str(), 1);
    handler_ = new FakeHandler();
    ASSERT_TRUE(TestAgent().Start(handler_, TestOptions()).ok());
  }
  static void TearDownTestSuite() {
    TestAgent().Stop();
    delete dir_;
  }
  void SetUp() override {
    if (!TestAgent().Running()) {
      ASSERT_TRUE(TestAgent().Start(handler_, TestOptions()).ok());
    }
    handler_->delay_ms = 0;
    handler_->suspended = false;
    handler_->progress_steps = 5;
    handler_->step_sleep_ms = 1;
    path_ = TestAgent().SocketPath();
  }
  // The agent still answers a well-formed request.
  void ExpectAlive() {
    json r = RoundTrip(path_, R"({"v":1,"id":99,"cmd":"ping"})"
                              "\n");
    EXPECT_EQ(r["ok"], true) << r;
    EXPECT_EQ(r["id"], 99);
    EXPECT_EQ(r["result"]["pid"], getpid());
  }
  static testing::TempDir* dir_;
  static FakeHandler* handler_;
  std::string path_;
};
testing::TempDir* AgentTest::dir_ = nullptr;
FakeHandler* AgentTest::handler_ = nullptr;

TEST_F(AgentTest, SocketIsPrivateAndNamedAfterThePid) {
  EXPECT_EQ(path_, RunDir() + "/agent-" + std::to_string(getpid()) + ".sock");
  struct stat st {};
  ASSERT_EQ(stat(path_.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(stat(RunDir().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

TEST_F(AgentTest, InfoRoundTrip) {
  json r = RoundTrip(path_, R"({"v":1,"id":5,"cmd":"info"})"
                            "\n");
  ASSERT_EQ(r["ok"], true) << r;
  EXPECT_EQ(r["v"], 1);
  EXPECT_EQ(r["id"], 5);
  EXPECT_EQ(r["result"]["pid"], getpid());
  EXPECT_EQ(r["result"]["devices"].size(), 2u);
  json ps = RoundTrip(path_, R"({"v":1,"id":6,"cmd":"ps"})"
                             "\n");
  ASSERT_EQ(ps["result"]["processes"].size(), 1u);
  EXPECT_EQ(ps["result"]["processes"][0]["group"], "ctr-42");
}

TEST_F(AgentTest, ClientLibraryCallsWithProgress) {
  Request req;
  req.id = 11;
  req.cmd = "checkpoint";
  req.args = ToJson(CheckpointArgs{"/ckpt", true});
  std::vector<Progress> seen;
  Response resp;
  Status st = Call(
      getpid(), req, [&](const Progress& p) { seen.push_back(p); }, &resp);
  ASSERT_TRUE(st.ok()) << st.message;
  ASSERT_TRUE(resp.ok) << resp.error;
  EXPECT_EQ(resp.id, 11);
  EXPECT_EQ(resp.result["path"], "/ckpt" + testing::FakeImageName());
  ASSERT_GE(seen.size(), 2u);
  EXPECT_EQ(seen.back().done, seen.back().total) << "the final progress line is never throttled";
  CheckpointArgs got;
  ASSERT_TRUE(ParseCheckpointArgs(handler_->last("checkpoint").args, &got).ok());
  EXPECT_EQ(got.dir, "/ckpt");
  EXPECT_EQ(handler_->last("checkpoint").peer_uid, getuid()) << "from SO_PEERCRED";
  EXPECT_TRUE(got.leave_running);
}

// vgpud's overall deadline: progress lines reset the silence timeout, not it.
TEST_F(AgentTest, ACallThatKeepsReportingProgressEndsAtItsDeadline) {
  handler_->progress_steps = 100;
  handler_->step_sleep_ms = 20;  // 2 s of progress, never 1 s silent
  Request req;
  req.cmd = "checkpoint";
  req.args = ToJson(CheckpointArgs{"/ckpt", true});
  Response resp;
  ClientOptions o;
  o.timeout_ms = 1000;
  o.deadline_ms = 400;
  const auto t0 = std::chrono::steady_clock::now();
  Status st = Call(getpid(), req, nullptr, &resp, o);
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(st.code, ErrorCode::kTimedOut) << st.message;
  EXPECT_NE(st.message.find("did not finish within 0.4"), std::string::npos) << st.message;
  EXPECT_LT(took, std::chrono::milliseconds(1500)) << "ended by the deadline, not by the transfer";
  handler_->progress_steps = 5;
  handler_->step_sleep_ms = 1;
  std::this_thread::sleep_for(std::chrono::milliseconds(2200));  // the agent's side finishes
}

// vgpud's give_up (a job SIGSTOPped mid-request): asked while the agent is
// silent, it ends the call long before the silence limit.
TEST_F(AgentTest, ACallEndsWhenGiveUpSaysSo) {
  handler_->progress_steps = 2;
  handler_->step_sleep_ms = 1000;  // 1 s silent between progress lines
  Request req;
  req.cmd = "checkpoint";
  req.args = ToJson(CheckpointArgs{"/ckpt", true});
  Response resp;
  ClientOptions o;
  o.timeout_ms = 5000;
  const auto t0 = std::chrono::steady_clock::now();
  int asked = 0;
  o.give_up = [&] { return ++asked >= 2; };  // the second question: ~500 ms
  Status st = Call(getpid(), req, nullptr, &resp, o);
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(st.code, ErrorCode::kBusy) << st.message;
  EXPECT_NE(st.message.find("stopped"), std::string::npos) << st.message;
  EXPECT_LT(took, std::chrono::milliseconds(900)) << "ended by give_up, not by the silence limit";
  // Never giving up: the call completes as before.
  o.give_up = [] { return false; };
  EXPECT_TRUE(Call(getpid(), req, nullptr, &resp, o).ok());
  EXPECT_TRUE(resp.ok) << resp.error;
  handler_->progress_steps = 5;
  handler_->step_sleep_ms = 1;
}

TEST_F(AgentTest, SeveralRequestsOnOneConnection) {
  RawClient c(path_);
  ASSERT_TRUE(c.Send(R"({"v":1,"id":1,"cmd":"ping"})"
                     "\n"
                     R"({"v":1,"id":2,"cmd":"info"})"
                     "\r\n\n   \n"));
  EXPECT_EQ(json::parse(c.ReadLine())["id"], 1);
  EXPECT_EQ(json::parse(c.ReadLine())["id"], 2);
}

TEST_F(AgentTest, HalfClosedRequestWithoutNewlineIsAnswered) {
  RawClient c(path_);
  ASSERT_TRUE(c.Send(R"({"v":1,"id":4,"cmd":"ping"})"));
  shutdown(c.fd(), SHUT_WR);
  EXPECT_EQ(json::parse(c.ReadLine())["id"], 4);
}

struct BadInput {
  const char* name;
  std::string line;
  const char* code;
};

TEST_F(AgentTest, MalformedRequestsGetErrorsAndTheConnectionSurvives) {
  const BadInput cases[] = {
      {"garbage", "hello there", "EINVAL"},
      {"not an object", "[1,2,3]", "EINVAL"},
      {"truncated", R"({"v":1,"cmd":"in)", "EINVAL"},
      {"invalid utf-8", "{\"v\":1,\"cmd\":\"\xff\xfe\xfd\"}", "EINVAL"},
      {"nul bytes", std::string("{\"v\":1,\0\0\"cmd\":\"ping\"}", 23), "EINVAL"},
      {"deep nesting", std::string(20000, '[') + std::string(20000, ']'), "EINVAL"},
      {"deep object", R"({"v":1,"cmd":"info","args":)" + std::string(5000, '{'), "EINVAL"},
      {"cmd not a string", R"({"v":1,"cmd":["info"]})", "EINVAL"},
      {"id not an integer", R"({"v":1,"id":{},"cmd":"info"})", "EINVAL"},
      {"args not an object", R"({"v":1,"cmd":"info","args":"x"})", "EINVAL"},
      {"dir wrong type", R"({"v":1,"cmd":"checkpoint","args":{"dir":1}})", "EINVAL"},
      {"dir empty", R"({"v":1,"cmd":"checkpoint","args":{"dir":""}})", "EINVAL"},
      {"from empty", R"({"v":1,"cmd":"restore","args":{"from":""}})", "EINVAL"},
      {"leave_running wrong type", R"({"v":1,"cmd":"checkpoint","args":{"leave_running":1}})",
       "EINVAL"},
      {"share out of range", R"({"v":1,"cmd":"set","args":{"compute_share":101}})", "EINVAL"},
      {"unknown command", R"({"v":1,"cmd":"format-c"})", "ENOSYS"},
      {"unknown command, bad utf-8", "{\"v\":1,\"cmd\":\"\\udcff\"}", "EINVAL"},
      {"future version", R"({"v":2,"cmd":"info"})", "EPROTO"},
      {"no version", R"({"cmd":"info"})", "EPROTO"},
  };
  int before = handler_->completed;
  RawClient c(path_);
  for (const BadInput& b : cases) {
    SCOPED_TRACE(b.name);
    ASSERT_TRUE(c.Send(b.line + "\n"));
    json r = json::parse(c.ReadLine(), nullptr, false);
    ASSERT_FALSE(r.is_discarded());
    EXPECT_EQ(r["ok"], false);
    EXPECT_EQ(r["code"], b.code) << r;
    EXPECT_TRUE(r["error"].is_string());
  }
  EXPECT_EQ(handler_->completed, before) << "nothing malformed reached the handler";
  ASSERT_TRUE(c.Send(R"({"v":1,"id":8,"cmd":"ping","unknown_field":[1]})"
                     "\n"));
  EXPECT_EQ(json::parse(c.ReadLine())["ok"], true);
  ExpectAlive();
}

TEST_F(AgentTest, OneMebibyteLineIsRefusedAndClosed) {
  RawClient c(path_);
  std::string huge =
      R"({"v":1,"cmd":"info","args":{"pad":")" + std::string(1 << 20, 'x') + "\"}}\n";
  c.Send(huge);  // the agent may close before reading it all
  bool eof = false;
  json r = json::parse(c.ReadLine(5000, &eof), nullptr, false);
  ASSERT_FALSE(eof);
  EXPECT_EQ(r["code"], "E2BIG") << r;
  EXPECT_TRUE(c.WaitForClose(5000));
  ExpectAlive();
}

TEST_F(AgentTest, HandlerExceptionsBecomeEio) {
  json r = RoundTrip(path_, R"({"v":1,"id":3,"cmd":"info","args":{"throw":1}})"
                            "\n");
  EXPECT_EQ(r["code"], "EIO");
  EXPECT_NE(r["error"].get<std::string>().find("fake handler exploded"), std::string::npos);
  ExpectAlive();
}

TEST_F(AgentTest, PartialLinesAndAbruptDisconnects) {
  for (int i = 0; i < 20; ++i) {
    RawClient c(path_);
    c.Send(R"({"v":1,"id":1,"cmd":"inf)");
    // Closed with a partial line: an answer to a truncated request, if any, is lost.
  }
  {
    RawClient c(path_);
    struct linger l {
      1, 0
    };  // RST instead of FIN
    setsockopt(c.fd(), SOL_SOCKET, SO_LINGER, &l, sizeof l);
    c.Send(R"({"v":1,"cmd":"info"})"
           "\n");
  }
  ExpectAlive();
}

TEST_F(AgentTest, ClientThatNeverSendsIsDroppedWithoutBlockingOthers) {
  RawClient silent(path_);
  ASSERT_TRUE(silent.connected());
  ExpectAlive();  // served while the silent client is connected ...
  EXPECT_FALSE(silent.WaitForClose(0)) << "... which is still connected: no clock needed";
  EXPECT_TRUE(silent.WaitForClose(kIdleMs * 4)) << "idle timeout closes it";
}

TEST_F(AgentTest, ClientDisconnectsMidResponse) {
  handler_->progress_steps = 40;
  handler_->step_sleep_ms = 5;
  int before = handler_->completed;
  {
    RawClient c(path_);
    c.Send(R"({"v":1,"id":1,"cmd":"checkpoint","args":{"dir":"/d"}})"
           "\n");
    json first = json::parse(c.ReadLine());
    EXPECT_TRUE(first.contains("progress")) << first;
  }               // gone while progress is being written
  ExpectAlive();  // queued behind the checkpoint, which runs to its end
  EXPECT_EQ(handler_->completed, before + 1);
}

TEST_F(AgentTest, ManyConcurrentClients) {
  constexpr int kThreads = 24, kRequests = 20;
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kRequests; ++i) {
        Request req;
        req.id = t * 1000 + i;
        req.cmd = i % 2 ? "info" : "ping";
        Response resp;
        if (Call(getpid(), req, nullptr, &resp).ok() && resp.ok && resp.id == req.id) ++ok;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok, kThreads * kRequests);
}

// Whether the agent has closed `c` (without waiting); a line it sent first
// is stored in *last.
bool ClosedNow(RawClient* c, std::string* last) {
  char buf[4096];
  for (;;) {
    ssize_t n = recv(c->fd(), buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) {
      last->append(buf, static_cast<size_t>(n));
      continue;
    }
    return n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
  }
}

// Opens kMaxConnections connections, waiting until the agent holds them all.
std::vector<std::unique_ptr<RawClient>> FillTable(const std::string& path) {
  std::vector<std::unique_ptr<RawClient>> held;
  for (int i = 0; i < kMaxConnections; ++i) {
    held.push_back(std::make_unique<RawClient>(path));
    // One accept per poll round: give each its own, so the order is known.
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // all accepted
  return held;
}

TEST_F(AgentTest, AFullTableEvictsTheLongestWaitingConnection) {
  std::vector<std::unique_ptr<RawClient>> held = FillTable(path_);
  // A new client is served all the same: the oldest waiting one makes room.
  ExpectAlive();
  bool eof = false;
  json r = json::parse(held[0]->ReadLine(2000, &eof), nullptr, false);
  ASSERT_FALSE(eof) << "the oldest connection was told why";
  EXPECT_EQ(r["code"], "EBUSY") << r;
  EXPECT_TRUE(held[0]->WaitForClose(1000));
  std::string ignored;
  for (int i = 1; i < kMaxConnections; ++i) {
    EXPECT_FALSE(ClosedNow(held[i].get(), &ignored)) << "connection " << i;
  }
}

// Same-uid clients that trickle a byte at a time on every slot: each byte
// resets the idle timeout, but not the request's total deadline.
TEST_F(AgentTest, TricklingClientsAreClosedAtTheRequestDeadline) {
  auto start = std::chrono::steady_clock::now();
  std::vector<std::unique_ptr<RawClient>> trickling = FillTable(path_);
  std::vector<std::string> last(trickling.size());
  std::vector<double> closed_at(trickling.size(), -1);
  bool served_meanwhile = false;
  auto elapsed_ms = [&] {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
        .count();
  };
  int open = kMaxConnections;
  while (open > 0 && elapsed_ms() < kRequestMs * 4) {
    for (size_t i = 0; i < trickling.size(); ++i) {
      if (closed_at[i] >= 0) continue;
      if (ClosedNow(trickling[i].get(), &last[i])) {
        closed_at[i] = elapsed_ms();
        --open;
      } else {
        trickling[i]->Send(" ");  // never a newline: the request never ends
      }
    }
    if (!served_meanwhile && elapsed_ms() > kRequestMs / 4) {
      Request req;
      req.cmd = "ping";
      Response resp;
      Status st = Call(getpid(), req, nullptr, &resp);
      EXPECT_TRUE(st.ok() && resp.ok) << st.message << resp.error;
      served_meanwhile = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(kIdleMs / 5));
  }
  ASSERT_EQ(open, 0) << "trickling clients still connected after " << elapsed_ms() << " ms";
  int at_deadline = 0;
  for (size_t i = 0; i < trickling.size(); ++i) {
    if (last[i].find("ETIMEDOUT") == std::string::npos) continue;
    ++at_deadline;
    EXPECT_GE(closed_at[i], kRequestMs * 0.9) << i;
    EXPECT_LE(closed_at[i], kRequestMs + kIdleMs) << i;
  }
  EXPECT_GE(at_deadline, kMaxConnections - 1) << "one may have been evicted for the ping";
  ExpectAlive();
}

// Runs `body` in a child process that switched to uid/gid 65534.
int AsNobody(const std::function<int()>& body) {
  pid_t pid = fork();
  if (pid == 0) {
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(100);
    _exit(body());
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST_F(AgentTest, PeerCredRefusesOtherUids) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to act as another uid";
  // Open the file permissions so that only SO_PEERCRED stands in the way.
  std::string dir = RunDir();
  ASSERT_EQ(chmod(dir_->path().c_str(), 0711), 0);  // mkdtemp made it 0700
  ASSERT_EQ(chmod(dir.c_str(), 0711), 0);
  ASSERT_EQ(chmod(path_.c_str(), 0666), 0);
  std::string path = path_;
  int rc = AsNobody([&] {
    RawClient c(path);
    if (!c.connected()) return 10;
    c.Send(R"({"v":1,"id":1,"cmd":"suspend"})"
           "\n");
    json r = json::parse(c.ReadLine(), nullptr, false);
    if (r.is_discarded() || r["ok"] != false || r["code"] != "EPERM") return 11;
    if (r["error"] != "permission denied: peer uid 65534 is not the owner") return 12;
    return c.WaitForClose(3000) ? 0 : 13;
  });
  EXPECT_EQ(rc, 0);
  // vgpuctl sees from the socket's peer credentials that the process is
  // root's, and does not even send its request.
  testing::RunResult v = testing::Vgpuctl({"suspend", std::to_string(getpid())}, 65534);
  EXPECT_EQ(v.exit_code, 4) << v.err;
  EXPECT_NE(v.err.find("permission denied: process " + std::to_string(getpid()) +
                       " runs as uid 0, not as uid 65534"),
            std::string::npos)
      << v.err;
  // With the default permissions the kernel refuses first; same exit code.
  chmod(dir.c_str(), 0700);
  chmod(path_.c_str(), 0600);
  v = testing::Vgpuctl({"info", std::to_string(getpid())}, 65534);
  EXPECT_EQ(v.exit_code, 4) << v.err;
  EXPECT_NE(v.err.find("permission denied"), std::string::npos) << v.err;
  EXPECT_EQ(handler_->last("suspend").cmd, "") << "the refused request never ran";
}

TEST_F(AgentTest, ForkChildDoesNotServe) {
  std::string parent_path = path_;
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) {
    int bad = 0;
    if (TestAgent().Running()) bad |= 1;
    if (!kTsan && testing::ThreadCount() != 1) bad |= 2;
    std::string own = RunDir() + "/agent-" + std::to_string(getpid()) + ".sock";
    if (access(own.c_str(), F_OK) == 0) bad |= 4;
    // The parent still serves on its socket.
    json r = RoundTrip(parent_path, R"({"v":1,"cmd":"ping"})"
                                    "\n");
    if (r["result"]["pid"] != parent) bad |= 8;
    // The child may start its own agent.
    if (!kTsan) {
      FakeHandler h;
      if (!TestAgent().Start(&h).ok() || access(own.c_str(), F_OK) != 0) bad |= 16;
      TestAgent().Stop();
      if (access(own.c_str(), F_OK) == 0) bad |= 32;
    }
    _exit(bad);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "failed checks (bitmask)";
  EXPECT_EQ(access(path_.c_str(), F_OK), 0) << "the child left the parent's socket alone";
  ExpectAlive();
}

// A socket file whose owner is gone: bound, then closed.
void MakeDeadSocket(const std::string& path) {
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0) << path;
  close(fd);
}

pid_t DeadPid() {
  pid_t pid = fork();
  if (pid == 0) _exit(0);
  waitpid(pid, nullptr, 0);
  return pid;
}

TEST_F(AgentTest, StaleSocketsAreRemoved) {
  std::string dead = RunDir() + "/agent-" + std::to_string(DeadPid()) + ".sock";
  MakeDeadSocket(dead);
  // A live process (pid reuse) with a socket nobody listens on.
  pid_t sleeper = fork();
  if (sleeper == 0) {
    pause();
    _exit(0);
  }
  std::string unlistened = RunDir() + "/agent-" + std::to_string(sleeper) + ".sock";
  MakeDeadSocket(unlistened);
  std::vector<std::string> removed;
  std::vector<AgentEntry> agents = ListAgents("", &removed);
  kill(sleeper, SIGKILL);
  waitpid(sleeper, nullptr, 0);
  ASSERT_EQ(agents.size(), 1u);
  EXPECT_EQ(agents[0].pid, getpid());
  EXPECT_EQ(removed.size(), 2u);
  EXPECT_NE(access(dead.c_str(), F_OK), 0);
  EXPECT_NE(access(unlistened.c_str(), F_OK), 0);

  // The agent cleans up dead pids' sockets when it starts.
  dead = RunDir() + "/agent-" + std::to_string(DeadPid()) + ".sock";
  MakeDeadSocket(dead);
  TestAgent().Stop();
  EXPECT_NE(access(path_.c_str(), F_OK), 0) << "Stop unlinks";
  ASSERT_TRUE(TestAgent().Start(handler_).ok());
  EXPECT_NE(access(dead.c_str(), F_OK), 0);
}

TEST_F(AgentTest, CallReportsMissingAgents) {
  Response r;
  Request req;
  req.cmd = "ping";
  EXPECT_EQ(Call(DeadPid(), req, nullptr, &r).code, ErrorCode::kNoEnt);
  Status st = Call(1, req, nullptr, &r);  // alive, not interposed
  EXPECT_EQ(st.code, ErrorCode::kNoEnt);
  EXPECT_NE(st.message.find("no vgpu agent"), std::string::npos) << st.message;
}

TEST_F(AgentTest, SilentAgentTimesOut) {
  handler_->delay_ms = 1500;
  Request req;
  req.cmd = "info";
  Response r;
  ClientOptions o;
  o.timeout_ms = 300;
  EXPECT_EQ(Call(getpid(), req, nullptr, &r, o).code, ErrorCode::kTimedOut);
  handler_->delay_ms = 0;
  std::this_thread::sleep_for(std::chrono::milliseconds(1300));
  ExpectAlive();
}

TEST_F(AgentTest, StartIsIdempotentAndStopJoins) {
  int threads = testing::ThreadCount();
  EXPECT_TRUE(TestAgent().Start(handler_).ok());
  EXPECT_EQ(testing::ThreadCount(), threads);
  TestAgent().Stop();
  EXPECT_FALSE(TestAgent().Running());
  // A joined thread can linger in /proc/self/task for a moment.
  for (int i = 0; i < 100 && testing::ThreadCount() != threads - 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(testing::ThreadCount(), threads - 1);
  EXPECT_EQ(TestAgent().SocketPath(), "");
}

TEST(AgentStart, FailsClearlyOnAnOverlongPath) {
  FakeHandler h;
  AgentOptions o;
  o.run_dir = "/tmp/" + std::string(110, 'x');
  Agent agent;
  Status st = agent.Start(&h, o);
  EXPECT_FALSE(st.ok());
  EXPECT_FALSE(agent.Running());
}

}  // namespace
}  // namespace vgpu::ctl
