#include "ctl/vgpud/daemon_server.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include "common/log.h"
#include "ctl/vgpud/coordinator.h"
#include "ctl/vgpud/node_gpus.h"

namespace vgpu::vgpud {
namespace {

constexpr int kRequestTimeoutMs = 10000;  // a request's bytes, from the first wait
constexpr int kIdleTimeoutMs = 30000;     // between requests
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

bool SendAll(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    pollfd p{fd, POLLOUT, 0};
    if (poll(&p, 1, kIdleTimeoutMs) <= 0) return false;
    ssize_t n = send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

nlohmann::json DevicesJson(const NodeGpus& gpus) {
  nlohmann::json out = nlohmann::json::array();
  for (const GpuMemory& g : gpus.Read()) {
    out.push_back({{"uuid", g.uuid}, {"index", g.index}, {"used", g.used}, {"total", g.total}});
  }
  return out;
}

}  // namespace

Status ParseDaemonRequest(std::string_view line, const Peer& peer, DaemonRequest* out) {
  if (line.size() > ctl::kMaxRequestBytes) return Status::Error(ErrorCode::kInval, "request too large");
  if (Status s = ctl::ParseRequest(line, &out->req); !s.ok()) return s;
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
    return ctl::Response::Ok({{"processes", jobs}, {"devices", DevicesJson(c->gpus())}});
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

DaemonServer::DaemonServer(Coordinator* c, std::string socket_path, std::string admin_group)
    : coordinator_(c), path_(std::move(socket_path)), admin_group_(std::move(admin_group)) {}

DaemonServer::~DaemonServer() { Stop(); }

Status DaemonServer::Start() {
  if (!admin_group_.empty()) {
    group* g = getgrnam(admin_group_.c_str());
    if (g == nullptr) return Status::Error(ErrorCode::kInval, "unknown admin group '" + admin_group_ + "'");
    admin_gid_ = g->gr_gid;
  }
  sockaddr_un addr{};
  if (path_.size() >= sizeof addr.sun_path) return Status::Error(ErrorCode::kInval, "socket path too long: " + path_);
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path_.c_str(), path_.size() + 1);
  listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0 || pipe2(wake_, O_CLOEXEC) != 0) return Status::Error(ErrorCode::kIo, "socket: " + std::string(strerror(errno)));
  unlink(path_.c_str());  // a previous vgpud's (killed) socket
  // Any local user may connect (jobs of every uid ask for room); who may do
  // what is decided per request from SO_PEERCRED.
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      chmod(path_.c_str(), 0666) != 0 || listen(listen_fd_, 64) != 0) {
    return Status::Error(ErrorCode::kIo, "cannot listen on " + path_ + ": " + strerror(errno));
  }
  thread_ = std::thread([this] { AcceptLoop(); });
  return Status::Ok();
}

void DaemonServer::Stop() {
  if (stop_.exchange(true)) return;
  if (wake_[1] >= 0) (void)!write(wake_[1], "x", 1);
  if (thread_.joinable()) thread_.join();
  if (listen_fd_ >= 0) {
    close(listen_fd_);
    unlink(path_.c_str());
  }
  // Connection threads are detached; they end at their next deadline.
}

void DaemonServer::AcceptLoop() {
  while (!stop_) {
    pollfd p[2] = {{listen_fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    if (poll(p, 2, -1) < 0 && errno != EINTR) break;
    if (p[1].revents != 0) break;
    if ((p[0].revents & POLLIN) == 0) continue;
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) continue;
    if (clients_.fetch_add(1) >= kMaxClients) {
      clients_.fetch_sub(1);
      SendAll(fd, ctl::SerializeResponse(ctl::Response::Error(ErrorCode::kBusy, "too many connections")));
      close(fd);
      continue;
    }
    try {
      std::thread([this, fd] {
        try {
          Serve(fd);
        } catch (const std::exception& e) {  // never takes vgpud down
          VGPU_LOG(kWarn, "client dropped: {}", e.what());
        }
        close(fd);
        clients_.fetch_sub(1);
      }).detach();
    } catch (const std::exception& e) {  // no thread: this client only is refused
      VGPU_LOG(kWarn, "client refused: {}", e.what());
      close(fd);
      clients_.fetch_sub(1);
    }
  }
}

void DaemonServer::Serve(int fd) {
  ucred cred{};
  socklen_t len = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return;
  Peer peer{cred.pid, cred.uid, cred.gid, cred.uid == 0};
  if (!peer.admin && admin_gid_ != static_cast<gid_t>(-1)) {
    // The peer's groups, as the kernel saw them at connect time.
    std::vector<gid_t> groups(64);
    socklen_t glen = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
    if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &glen) == 0) {
      groups.resize(glen / sizeof(gid_t));
      for (gid_t g : groups) peer.admin |= g == admin_gid_;
    }
    peer.admin |= cred.gid == admin_gid_;
  }
  std::string buf;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kIdleTimeoutMs);
  while (!stop_) {
    size_t nl = buf.find('\n');
    if (nl == std::string::npos) {
      if (buf.size() > ctl::kMaxRequestBytes) {
        SendAll(fd, ctl::SerializeResponse(ctl::Response::Error(ErrorCode::kTooBig, "request too large")));
        return;
      }
      const int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                            deadline - std::chrono::steady_clock::now()).count());
      if (left <= 0) return;  // slow or idle client: dropped
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, std::min(left, 500)) < 0 && errno != EINTR) return;
      if ((p.revents & (POLLIN | POLLHUP)) == 0) continue;
      char chunk[4096];
      ssize_t n = recv(fd, chunk, sizeof chunk, 0);
      if (n == 0) return;
      if (n < 0) {
        if (errno == EINTR || errno == EAGAIN) continue;
        return;
      }
      if (buf.empty()) deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kRequestTimeoutMs);
      buf.append(chunk, static_cast<size_t>(n));
      continue;
    }
    std::string line = buf.substr(0, nl);
    buf.erase(0, nl + 1);
    DaemonRequest r;
    r.req.peer_uid = peer.uid;
    ctl::Response resp;
    Status s = ParseDaemonRequest(line, peer, &r);
    if (s.ok() && (r.req.cmd == "set" || r.req.cmd == "migrate") && !peer.admin && !coordinator_->OwnedBy(r.target, peer.uid)) {
      s = Denied("pid " + std::to_string(r.target) + " is not yours");
    }
    if (!s.ok()) {
      resp = ctl::Response::Error(s);
    } else {
      const int64_t id = r.req.id;
      resp = Dispatch(coordinator_, r, [fd, id] {
        ctl::Progress p;
        p.phase = "waiting";
        return SendAll(fd, ctl::SerializeProgress(id, p));
      });
    }
    resp.id = r.req.id;
    if (!SendAll(fd, ctl::SerializeResponse(resp))) return;
    deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kIdleTimeoutMs);
  }
}

}  // namespace vgpu::vgpud
