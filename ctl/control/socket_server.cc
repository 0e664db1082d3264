#include "ctl/control/socket_server.h"

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
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace vgpu::ctl {

using Clock = std::chrono::steady_clock;

// One running server, shared by its thread and the request threads: a Stop()
// that times out leaves it to whoever still runs, and the last one frees it.
struct SocketServer::State {
  Endpoint* endpoint = nullptr;
  ServerOptions options;
  int listen_fd = -1;
  int wake_fd = -1;
  std::atomic<bool> stop{false};
  // Every descriptor the server owns, so that a fork child can close them
  // without touching the thread's (possibly mid-update) connection list.
  std::array<std::atomic<int>, kMaxConnections> conn_fds;
  std::thread thread;

  std::mutex mu;  // guards what follows
  std::condition_variable cv;
  struct Finished {
    int slot;
    bool keep;
  };
  std::vector<Finished> finished;  // request threads done, for the server thread
  int running = 0;                 // request threads not done
  bool exited = false;             // the server thread has left its loop

  State() {
    for (auto& fd : conn_fds) fd.store(-1);
  }
};

namespace {

using State = SocketServer::State;

// The server whose thread this is (its own, or a request's): Stop() from
// inside a request (a handler that calls exit()) must not wait for itself.
thread_local const State* tls_server = nullptr;

struct Conn {
  int fd = -1;
  int slot = -1;
  Peer peer;
  std::string in;
  Clock::time_point deadline;  // idle: reset by every byte received
  // When the server began waiting for the current request (accept, or the
  // previous answer): the request must be complete by waiting_since +
  // request_timeout_ms. Also the eviction order when the table is full.
  Clock::time_point waiting_since;
  bool eof = false;   // the client half-closed: answer what it sent, then close
  bool busy = false;  // a request thread owns the descriptor
  bool closing = false;
};

Clock::time_point After(int ms) { return Clock::now() + std::chrono::milliseconds(ms); }

// --- Writing with a deadline on a non-blocking socket ---

bool WriteAll(int fd, std::string_view data, int timeout_ms) {
  Clock::time_point deadline = After(timeout_ms);
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

// The response line; its descriptors, if any, ride on its first byte.
bool WriteResponse(int fd, const Response& r, int timeout_ms) {
  std::string line = SerializeResponse(r);
  if (r.fds.empty()) return WriteAll(fd, line, timeout_ms);
  std::vector<char> control(CMSG_SPACE(sizeof(int) * r.fds.size()));
  iovec iov{line.data(), 1};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control.data();
  msg.msg_controllen = control.size();
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int) * r.fds.size());
  std::memcpy(CMSG_DATA(c), r.fds.data(), sizeof(int) * r.fds.size());
  Clock::time_point deadline = After(timeout_ms);
  for (;;) {
    if (sendmsg(fd, &msg, MSG_NOSIGNAL) == 1) break;
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return false;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    pollfd p{fd, POLLOUT, 0};
    if (left.count() <= 0 || (poll(&p, 1, static_cast<int>(left.count())) < 0 && errno != EINTR)) {
      return false;
    }
  }
  return WriteAll(fd, std::string_view(line).substr(1), timeout_ms);
}

// Progress lines of one request, throttled so that a chatty operation cannot
// flood the socket; the first and the last (done == total) always go out.
class ConnProgress : public ProgressSink {
 public:
  ConnProgress(const State& s, int fd, int64_t id) : s_(s), fd_(fd), id_(id) {}

  void Report(const Progress& p) override {
    if (ClientGone()) return;
    Clock::time_point now = Clock::now();
    bool final = p.total != 0 && p.done >= p.total;
    if (sent_ && !final && now - last_ < std::chrono::milliseconds(50)) return;
    sent_ = true;
    last_ = now;
    if (!WriteAll(fd_, SerializeProgress(id_, p), s_.options.idle_timeout_ms)) broken_ = true;
  }
  bool ClientGone() const override { return broken_ || s_.stop.load(); }
  bool broken() const { return broken_; }

 private:
  const State& s_;
  int fd_;
  int64_t id_;
  bool sent_ = false;
  bool broken_ = false;
  Clock::time_point last_;
};

// --- One request ---

Response CallEndpoint(const State& s, const Request& req, const Peer& peer, ProgressSink* sink) {
  try {
    return s.endpoint->Serve(req, peer, sink);
  } catch (const std::exception& e) {
    return Response::Error(ErrorCode::kIo, std::string("internal error: ") + e.what());
  } catch (...) {
    return Response::Error(ErrorCode::kIo, "internal error");
  }
}

// Answers one request line on fd; false if the connection must be closed.
bool Answer(const State& s, int fd, const Peer& peer, std::string_view line) {
  Request req;
  Status st = ParseRequest(line, &req);
  req.peer_uid = peer.uid;
  req.peer_pid = peer.pid;
  Response r;
  bool broken = false;
  if (!st.ok()) {
    r = Response::Error(st);
  } else {
    ConnProgress sink(s, fd, req.id);
    r = CallEndpoint(s, req, peer, &sink);
    broken = sink.broken();
  }
  r.id = req.id;
  bool sent = !broken && WriteResponse(fd, r, s.options.idle_timeout_ms);
  for (int d : r.fds) close(d);
  return sent;
}

void SendErrorAndClose(Conn* c, ErrorCode code, const std::string& message, int timeout_ms) {
  WriteAll(c->fd, SerializeResponse(Response::Error(code, message)), timeout_ms);
  c->closing = true;
}

// The client that caused this may not read: one attempt, never a wait.
void NotifyAndClose(Conn* c, ErrorCode code, const std::string& message) {
  SendErrorAndClose(c, code, message, /*timeout_ms=*/0);
}

// --- Request threads (kThreadPerRequest) ---

void WakeLocked(const State& s) {
  uint64_t one = 1;
  (void)!write(s.wake_fd, &one, sizeof one);
}

// Hands the connection back to the server thread, or closes it if that
// thread is gone (Stop() did not wait for this request).
void Finish(State* s, int slot, int fd, bool keep) {
  std::lock_guard<std::mutex> lock(s->mu);
  --s->running;
  if (s->exited) {
    s->conn_fds[slot].store(-1);
    close(fd);
  } else {
    s->finished.push_back({slot, keep});
    WakeLocked(*s);
  }
  s->cv.notify_all();
}

void RunRequest(std::shared_ptr<State> s, int slot, int fd, Peer peer, std::string line) {
  tls_server = s.get();
  bool keep = false;
  try {
    keep = Answer(*s, fd, peer, line);
  } catch (...) {  // bad_alloc: this client only
  }
  Finish(s.get(), slot, fd, keep);
}

// False if no thread could be started (the request is refused).
bool StartRequest(const std::shared_ptr<State>& s, Conn* c, std::string line) {
  {
    std::lock_guard<std::mutex> lock(s->mu);
    ++s->running;
  }
  try {
    std::thread(RunRequest, s, c->slot, c->fd, c->peer, std::move(line)).detach();
    c->busy = true;
    return true;
  } catch (const std::exception&) {
    std::lock_guard<std::mutex> lock(s->mu);
    --s->running;
    return false;
  }
}

// --- Framing ---

void Run(const std::shared_ptr<State>& s, Conn* c, std::string line) {
  if (s->options.concurrency == Concurrency::kThreadPerRequest) {
    if (!StartRequest(s, c, std::move(line))) {
      SendErrorAndClose(c, ErrorCode::kBusy, "cannot start a thread for the request",
                        s->options.idle_timeout_ms);
    }
    return;
  }
  if (!Answer(*s, c->fd, c->peer, line)) c->closing = true;
  c->waiting_since = Clock::now();  // the next request's clock starts now
}

bool Blank(std::string_view line) {
  return line.find_first_not_of(" \t\r") == std::string_view::npos;
}

// Frames complete lines out of c->in and runs them, in order: in threaded
// mode one at a time, the rest staying buffered until it is done.
void ProcessInput(const std::shared_ptr<State>& s, Conn* c) {
  while (!c->closing && !c->busy) {
    size_t nl = c->in.find('\n');
    std::string line;
    if (nl == std::string::npos || nl > kMaxRequestBytes) {
      if (c->in.size() > kMaxRequestBytes) {
        SendErrorAndClose(c, ErrorCode::kTooBig,
                          "request longer than " + std::to_string(kMaxRequestBytes) + " bytes",
                          s->options.idle_timeout_ms);
        return;
      }
      // A client that half-closed after an unterminated request still gets its answer.
      if (!c->eof || c->in.empty()) break;
      line = std::move(c->in);
      c->in.clear();
    } else {
      line = c->in.substr(0, nl);
      c->in.erase(0, nl + 1);
    }
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!Blank(line)) Run(s, c, std::move(line));
  }
  if (c->eof && !c->busy) c->closing = true;
}

