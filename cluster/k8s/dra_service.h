// The kubelet-facing side of the plugin: the registration service the
// kubelet's plugin watcher finds in its plugins_registry directory, and the
// DRAPlugin v1 service on the plugin's own socket (both gRPC over unix
// sockets, protos in proto/). docs/kubernetes.md, "Kubelet".
#pragma once

#include <dra/v1/api.grpc.pb.h>
#include <grpcpp/grpcpp.h>
#include <pluginregistration/v1/api.grpc.pb.h>

#include <atomic>
#include <memory>
#include <string>

#include "cluster/k8s/claim_preparer.h"
#include "common/status.h"

namespace vgpu::k8s {

namespace drapb = ::k8s::io::kubelet::pkg::apis::dra::v1;
namespace regpb = ::pluginregistration;

// What GetInfo announces.
inline constexpr std::string_view kPluginType = "DRAPlugin";
inline constexpr std::string_view kServiceVersion = "v1.DRAPlugin";

class DraService final : public drapb::DRAPlugin::Service {
 public:
  explicit DraService(ClaimPreparer* preparer) : preparer_(preparer) {}
  grpc::Status NodePrepareResources(grpc::ServerContext* ctx,
                                    const drapb::NodePrepareResourcesRequest* req,
                                    drapb::NodePrepareResourcesResponse* resp) override;
  grpc::Status NodeUnprepareResources(grpc::ServerContext* ctx,
                                      const drapb::NodeUnprepareResourcesRequest* req,
                                      drapb::NodeUnprepareResourcesResponse* resp) override;

 private:
  ClaimPreparer* preparer_;
};

class RegistrationService final : public regpb::Registration::Service {
 public:
  explicit RegistrationService(std::string dra_endpoint) : endpoint_(std::move(dra_endpoint)) {}
  grpc::Status GetInfo(grpc::ServerContext* ctx, const regpb::InfoRequest* req,
                       regpb::PluginInfo* info) override;
  grpc::Status NotifyRegistrationStatus(grpc::ServerContext* ctx,
                                        const regpb::RegistrationStatus* status,
                                        regpb::RegistrationStatusResponse* resp) override;
  // The kubelet's last word: registered, or why not.
  bool registered() const { return registered_.load(); }
  int notifications() const { return notifications_.load(); }

 private:
  std::string endpoint_;
  std::atomic<bool> registered_{false};
  std::atomic<int> notifications_{0};
};

// Both servers. The DRA socket first, then the registration socket: the
// kubelet may dial the endpoint as soon as it sees the registration socket.
class PluginServer {
 public:
  PluginServer(ClaimPreparer* preparer, std::string registration_socket, std::string dra_socket);
  ~PluginServer();
  Status Start();
  void Stop();
  const RegistrationService& registration() const { return registration_; }

 private:
  std::string registration_socket_, dra_socket_;
  DraService dra_;
  RegistrationService registration_;
  std::unique_ptr<grpc::Server> dra_server_, registration_server_;
};

}  // namespace vgpu::k8s
