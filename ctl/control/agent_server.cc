#include "ctl/control/agent_server.h"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ctl/control/run_dir.h"

namespace vgpu::ctl {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

// One running agent. Owned by its thread's lifetime: if Stop() times out
// waiting for a handler, the state is leaked rather than freed under it.
struct State {
  Handler* handler = nullptr;
  AgentOptions options;
  std::string path;
  int listen_fd = -1;
  int wake_fd = -1;
  std::atomic<bool> stop{false};
  // Every descriptor the thread owns, so that a fork child can close them
  // without touching the thread's (possibly mid-update) connection list.
  std::array<std::atomic<int>, kMaxConnections> conn_fds;
  std::thread thread;
  std::mutex exit_mu;
  std::condition_variable exit_cv;
  bool exited = false;

  State() {
    for (auto& fd : conn_fds) fd.store(-1);
  }
};

std::mutex g_mu;           // serializes Start/Stop; held across fork
State* g_state = nullptr;  // the running agent, or null
std::once_flag g_hooks_once;

struct Conn {
  int fd = -1;
  int slot = -1;
  int64_t peer_uid = -1;
  std::string in;
  Clock::time_point deadline;  // idle: reset by every byte received
  // When the agent began waiting for the current request (accept, or the
  // previous answer): the request must be complete by waiting_since +
  // request_timeout_ms. Also the eviction order when the table is full.
  Clock::time_point waiting_since;
  bool closing = false;
};

Clock::time_point After(int ms) { return Clock::now() + std::chrono::milliseconds(ms); }

// --- Writing with a deadline on a non-blocking socket ---

bool WriteAll(int fd, std::string_view data, int timeout_ms) {
  Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!data.empty()) {
    ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return false;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, POLLOUT, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) < 0 && errno != EINTR) return false;
  }
  return true;
}

// Progress lines of one request, throttled so that a chatty handler cannot
// flood the socket; the first and the last (done == total) always go out.
class ConnProgress : public ProgressSink {
 public:
  ConnProgress(int fd, int64_t id, int timeout_ms) : fd_(fd), id_(id), timeout_ms_(timeout_ms) {}

  void Report(const Progress& p) override {
    if (broken_) return;
    Clock::time_point now = Clock::now();
    bool final = p.total != 0 && p.done >= p.total;
    if (sent_ && !final && now - last_ < std::chrono::milliseconds(50)) return;
    sent_ = true;
    last_ = now;
    if (!WriteAll(fd_, SerializeProgress(id_, p), timeout_ms_)) broken_ = true;
  }
  bool broken() const { return broken_; }

 private:
  int fd_;
  int64_t id_;
  int timeout_ms_;
  bool sent_ = false;
  bool broken_ = false;
  Clock::time_point last_;
};

// --- Request dispatch ---

Response CallHandler(State* s, const Request& req, ProgressSink* sink) {
  try {
    return s->handler->Handle(req, sink);
  } catch (const std::exception& e) {
    return Response::Error(ErrorCode::kIo, std::string("internal error: ") + e.what());
  } catch (...) {
    return Response::Error(ErrorCode::kIo, "internal error");
  }
}

Response Dispatch(State* s, const Conn& c, std::string_view line, int64_t* id, bool* broken) {
  Request req;
  Status st = ParseRequest(line, &req);
  req.peer_uid = c.peer_uid;
  *id = req.id;
  if (!st.ok()) return Response::Error(st);
  if (!IsKnownCommand(req.cmd)) {
    return Response::Error(ErrorCode::kNoSys, "unknown command '" + req.cmd + "'");
  }
  st = ValidateArgs(req.cmd, req.args);
  if (!st.ok()) return Response::Error(st);
  // The server's own answer: it proves the socket is served by this process
  // and names the protocol, whatever the handler behind it.
  if (req.cmd == "ping") {
    return Response::Ok({{"pid", getpid()}, {"protocol", kProtocolVersion}});
  }
  ConnProgress sink(c.fd, req.id, s->options.idle_timeout_ms);
  Response r = CallHandler(s, req, &sink);
  *broken = sink.broken();
  return r;
}

