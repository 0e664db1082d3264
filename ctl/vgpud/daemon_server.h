// vgpud's socket (<run_dir>/vgpud.sock): the control protocol's framing
// (newline-delimited JSON, ctl/control/protocol.h) with vgpud's commands
// (docs/vgpud.md, "Socket"). One thread per connection (a make_room waits
// for memory as long as it takes, sending progress lines as keepalives),
// at most kMaxClients. Every peer is identified with SO_PEERCRED: root and
// members of the admin group may act on any job, a uid on its own jobs, and
// a job's library asks for room only for itself.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <functional>
#include <thread>
#include <string>
#include <string_view>

#include "common/status.h"
#include "ctl/control/protocol.h"

namespace vgpu::vgpud {

class Coordinator;

struct Peer {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  bool admin = false;  // root or a member of the admin group
};

// A request checked against what the peer may do. Split from the transport
// so that the parser and the policy can be fuzzed (tests/fuzz).
struct DaemonRequest {
  ctl::Request req;
  pid_t target = 0;  // the job acted on (make_room, set), 0 for none
  bool admin = false;  // the peer is root or in the admin group
};
Status ParseDaemonRequest(std::string_view line, const Peer& peer, DaemonRequest* out);

// Runs one parsed request; `progress` sends a keepalive line (false: the
// client is gone).
ctl::Response Dispatch(Coordinator* c, const DaemonRequest& r,
                       const std::function<bool()>& progress);

class DaemonServer {
 public:
  static constexpr int kMaxClients = 64;
  DaemonServer(Coordinator* c, std::string socket_path, std::string admin_group);
  ~DaemonServer();
  Status Start();
  void Stop();

 private:
  void AcceptLoop();
  void Serve(int fd);

  Coordinator* coordinator_;
  std::string path_;
  std::string admin_group_;
  gid_t admin_gid_ = static_cast<gid_t>(-1);
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};
  std::atomic<bool> stop_{false};
  std::atomic<int> clients_{0};
  std::thread thread_;
};

}  // namespace vgpu::vgpud
