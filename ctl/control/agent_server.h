// The agent: the control endpoint inside every interposed process
// (docs/control-protocol.md), served for vgpuctl and vgpud on
// <run_dir>/agent-<pid>.sock by the control plane's one transport
// (ctl/control/socket_server.h: owner-only access, requests one at a time on
// the agent's thread). The agent checks the request (known command, argument
// types) and answers "ping" itself; what every other command means is the
// Handler's (libvgpu: intercept/agent_handler.cc).
//
// Lifecycle, as libvgpu uses it (the process's Runtime owns the Agent):
//  - Nothing happens at library load. Start() is called lazily (at first CUDA
//    use), so a process that never uses CUDA gets no thread and no socket.
//  - Start() is idempotent and thread-safe; it creates the run directory,
//    removes sockets of dead pids and serves "agent-<pid>.sock" (mode 0600).
//  - Stop() (the owner calls it at exit) ends the thread, closes every
//    connection and unlinks the socket.
//  - fork(): the owner's one fork handler calls ForkPrepare/ForkParent/
//    ForkChild; the child has no agent and may Start() its own (it gets
//    agent-<childpid>.sock).
#pragma once

#include <mutex>
#include <string>

#include "ctl/control/protocol.h"
#include "ctl/control/socket_server.h"

namespace vgpu::ctl {

// Every command's meaning, in one place per process: implemented by libvgpu
// (intercept/agent_handler.cc: the real operations) and by tests (a fake).
// The agent has already checked the protocol version, that `cmd` is a known
// command, and the argument types (Parse*Args in protocol.h will succeed).
// Only "ping" is answered by the agent itself (it checks the transport, not
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
};

class Agent : private Endpoint {
 public:
  Agent() = default;
  ~Agent() override;  // Stop()

  // Serves `handler` (which must outlive the agent). Ok if already running.
  Status Start(Handler* handler, const AgentOptions& options = {});
  void Stop();
  bool Running() const { return server_.Running(); }
  // The socket path while running, else "".
  std::string SocketPath() const { return server_.path(); }

  void ForkPrepare();
  void ForkParent();
  void ForkChild();

 private:
  Response Serve(const Request& request, const Peer& peer, ProgressSink* progress) override;

  std::mutex mu_;  // serializes Start/Stop (handler_ changes only when stopped)
  Handler* handler_ = nullptr;
  SocketServer server_;
};

}  // namespace vgpu::ctl
