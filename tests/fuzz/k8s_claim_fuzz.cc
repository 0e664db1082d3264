// Fuzz target for what the DRA plugin reads from outside (cluster/k8s): the
// ResourceClaim objects of the API server, resource.Quantity strings in them,
// and its own checkpoint file (which a crash or a full disk may have cut).
// The first byte picks the parser. Self-contradictions fail:
// - an accepted claim without a UID or devices, or with negative capacity;
// - an accepted claim whose ceilings or CDI spec (for a fixed node of two GPUs)
//   do not validate;
// - an accepted checkpoint that does not read back equal after writing it;
// - a quantity that formats and parses back to another value.
//
// Built without libFuzzer it is a regression runner over k8s_corpus/: inputs
// must only not crash (and meet the rules above).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "cluster/k8s/claim_files.h"
#include "cluster/k8s/prepared_claims.h"
#include "cluster/k8s/quantity.h"
#include "cluster/k8s/resource_claim.h"
#include "tests/fuzz/fuzz_regression.h"

namespace k8s = vgpu::k8s;

namespace {

std::string CheckClaim(const std::string& text) {
  nlohmann::json obj = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (obj.is_discarded()) return "";
  k8s::ParsedClaim c;
  if (!k8s::ParseResourceClaim(obj, k8s::kDriverName, &c).ok()) return "";
  if (c.uid.empty() || c.devices.empty()) return "accepted without a UID or devices";
  for (const k8s::ClaimDevice& d : c.devices) {
    if (d.memory_bytes < 0 || d.compute_percent < 0) return "negative capacity accepted";
  }
  std::vector<k8s::NodeGpu> node = {{0, "GPU-a", 16ull << 30, ""}, {1, "GPU-b", 16ull << 30, ""}};
  std::vector<k8s::ClaimShare> shares;
  if (!k8s::ClaimShares(c, node, &shares).ok()) return "";
  vgpu::cdi::Inventory inv;
  inv.libvgpu = "/opt/vgpu/lib/libvgpu.so";
  inv.libcuda = "/usr/lib/libcuda.so.1";
  inv.hook = "/opt/vgpu/bin/vgpu-oci-hook";
  nlohmann::json ceilings = k8s::ClaimCeilings(c, shares, nullptr, k8s::PriorityRule{});
  if (!ceilings.is_object() || ceilings.value("group", "").empty())
    return "ceilings without a group";
  // A UID that cannot name a file is refused before any of this runs.
  if (!k8s::ValidClaimUid(c.uid)) return "";
  nlohmann::json spec = k8s::ClaimCdiSpec(inv, c.uid, shares, "/run/vgpu/claims/x/limits.json");
  if (vgpu::Status s = vgpu::cdi::ValidateSpec(spec); !s.ok())
    return "invalid CDI spec: " + s.message;
  return "";
}

std::string CheckCheckpoint(const std::string& text) {
  std::map<std::string, k8s::PreparedClaim> m, back;
  if (!k8s::PreparedClaims::Parse(text, &m).ok()) return "";
  if (!k8s::PreparedClaims::Parse(k8s::PreparedClaims::Serialize(m), &back).ok() || back != m) {
    return "checkpoint does not read back";
  }
  return "";
}

std::string CheckQuantity(const std::string& text) {
  int64_t v = 0, again = 0;
  if (!k8s::ParseQuantity(text, &v).ok()) return "";
  if (v < 0) return "negative quantity accepted";
  if (!k8s::ParseQuantity(k8s::FormatBytes(v), &again).ok() || again != v) {
    return "quantity does not format back: " + k8s::FormatBytes(v);
  }
  return "";
}

std::string Check(const uint8_t* data, size_t size) {
  if (size == 0) return "";
  std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] % 3) {
    case 0:
      return CheckClaim(text);
    case 1:
      return CheckCheckpoint(text);
    default:
      return CheckQuantity(text);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (const std::string v = Check(data, size); !v.empty()) {
    std::fprintf(stderr, "%s\n", v.c_str());
    std::abort();
  }
  return 0;
}

#ifndef VGPU_LIBFUZZER
int main(int argc, char** argv) {
  return vgpu::fuzz::RunRegression(argc, argv,
                                   [](const std::string&, const std::vector<uint8_t>& in) {
                                     return Check(in.data(), in.size());
                                   });
}
#endif
