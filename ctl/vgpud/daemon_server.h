// vgpud's socket (<run_dir>/vgpud.sock, docs/vgpud.md "Socket"): vgpud's
// endpoint on the control plane's one transport (ctl/control/socket_server.h)
// — the same framing, deadlines and eviction as every agent's — with its own
// access rule and concurrency: any local user may connect (jobs of every uid
// ask for room), each peer identified with SO_PEERCRED; root and members of
// the admin group may act on any job, a uid on its own jobs, and a job's
// library asks for room only for itself. Each request runs on a thread of its
// own (a make_room waits for memory as long as it takes, sending progress
// lines as keepalives).
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "ctl/control/protocol.h"
#include "ctl/control/run_dir.h"
#include "ctl/control/socket_server.h"

namespace vgpu::vgpud {

class Coordinator;

using ctl::Peer;

// A request checked against what the peer may do. Split from the transport
// so that the parser and the policy can be fuzzed (tests/fuzz).
struct DaemonRequest {
  ctl::Request req;
  pid_t target = 0;  // the job acted on (make_room, set), 0 for none
  bool admin = false;  // the peer is root or in the admin group
};
// `req`'s envelope is parsed (the transport did it); checks its command and
// arguments and what `peer` may do.
Status CheckDaemonRequest(const ctl::Request& req, const Peer& peer, DaemonRequest* out);
// The envelope and the check, as the socket does them on one request line.
Status ParseDaemonRequest(std::string_view line, const Peer& peer, DaemonRequest* out);

// Runs one parsed request; `progress` sends a keepalive line (false: the
// client is gone).
ctl::Response Dispatch(Coordinator* c, const DaemonRequest& r,
                       const std::function<bool()>& progress);

// The tenant socket (<run_dir>/tenant/vgpud.sock): the one directory of
// vgpud's that vgpu-oci-hook mounts into containers, so that a container's
// job can wait for memory (make_room) and be preempted for a higher-priority
// one like a host job. Only ping and make_room, the job being the peer itself
// (its pid from SO_PEERCRED, translated into vgpud's namespace: a
// container's own pid numbers mean nothing here), and never as admin (a
// container's root is not the node's). docs/security.md, "Containers".
using ctl::kTenantSubdir;
// The request as the tenant socket lets it through; EPERM for anything else.
Status TenantRequest(const ctl::Request& req, const Peer& peer, ctl::Request* out, Peer* as);

class DaemonServer : private ctl::Endpoint {
 public:
  static constexpr int kMaxClients = ctl::kMaxConnections;
  // `tenant_dir` empty: no tenant socket.
  DaemonServer(Coordinator* c, std::string socket_path, std::string admin_group,
               std::string tenant_dir = "");
  ~DaemonServer() override;
  Status Start();
  void Stop();

 private:
  class TenantEndpoint : public ctl::Endpoint {
   public:
    explicit TenantEndpoint(DaemonServer* s) : server_(s) {}
    ctl::Response Serve(const ctl::Request& request, const Peer& peer,
                        ctl::ProgressSink* progress) override;

   private:
    DaemonServer* server_;
  };

  ctl::Response Serve(const ctl::Request& request, const Peer& peer,
                      ctl::ProgressSink* progress) override;
  Status StartTenant(const ctl::ServerOptions& main);

  Coordinator* coordinator_;
  std::string path_;
  std::string admin_group_;
  std::string tenant_dir_;
  ctl::SocketServer server_;
  TenantEndpoint tenant_endpoint_{this};
  ctl::SocketServer tenant_server_;
};

}  // namespace vgpu::vgpud