// Handles one request line; returns false if the connection must be closed.
bool HandleLine(State* s, Conn* c, std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (line.find_first_not_of(" \t") == std::string_view::npos) return true;
  int64_t id = 0;
  bool broken = false;
  Response r = Dispatch(s, *c, line, &id, &broken);
  r.id = id;
  if (broken) return false;
  bool written = WriteAll(c->fd, SerializeResponse(r), s->options.idle_timeout_ms);
  c->waiting_since = Clock::now();  // the next request's clock starts now
  return written;
}

void SendErrorAndClose(Conn* c, ErrorCode code, const std::string& message, int timeout_ms) {
  WriteAll(c->fd, SerializeResponse(Response::Error(code, message)), timeout_ms);
  c->closing = true;
}

// The client that caused this may not read: one attempt, never a wait.
void NotifyAndClose(Conn* c, ErrorCode code, const std::string& message) {
  SendErrorAndClose(c, code, message, /*timeout_ms=*/0);
}

// Frames complete lines out of c->in; enforces the request size limit.
void ProcessInput(State* s, Conn* c, bool eof) {
  size_t start = 0;
  while (!c->closing) {
    size_t nl = c->in.find('\n', start);
    if (nl == std::string::npos) break;
    if (nl - start > kMaxRequestBytes) break;
    if (!HandleLine(s, c, std::string_view(c->in).substr(start, nl - start))) c->closing = true;
    start = nl + 1;
  }
  c->in.erase(0, start);
  if (c->closing) return;
  if (c->in.size() > kMaxRequestBytes) {
    SendErrorAndClose(c, ErrorCode::kTooBig,
                      "request longer than " + std::to_string(kMaxRequestBytes) + " bytes",
                      s->options.idle_timeout_ms);
  } else if (eof && !c->in.empty()) {
    // A client that half-closed after an unterminated request still gets its answer.
    HandleLine(s, c, c->in);
    c->in.clear();
  }
}

void ReadConn(State* s, Conn* c) {
  char buf[16384];
  for (;;) {
    ssize_t n = recv(c->fd, buf, sizeof buf, 0);
    if (n > 0) {
      c->in.append(buf, static_cast<size_t>(n));
      c->deadline = After(s->options.idle_timeout_ms);
      // Bound memory: frame what we have before reading more.
      if (c->in.size() > kMaxRequestBytes) break;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    ProcessInput(s, c, /*eof=*/true);  // EOF or reset
    c->closing = true;
    return;
  }
  ProcessInput(s, c, /*eof=*/false);
  c->deadline = After(s->options.idle_timeout_ms);
}

// --- Accepting and authenticating ---

int FreeSlot(State* s) {
  for (int i = 0; i < kMaxConnections; ++i) {
    if (s->conn_fds[i].load() < 0) return i;
  }
  return -1;
}

void CloseConn(State* s, Conn* c) {
  if (c->fd < 0) return;
  s->conn_fds[c->slot].store(-1);
  close(c->fd);
  c->fd = -1;
  c->closing = true;
}

// A full table must not lock new clients out: every connection in it is
// waiting for a request (requests are handled to their end on this thread),
// so the one that has waited longest goes. A client that sends its request
// right after connecting is read long before it could become the oldest.
int EvictOldest(State* s, std::vector<Conn>* conns) {
  Conn* oldest = nullptr;
  for (Conn& c : *conns) {
    if (c.fd >= 0 && (oldest == nullptr || c.waiting_since < oldest->waiting_since)) oldest = &c;
  }
  if (oldest == nullptr) return -1;
  int slot = oldest->slot;
  NotifyAndClose(oldest, ErrorCode::kBusy,
                 "too many connections: closed to admit a newer one (send the request at once)");
  CloseConn(s, oldest);
  return slot;
}

void Accept(State* s, std::vector<Conn>* conns) {
  int fd = accept4(s->listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd < 0) return;
  Conn c;
  c.fd = fd;
  ucred cred{};
  socklen_t len = sizeof cred;
  int timeout = s->options.idle_timeout_ms;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    SendErrorAndClose(&c, ErrorCode::kPerm, "permission denied: peer credentials unavailable",
                      timeout);
  } else if (cred.uid != geteuid() && cred.uid != 0) {
    SendErrorAndClose(
        &c, ErrorCode::kPerm,
        "permission denied: peer uid " + std::to_string(cred.uid) + " is not the owner", timeout);
  } else if ((c.slot = FreeSlot(s)) < 0 && (c.slot = EvictOldest(s, conns)) < 0) {
    SendErrorAndClose(&c, ErrorCode::kBusy, "too many connections", timeout);
  }
  if (c.closing) {
    close(fd);
    return;
  }
  c.peer_uid = cred.uid;
  s->conn_fds[c.slot].store(fd);
  c.deadline = After(timeout);
  c.waiting_since = Clock::now();
  conns->push_back(std::move(c));
}

