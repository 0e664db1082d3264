// The control plane's one transport (ctl/control/socket_server.h) with a fake
// endpoint, through raw sockets: what differs between the agent's settings
// (owner only, serial) and vgpud's (any local user, a thread per request).
// The agent's transport behaviour in full (framing, deadlines, eviction, fork)
// is tests/ctl/agent_test.cc. Label integration.
#include "ctl/control/socket_server.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "tests/ctl/test_util.h"

namespace vgpu::ctl {
namespace {

using nlohmann::json;
using testing::RawClient;
using testing::RoundTrip;

// "hold" runs until Release() (or until its client is gone); "who" answers
// the peer as the server identified it; anything else answers its id.
class FakeEndpoint : public Endpoint {
 public:
  Response Serve(const Request& req, const Peer& peer, ProgressSink* progress) override {
    if (req.cmd == "who") {
      return Response::Ok({{"uid", peer.uid}, {"pid", peer.pid}, {"admin", peer.admin}});
    }
    std::unique_lock<std::mutex> lock(mu_);
    order_.push_back(req.id);
    if (req.cmd != "hold") return Response::Ok({{"id", req.id}});
    ++holding_;
    cv_.notify_all();
    while (!released_ && !progress->ClientGone()) cv_.wait_for(lock, std::chrono::milliseconds(5));
    saw_gone_ = !released_;
    --holding_;
    return Response::Ok({{"released", released_}});
  }
  // Waits (bounded) until n requests are being held.
  bool WaitHolding(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(10), [&] { return holding_ == n; });
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    cv_.notify_all();
  }
  int holding() {
    std::lock_guard<std::mutex> lock(mu_);
    return holding_;
  }
  bool saw_gone() {
    std::lock_guard<std::mutex> lock(mu_);
    return saw_gone_;
  }
  std::vector<int64_t> order() {
    std::lock_guard<std::mutex> lock(mu_);
    return order_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int holding_ = 0;
  bool released_ = false;
  bool saw_gone_ = false;
  std::vector<int64_t> order_;
};

std::string Line(const char* cmd, int id) {
  return json{{"v", 1}, {"id", id}, {"cmd", cmd}}.dump() + "\n";
}

class SocketServerTest : public ::testing::Test {
 protected:
  ServerOptions Options(Access access, Concurrency concurrency) {
    ServerOptions o;
    o.path = dir_.path() + "/s.sock";
    o.access = access;
    o.concurrency = concurrency;
    o.idle_timeout_ms = 5000;
    o.request_timeout_ms = 5000;
    o.stop_timeout_ms = 10000;
    return o;
  }
  // Sends a "hold" on `c` and waits until the endpoint runs it.
  bool Holding(RawClient* c) { return c->Send(Line("hold", 1)) && endpoint_.WaitHolding(1); }
  void TearDown() override {
    endpoint_.Release();
    server_.Stop();
  }
  testing::TempDir dir_;
  FakeEndpoint endpoint_;
  SocketServer server_;
};

TEST_F(SocketServerTest, ThreadPerRequestAnswersOthersWhileOneRuns) {
  ASSERT_TRUE(
      server_.Start(&endpoint_, Options(Access::kOwner, Concurrency::kThreadPerRequest)).ok());
  RawClient held(server_.path());
  ASSERT_TRUE(Holding(&held));
  json r = RoundTrip(server_.path(), Line("other", 2));
  EXPECT_EQ(r["result"]["id"], 2) << "answered while the first request still runs";
  EXPECT_EQ(endpoint_.holding(), 1);
  endpoint_.Release();
  json held_reply = json::parse(held.ReadLine(10000), nullptr, false);
  EXPECT_EQ(held_reply["result"]["released"], true) << held_reply;
}

TEST_F(SocketServerTest, SerialRunsOneRequestAtATime) {
  ASSERT_TRUE(server_.Start(&endpoint_, Options(Access::kOwner, Concurrency::kSerial)).ok());
  RawClient held(server_.path());
  ASSERT_TRUE(Holding(&held));
  RawClient other(server_.path());
  ASSERT_TRUE(other.Send(Line("other", 2)));
  // While "hold" runs on the server's thread nothing else can be answered.
  bool eof = false;
  EXPECT_EQ(other.ReadLine(300, &eof), "");
  EXPECT_EQ(endpoint_.order(), (std::vector<int64_t>{1}));
  endpoint_.Release();
  EXPECT_EQ(json::parse(held.ReadLine(10000))["result"]["released"], true);
  EXPECT_EQ(json::parse(other.ReadLine(10000))["result"]["id"], 2);
}

TEST_F(SocketServerTest, OneConnectionsRequestsRunInOrderUnderThreads) {
  ASSERT_TRUE(
      server_.Start(&endpoint_, Options(Access::kOwner, Concurrency::kThreadPerRequest)).ok());
  RawClient c(server_.path());
  ASSERT_TRUE(c.Send(Line("hold", 1) + Line("next", 2) + Line("last", 3)));
  ASSERT_TRUE(endpoint_.WaitHolding(1));
  EXPECT_EQ(endpoint_.order(), (std::vector<int64_t>{1})) << "the second waits for the first";
  endpoint_.Release();
  for (int id : {1, 2, 3}) EXPECT_EQ(json::parse(c.ReadLine(10000))["id"], id);
  EXPECT_EQ(endpoint_.order(), (std::vector<int64_t>{1, 2, 3}));
}

TEST_F(SocketServerTest, RunningRequestsAreNeverEvicted) {
  ASSERT_TRUE(
      server_.Start(&endpoint_, Options(Access::kOwner, Concurrency::kThreadPerRequest)).ok());
  std::vector<std::unique_ptr<RawClient>> held;
  for (int i = 0; i < kMaxConnections; ++i) {
    held.push_back(std::make_unique<RawClient>(server_.path()));
    ASSERT_TRUE(held.back()->Send(Line("hold", i)));
  }
  ASSERT_TRUE(endpoint_.WaitHolding(kMaxConnections));
  // Every slot runs a request: the newcomer is refused, nobody is dropped.
  RawClient newcomer(server_.path());
  (void)newcomer.Send(Line("other", 99));  // may find the connection already refused
  json r = json::parse(newcomer.ReadLine(10000), nullptr, false);
  EXPECT_EQ(r["code"], "EBUSY") << r;
  EXPECT_EQ(endpoint_.holding(), kMaxConnections);
  endpoint_.Release();
  for (auto& c : held) EXPECT_EQ(json::parse(c->ReadLine(10000))["result"]["released"], true);
}

TEST_F(SocketServerTest, StopEndsARequestThatWaitsForItsClient) {
  ASSERT_TRUE(
      server_.Start(&endpoint_, Options(Access::kOwner, Concurrency::kThreadPerRequest)).ok());
  RawClient held(server_.path());
  ASSERT_TRUE(Holding(&held));
  server_.Stop();  // waits for running requests: ClientGone lets this one end
  EXPECT_TRUE(endpoint_.saw_gone());
  EXPECT_EQ(endpoint_.holding(), 0);
  EXPECT_FALSE(server_.Running());
  EXPECT_TRUE(held.WaitForClose(5000));
}

TEST_F(SocketServerTest, AccessDecidesTheSocketMode) {
  ASSERT_TRUE(server_.Start(&endpoint_, Options(Access::kOwner, Concurrency::kSerial)).ok());
  struct stat st {};
  ASSERT_EQ(stat(server_.path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  server_.Stop();
  ASSERT_TRUE(server_.Start(&endpoint_, Options(Access::kAnyLocalUser, Concurrency::kSerial)).ok());
  ASSERT_EQ(stat(server_.path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0666u);
}

// A peer of another uid, as the kernel reports it: refused by an owner-only
// server, identified (and not an admin) by an any-user one.
// The child is forked from a process whose server threads may hold a lock of
// the allocator (ASan's among them) at that instant, and then deadlocks on its
// first allocation: a child silent for 10 s is killed and the fork tried again.
json AsNobodyOnce(const std::string& path, const std::string& line, bool* hung) {
  *hung = false;
  int p[2];
  EXPECT_EQ(pipe(p), 0);
  pid_t pid = fork();
  if (pid == 0) {
    close(p[0]);
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(2);
    RawClient c(path);
    // A refused peer may find the connection closed before it sends: the
    // refusal is still there to read.
    if (c.connected()) (void)c.Send(line);
    std::string reply = c.connected() ? c.ReadLine(5000) : "";
    reply += "\n";
    (void)!write(p[1], reply.data(), reply.size());
    _exit(0);
  }
  close(p[1]);
  std::string out;
  char buf[4096];
  for (;;) {
    pollfd pfd{p[0], POLLIN, 0};
    if (poll(&pfd, 1, 10000) <= 0) {
      *hung = true;
      kill(pid, SIGKILL);
      break;
    }
    const ssize_t n = read(p[0], buf, sizeof buf);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  close(p[0]);
  waitpid(pid, nullptr, 0);
  return json::parse(out, nullptr, false);
}

json AsNobody(const std::string& path, const std::string& line) {
  bool hung = false;
  json r;
  for (int attempt = 0; attempt < 3; ++attempt) {
    r = AsNobodyOnce(path, line, &hung);
    if (!hung) break;
  }
  EXPECT_FALSE(hung) << "the child deadlocked three times";
  return r;
}

TEST_F(SocketServerTest, OtherUsersAreRefusedOrIdentifiedByAccess) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to act as another uid";
  chmod(dir_.path().c_str(), 0755);
  ASSERT_TRUE(server_.Start(&endpoint_, Options(Access::kOwner, Concurrency::kSerial)).ok());
  chmod(server_.path().c_str(), 0666);  // past the file mode: the server itself refuses
  json r = AsNobody(server_.path(), Line("who", 1));
  EXPECT_EQ(r["code"], "EPERM") << r;
  server_.Stop();
  ASSERT_TRUE(
      server_.Start(&endpoint_, Options(Access::kAnyLocalUser, Concurrency::kThreadPerRequest))
          .ok());
  r = AsNobody(server_.path(), Line("who", 2));
  EXPECT_EQ(r["result"]["uid"], 65534) << r;
  EXPECT_EQ(r["result"]["admin"], false);
}

// Root is an admin whatever its groups: the rule is checked on a peer that
// is not root (this process if it is not, else a child that becomes nobody).
TEST_F(SocketServerTest, AdminGroupMembersAreAdmins) {
  const bool root = geteuid() == 0;
  if (root) chmod(dir_.path().c_str(), 0755);
  const gid_t group = root ? 65534 : getegid();
  auto who = [&](int id) {
    return root ? AsNobody(server_.path(), Line("who", id))
                : RoundTrip(server_.path(), Line("who", id));
  };
  ServerOptions o = Options(Access::kAnyLocalUser, Concurrency::kThreadPerRequest);
  o.admin_gid = group;
  ASSERT_TRUE(server_.Start(&endpoint_, o).ok());
  json r = who(1);
  EXPECT_EQ(r["result"]["admin"], true) << r;
  server_.Stop();
  o.admin_gid = group - 1;
  ASSERT_TRUE(server_.Start(&endpoint_, o).ok());
  r = who(2);
  EXPECT_EQ(r["result"]["admin"], false) << r;
}

TEST_F(SocketServerTest, AnOverlongPathIsAClearError) {
  ServerOptions o = Options(Access::kOwner, Concurrency::kSerial);
  o.path = "/tmp/" + std::string(110, 'x');
  Status st = server_.Start(&endpoint_, o);
  EXPECT_EQ(st.code, ErrorCode::kInval);
  EXPECT_NE(st.message.find("too long"), std::string::npos) << st.message;
  EXPECT_FALSE(server_.Running());
}

}  // namespace
}  // namespace vgpu::ctl
