#include "cluster/k8s/resource_claim.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>

namespace vgpu::k8s {
namespace {

using nlohmann::json;

json Fixture(const std::string& name) {
  std::ifstream in(std::string(VGPU_K8S_FIXTURES) + "/" + name);
  json j = json::parse(in, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << name;
  return j;
}

TEST(ResourceClaimTest, TwoRequestsWithSharesConfigAndAPod) {
  ParsedClaim c;
  Status st = ParseResourceClaim(Fixture("claim_two_requests.json"), "vgpu.io", &c);
  ASSERT_TRUE(st.ok()) << st.message;
  EXPECT_EQ(c.uid, "4a1c2d9e-51f0-4d7b-9f63-0c1e7a2b8d10");
  EXPECT_EQ(c.ns, "ml");
  EXPECT_EQ(c.name, "trainer-gpu");
  EXPECT_TRUE(c.allocated);
  ASSERT_EQ(c.devices.size(), 2u);
  EXPECT_EQ(c.devices[0].request, "big");
  EXPECT_EQ(c.devices[0].pool, "node-a");
  EXPECT_EQ(c.devices[0].device, "gpu-0");
  EXPECT_EQ(c.devices[0].share_id, "0b6f8c1e-3d2a-4f5b-8e7c-9a1d2c3b4e5f");
  EXPECT_EQ(c.devices[0].memory_bytes, int64_t{6} << 30);
  EXPECT_EQ(c.devices[0].compute_percent, 40);
  EXPECT_EQ(c.devices[1].request, "small/half");
  EXPECT_EQ(c.devices[1].memory_bytes, int64_t{1536} << 20);  // under "vgpu.io/memory"
  EXPECT_EQ(c.devices[1].compute_percent, 100);
  // The class said normal, time-sliced, weight 10; the claim's weight 30 wins.
  EXPECT_EQ(c.params.priority, "normal");
  EXPECT_EQ(c.params.weight, 30);
  EXPECT_EQ(c.params.share, 25);
  ASSERT_TRUE(c.params.time_sliced.has_value());
  EXPECT_TRUE(*c.params.time_sliced);
  // The class's entries alone, the admin's bound on the claim's (ClaimCeilings).
  EXPECT_EQ(c.class_params.weight, 10);
  EXPECT_EQ(c.class_params.share, 0);
  EXPECT_EQ(c.class_params.priority, "normal");
  ASSERT_EQ(c.pods.size(), 1u);  // the batch/jobs entry is not a pod
  EXPECT_EQ(c.pods[0].name, "trainer-0");
  EXPECT_EQ(c.pods[0].uid, "9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c6b");
  EXPECT_EQ(EffectiveComputePercent(c.devices[0], c.params), 25);
  EXPECT_EQ(EffectiveComputePercent(c.devices[1], c.params), 25);
}

TEST(ResourceClaimTest, ClassConfigAppliesBeforeClaimConfigWhateverTheListOrder) {
  json obj = Fixture("claim_two_requests.json");
  json& config = obj["status"]["allocation"]["devices"]["config"];
  std::swap(config[0], config[1]);
  ParsedClaim c;
  ASSERT_TRUE(ParseResourceClaim(obj, "vgpu.io", &c).ok());
  EXPECT_EQ(c.params.weight, 30);
}

TEST(ResourceClaimTest, ConfigForOtherRequestsOnlyIsSkipped) {
  json obj = Fixture("claim_two_requests.json");
  json& config = obj["status"]["allocation"]["devices"]["config"];
  config[1]["requests"] = {"nic"};
  ParsedClaim c;
  ASSERT_TRUE(ParseResourceClaim(obj, "vgpu.io", &c).ok());
  EXPECT_EQ(c.params.weight, 10);
  EXPECT_EQ(c.params.share, 0);
  config[1]["requests"] = {"small"};  // the main request covers "small/half"
  ASSERT_TRUE(ParseResourceClaim(obj, "vgpu.io", &c).ok());
  EXPECT_EQ(c.params.weight, 30);
}

TEST(ResourceClaimTest, AnotherDriversClaimSaysWhose) {
  ParsedClaim c;
  Status st = ParseResourceClaim(Fixture("claim_other_driver.json"), "vgpu.io", &c);
  EXPECT_EQ(st.code, ErrorCode::kNoEnt);
  EXPECT_NE(st.message.find("nic.example.com"), std::string::npos) << st.message;
  EXPECT_NE(st.message.find("ml/nic"), std::string::npos) << st.message;
  EXPECT_TRUE(ParseResourceClaim(Fixture("claim_other_driver.json"), "nic.example.com", &c).ok());
}

TEST(ResourceClaimTest, UnallocatedIsRefused) {
  ParsedClaim c;
  c.name = "untouched";
  Status st = ParseResourceClaim(Fixture("claim_unallocated.json"), "vgpu.io", &c);
  EXPECT_EQ(st.code, ErrorCode::kBusy);
  EXPECT_NE(st.message.find("not allocated"), std::string::npos) << st.message;
  EXPECT_EQ(c.name, "untouched");
}

// Each mutation of the good fixture must fail with kInval naming `field`.
struct Broken {
  const char* pointer;  // JSON pointer into the fixture
  json value;
  const char* field;
};

TEST(ResourceClaimTest, MalformedClaimsNameTheField) {
  const std::string kParams = "/status/allocation/devices/config/1/opaque/parameters";
  const Broken kBroken[] = {
      {"/metadata/uid", 7, "metadata.uid"},
      {"/status/allocation/devices/results", "x", "results"},
      {"/status/allocation/devices/results/0/device", nullptr, "device"},
      {"/status/allocation/devices/results/0/consumedCapacity/memory", "6GB", "memory"},
      {"/status/allocation/devices/results/0/consumedCapacity/compute", 40, "compute"},
      {"/status/allocation/devices/results/1/consumedCapacity/memory", "1Gi", "memory"},
      {"/status/allocation/devices/config/0/source", "FromNowhere", "source"},
      {"/status/allocation/devices/config/1/requests", "big", "requests"},
      {"/status/reservedFor/0/uid", nullptr, "uid"},
  };
  for (const Broken& b : kBroken) {
    json obj = Fixture("claim_two_requests.json");
    if (b.value.is_null()) {
      json::json_pointer p(b.pointer);
      obj[p.parent_pointer()].erase(p.back());
    } else {
      obj[json::json_pointer(b.pointer)] = b.value;
    }
    ParsedClaim c;
    Status st = ParseResourceClaim(obj, "vgpu.io", &c);
    EXPECT_EQ(st.code, ErrorCode::kInval) << b.pointer;
    EXPECT_NE(st.message.find(b.field), std::string::npos) << b.pointer << ": " << st.message;
  }
}

TEST(ResourceClaimTest, BadParametersNameTheKey) {
  const std::pair<const char*, json> kBad[] = {
      {"priority", "urgent"}, {"priority", 1},   {"weight", 0},
      {"weight", 101},        {"weight", 1.5},   {"share", "50"},
      {"timeSliced", "yes"},  {"colour", "red"}, {"apiVersion", "vgpu.io/v2"},
      {"kind", "Pod"},
  };
  for (const auto& [key, value] : kBad) {
    json obj = Fixture("claim_two_requests.json");
    obj["status"]["allocation"]["devices"]["config"][1]["opaque"]["parameters"][key] = value;
    ParsedClaim c;
    Status st = ParseResourceClaim(obj, "vgpu.io", &c);
    EXPECT_EQ(st.code, ErrorCode::kInval) << key << "=" << value.dump();
    EXPECT_NE(st.message.find(std::string("parameters.") + key), std::string::npos) << st.message;
  }
  json obj = Fixture("claim_two_requests.json");
  obj["status"]["allocation"]["devices"]["config"][1]["opaque"]["parameters"].erase("kind");
  ParsedClaim c;
  EXPECT_EQ(ParseResourceClaim(obj, "vgpu.io", &c).code, ErrorCode::kInval);
  // Another driver's parameters are its business, however odd.
  obj = Fixture("claim_two_requests.json");
  obj["status"]["allocation"]["devices"]["config"][2]["opaque"]["parameters"] = "???";
  EXPECT_TRUE(ParseResourceClaim(obj, "vgpu.io", &c).ok());
}

TEST(ResourceClaimTest, NonObjectsAreErrorsNotExceptions) {
  ParsedClaim c;
  for (const json& j : {json(), json(3), json::array(), json::object(),
                        json::parse(R"({"metadata": {"name": "a", "namespace": "b", "uid": "c"},
                                       "status": {"allocation": []}})")}) {
    EXPECT_FALSE(ParseResourceClaim(j, "vgpu.io", &c).ok()) << j.dump();
  }
}

TEST(ResourceClaimTest, EffectiveComputeOnlyLowers) {
  ClaimDevice d;
  ClaimParameters p;
  EXPECT_EQ(EffectiveComputePercent(d, p), 100);  // not consumable: the whole GPU
  d.compute_percent = 30;
  EXPECT_EQ(EffectiveComputePercent(d, p), 30);
  p.share = 50;
  EXPECT_EQ(EffectiveComputePercent(d, p), 30);
  p.share = 20;
  EXPECT_EQ(EffectiveComputePercent(d, p), 20);
}

}  // namespace
}  // namespace vgpu::k8s
