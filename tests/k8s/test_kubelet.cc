// A stand-in for the kubelet's side of a DRA plugin, for the end-to-end
// tests and the prepare benchmark (tests/k8s/dra_podman_test.sh,
// bench/dra_prepare_bench.sh): the same protos, unix sockets, and the
// kubelet's 45 s deadline per call.
//   vgpu_test_kubelet register REG_SOCKET        GetInfo, then Notify(registered); prints the info
//   vgpu_test_kubelet prepare DRA_SOCKET NS/NAME/UID...     one call; prints the response as JSON
//   vgpu_test_kubelet unprepare DRA_SOCKET NS/NAME/UID...
//   vgpu_test_kubelet bench DRA_SOCKET NS PREFIX UID_PREFIX N   N claims PREFIX-<i> (UID
//       UID_PREFIX + i as 12 hex digits), one call each; prints p50/p99 of prepare in ms
// Exit 0 when every call returned OK and every claim had no error.
#include <dra/v1/api.grpc.pb.h>
#include <grpcpp/grpcpp.h>
#include <pluginregistration/v1/api.grpc.pb.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace {

namespace drapb = ::k8s::io::kubelet::pkg::apis::dra::v1;
namespace regpb = ::pluginregistration;
using nlohmann::json;

constexpr auto kDeadline = std::chrono::seconds(45);

std::shared_ptr<grpc::Channel> Dial(const std::string& socket) {
  return grpc::CreateChannel("unix://" + socket, grpc::InsecureChannelCredentials());
}

void SetDeadline(grpc::ClientContext* ctx) {
  ctx->set_deadline(std::chrono::system_clock::now() + kDeadline);
}

bool ParseClaim(const std::string& arg, drapb::Claim* c) {
  size_t a = arg.find('/'), b = arg.find('/', a + 1);
  if (a == std::string::npos || b == std::string::npos) return false;
  c->set_namespace_(arg.substr(0, a));
  c->set_name(arg.substr(a + 1, b - a - 1));
  c->set_uid(arg.substr(b + 1));
  return true;
}

int Register(const std::string& socket) {
  auto stub = regpb::Registration::NewStub(Dial(socket));
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  regpb::PluginInfo info;
  grpc::Status s = stub->GetInfo(&ctx, regpb::InfoRequest(), &info);
  if (!s.ok()) return std::fprintf(stderr, "GetInfo: %s\n", s.error_message().c_str()), 1;
  json versions = json::array();
  for (const auto& v : info.supported_versions()) versions.push_back(v);
  bool ok = info.type() == "DRAPlugin" &&
            std::find(versions.begin(), versions.end(), "v1.DRAPlugin") != versions.end();
  regpb::RegistrationStatus status;
  status.set_plugin_registered(ok);
  if (!ok) status.set_error("no v1.DRAPlugin service");
  grpc::ClientContext c2;
  SetDeadline(&c2);
  regpb::RegistrationStatusResponse none;
  s = stub->NotifyRegistrationStatus(&c2, status, &none);
  std::printf("%s\n", json{{"type", info.type()},
                           {"name", info.name()},
                           {"endpoint", info.endpoint()},
                           {"supported_versions", versions},
                           {"registered", ok && s.ok()}}
                          .dump()
                          .c_str());
  return ok && s.ok() ? 0 : 1;
}

json DevicesJson(const drapb::NodePrepareResourceResponse& r) {
  json out = json::array();
  for (const auto& d : r.devices()) {
    json ids = json::array(), reqs = json::array();
    for (const auto& id : d.cdi_device_ids()) ids.push_back(id);
    for (const auto& n : d.request_names()) reqs.push_back(n);
    out.push_back({{"requests", reqs},
                   {"pool", d.pool_name()},
                   {"device", d.device_name()},
                   {"cdi_device_ids", ids}});
  }
  return out;
}

int Prepare(const std::string& socket, const std::vector<drapb::Claim>& claims, bool unprepare) {
  auto stub = drapb::DRAPlugin::NewStub(Dial(socket));
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  json out = json::object();
  bool all_ok = true;
  grpc::Status s;
  if (unprepare) {
    drapb::NodeUnprepareResourcesRequest req;
    for (const auto& c : claims) *req.add_claims() = c;
    drapb::NodeUnprepareResourcesResponse resp;
    s = stub->NodeUnprepareResources(&ctx, req, &resp);
    for (const auto& [uid, r] : resp.claims()) {
      out[uid] = {{"error", r.error()}};
      all_ok = all_ok && r.error().empty();
    }
  } else {
    drapb::NodePrepareResourcesRequest req;
    for (const auto& c : claims) *req.add_claims() = c;
    drapb::NodePrepareResourcesResponse resp;
    s = stub->NodePrepareResources(&ctx, req, &resp);
    for (const auto& [uid, r] : resp.claims()) {
      out[uid] = {{"error", r.error()}, {"devices", DevicesJson(r)}};
      all_ok = all_ok && r.error().empty();
    }
  }
  if (!s.ok()) return std::fprintf(stderr, "call: %s\n", s.error_message().c_str()), 1;
  std::printf("%s\n", out.dump().c_str());
  return all_ok && out.size() == claims.size() ? 0 : 1;
}

int Bench(const std::string& socket, const std::string& ns, const std::string& prefix,
          const std::string& uid_prefix, int n) {
  auto stub = drapb::DRAPlugin::NewStub(Dial(socket));
  std::vector<double> ms;
  for (int i = 0; i < n; ++i) {
    char uid[64];
    std::snprintf(uid, sizeof uid, "%s%012x", uid_prefix.c_str(), i);
    drapb::NodePrepareResourcesRequest req;
    drapb::Claim* c = req.add_claims();
    c->set_namespace_(ns);
    c->set_name(prefix + "-" + std::to_string(i));
    c->set_uid(uid);
    drapb::NodePrepareResourcesResponse resp;
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    auto t0 = std::chrono::steady_clock::now();
    grpc::Status s = stub->NodePrepareResources(&ctx, req, &resp);
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    if (!s.ok() || resp.claims().at(uid).error() != "") {
      std::fprintf(stderr, "claim %d: %s\n", i,
                   s.ok() ? resp.claims().at(uid).error().c_str() : s.error_message().c_str());
      return 1;
    }
  }
  std::sort(ms.begin(), ms.end());
  auto at = [&](double q) {
    return ms[std::min(ms.size() - 1, static_cast<size_t>(q * ms.size()))];
  };
  std::printf("prepare_ms p50=%.3f p99=%.3f max=%.3f n=%d\n", at(0.50), at(0.99), ms.back(), n);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 3 && std::strcmp(argv[1], "register") == 0) return Register(argv[2]);
  if (argc == 7 && std::strcmp(argv[1], "bench") == 0) {
    return Bench(argv[2], argv[3], argv[4], argv[5], std::atoi(argv[6]));
  }
  if (argc >= 4 &&
      (std::strcmp(argv[1], "prepare") == 0 || std::strcmp(argv[1], "unprepare") == 0)) {
    std::vector<drapb::Claim> claims;
    for (int i = 3; i < argc; ++i) {
      drapb::Claim c;
      if (!ParseClaim(argv[i], &c)) return std::fprintf(stderr, "bad claim '%s'\n", argv[i]), 2;
      claims.push_back(c);
    }
    return Prepare(argv[2], claims, std::strcmp(argv[1], "unprepare") == 0);
  }
  std::fprintf(stderr, "usage: see the comment at the top of tests/k8s/test_kubelet.cc\n");
  return 2;
}