void ReadConn(const std::shared_ptr<State>& s, Conn* c) {
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
    c->eof = true;  // EOF or reset
    break;
  }
  ProcessInput(s, c);
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

// A full table must not lock new clients out: the idle connection that has
// waited longest goes. A client that sends its request right after connecting
// is read long before it could become the oldest.
int EvictOldest(State* s, std::vector<Conn>* conns) {
  Conn* oldest = nullptr;
  for (Conn& c : *conns) {
    if (c.fd < 0 || c.busy || c.closing) continue;
    if (oldest == nullptr || c.waiting_since < oldest->waiting_since) oldest = &c;
  }
  if (oldest == nullptr) return -1;
  int slot = oldest->slot;
  NotifyAndClose(oldest, ErrorCode::kBusy,
                 "too many connections: closed to admit a newer one (send the request at once)");
  CloseConn(s, oldest);
  return slot;
}

bool InGroup(int fd, gid_t primary, gid_t group) {
  if (primary == group) return true;
  // The peer's supplementary groups, as the kernel saw them at connect time.
  std::vector<gid_t> groups(256);
  socklen_t len = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
  if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &len) != 0) return false;
  groups.resize(len / sizeof(gid_t));
  return std::find(groups.begin(), groups.end(), group) != groups.end();
}

