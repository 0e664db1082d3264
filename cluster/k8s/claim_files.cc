#include "cluster/k8s/claim_files.h"

#include <algorithm>

namespace vgpu::k8s {

using nlohmann::json;

namespace {

int Rank(const std::string& priority) { return priority == "high" ? 2 : priority == "low" ? 0 : 1; }

// At most the class's weight, 1 when it names none (as libvgpu's ceilings).
int Weight(const ParsedClaim& claim) {
  int cap = claim.class_params.weight > 0 ? claim.class_params.weight : 1;
  return claim.params.weight > 0 ? std::min(claim.params.weight, cap) : cap;
}

}  // namespace

std::string ClaimPriority(const ClaimParameters& params, const ClaimParameters& admin,
                          const std::optional<int64_t>& pod_priority, const PriorityRule& rule) {
  std::string bound = admin.priority;
  if (bound.empty()) {
    bound = !pod_priority                     ? "normal"
            : *pod_priority >= rule.high_from ? "high"
            : *pod_priority < 0               ? "low"
                                              : "normal";
  }
  if (!params.priority.empty() && Rank(params.priority) < Rank(bound)) return params.priority;
  return bound;
}

Status ClaimShares(const ParsedClaim& claim, const std::vector<NodeGpu>& gpus,
                   std::vector<ClaimShare>* out) {
  out->clear();
  for (const ClaimDevice& d : claim.devices) {
    int index = -1;
    auto gpu = gpus.end();
    if (ParseGpuDeviceName(d.device, &index)) {
      gpu = std::find_if(gpus.begin(), gpus.end(),
                         [&](const NodeGpu& g) { return g.index == index; });
    }
    if (gpu == gpus.end()) {
      return Status::Error(ErrorCode::kNoEnt, "device '" + d.device + "' of request '" + d.request +
                                                  "' is not a GPU of this node (gone?)");
    }
    // No consumed capacity: the device was allocated whole.
    uint64_t memory =
        d.memory_bytes > 0 ? static_cast<uint64_t>(d.memory_bytes) : gpu->memory_bytes;
    int compute =
        d.compute_percent > 0 ? static_cast<int>(std::min<int64_t>(d.compute_percent, 100)) : 100;
    auto same = std::find_if(out->begin(), out->end(),
                             [&](const ClaimShare& s) { return s.gpu.index == index; });
    if (same == out->end()) {
      out->push_back({*gpu, memory, compute});
    } else {
      same->memory_bytes = std::min(same->memory_bytes + memory, gpu->memory_bytes);
      same->compute_percent = std::min(same->compute_percent + compute, 100);
    }
  }
  if (out->empty()) {
    return Status::Error(ErrorCode::kInval, "the claim has no device of this driver");
  }
  return Status::Ok();
}

std::string ClaimGroup(const std::string& uid) { return "claim-" + uid; }

json ClaimCeilings(const ParsedClaim& claim, const std::vector<ClaimShare>& shares,
                   const PodInfo* pod, const PriorityRule& rule) {
  std::string visible, memory;
  int share = 100;
  for (const ClaimShare& s : shares) {
    visible += (visible.empty() ? "" : ",") +
               (s.gpu.uuid.empty() ? std::to_string(s.gpu.index) : s.gpu.uuid);
    memory += (memory.empty() ? "" : ",") + std::to_string(s.memory_bytes);
    // libvgpu has one share for all of a process's GPUs: the smallest
    // keeps every GPU within what the scheduler counted.
    share = std::min(share, s.compute_percent);
  }
  if (claim.params.share > 0) share = std::min(share, claim.params.share);
  json c = {{"group", ClaimGroup(claim.uid)},
            {"visible_devices", visible},
            {"device_memory_limit", memory},
            {"compute_share", std::to_string(share)},
            {"compute_weight", std::to_string(Weight(claim))},
            {"priority", ClaimPriority(claim.params, claim.class_params,
                                       pod ? pod->priority : std::nullopt, rule)},
            {"claim", claim.ns + "/" + claim.name}};
  // Exempt from time-slicing only by the class: the claim may ask to be
  // time-sliced after all, never the other way.
  if (claim.class_params.time_sliced == false && claim.params.time_sliced == false) {
    c["preemptible"] = "false";
  }
  if (pod != nullptr) c["pod"] = pod->ns + "/" + pod->name;
  return c;
}

json ClaimCdiSpec(const cdi::Inventory& inv, const std::string& uid,
                  const std::vector<ClaimShare>& shares, const std::string& ceilings_file) {
  cdi::ClaimSpecDevice d{std::string(kClaimCdiKind), uid, {}, ceilings_file};
  for (const ClaimShare& s : shares) {
    d.gpus.push_back(cdi::Gpu{s.gpu.index, s.gpu.uuid, s.gpu.device_node});
  }
  return cdi::BuildClaimSpec(inv, d);
}

std::string ClaimCdiId(const std::string& uid) { return std::string(kClaimCdiKind) + "=" + uid; }

bool ValidClaimUid(std::string_view uid) {
  if (uid.empty() || uid.size() > 64) return false;
  return std::all_of(uid.begin(), uid.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || c == '-';
  });
}

}  // namespace vgpu::k8s
