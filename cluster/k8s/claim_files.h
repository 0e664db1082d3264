// What the DRA plugin writes for one prepared ResourceClaim, built from the
// claim (resource_claim.h), its pod and the node's GPUs: the claim's ceilings
// file (libvgpu's admin limits for every container of the claim, which the
// OCI hook installs from `--claim FILE`) and its CDI spec. Pure: no file
// system, no API server (claim_preparer.h does those). docs/kubernetes.md.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/k8s/resource_claim.h"
#include "cluster/k8s/resource_slice.h"
#include "common/status.h"
#include "ctl/cdi/cdi_spec.h"

namespace vgpu::k8s {

// The CDI kind of the per-claim specs; one device per spec, named by the
// claim's UID.
inline constexpr std::string_view kClaimCdiKind = "vgpu.io/claim";

// A GPU of this node as a claim uses it.
struct NodeGpu {
  int index = 0;
  std::string uuid;
  uint64_t memory_bytes = 0;  // physical (what a result without consumed memory gets)
  std::string device_node;    // host /dev/nvidiaN, empty if absent (the simulated node)
};

// The consuming pod, as far as the claim's config needs it.
struct PodInfo {
  std::string ns, name;
  std::optional<int64_t> priority;  // spec.priority (from its PriorityClass)
};

// Pod priority to vgpu priority: at least `high_from` is high, below 0 low,
// else normal.
struct PriorityRule {
  int64_t high_from = 1000;
};
// The claim's vgpu priority. The admin's bound is the DeviceClass's
// `priority` parameter when it sets one, else the pod's (its PriorityClass,
// the cluster admin's). The claim's own `priority` parameter (`params`, class
// and claim entries merged) applies only where it does not exceed that bound:
// a claim's author is a tenant.
std::string ClaimPriority(const ClaimParameters& params, const ClaimParameters& admin,
                          const std::optional<int64_t>& pod_priority, const PriorityRule& rule);

// One GPU of the claim with what the claim may use of it: the results on
// the same GPU added up (a claim may hold several shares of one device).
struct ClaimShare {
  NodeGpu gpu;
  uint64_t memory_bytes = 0;
  int compute_percent = 0;  // 1..100
};

// The claim's shares, in the order of its results. `gpus` is the node now: a
// result whose device is not on it (gone, renamed) is an error naming it.
Status ClaimShares(const ParsedClaim& claim, const std::vector<NodeGpu>& gpus,
                   std::vector<ClaimShare>* out);

// The ceilings file: libvgpu's JSON config keys, as an admin file. Group
// "claim-<uid>", the GPUs by UUID, memory per GPU, the smallest compute share
// of its GPUs (lowered by the `share` parameter), weight, priority, whether
// vgpud may time-slice it, and the claim and pod as labels. The claim's own
// parameters only lower what the DeviceClass's give (`class_params`): weight
// at most the class's (1 when it names none), priority as ClaimPriority,
// `timeSliced: false` only when the class says so.
nlohmann::json ClaimCeilings(const ParsedClaim& claim, const std::vector<ClaimShare>& shares,
                             const PodInfo* pod, const PriorityRule& rule);

// The claim's quota group.
std::string ClaimGroup(const std::string& uid);

// The claim's CDI spec: `inv` (what `vgpuctl cdi generate` finds) restricted
// to the claim's GPUs, with the hook pointed at `ceilings_file`.
nlohmann::json ClaimCdiSpec(const cdi::Inventory& inv, const std::string& uid,
                            const std::vector<ClaimShare>& shares,
                            const std::string& ceilings_file);

// The fully qualified CDI device id the kubelet passes to the runtime.
std::string ClaimCdiId(const std::string& uid);

// A claim UID as the API server makes them (RFC 4122 text: hex and '-'), so
// that it can name files and CDI devices.
bool ValidClaimUid(std::string_view uid);

}  // namespace vgpu::k8s
