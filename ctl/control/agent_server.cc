#include "ctl/control/agent_server.h"

#include <unistd.h>

#include "ctl/control/run_dir.h"

namespace vgpu::ctl {

Agent::~Agent() { Stop(); }

Status Agent::Start(Handler* handler, const AgentOptions& options) {
  std::lock_guard<std::mutex> lock(mu_);
  if (server_.Running()) return Status::Ok();
  ServerOptions o;
  std::string dir = options.run_dir.empty() ? RunDir() : options.run_dir;
  Status st = ctl::SocketPath(dir, getpid(), &o.path);
  if (st.ok()) st = EnsureRunDir(dir);
  if (!st.ok()) return st;
  RemoveStaleSockets(dir);
  o.access = Access::kOwner;
  o.concurrency = Concurrency::kSerial;
  o.idle_timeout_ms = options.idle_timeout_ms;
  o.request_timeout_ms = options.request_timeout_ms;
  o.stop_timeout_ms = options.stop_timeout_ms;
  o.thread_name = "vgpu-agent";
  handler_ = handler;
  return server_.Start(this, o);
}

void Agent::Stop() {
  std::lock_guard<std::mutex> lock(mu_);
  server_.Stop();
}

void Agent::ForkPrepare() {
  mu_.lock();
  server_.ForkPrepare();
}

void Agent::ForkParent() {
  server_.ForkParent();
  mu_.unlock();
}

void Agent::ForkChild() {
  server_.ForkChild();
  mu_.unlock();
}

Response Agent::Serve(const Request& req, const Peer& /*peer*/, ProgressSink* progress) {
  if (!IsKnownCommand(req.cmd)) {
    return Response::Error(ErrorCode::kNoSys, "unknown command '" + req.cmd + "'");
  }
  if (Status st = ValidateArgs(req.cmd, req.args); !st.ok()) return Response::Error(st);
  // The agent's own answer: it proves the socket is served by this process
  // and names the protocol, whatever the handler behind it.
  if (req.cmd == "ping") return Response::Ok({{"pid", getpid()}, {"protocol", kProtocolVersion}});
  return handler_->Handle(req, progress);
}

}  // namespace vgpu::ctl
