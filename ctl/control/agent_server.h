// The agent server of the control library: one background thread serving the
// control socket (docs/control-protocol.md) for vgpuctl and vgpud. It owns the
// transport (socket, peer credentials, framing, deadlines, eviction) and the
// request envelope (version, known command, argument types); what a command
// means is the Handler's, implemented once per endpoint (libvgpu:
// intercept/agent_handler.cc).
//
// Lifecycle, as libvgpu uses it:
//  - Nothing happens at library load. libvgpu calls Agent::Start() lazily (at
//    first CUDA use), so a process that never uses CUDA gets no thread and no
//    socket.
//  - Start() is idempotent and thread-safe; it creates the run directory,
//    removes sockets of dead pids, binds "agent-<pid>.sock" (mode 0600, bound
//    under a temporary name and renamed into place so that a concurrent
//    `vgpuctl ps` never sees an unlistened socket) and starts the thread.
//  - Stop() (also registered with atexit) wakes the thread, waits for it (at
//    most `stop_timeout_ms` if a handler is running), closes every connection
//    and unlinks the socket.
//  - fork(): a pthread_atfork child handler closes, in the child, the inherited
//    listening socket and connections, and forgets the agent without touching
//    the parent's socket file; the thread does not exist in the child. The
//    child may call Start() again (it gets its own agent-<childpid>.sock).
//
// Concurrency: the thread multiplexes up to kMaxConnections clients with
// poll(); reading, framing and authentication never block it. Requests are
// handled one at a time, in arrival order, on this thread: the handler never
// runs concurrently with itself, and a long operation (checkpoint) delays
// other clients' requests until it ends (their connections stay open). A
// client idle for `idle_timeout_ms` (default 5 s) is disconnected; a response
// or progress line that cannot be written within that time drops the client.
// A request must also be complete within `request_timeout_ms` (default 10 s)
// of the agent starting to wait for it (accept, or the previous answer),
// however steadily its bytes trickle in. When all kMaxConnections slots are
// taken, a new client is still admitted: the connection that has waited
// longest for its request is told EBUSY and closed, so that same-uid clients
// that hold connections open cannot lock everyone else (root included) out.
//
// Signals: the thread blocks every signal, so process-directed signals go to
// the application's threads. Nothing is ever written to stderr.
#pragma once

#include <string>

#include "ctl/control/protocol.h"

namespace vgpu::ctl {

// Lets a long operation report progress; lines reach the client before the
// final response. Writing never fails the operation: if the client went away,
// progress is dropped and the operation continues.
class ProgressSink {
 public:
  virtual ~ProgressSink() = default;
  virtual void Report(const Progress& progress) = 0;
};

// Every command's meaning, in one place per endpoint: implemented by libvgpu
// (intercept/agent_handler.cc: the real operations) and by tests (a fake).
// The server has already checked the protocol version, that `cmd` is a known
// command, and the argument types (Parse*Args in protocol.h will succeed).
// Only "ping" is answered by the server itself (it checks the transport, not
// the process); every other command, "ps" included (ProcessListOf in
// protocol.h), reaches Handle(). Exceptions thrown by Handle() become EIO
// responses.
class Handler {
 public:
  virtual ~Handler() = default;
  virtual Response Handle(const Request& request, ProgressSink* progress) = 0;
};

struct AgentOptions {
  std::string run_dir;             // empty: RunDir()
  int idle_timeout_ms = 5000;      // per client, and per response write
  int request_timeout_ms = 10000;  // from waiting for a request to its last byte
  int stop_timeout_ms = 2000;      // how long Stop() waits for a running handler
  // true: the agent registers its own pthread_atfork and atexit handlers.
  // false: the process's lifecycle owner calls ForkPrepare/ForkParent/
  // ForkChild from its one fork handler and Stop at exit (libvgpu's Runtime).
  bool lifecycle_hooks = true;
};

inline constexpr int kMaxConnections = 64;

class Agent {
 public:
  // Starts the process-wide agent serving `handler` (which must outlive it).
  // Returns Ok if it is already running.
  static Status Start(Handler* handler, const AgentOptions& options = {});
  static void Stop();
  static bool Running();
  // fork(): hold the agent's state across the fork; in the child, close the
  // inherited sockets and forget the parent's agent (the child has none).
  static void ForkPrepare();
  static void ForkParent();
  static void ForkChild();
  // The socket path while running, else "".
  static std::string SocketPath();
};

}  // namespace vgpu::ctl
