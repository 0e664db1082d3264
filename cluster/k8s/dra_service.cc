#include "cluster/k8s/dra_service.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/log.h"

namespace vgpu::k8s {

grpc::Status DraService::NodePrepareResources(grpc::ServerContext* /*ctx*/,
                                              const drapb::NodePrepareResourcesRequest* req,
                                              drapb::NodePrepareResourcesResponse* resp) {
  // Every claim gets an entry: the kubelet calls again for a missing one.
  for (const drapb::Claim& c : req->claims()) {
    drapb::NodePrepareResourceResponse& r = (*resp->mutable_claims())[c.uid()];
    std::vector<PreparedDevice> devices;
    Status s = preparer_->Prepare({c.namespace_(), c.uid(), c.name()}, &devices);
    if (!s.ok()) {
      r.set_error(s.message);
      continue;
    }
    for (const PreparedDevice& d : devices) {
      drapb::Device* out = r.add_devices();
      for (const std::string& n : d.requests) out->add_request_names(n);
      out->set_pool_name(d.pool);
      out->set_device_name(d.device);
      for (const std::string& id : d.cdi_ids) out->add_cdi_device_ids(id);
    }
  }
  return grpc::Status::OK;
}

grpc::Status DraService::NodeUnprepareResources(grpc::ServerContext* /*ctx*/,
                                                const drapb::NodeUnprepareResourcesRequest* req,
                                                drapb::NodeUnprepareResourcesResponse* resp) {
  for (const drapb::Claim& c : req->claims()) {
    drapb::NodeUnprepareResourceResponse& r = (*resp->mutable_claims())[c.uid()];
    if (Status s = preparer_->Unprepare({c.namespace_(), c.uid(), c.name()}); !s.ok()) {
      r.set_error(s.message);
    }
  }
  return grpc::Status::OK;
}

grpc::Status RegistrationService::GetInfo(grpc::ServerContext* /*ctx*/,
                                          const regpb::InfoRequest* /*req*/,
                                          regpb::PluginInfo* info) {
  info->set_type(std::string(kPluginType));
  info->set_name(std::string(kDriverName));
  info->set_endpoint(endpoint_);
  info->add_supported_versions(std::string(kServiceVersion));
  return grpc::Status::OK;
}

grpc::Status RegistrationService::NotifyRegistrationStatus(
    grpc::ServerContext* /*ctx*/, const regpb::RegistrationStatus* status,
    regpb::RegistrationStatusResponse* /*resp*/) {
  registered_ = status->plugin_registered();
  ++notifications_;
  if (status->plugin_registered()) {
    VGPU_LOG(kInfo, "registered with the kubelet as DRA driver {}", kDriverName);
  } else {
    VGPU_LOG(kError, "the kubelet refused the registration: {}", status->error());
  }
  return grpc::Status::OK;
}

namespace {

// A socket left by a previous run (crash, kill -9) would make the bind fail.
Status ClearSocket(const std::string& path) {
  if (::unlink(path.c_str()) == 0 || errno == ENOENT) return Status::Ok();
  return Status::Error(ErrorCode::kIo, "remove stale socket " + path + ": " + std::strerror(errno));
}

Status Serve(const std::string& path, grpc::Service* service, std::unique_ptr<grpc::Server>* out) {
  if (Status s = ClearSocket(path); !s.ok()) return s;
  grpc::ServerBuilder b;
  b.AddListeningPort("unix://" + path, grpc::InsecureServerCredentials());
  b.RegisterService(service);
  *out = b.BuildAndStart();
  if (*out == nullptr) return Status::Error(ErrorCode::kIo, "cannot serve gRPC on " + path);
  return Status::Ok();
}

}  // namespace

PluginServer::PluginServer(ClaimPreparer* preparer, std::string registration_socket,
                           std::string dra_socket)
    : registration_socket_(std::move(registration_socket)),
      dra_socket_(std::move(dra_socket)),
      dra_(preparer),
      registration_(dra_socket_) {}

PluginServer::~PluginServer() { Stop(); }

Status PluginServer::Start() {
  if (Status s = Serve(dra_socket_, &dra_, &dra_server_); !s.ok()) return s;
  return Serve(registration_socket_, &registration_, &registration_server_);
}

void PluginServer::Stop() {
  // The registration socket first: the kubelet's watcher sees it go and
  // deregisters the driver before the DRA socket disappears.
  if (registration_server_) {
    registration_server_->Shutdown();
    registration_server_.reset();
    ::unlink(registration_socket_.c_str());
  }
  if (dra_server_) {
    dra_server_->Shutdown();
    dra_server_.reset();
    ::unlink(dra_socket_.c_str());
  }
}

}  // namespace vgpu::k8s