// Empty if the peer may connect, else why not.
std::string Admit(const State& s, int fd, Peer* peer) {
  ucred cred{};
  socklen_t len = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    return "permission denied: peer credentials unavailable";
  }
  *peer = {cred.pid, cred.uid, cred.gid, cred.uid == 0};
  if (s.options.access == Access::kOwner) {
    if (cred.uid != geteuid() && cred.uid != 0) {
      return "permission denied: peer uid " + std::to_string(cred.uid) + " is not the owner";
    }
  } else if (!peer->admin && s.options.admin_gid != static_cast<gid_t>(-1)) {
    peer->admin = InGroup(fd, cred.gid, s.options.admin_gid);
  }
  return "";
}

void Accept(State* s, std::vector<Conn>* conns) {
  int fd = accept4(s->listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd < 0) return;
  Conn c;
  c.fd = fd;
  int timeout = s->options.idle_timeout_ms;
  if (std::string why = Admit(*s, fd, &c.peer); !why.empty()) {
    SendErrorAndClose(&c, ErrorCode::kPerm, why, timeout);
  } else if ((c.slot = FreeSlot(s)) < 0 && (c.slot = EvictOldest(s, conns)) < 0) {
    SendErrorAndClose(&c, ErrorCode::kBusy, "too many connections", timeout);
  }
  if (c.closing) {
    close(fd);
    return;
  }
  s->conn_fds[c.slot].store(fd);
  c.deadline = After(timeout);
  c.waiting_since = Clock::now();
  conns->push_back(std::move(c));
}

// --- The server thread ---

Clock::time_point RequestDeadline(const State& s, const Conn& c) {
  return c.waiting_since + std::chrono::milliseconds(s.options.request_timeout_ms);
}

int PollTimeout(const State& s, const std::vector<Conn>& conns) {
  std::optional<Clock::time_point> first;
  for (const Conn& c : conns) {
    if (c.busy) continue;
    Clock::time_point t = std::min(c.deadline, RequestDeadline(s, c));
    if (!first || t < *first) first = t;
  }
  if (!first) return -1;
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(*first - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(ms + 1, 0, 60000));
}

