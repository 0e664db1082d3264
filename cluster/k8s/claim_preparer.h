// NodePrepareResources / NodeUnprepareResources for one claim: reads the
// claim and its pod from the API server, checks them, writes the claim's
// ceilings file and CDI spec, and keeps the checkpoint. Idempotent both ways;
// on an error nothing is left written. Safe to call from several gRPC
// threads at once. docs/kubernetes.md, "Prepare".
#pragma once

#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cluster/k8s/claim_files.h"
#include "cluster/k8s/prepared_claims.h"
#include "common/status.h"
#include "ctl/cdi/cdi_spec.h"

namespace vgpu::k8s {

// Where claims and pods come from: the API server in the plugin
// (KubeReader), fixtures in tests. kNoEnt when the object does not exist.
class ClusterReader {
 public:
  virtual ~ClusterReader() = default;
  virtual Status GetClaim(const std::string& ns, const std::string& name, nlohmann::json* out) = 0;
  virtual Status GetPod(const std::string& ns, const std::string& name, nlohmann::json* out) = 0;
};

// The node's GPUs now (NVML in the plugin).
using GpuLister = std::function<Status(std::vector<NodeGpu>*)>;

struct PreparerOptions {
  std::string cdi_dir = "/var/run/cdi";
  std::string claims_dir = "/run/vgpu/claims";  // the ceilings files (host paths)
  std::string checkpoint_file;
  cdi::Inventory inventory;  // what every claim's spec mounts; its GPU list is not used
  PriorityRule priority;
};

struct ClaimRef {
  std::string ns, uid, name;
};

class ClaimPreparer {
 public:
  ClaimPreparer(PreparerOptions o, ClusterReader* cluster, GpuLister gpus);

  // Loads the checkpoint (*warning: it was corrupt and was set aside).
  Status Init(std::string* warning);
  Status Prepare(const ClaimRef& ref, std::vector<PreparedDevice>* out);
  Status Unprepare(const ClaimRef& ref);

  std::string SpecFile(const std::string& uid) const;
  std::string CeilingsFile(const std::string& uid) const;
  size_t prepared() const;

 private:
  // The answer recorded for `uid` if its spec file is still there (a reboot
  // empties /var/run but not the checkpoint).
  bool Recorded(const std::string& uid, std::vector<PreparedDevice>* out) const;
  Status Build(const ClaimRef& ref, PreparedClaim* claim, nlohmann::json* ceilings,
               nlohmann::json* spec);
  Status ReadPod(const ParsedClaim& claim, PodInfo* pod, bool* found);
  Status WriteFiles(const std::string& uid, const nlohmann::json& ceilings,
                    const nlohmann::json& spec);
  Status RemoveFiles(const std::string& uid);

  PreparerOptions o_;
  ClusterReader* cluster_;
  GpuLister gpus_;
  mutable std::mutex mu_;  // the checkpoint and the files
  PreparedClaims checkpoint_;
};

// DNS-1123 subdomain (namespaces, claim and pod names): what may go into a
// request path.
bool ValidObjectName(std::string_view name);

}  // namespace vgpu::k8s
