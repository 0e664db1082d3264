// What the vgpu.io kubelet plugin needs from an allocated ResourceClaim
// (resource.k8s.io/v1, as GET .../namespaces/{ns}/resourceclaims/{name}
// returns it): the devices allocated to our driver with the capacity each
// share consumed, the driver's opaque parameters, and the pods it is reserved
// for. Pure parsing: no I/O.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace vgpu::k8s {

inline constexpr char kParametersApiVersion[] = "vgpu.io/v1alpha1";
inline constexpr char kParametersKind[] = "ClaimParameters";

struct ClaimDevice {
  std::string request, pool, device;
  std::string share_id;         // status.allocation.devices.results[].shareID; "" if absent
  int64_t memory_bytes = 0;     // consumedCapacity["memory"] (or "<driver>/memory"), 0 if absent
  int64_t compute_percent = 0;  // consumedCapacity["compute"], 0 if absent
};

// The opaque parameters ({"apiVersion": kParametersApiVersion, "kind":
// kParametersKind, ...}) in force for the claim.
struct ClaimParameters {
  std::string priority;  // "low" | "normal" | "high" | "" (unset)
  int weight = 0;        // 0 unset, else 1..100
  int share = 0;         // 0 unset, else 1..100: a cap in percent; may only lower the compute
  std::optional<bool> time_sliced;
};

struct PodRef {
  std::string name, uid;
};

struct ParsedClaim {
  std::string uid, ns, name;
  bool allocated = false;
  std::vector<ClaimDevice> devices;  // only results whose driver is ours
  ClaimParameters params;
  // The DeviceClass's entries (FromClass) alone: the admin's. The claim's own
  // entries are its author's, a tenant's, and may only lower these
  // (claim_files.h, ClaimCeilings).
  ClaimParameters class_params;
  std::vector<PodRef> pods;  // status.reservedFor entries of core "pods"
};

// Parses `obj` for `driver`. Opaque config entries of other drivers are
// ignored; ours apply class entries (source FromClass) before claim entries
// (FromClaim), each in list order, later keys overriding earlier ones. An
// entry whose `requests` names none of our results' requests (a name matches
// "req" and its subrequests "req/sub") is skipped: parameters are per claim,
// not per request.
//
// Errors: kInval for anything malformed (the message names the field; unknown
// parameter keys and values out of range included), kBusy when the claim is
// not allocated yet, kNoEnt when it is allocated but has no device of
// `driver` (the message names the drivers it has). `*out` is complete only on
// success.
Status ParseResourceClaim(const nlohmann::json& obj, std::string_view driver, ParsedClaim* out);

// The compute percent a share gets: what it consumed, lowered to the claim's
// share cap when one is set (a cap never raises it).
int EffectiveComputePercent(const ClaimDevice& device, const ClaimParameters& params);

}  // namespace vgpu::k8s