// Connections whose request thread is done come back to the poll set.
void TakeFinished(const std::shared_ptr<State>& s, std::vector<Conn>* conns) {
  uint64_t count;
  (void)!read(s->wake_fd, &count, sizeof count);
  std::vector<State::Finished> done;
  {
    std::lock_guard<std::mutex> lock(s->mu);
    done.swap(s->finished);
  }
  for (const State::Finished& f : done) {
    for (Conn& c : *conns) {
      if (c.slot != f.slot || !c.busy) continue;
      c.busy = false;
      c.closing |= !f.keep;
      c.waiting_since = Clock::now();
      c.deadline = After(s->options.idle_timeout_ms);
      ProcessInput(s, &c);  // requests it sent meanwhile
    }
  }
}

void Sweep(State* s, std::vector<Conn>* conns) {
  Clock::time_point now = Clock::now();
  for (Conn& c : *conns) {
    if (c.busy) continue;  // its request thread owns it
    if (c.closing) {
      CloseConn(s, &c);
    } else if (RequestDeadline(*s, c) <= now) {
      // Trickling a byte at a time must not keep a slot for ever.
      NotifyAndClose(
          &c, ErrorCode::kTimedOut,
          "request not complete within " + std::to_string(s->options.request_timeout_ms) + " ms");
      CloseConn(s, &c);
    } else if (c.deadline <= now) {
      CloseConn(s, &c);  // idle too long
    }
  }
  std::erase_if(*conns, [](const Conn& c) { return c.fd < 0; });
}

void ServeOnce(const std::shared_ptr<State>& s, std::vector<Conn>* conns) {
  std::vector<pollfd> fds = {{s->wake_fd, POLLIN, 0}, {s->listen_fd, POLLIN, 0}};
  std::vector<size_t> polled;
  for (size_t i = 0; i < conns->size(); ++i) {
    if ((*conns)[i].busy) continue;
    fds.push_back({(*conns)[i].fd, POLLIN, 0});
    polled.push_back(i);
  }
  if (poll(fds.data(), fds.size(), PollTimeout(*s, *conns)) < 0) return;
  if (s->stop.load()) return;
  if (fds[0].revents & POLLIN) TakeFinished(s, conns);
  // Only the connections that were polled (Accept appends after them).
  for (size_t k = 0; k < polled.size(); ++k) {
    Conn& c = (*conns)[polled[k]];
    if (fds[k + 2].revents != 0 && !c.closing && !c.busy) ReadConn(s, &c);  // evicted: closed
  }
  if (fds[1].revents & POLLIN) Accept(s.get(), conns);
  Sweep(s.get(), conns);
}

void Serve(std::shared_ptr<State> s) {
  tls_server = s.get();
  std::vector<Conn> conns;
  while (!s->stop.load()) {
    try {
      ServeOnce(s, &conns);
    } catch (...) {
      // bad_alloc or a bug: drop every idle client rather than the process.
      for (Conn& c : conns) {
        if (!c.busy) CloseConn(s.get(), &c);
      }
      std::erase_if(conns, [](const Conn& c) { return c.fd < 0; });
    }
  }
  std::lock_guard<std::mutex> lock(s->mu);
  // Requests that finished since the last wake handed their connection back.
  for (const State::Finished& f : s->finished) {
    for (Conn& c : conns) {
      if (c.slot == f.slot) c.busy = false;
    }
  }
  s->finished.clear();
  for (Conn& c : conns) {
    if (!c.busy) CloseConn(s.get(), &c);  // busy ones: their thread closes them
  }
  close(s->listen_fd);
  close(s->wake_fd);
  s->exited = true;
  s->cv.notify_all();
}

// --- Setup ---

Status Listen(const std::string& path, mode_t mode, int* out) {
  sockaddr_un addr{};
  std::string tmp = path + ".tmp";
  if (tmp.size() >= sizeof addr.sun_path) {
    return Status::Error(ErrorCode::kInval, "socket path too long: " + path);
  }
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return Status::Error(ErrorCode::kIo, std::string("socket: ") + strerror(errno));
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, tmp.c_str(), tmp.size() + 1);
  unlink(tmp.c_str());
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      chmod(tmp.c_str(), mode) != 0 || listen(fd, kMaxConnections) != 0 ||
      rename(tmp.c_str(), path.c_str()) != 0) {
    Status st = Status::Error(ErrorCode::kIo, "cannot listen on " + path + ": " + strerror(errno));
    close(fd);
    unlink(tmp.c_str());
    return st;
  }
  *out = fd;
  return Status::Ok();
}