// --- The thread ---

Clock::time_point RequestDeadline(const State* s, const Conn& c) {
  return c.waiting_since + std::chrono::milliseconds(s->options.request_timeout_ms);
}

int PollTimeout(const State* s, const std::vector<Conn>& conns) {
  if (conns.empty()) return -1;
  Clock::time_point first = conns.front().deadline;
  for (const Conn& c : conns) first = std::min({first, c.deadline, RequestDeadline(s, c)});
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(first - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(ms + 1, 0, 60000));
}

void ServeOnce(State* s, std::vector<Conn>* conns) {
  std::vector<pollfd> fds = {{s->wake_fd, POLLIN, 0}, {s->listen_fd, POLLIN, 0}};
  for (const Conn& c : *conns) fds.push_back({c.fd, POLLIN, 0});
  if (poll(fds.data(), fds.size(), PollTimeout(s, *conns)) < 0) return;
  if (s->stop.load()) return;
  if (fds[1].revents & POLLIN) Accept(s, conns);
  // Only the connections that were polled (Accept appends after them).
  size_t polled = fds.size() - 2;
  for (size_t i = 0; i < polled; ++i) {
    Conn& c = (*conns)[i];
    if (fds[i + 2].revents != 0 && !c.closing) ReadConn(s, &c);  // evicted: closed
  }
  Clock::time_point now = Clock::now();
  for (Conn& c : *conns) {
    if (c.closing) {
      CloseConn(s, &c);
    } else if (RequestDeadline(s, c) <= now) {
      // Trickling a byte at a time must not keep a slot for ever.
      NotifyAndClose(
          &c, ErrorCode::kTimedOut,
          "request not complete within " + std::to_string(s->options.request_timeout_ms) + " ms");
      CloseConn(s, &c);
    } else if (c.deadline <= now) {
      CloseConn(s, &c);  // idle too long
    }
  }
  std::erase_if(*conns, [](const Conn& c) { return c.closing; });
}

void Serve(State* s) {
  std::vector<Conn> conns;
  while (!s->stop.load()) {
    try {
      ServeOnce(s, &conns);
    } catch (...) {
      // bad_alloc or a bug: drop every client rather than the process.
      for (Conn& c : conns) CloseConn(s, &c);
      conns.clear();
    }
  }
  for (Conn& c : conns) CloseConn(s, &c);
  close(s->listen_fd);
  close(s->wake_fd);
  std::lock_guard<std::mutex> lock(s->exit_mu);
  s->exited = true;
  s->exit_cv.notify_all();
}

// --- Setup ---

Status Listen(const std::string& path, int* out) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return Status::Error(ErrorCode::kIo, std::string("socket: ") + strerror(errno));
  // Bind under a temporary name, restrict it, listen, then rename: the final
  // name only ever denotes a listening socket with the right mode.
  std::string tmp = path + ".tmp";
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, tmp.c_str(), sizeof addr.sun_path - 1);
  unlink(tmp.c_str());
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      chmod(tmp.c_str(), 0600) != 0 || listen(fd, kMaxConnections) != 0 ||
      rename(tmp.c_str(), path.c_str()) != 0) {
    Status st = Status::Error(ErrorCode::kIo, "cannot listen on " + path + ": " + strerror(errno));
    close(fd);
    unlink(tmp.c_str());
    return st;
  }
  *out = fd;
  return Status::Ok();
}

