#include "cluster/k8s/resource_slice.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace vgpu::k8s {
namespace {

using nlohmann::json;

constexpr uint64_t kGi = uint64_t{1} << 30;

std::vector<SliceGpu> TwoGpus() {
  return {{0, "GPU-0aa1b2c3-0000-4000-8000-000000000000", "NVIDIA H200", 9, 0, 141 * kGi, false},
          {1, "GPU-1bb1b2c3-0000-4000-8000-000000000001", "NVIDIA H200", 9, 0, 141 * kGi, true}};
}

SliceOptions Options() {
  SliceOptions o;
  o.node_name = "node-a";
  o.taint_time = "2025-09-01T10:00:00Z";
  return o;
}

TEST(ResourceSliceTest, BuildsTheV1Object) {
  json s = BuildResourceSlice(TwoGpus(), Options(), 3);
  EXPECT_EQ(s["apiVersion"], "resource.k8s.io/v1");
  EXPECT_EQ(s["kind"], "ResourceSlice");
  EXPECT_EQ(s["metadata"], json({{"name", "node-a-vgpu.io"}}));
  const json& spec = s["spec"];
  EXPECT_EQ(spec["driver"], "vgpu.io");
  EXPECT_EQ(spec["nodeName"], "node-a");
  EXPECT_EQ(spec["pool"], json({{"name", "node-a"}, {"generation", 3}, {"resourceSliceCount", 1}}));
  ASSERT_EQ(spec["devices"].size(), 2u);
  const json& d0 = spec["devices"][0];
  EXPECT_EQ(d0["name"], "gpu-0");
  EXPECT_EQ(d0["attributes"]["uuid"],
            json({{"string", "GPU-0aa1b2c3-0000-4000-8000-000000000000"}}));
  EXPECT_EQ(d0["attributes"]["productName"], json({{"string", "NVIDIA H200"}}));
  EXPECT_EQ(d0["attributes"]["index"], json({{"int", 0}}));
  EXPECT_EQ(d0["attributes"]["computeCapability"], json({{"version", "9.0.0"}}));
  EXPECT_EQ(d0["capacity"]["memory"],
            json::parse(R"({"value": "141Gi", "requestPolicy": {"default": "141Gi",
                            "validRange": {"min": "256Mi", "step": "256Mi"}}})"));
  EXPECT_EQ(d0["capacity"]["compute"],
            json::parse(R"({"value": "100", "requestPolicy": {"default": "100",
                            "validRange": {"min": "1", "max": "100", "step": "1"}}})"));
  EXPECT_EQ(d0["allowMultipleAllocations"], true);
  EXPECT_FALSE(d0.contains("taints"));
  EXPECT_EQ(spec["devices"][1]["taints"],
            json::parse(R"([{"key": "vgpu.io/drained", "value": "true", "effect": "NoSchedule",
                             "timeAdded": "2025-09-01T10:00:00Z"}])"));
}

TEST(ResourceSliceTest, OvercommitScalesAndRoundsToTheStep) {
  SliceOptions o = Options();
  o.memory_overcommit = 1.5;
  std::vector<SliceGpu> gpus = {{2, "GPU-x", "T4", 7, 5, (uint64_t{15095} << 20), false}};
  json s = BuildResourceSlice(gpus, o, 1);
  // 15095Mi × 1.5 = 22642.5Mi, down to a multiple of 256Mi: 22528Mi = 22Gi.
  EXPECT_EQ(s["spec"]["devices"][0]["capacity"]["memory"]["value"], "22Gi");
  EXPECT_EQ(s["spec"]["devices"][0]["attributes"]["computeCapability"]["version"], "7.5.0");
  EXPECT_EQ(s["spec"]["devices"][0]["name"], "gpu-2");
}

TEST(ResourceSliceTest, TinyGpuHasNoMemoryPolicy) {
  std::vector<SliceGpu> gpus = {{0, "GPU-t", "tiny", 8, 0, 300u << 20, false}};
  json mem = BuildResourceSlice(gpus, Options(), 1)["spec"]["devices"][0]["capacity"]["memory"];
  EXPECT_EQ(mem, json({{"value", "256Mi"}}));  // 256Mi + 256Mi would exceed it
}

TEST(ResourceSliceTest, LongStringsAreCutToTheApiLimit) {
  std::vector<SliceGpu> gpus = {{0, "GPU-u", std::string(100, 'p'), 8, 0, kGi, false}};
  json s = BuildResourceSlice(gpus, Options(), 1);
  EXPECT_EQ(
      s["spec"]["devices"][0]["attributes"]["productName"]["string"].get<std::string>().size(),
      64u);
}

TEST(ResourceSliceTest, OverlongNodeNamesGetAGeneratedName) {
  SliceOptions o = Options();
  o.node_name = std::string(250, 'n');
  json meta = BuildResourceSlice({}, o, 1)["metadata"];
  EXPECT_FALSE(meta.contains("name"));
  EXPECT_EQ(meta["generateName"], o.node_name + "-");
}

TEST(ResourceSliceTest, SpecEqualIgnoresGenerationAndTaintTime) {
  SliceOptions o = Options();
  json a = BuildResourceSlice(TwoGpus(), o, 1);
  o.taint_time = "2030-01-01T00:00:00Z";
  json b = BuildResourceSlice(TwoGpus(), o, 7);
  b["metadata"]["resourceVersion"] = "99";
  EXPECT_TRUE(SliceSpecEqual(a, b));
  EXPECT_TRUE(SliceSpecEqual(a["spec"], b));
  b["spec"]["devices"][1].erase("taints");  // the API fills timeAdded; we compare without
  EXPECT_FALSE(SliceSpecEqual(a, b));
  std::vector<SliceGpu> gpus = TwoGpus();
  gpus[1].drained = false;
  EXPECT_FALSE(SliceSpecEqual(a, BuildResourceSlice(gpus, o, 1)));
  gpus[1].drained = true;
  gpus[0].memory_bytes = 80 * kGi;
  EXPECT_FALSE(SliceSpecEqual(a, BuildResourceSlice(gpus, o, 1)));
  EXPECT_FALSE(SliceSpecEqual(a, json()));
  EXPECT_FALSE(SliceSpecEqual(json::array(), a));
}

}  // namespace
}  // namespace vgpu::k8s