// Empty if the thread runs, else why not.
std::string StartThread(const std::shared_ptr<State>& s) {
  // The thread inherits a full signal mask (and passes it to request
  // threads): signals are the application's. The caller's mask is restored on
  // every path, a failed start included.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  std::string error;
  try {
    s->thread = std::thread(Serve, s);
  } catch (const std::exception& e) {
    error = e.what();
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (!s->thread.joinable()) return error.empty() ? "unknown error" : error;
  // Named here rather than by the thread so the name is there when Start returns.
  pthread_setname_np(s->thread.native_handle(), s->options.thread_name.substr(0, 15).c_str());
  return "";
}

}  // namespace

SocketServer::SocketServer() = default;
SocketServer::~SocketServer() { Stop(); }

Status SocketServer::Start(Endpoint* endpoint, const ServerOptions& options) {
  std::lock_guard<std::mutex> lock(mu_);
  if (state_ != nullptr) return Status::Ok();
  auto s = std::make_shared<State>();
  s->endpoint = endpoint;
  s->options = options;
  s->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (s->wake_fd < 0)
    return Status::Error(ErrorCode::kIo, std::string("eventfd: ") + strerror(errno));
  mode_t mode = options.access == Access::kOwner ? 0600 : 0666;
  if (Status st = Listen(options.path, mode, &s->listen_fd); !st.ok()) {
    close(s->wake_fd);
    return st;
  }
  if (std::string e = StartThread(s); !e.empty()) {
    close(s->listen_fd);
    close(s->wake_fd);
    unlink(options.path.c_str());  // nobody would ever accept on it
    return Status::Error(ErrorCode::kIo,
                         "cannot start the " + options.thread_name + " thread: " + e);
  }
  state_ = std::move(s);
  return Status::Ok();
}

void SocketServer::Stop() {
  std::lock_guard<std::mutex> lock(mu_);
  std::shared_ptr<State> s = std::move(state_);
  if (s == nullptr) return;
  {
    // Wake first, then publish stop, both under the lock the thread closes
    // wake_fd under: the write can never hit a closed (or reused) fd.
    std::lock_guard<std::mutex> state_lock(s->mu);
    if (!s->exited) WakeLocked(*s);
    s->stop.store(true);
  }
  unlink(s->options.path.c_str());
  if (tls_server == s.get()) {
    s->thread.detach();  // a request called exit(): the threads end on return
    return;
  }
  std::unique_lock<std::mutex> state_lock(s->mu);
  bool done = s->cv.wait_for(state_lock, std::chrono::milliseconds(s->options.stop_timeout_ms),
                             [&s] { return s->exited && s->running == 0; });
  bool exited = s->exited;
  state_lock.unlock();
  // A request still running keeps the state (shared) and its connection.
  if (exited || done) {
    s->thread.join();
  } else {
    s->thread.detach();
  }
}

bool SocketServer::Running() const {
  std::lock_guard<std::mutex> lock(mu_);
  return state_ != nullptr;
}

std::string SocketServer::path() const {
  std::lock_guard<std::mutex> lock(mu_);
  return state_ != nullptr ? state_->options.path : std::string();
}

void SocketServer::ForkPrepare() { mu_.lock(); }
void SocketServer::ForkParent() { mu_.unlock(); }

// The child of fork() must not serve: the threads are gone, and the listening
// socket belongs to the parent. Close our copies of every descriptor and
// forget the server. Its state is leaked on purpose: its std::thread is
// joinable but names no thread here (destroying it would terminate), and a
// request thread's reference will never be dropped.
void SocketServer::ForkChild() {
  if (State* s = state_.get()) {
    for (auto& fd : s->conn_fds) {
      if (int f = fd.load(); f >= 0) close(f);
    }
    close(s->listen_fd);
    close(s->wake_fd);
    static_cast<void>(new std::shared_ptr<State>(std::move(state_)));  // deliberate leak, see above
  }
  mu_.unlock();
}

}  // namespace vgpu::ctl
