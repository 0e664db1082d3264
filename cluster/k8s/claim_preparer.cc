#include "cluster/k8s/claim_preparer.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "ctl/cdi/cdi_host.h"

namespace vgpu::k8s {

using nlohmann::json;

bool ValidObjectName(std::string_view name) {
  if (name.empty() || name.size() > 253) return false;
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!alnum(name.front()) || !alnum(name.back())) return false;
  for (char c : name) {
    if (!alnum(c) && c != '-' && c != '.') return false;
  }
  return true;
}

namespace {

Status RemoveIfThere(const std::string& path) {
  if (::unlink(path.c_str()) == 0 || errno == ENOENT) return Status::Ok();
  return Status::Error(ErrorCode::kIo, "remove " + path + ": " + std::strerror(errno));
}

Status MakeDir(const std::string& path) {
  if (::mkdir(path.c_str(), 0755) == 0 || errno == EEXIST) return Status::Ok();
  return Status::Error(ErrorCode::kIo, "mkdir " + path + ": " + std::strerror(errno));
}

std::string Describe(const ClaimRef& r) { return "ResourceClaim " + r.ns + "/" + r.name; }

}  // namespace

ClaimPreparer::ClaimPreparer(PreparerOptions o, ClusterReader* cluster, GpuLister gpus)
    : o_(std::move(o)),
      cluster_(cluster),
      gpus_(std::move(gpus)),
      checkpoint_(o_.checkpoint_file) {}

Status ClaimPreparer::Init(std::string* warning) {
  std::lock_guard lock(mu_);
  return checkpoint_.Load(warning);
}

std::string ClaimPreparer::SpecFile(const std::string& uid) const {
  return o_.cdi_dir + "/vgpu.io-claim_" + uid + ".json";
}

std::string ClaimPreparer::CeilingsFile(const std::string& uid) const {
  return o_.claims_dir + "/" + uid + "/limits.json";
}

size_t ClaimPreparer::prepared() const {
  std::lock_guard lock(mu_);
  return checkpoint_.size();
}

bool ClaimPreparer::Recorded(const std::string& uid, std::vector<PreparedDevice>* out) const {
  const PreparedClaim* c = checkpoint_.Find(uid);
  if (c == nullptr || ::access(SpecFile(uid).c_str(), F_OK) != 0 ||
      ::access(CeilingsFile(uid).c_str(), F_OK) != 0) {
    return false;
  }
  *out = c->devices;
  return true;
}

Status ClaimPreparer::Prepare(const ClaimRef& ref, std::vector<PreparedDevice>* out) {
  out->clear();
  if (!ValidClaimUid(ref.uid) || !ValidObjectName(ref.ns) || !ValidObjectName(ref.name)) {
    return Status::Error(ErrorCode::kInval, "malformed claim reference (namespace, name or UID)");
  }
  {
    std::lock_guard lock(mu_);
    if (Recorded(ref.uid, out)) return Status::Ok();
  }
  // The API server is asked without the lock: other claims go on meanwhile.
  PreparedClaim claim;
  json ceilings, spec;
  if (Status s = Build(ref, &claim, &ceilings, &spec); !s.ok()) return s;
  std::lock_guard lock(mu_);
  if (Recorded(ref.uid, out)) return Status::Ok();  // a concurrent call for the same claim
  // Files first, then the checkpoint: a crash between leaves files that a
  // repeated prepare rewrites and an unprepare removes (named by the UID).
  if (Status s = WriteFiles(ref.uid, ceilings, spec); !s.ok()) {
    RemoveFiles(ref.uid);
    return s;
  }
  if (Status s = checkpoint_.Put(claim); !s.ok()) {
    RemoveFiles(ref.uid);
    return s;
  }
  *out = claim.devices;
  return Status::Ok();
}

