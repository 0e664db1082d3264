#include "ctl/vgpud/daemon_server.h"

#include <grp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "ctl/vgpud/coordinator.h"
#include "ctl/vgpud/node_gpus.h"

namespace vgpu::vgpud {
namespace {

// A client's silence between requests, and the time its request's bytes may take.
constexpr int kIdleTimeoutMs = 30000;
constexpr size_t kMaxEvents = 512;

Status Denied(const std::string& why) { return Status::Error(ErrorCode::kPerm, "permission denied: " + why); }

Status ReadPid(const nlohmann::json& args, pid_t* out) {
  if (!args.contains("pid") || !args["pid"].is_number_integer()) {
    return Status::Error(ErrorCode::kInval, "invalid 'pid': expected an integer");
  }
  const int64_t p = args["pid"].get<int64_t>();
  if (p <= 0 || p > 0x3fffffff) return Status::Error(ErrorCode::kInval, "invalid 'pid': out of range");
  *out = static_cast<pid_t>(p);
  return Status::Ok();
}

nlohmann::json DevicesJson(const NodeGpus& gpus, const std::vector<std::string>& drained) {
  nlohmann::json out = nlohmann::json::array();
  for (const GpuMemory& g : gpus.Read()) {
    bool is_drained = std::find(drained.begin(), drained.end(), g.uuid) != drained.end();
    out.push_back({{"uuid", g.uuid},
                   {"index", g.index},
                   {"used", g.used},
                   {"total", g.total},
                   {"drained", is_drained}});
  }
  return out;
}

}  // namespace

Status ParseDaemonRequest(std::string_view line, const Peer& peer, DaemonRequest* out) {
  if (line.size() > ctl::kMaxRequestBytes) return Status::Error(ErrorCode::kInval, "request too large");
  ctl::Request req;
  if (Status s = ctl::ParseRequest(line, &req); !s.ok()) {
    out->req.id = req.id;
    return s;
  }
  return CheckDaemonRequest(req, peer, out);
}

Status CheckDaemonRequest(const ctl::Request& req, const Peer& peer, DaemonRequest* out) {
  out->req = req;
  out->admin = peer.admin;
  const std::string& cmd = out->req.cmd;
  const nlohmann::json& args = out->req.args;
  if (!args.is_object()) return Status::Error(ErrorCode::kInval, "invalid 'args': expected an object");
  if (cmd == "ping" || cmd == "ps") return Status::Ok();
  if (cmd == "events") {
    if (args.contains("n") && (!args["n"].is_number_unsigned() || args["n"].get<uint64_t>() > kMaxEvents)) {
      return Status::Error(ErrorCode::kInval, "invalid 'n': expected 0.." + std::to_string(kMaxEvents));
    }
    return Status::Ok();
  }
  if (cmd == "make_room") {
    if (Status s = ReadPid(args, &out->target); !s.ok()) return s;
    if (!args.contains("device") || !args["device"].is_string() ||
        args["device"].get<std::string>().size() > 96) {
      return Status::Error(ErrorCode::kInval, "invalid 'device': expected a GPU UUID");
    }
    if (!args.contains("bytes") || !args["bytes"].is_number_unsigned() || args["bytes"].get<uint64_t>() == 0) {
      return Status::Error(ErrorCode::kInval, "invalid 'bytes': expected a positive integer");
    }
    // A job's library asks for itself only: not even its owner may ask for another pid.
    if (!peer.admin && peer.pid != out->target) return Denied("make_room for another process");
    return Status::Ok();
  }
  if (cmd == "set") {
    if (Status s = ReadPid(args, &out->target); !s.ok()) return s;
    nlohmann::json rest = args;
    rest.erase("pid");
    return ctl::ValidateArgs("set", rest);
  }
  if (cmd == "migrate") {
    if (Status s = ReadPid(args, &out->target); !s.ok()) return s;
    const nlohmann::json& pairs = args.contains("pairs") ? args["pairs"] : nlohmann::json();
    if (!pairs.is_array() || pairs.empty() || pairs.size() > 16) {
      return Status::Error(ErrorCode::kInval, "invalid 'pairs': expected 1..16 {from, to}");
    }
    for (const auto& p : pairs) {
      if (!p.is_object() || !p.contains("from") || !p["from"].is_string() || !p.contains("to") ||
          !p["to"].is_string() || p["from"].get<std::string>().size() > 96 ||
          p["to"].get<std::string>().size() > 96) {
        return Status::Error(ErrorCode::kInval, "invalid 'pairs': expected {from, to} GPU names");
      }
    }
    return Status::Ok();
  }
  if (cmd == "drain" || cmd == "undrain") {
    if (!args.contains("device") || !args["device"].is_string() ||
        args["device"].get<std::string>().size() > 96) {
      return Status::Error(ErrorCode::kInval, "invalid 'device': expected a GPU index or UUID");
    }
    // A node-wide decision: it moves other users' jobs.
    if (!peer.admin) return Denied(cmd + " (root or the admin group only)");
    return Status::Ok();
  }
  return Status::Error(ErrorCode::kNoSys, "unknown command '" + cmd + "'");
}

ctl::Response Dispatch(Coordinator* c, const DaemonRequest& r, const std::function<bool()>& progress) {
  const std::string& cmd = r.req.cmd;
  const nlohmann::json& args = r.req.args;
  if (cmd == "ping") return ctl::Response::Ok({{"daemon", "vgpud"}, {"version", VGPU_VERSION}});
  if (cmd == "ps") {
    nlohmann::json jobs = nlohmann::json::array();
    for (const Job& j : c->Jobs()) jobs.push_back(ToJson(j));
    // The DRA plugin reads drained GPUs (its slice's taints) and whether
    // devices are time-sliced (the memory it advertises) from here.
    return ctl::Response::Ok({{"processes", jobs},
                              {"devices", DevicesJson(c->gpus(), c->Drained())},
                              {"oversubscribe", c->oversubscribe()}});
  }
  if (cmd == "events") {
    nlohmann::json events = nlohmann::json::array();
    for (const Event& e : c->events().Recent(args.value("n", uint64_t{50}))) events.push_back(ToJson(e));
    return ctl::Response::Ok({{"events", events}});
  }
  if (cmd == "make_room") {
    Status s = c->MakeRoom(r.target, args["device"].get<std::string>(), args["bytes"].get<uint64_t>(), progress);
    return s.ok() ? ctl::Response::Ok() : ctl::Response::Error(s);
  }
  if (cmd == "set") {
    nlohmann::json rest = args;
    rest.erase("pid");
    // vgpud asks as root: a job owner's request must still obey the ceilings.
    if (!r.admin) rest["as_tenant"] = true;
    return c->Set(r.target, rest);
  }
  if (cmd == "migrate") {
    std::vector<std::pair<std::string, std::string>> pairs;
    for (const auto& p : args["pairs"]) pairs.emplace_back(p["from"], p["to"]);
    return c->Migrate(r.target, pairs);
  }
  if (cmd == "drain" || cmd == "undrain") return c->Drain(args["device"], cmd == "drain");
  return ctl::Response::Error(ErrorCode::kNoSys, "unknown command '" + cmd + "'");
}

Status TenantRequest(const ctl::Request& req, const Peer& peer, ctl::Request* out, Peer* as) {
  if (req.cmd != "ping" && req.cmd != "make_room") {
    return Denied(req.cmd + " through the tenant socket (only ping and make_room)");
  }
  *out = req;
  *as = peer;
  as->admin = false;
  if (req.cmd == "make_room") {
    if (peer.pid <= 0) return Denied("make_room from a process of unknown pid");
    if (!out->args.is_object())
      return Status::Error(ErrorCode::kInval, "invalid 'args': expected an object");
    out->args["pid"] = peer.pid;
  }
  return Status::Ok();
}

DaemonServer::DaemonServer(Coordinator* c, std::string socket_path, std::string admin_group,
                           std::string tenant_dir)
    : coordinator_(c),
      path_(std::move(socket_path)),
      admin_group_(std::move(admin_group)),
      tenant_dir_(std::move(tenant_dir)) {}

DaemonServer::~DaemonServer() { Stop(); }

Status DaemonServer::Start() {
  ctl::ServerOptions o;
  if (!admin_group_.empty()) {
    group* g = getgrnam(admin_group_.c_str());
    if (g == nullptr) return Status::Error(ErrorCode::kInval, "unknown admin group '" + admin_group_ + "'");
    o.admin_gid = g->gr_gid;
  }
  o.path = path_;
  // Who may do what is decided per request (CheckDaemonRequest, Serve).
  o.access = ctl::Access::kAnyLocalUser;
  o.concurrency = ctl::Concurrency::kThreadPerRequest;
  o.idle_timeout_ms = kIdleTimeoutMs;
  o.request_timeout_ms = kIdleTimeoutMs;
  o.thread_name = "vgpud-socket";
  if (Status s = server_.Start(this, o); !s.ok()) return s;
  return StartTenant(o);
}

Status DaemonServer::StartTenant(const ctl::ServerOptions& main) {
  if (tenant_dir_.empty()) return Status::Ok();
  // Containers see this directory (read-only): it holds this socket only.
  if (::mkdir(tenant_dir_.c_str(), 0755) != 0 && errno != EEXIST) {
    return Status::Error(ErrorCode::kIo,
                         "cannot create " + tenant_dir_ + ": " + std::strerror(errno));
  }
  struct stat st {};
  if (::lstat(tenant_dir_.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid()) {
    return Status::Error(ErrorCode::kPerm, tenant_dir_ + " is not a directory of vgpud's user");
  }
  ::chmod(tenant_dir_.c_str(), 0755);
  ctl::ServerOptions o = main;
  o.path = tenant_dir_ + "/vgpud.sock";
  o.admin_gid = static_cast<gid_t>(-1);
  o.thread_name = "vgpud-tenant";
  return tenant_server_.Start(&tenant_endpoint_, o);
}

void DaemonServer::Stop() {
  tenant_server_.Stop();
  server_.Stop();
}

ctl::Response DaemonServer::TenantEndpoint::Serve(const ctl::Request& request, const Peer& peer,
                                                  ctl::ProgressSink* progress) {
  ctl::Request req;
  Peer as;
  if (Status s = TenantRequest(request, peer, &req, &as); !s.ok()) return ctl::Response::Error(s);
  return server_->Serve(req, as, progress);
}

ctl::Response DaemonServer::Serve(const ctl::Request& req, const Peer& peer,
                                  ctl::ProgressSink* progress) {
  DaemonRequest r;
  Status s = CheckDaemonRequest(req, peer, &r);
  if (s.ok() && (r.req.cmd == "set" || r.req.cmd == "migrate") && !peer.admin &&
      !coordinator_->OwnedBy(r.target, peer.uid)) {
    s = Denied("pid " + std::to_string(r.target) + " is not yours");
  }
  if (!s.ok()) return ctl::Response::Error(s);
  return Dispatch(coordinator_, r, [progress] {
    ctl::Progress p;
    p.phase = "waiting";
    progress->Report(p);
    return !progress->ClientGone();
  });
}

}  // namespace vgpu::vgpud