// False (errno-like text in *error) when no thread could be started.
bool StartThread(State* s, std::string* error) {
  // The thread inherits a full signal mask: signals are the application's.
  // The caller's mask is restored on every path, a failed start included.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  try {
    s->thread = std::thread(Serve, s);
  } catch (const std::exception& e) {
    *error = e.what();
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (!s->thread.joinable()) return false;
  // Named here rather than by the thread so the name is there when Start returns.
  pthread_setname_np(s->thread.native_handle(), "vgpu-agent");
  return true;
}

// The child of fork() must not serve: the thread is gone, and the listening
// socket belongs to the parent. Close our copies of every descriptor and
// forget the agent (leaked: its std::thread is not joinable here).
void LockForFork() { g_mu.lock(); }
void UnlockAfterFork() { g_mu.unlock(); }
void ResetInForkChild() {
  if (State* s = g_state) {
    for (auto& fd : s->conn_fds) {
      if (int f = fd.load(); f >= 0) close(f);
    }
    close(s->listen_fd);
    close(s->wake_fd);
    g_state = nullptr;
  }
  g_mu.unlock();
}

void StopLocked() {
  State* s = g_state;
  if (s == nullptr) return;
  g_state = nullptr;
  // Wake first, then publish stop: the thread closes wake_fd only after it
  // has seen stop, so the write can never hit a closed (or reused) fd.
  uint64_t one = 1;
  (void)!write(s->wake_fd, &one, sizeof one);
  s->stop.store(true);
  unlink(s->path.c_str());
  if (std::this_thread::get_id() == s->thread.get_id()) {
    s->thread.detach();  // a handler called exit(): the thread ends on return
    return;
  }
  std::unique_lock<std::mutex> lock(s->exit_mu);
  bool done = s->exit_cv.wait_for(lock, std::chrono::milliseconds(s->options.stop_timeout_ms),
                                  [s] { return s->exited; });
  lock.unlock();
  if (!done) {
    s->thread.detach();  // still inside a handler: leave it its state
    return;
  }
  s->thread.join();
  delete s;
}

void StopAtExit() {
  std::lock_guard<std::mutex> lock(g_mu);
  StopLocked();
}

}  // namespace

void Agent::ForkPrepare() { LockForFork(); }
void Agent::ForkParent() { UnlockAfterFork(); }
void Agent::ForkChild() { ResetInForkChild(); }

Status Agent::Start(Handler* handler, const AgentOptions& options) {
  std::call_once(g_hooks_once, [&options] {
    if (!options.lifecycle_hooks) return;
    pthread_atfork(LockForFork, UnlockAfterFork, ResetInForkChild);
    std::atexit(StopAtExit);
  });
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_state != nullptr) return Status::Ok();
  auto s = std::make_unique<State>();
  s->handler = handler;
  s->options = options;
  std::string dir = options.run_dir.empty() ? RunDir() : options.run_dir;
  Status st = ctl::SocketPath(dir, getpid(), &s->path);
  if (st.ok()) st = EnsureRunDir(dir);
  if (!st.ok()) return st;
  RemoveStaleSockets(dir);
  s->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (s->wake_fd < 0)
    return Status::Error(ErrorCode::kIo, std::string("eventfd: ") + strerror(errno));
  st = Listen(s->path, &s->listen_fd);
  if (!st.ok()) {
    close(s->wake_fd);
    return st;
  }
  if (std::string e; !StartThread(s.get(), &e)) {
    close(s->listen_fd);
    close(s->wake_fd);
    unlink(s->path.c_str());  // nobody would ever accept on it
    return Status::Error(ErrorCode::kIo, "cannot start the agent thread: " + e);
  }
  g_state = s.release();
  return Status::Ok();
}

void Agent::Stop() {
  std::lock_guard<std::mutex> lock(g_mu);
  StopLocked();
}

bool Agent::Running() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_state != nullptr;
}

std::string Agent::SocketPath() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_state != nullptr ? g_state->path : std::string();
}

}  // namespace vgpu::ctl
