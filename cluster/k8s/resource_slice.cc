#include "cluster/k8s/resource_slice.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <ctime>

#include "cluster/k8s/quantity.h"

namespace vgpu::k8s {
namespace {

using nlohmann::json;

constexpr size_t kMaxObjectName = 253;      // a DNS subdomain
constexpr size_t kMaxAttributeString = 64;  // DeviceAttribute string and version values

std::string NowRfc3339() {
  std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

int64_t AdvertisedMemory(uint64_t physical, const SliceOptions& options) {
  long double bytes = static_cast<long double>(physical) * options.memory_overcommit;
  constexpr long double kMax = static_cast<long double>(INT64_MAX / 2);
  int64_t v = bytes <= 0 ? 0 : static_cast<int64_t>(std::floor(std::min(bytes, kMax)));
  int64_t step = std::max<int64_t>(options.memory_step, 1);
  return v / step * step;
}

json Range(const std::string& min, const std::string& max, const std::string& step) {
  json range = {{"min", min}, {"step", step}};
  if (!max.empty()) range["max"] = max;
  return range;
}

json MemoryCapacity(int64_t bytes, const SliceOptions& options) {
  json capacity = {{"value", FormatBytes(bytes)}};
  // The API wants min + step <= value; a GPU too small for that is still
  // published, with unconstrained requests.
  if (options.min_memory > 0 && options.memory_step > 0 &&
      options.min_memory + options.memory_step <= bytes && options.min_memory <= bytes) {
    capacity["requestPolicy"] = {{"default", FormatBytes(bytes)},
                                 {"validRange", Range(FormatBytes(options.min_memory), "",
                                                      FormatBytes(options.memory_step))}};
  }
  return capacity;
}

json ComputeCapacity() {
  return {{"value", "100"},
          {"requestPolicy", {{"default", "100"}, {"validRange", Range("1", "100", "1")}}}};
}

json Device(const SliceGpu& gpu, const SliceOptions& options, const std::string& taint_time) {
  std::string version = std::to_string(std::max(gpu.cc_major, 0)) + "." +
                        std::to_string(std::max(gpu.cc_minor, 0)) + ".0";
  json device = {
      {"name", GpuDeviceName(gpu.index)},
      {"attributes",
       {{"uuid", {{"string", gpu.uuid.substr(0, kMaxAttributeString)}}},
        {"productName", {{"string", gpu.product.substr(0, kMaxAttributeString)}}},
        {"index", {{"int", gpu.index}}},
        {"computeCapability", {{"version", version}}}}},
      {"capacity",
       {{"memory", MemoryCapacity(AdvertisedMemory(gpu.memory_bytes, options), options)},
        {"compute", ComputeCapacity()}}},
      {"allowMultipleAllocations", true},
  };
  if (gpu.drained) {
    device["taints"] = json::array({{{"key", kDrainedTaintKey},
                                     {"value", "true"},
                                     {"effect", "NoSchedule"},
                                     {"timeAdded", taint_time}}});
  }
  return device;
}

json Metadata(const SliceOptions& options) {
  std::string name = options.node_name + "-" + options.driver;
  if (name.size() <= kMaxObjectName) return {{"name", name}};
  // The API server cuts a long generateName itself before adding its suffix.
  return {{"generateName", options.node_name + "-"}};
}

// A slice's spec without what changes on every write.
json Comparable(const json& slice) {
  json spec = slice.contains("spec") ? slice["spec"] : slice;
  if (!spec.is_object()) return spec;
  if (spec.contains("pool") && spec["pool"].is_object()) spec["pool"].erase("generation");
  if (!spec.contains("devices") || !spec["devices"].is_array()) return spec;
  for (json& device : spec["devices"]) {
    if (!device.is_object() || !device.contains("taints") || !device["taints"].is_array()) continue;
    for (json& taint : device["taints"]) {
      if (taint.is_object()) taint.erase("timeAdded");
    }
  }
  return spec;
}

}  // namespace

json BuildResourceSlice(const std::vector<SliceGpu>& gpus, const SliceOptions& options,
                        int64_t pool_generation) {
  std::string taint_time = options.taint_time.empty() ? NowRfc3339() : options.taint_time;
  json devices = json::array();
  for (const SliceGpu& gpu : gpus) devices.push_back(Device(gpu, options, taint_time));
  return {
      {"apiVersion", "resource.k8s.io/v1"},
      {"kind", "ResourceSlice"},
      {"metadata", Metadata(options)},
      {"spec",
       {{"driver", options.driver},
        {"nodeName", options.node_name},
        {"pool",
         {{"name", options.node_name}, {"generation", pool_generation}, {"resourceSliceCount", 1}}},
        {"devices", std::move(devices)}}}};
}

bool SliceSpecEqual(const json& a, const json& b) { return Comparable(a) == Comparable(b); }

std::string GpuDeviceName(int index) { return "gpu-" + std::to_string(index); }

bool ParseGpuDeviceName(std::string_view name, int* index) {
  constexpr std::string_view kPrefix = "gpu-";
  if (!name.starts_with(kPrefix)) return false;
  std::string_view digits = name.substr(kPrefix.size());
  // "gpu-01" is not a name we publish: exactly one spelling per GPU.
  if (digits.empty() || digits.size() > 4 || (digits.size() > 1 && digits[0] == '0') ||
      digits.find_first_not_of("0123456789") != std::string_view::npos) {
    return false;
  }
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), *index);
  return ec == std::errc() && end == digits.data() + digits.size();
}

}  // namespace vgpu::k8s