Status ClaimPreparer::Build(const ClaimRef& ref, PreparedClaim* claim, json* ceilings, json* spec) {
  json obj;
  if (Status s = cluster_->GetClaim(ref.ns, ref.name, &obj); !s.ok()) {
    if (s.code == ErrorCode::kNoEnt) return Status::Error(s.code, Describe(ref) + " not found");
    return Status::Error(s.code, "reading " + Describe(ref) + ": " + s.message);
  }
  ParsedClaim parsed;
  if (Status s = ParseResourceClaim(obj, kDriverName, &parsed); !s.ok()) {
    return Status::Error(s.code, Describe(ref) + ": " + s.message);
  }
  if (parsed.uid != ref.uid) {
    return Status::Error(ErrorCode::kInval, Describe(ref) + " has UID " + parsed.uid + ", not " +
                                                ref.uid + " (deleted and created again?)");
  }
  PodInfo pod;
  bool has_pod = false;
  if (Status s = ReadPod(parsed, &pod, &has_pod); !s.ok()) {
    return Status::Error(s.code, Describe(ref) + ": " + s.message);
  }
  std::vector<NodeGpu> gpus;
  std::vector<ClaimShare> shares;
  Status s = gpus_(&gpus);
  if (s.ok()) s = ClaimShares(parsed, gpus, &shares);
  if (!s.ok()) return Status::Error(s.code, Describe(ref) + ": " + s.message);
  *ceilings = ClaimCeilings(parsed, shares, has_pod ? &pod : nullptr, o_.priority);
  *spec = ClaimCdiSpec(o_.inventory, ref.uid, shares, CeilingsFile(ref.uid));
  if (Status v = cdi::ValidateSpec(*spec); !v.ok()) {
    return Status::Error(ErrorCode::kIo, "internal error: the claim's CDI spec: " + v.message);
  }
  *claim = PreparedClaim{ref.uid, ref.ns, ref.name, {}};
  for (const ClaimDevice& d : parsed.devices) {
    claim->devices.push_back({{d.request}, d.pool, d.device, {ClaimCdiId(ref.uid)}});
  }
  return Status::Ok();
}

// The first pod the claim is reserved for (a claim shared by several pods
// takes the first one's priority). A pod with another UID than the claim
// says is a stale reservation: refused.
Status ClaimPreparer::ReadPod(const ParsedClaim& claim, PodInfo* pod, bool* found) {
  *found = false;
  if (claim.pods.empty()) return Status::Ok();
  const PodRef& ref = claim.pods.front();
  if (!ValidObjectName(ref.name)) return Status::Error(ErrorCode::kInval, "malformed pod name");
  json obj;
  if (Status s = cluster_->GetPod(claim.ns, ref.name, &obj); !s.ok()) {
    return Status::Error(s.code, "reading its pod " + claim.ns + "/" + ref.name + ": " + s.message);
  }
  const json* uid = obj.contains("metadata") ? &obj["metadata"] : nullptr;
  if (uid == nullptr || !uid->is_object() || uid->value("uid", "") != ref.uid) {
    return Status::Error(ErrorCode::kInval, "its pod " + claim.ns + "/" + ref.name +
                                                " has another UID than " + ref.uid);
  }
  pod->ns = claim.ns;
  pod->name = ref.name;
  const json* spec = obj.contains("spec") ? &obj["spec"] : nullptr;
  if (spec != nullptr && spec->is_object() && spec->contains("priority") &&
      (*spec)["priority"].is_number_integer()) {
    pod->priority = (*spec)["priority"].get<int64_t>();
  }
  *found = true;
  return Status::Ok();
}

Status ClaimPreparer::WriteFiles(const std::string& uid, const json& ceilings, const json& spec) {
  std::string dir = o_.claims_dir + "/" + uid;
  Status s = MakeDir(dir);
  if (s.ok()) s = cdi::WriteFileAtomic(CeilingsFile(uid), ceilings.dump(2) + "\n");
  // The spec last: once it is there a runtime may use it, and the hook needs
  // the ceilings file.
  if (s.ok()) s = cdi::WriteFileAtomic(SpecFile(uid), spec.dump(2) + "\n");
  return s;
}

Status ClaimPreparer::RemoveFiles(const std::string& uid) {
  Status s = RemoveIfThere(SpecFile(uid));
  if (Status c = RemoveIfThere(CeilingsFile(uid)); s.ok()) s = c;
  std::string dir = o_.claims_dir + "/" + uid;
  if (::rmdir(dir.c_str()) != 0 && errno != ENOENT && s.ok()) {
    s = Status::Error(ErrorCode::kIo, "remove " + dir + ": " + std::strerror(errno));
  }
  return s;
}

Status ClaimPreparer::Unprepare(const ClaimRef& ref) {
  if (!ValidClaimUid(ref.uid)) {
    return Status::Error(ErrorCode::kInval, "malformed claim UID");
  }
  std::lock_guard lock(mu_);
  // The checkpoint first: a crash between leaves files that a repeated
  // unprepare still removes, never a checkpoint naming files that are gone.
  if (Status s = checkpoint_.Remove(ref.uid); !s.ok()) return s;
  return RemoveFiles(ref.uid);
}

}  // namespace vgpu::k8s
