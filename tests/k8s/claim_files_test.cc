// The decision rules of a prepared claim: which vgpu priority a pod gets,
// what a claim may use of each GPU, what its ceilings file says, and the
// checkpoint's format.
#include "cluster/k8s/claim_files.h"

#include <gtest/gtest.h>

#include "cluster/k8s/prepared_claims.h"

namespace vgpu::k8s {
namespace {

TEST(ClaimPriorityTest, ThePodOrClassBoundsWhatTheClaimAsks) {
  PriorityRule rule{1000};
  ClaimParameters none, low{"low"}, high{"high"};
  EXPECT_EQ(ClaimPriority(none, none, std::nullopt, rule), "normal");
  EXPECT_EQ(ClaimPriority(none, none, 0, rule), "normal");
  EXPECT_EQ(ClaimPriority(none, none, 999, rule), "normal");
  EXPECT_EQ(ClaimPriority(none, none, 1000, rule), "high");
  EXPECT_EQ(ClaimPriority(none, none, 2000000000, rule), "high");
  EXPECT_EQ(ClaimPriority(none, none, -1, rule), "low");
  EXPECT_EQ(ClaimPriority(none, none, 10, PriorityRule{10}), "high");
  // The claim (a tenant's) may lower what the pod gives, never raise it.
  EXPECT_EQ(ClaimPriority(low, none, 2000000000, rule), "low");
  EXPECT_EQ(ClaimPriority(high, none, -5, rule), "low");
  EXPECT_EQ(ClaimPriority(high, none, 0, rule), "normal");
  // The DeviceClass's (the admin's) priority is the bound when it names one.
  EXPECT_EQ(ClaimPriority(high, high, -5, rule), "high");
  EXPECT_EQ(ClaimPriority(none, low, 2000000000, rule), "low");
  EXPECT_EQ(ClaimPriority(low, high, 0, rule), "low");
}

TEST(GpuDeviceNameTest, OneSpellingPerGpu) {
  int i = -1;
  EXPECT_EQ(GpuDeviceName(3), "gpu-3");
  EXPECT_TRUE(ParseGpuDeviceName("gpu-12", &i));
  EXPECT_EQ(i, 12);
  for (const char* bad : {"gpu-", "gpu-01", "gpu-1a", "GPU-1", "gpu--1", "gpu-99999", "x"}) {
    EXPECT_FALSE(ParseGpuDeviceName(bad, &i)) << bad;
  }
}

std::vector<NodeGpu> TwoGpus() {
  return {{0, "GPU-a", 16ull << 30, "/dev/nvidia0"}, {1, "GPU-b", 16ull << 30, ""}};
}

ParsedClaim OneClaim() {
  ParsedClaim c;
  c.uid = "1234-abcd";
  c.ns = "ns";
  c.name = "c";
  c.allocated = true;
  c.devices = {{"gpu", "node", "gpu-1", "", 8ll << 30, 30}};
  return c;
}

TEST(ClaimSharesTest, ConsumedCapacityOrTheWholeDevice) {
  ParsedClaim c = OneClaim();
  c.devices.push_back({"b", "node", "gpu-0", "", 0, 0});  // allocated whole
  std::vector<ClaimShare> shares;
  ASSERT_TRUE(ClaimShares(c, TwoGpus(), &shares).ok());
  ASSERT_EQ(shares.size(), 2u);
  EXPECT_EQ(shares[0].gpu.uuid, "GPU-b");
  EXPECT_EQ(shares[0].memory_bytes, 8ull << 30);
  EXPECT_EQ(shares[0].compute_percent, 30);
  EXPECT_EQ(shares[1].memory_bytes, 16ull << 30);
  EXPECT_EQ(shares[1].compute_percent, 100);
}

TEST(ClaimSharesTest, TwoSharesOfOneGpuAddUpWithinIt) {
  ParsedClaim c = OneClaim();
  c.devices.push_back({"b", "node", "gpu-1", "", 10ll << 30, 80});
  std::vector<ClaimShare> shares;
  ASSERT_TRUE(ClaimShares(c, TwoGpus(), &shares).ok());
  ASSERT_EQ(shares.size(), 1u);
  EXPECT_EQ(shares[0].memory_bytes, 16ull << 30);
  EXPECT_EQ(shares[0].compute_percent, 100);
}

TEST(ClaimSharesTest, ADeviceNotOnTheNodeIsAnError) {
  ParsedClaim c = OneClaim();
  c.devices[0].device = "gpu-2";
  std::vector<ClaimShare> shares;
  Status s = ClaimShares(c, TwoGpus(), &shares);
  EXPECT_EQ(s.code, ErrorCode::kNoEnt);
  EXPECT_NE(s.message.find("gpu-2"), std::string::npos);
  c.devices.clear();
  EXPECT_FALSE(ClaimShares(c, TwoGpus(), &shares).ok());
}

TEST(ClaimCeilingsTest, TheSmallestShareAndTheLowerCapApply) {
  ParsedClaim c = OneClaim();
  c.devices.push_back({"b", "node", "gpu-0", "", 1ll << 30, 60});
  std::vector<ClaimShare> shares;
  ASSERT_TRUE(ClaimShares(c, TwoGpus(), &shares).ok());
  PodInfo pod{"ns", "p", 5};
  auto j = ClaimCeilings(c, shares, &pod, PriorityRule{});
  EXPECT_EQ(j["group"], "claim-1234-abcd");
  EXPECT_EQ(j["visible_devices"], "GPU-b,GPU-a");
  EXPECT_EQ(j["device_memory_limit"],
            std::to_string(8ull << 30) + "," + std::to_string(1ull << 30));
  EXPECT_EQ(j["compute_share"], "30");
  EXPECT_EQ(j["compute_weight"], "1");
  EXPECT_EQ(j["priority"], "normal");
  EXPECT_EQ(j["pod"], "ns/p");
  EXPECT_FALSE(j.contains("preemptible"));
  c.params.share = 20;
  c.params.time_sliced = false;
  c.params.weight = 5;
  j = ClaimCeilings(c, shares, nullptr, PriorityRule{});
  EXPECT_EQ(j["compute_share"], "20");
  // A claim's own weight and exemption from time-slicing are above what no
  // class granted: weight 1, preemptible.
  EXPECT_EQ(j["compute_weight"], "1");
  EXPECT_FALSE(j.contains("preemptible"));
  c.class_params.time_sliced = false;
  c.class_params.weight = 3;
  j = ClaimCeilings(c, shares, nullptr, PriorityRule{});
  EXPECT_EQ(j["compute_weight"], "3");
  EXPECT_EQ(j["preemptible"], "false");
  EXPECT_FALSE(j.contains("pod"));
  c.params.share = 90;  // a share parameter never raises what was scheduled
  EXPECT_EQ(ClaimCeilings(c, shares, nullptr, PriorityRule{})["compute_share"], "30");
}

TEST(ClaimCdiSpecTest, OnlyTheClaimsGpusAndTheHookGetsTheCeilings) {
  cdi::Inventory inv;
  inv.libvgpu = "/opt/vgpu/lib/libvgpu.so";
  inv.libcuda = "/usr/lib/libcuda.so.1";
  inv.hook = "/opt/vgpu/bin/vgpu-oci-hook";
  inv.gpus = {{0, "GPU-a", "/dev/nvidia0"}, {1, "GPU-b", "/dev/nvidia1"}};
  std::vector<ClaimShare> shares;
  ASSERT_TRUE(ClaimShares(OneClaim(), TwoGpus(), &shares).ok());
  auto spec = ClaimCdiSpec(inv, "1234-abcd", shares, "/run/vgpu/claims/1234-abcd/limits.json");
  ASSERT_TRUE(cdi::ValidateSpec(spec).ok()) << cdi::ValidateSpec(spec).message;
  EXPECT_EQ(spec["kind"], "vgpu.io/claim");
  ASSERT_EQ(spec["devices"].size(), 1u);
  EXPECT_EQ(spec["devices"][0]["containerEdits"]["env"][0], "VGPU_VISIBLE_DEVICES=GPU-b");
  EXPECT_FALSE(spec["devices"][0]["containerEdits"].contains("deviceNodes"));  // gpu-1 has none
  std::string args = spec["containerEdits"]["hooks"][0]["args"].dump();
  EXPECT_NE(args.find("\"--claim\",\"/run/vgpu/claims/1234-abcd/limits.json\""), std::string::npos);
  EXPECT_EQ(ClaimCdiId("1234-abcd"), "vgpu.io/claim=1234-abcd");
}

TEST(ClaimUidTest, OnlyUuidText) {
  EXPECT_TRUE(ValidClaimUid("0b6ea3e2-3c0e-4c55-9d1c-1a2b3c4d5e01"));
  for (const char* bad : {"", "../x", "a/b", "0b6ea3e2 3c0e", "zz"})
    EXPECT_FALSE(ValidClaimUid(bad));
}

TEST(PreparedClaimsTest, RoundTripsAndRefusesGarbage) {
  std::map<std::string, PreparedClaim> m;
  m["u1"] = {"u1", "ns", "c", {{{"gpu"}, "node", "gpu-0", {"vgpu.io/claim=u1"}}}};
  std::map<std::string, PreparedClaim> back;
  ASSERT_TRUE(PreparedClaims::Parse(PreparedClaims::Serialize(m), &back).ok());
  EXPECT_EQ(back, m);
  for (const char* bad : {"", "{", "[]", "{\"version\":2,\"claims\":{}}",
                          "{\"version\":1,\"claims\":{\"u\":{\"namespace\":1}}}"}) {
    EXPECT_FALSE(PreparedClaims::Parse(bad, &back).ok()) << bad;
    EXPECT_TRUE(back.empty());
  }
}

}  // namespace
}  // namespace vgpu::k8s
