// The control plane's one socket server: every endpoint of vgpu's control
// protocol (docs/control-protocol.md) — the agent inside each interposed
// process (ctl/control/agent_server.h) and vgpud (ctl/vgpud/daemon_server.h)
// — is this transport with its own Endpoint behind it.
//
// The server owns:
//  - the socket: bound under a temporary name, given its mode, listening, and
//    only then renamed into place, so the final name never denotes a socket
//    nobody accepts on (or one with a laxer mode);
//  - who may connect (Access): the owner only (the agent: same uid or root,
//    anyone else is told EPERM at accept), or any local user, each peer
//    identified by SO_PEERCRED (pid, uid, gid, admin group via SO_PEERGROUPS)
//    for the endpoint to decide per request (vgpud);
//  - framing: newline-delimited JSON, the request envelope parsed
//    (ctl::ParseRequest) before the endpoint sees it, kMaxRequestBytes per
//    request (E2BIG and close);
//  - deadlines: a client idle for idle_timeout_ms is dropped; a request must be
//    complete within request_timeout_ms of the server starting to wait for it
//    (accept, or the previous answer), however steadily its bytes trickle in;
//    a response or progress line that cannot be written within idle_timeout_ms
//    drops the client;
//  - eviction: when all kMaxConnections slots are taken, the idle connection
//    that has waited longest for its request is told EBUSY and closed to admit
//    the new one, so clients that hold connections open cannot lock everyone
//    else (root included) out; connections with a request running are never
//    evicted;
//  - concurrency (Concurrency): kSerial runs requests one at a time on the
//    server's thread, in arrival order (the endpoint never runs concurrently
//    with itself; a long request delays the others, whose connections stay
//    open). kThreadPerRequest runs each request on a thread of its own
//    (vgpud's make_room waits for memory as long as it takes) while the server
//    thread keeps accepting and reading; requests of one connection still run
//    in order.
//
// Signals: the server's threads block every signal, so process-directed
// signals go to the application's threads. Nothing is written to stderr.
//
// fork(): the owner calls ForkPrepare/ForkParent/ForkChild from its one fork
// handler; in the child the inherited descriptors are closed and the server
// is forgotten (its threads do not exist there), without touching the
// parent's socket file. Start() may be called again in the child.
#pragma once

#include <sys/types.h>

#include <memory>
#include <mutex>
#include <string>

#include "ctl/control/protocol.h"

namespace vgpu::ctl {

inline constexpr int kMaxConnections = 64;

// Lets a long operation report progress; lines reach the client before the
// final response, throttled (the first and the final one always go out).
// Writing never fails the operation: if the client went away, progress is
// dropped and ClientGone() says so, so that an operation that only waits for
// its client can stop.
class ProgressSink {
 public:
  virtual ~ProgressSink() = default;
  virtual void Report(const Progress& progress) = 0;
  // The client cannot be written to any more, or the server is stopping.
  virtual bool ClientGone() const { return false; }
};

// Who is asking, as the kernel says (SO_PEERCRED at connect time).
struct Peer {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  bool admin = false;  // root, or a member of ServerOptions::admin_gid
};

// What a command means, one per endpoint. Serve() gets a request whose
// envelope (version, id, cmd string, args) has been parsed; checking the
// command and its arguments is the endpoint's. Exceptions become EIO responses.
class Endpoint {
 public:
  virtual ~Endpoint() = default;
  virtual Response Serve(const Request& request, const Peer& peer, ProgressSink* progress) = 0;
};

enum class Access {
  kOwner,         // the server's euid or root; the socket is 0600
  kAnyLocalUser,  // everyone may connect (0666); the endpoint decides per request
};

enum class Concurrency { kSerial, kThreadPerRequest };

struct ServerOptions {
  std::string path;  // the socket's final name
  Access access = Access::kOwner;
  gid_t admin_gid = static_cast<gid_t>(-1);  // -1: root is the only admin
  Concurrency concurrency = Concurrency::kSerial;
  int idle_timeout_ms = 5000;            // per client, and per response write
  int request_timeout_ms = 10000;        // from waiting for a request to its last byte
  int stop_timeout_ms = 2000;            // how long Stop() waits for running requests
  std::string thread_name = "vgpu-ctl";  // at most 15 characters
};

class SocketServer {
 public:
  SocketServer();
  ~SocketServer();  // Stop()
  SocketServer(const SocketServer&) = delete;
  SocketServer& operator=(const SocketServer&) = delete;

  // Serves `endpoint` (which must outlive the server) on options.path.
  // Ok if already serving (the arguments are then ignored).
  Status Start(Endpoint* endpoint, const ServerOptions& options);
  // Stops accepting, unlinks the socket, closes every idle connection and
  // waits up to stop_timeout_ms for running requests (whose progress sinks
  // now say ClientGone); a request still running after that keeps its
  // connection and its state until it returns.
  void Stop();
  bool Running() const;
  std::string path() const;  // while running, else ""

  void ForkPrepare();
  void ForkParent();
  void ForkChild();

  struct State;  // shared with the server's threads

 private:
  mutable std::mutex mu_;  // serializes Start/Stop; held across fork
  std::shared_ptr<State> state_;
};

}  // namespace vgpu::ctl
