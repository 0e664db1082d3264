// The node's ResourceSlice (resource.k8s.io/v1, Kubernetes 1.34 with
// DRAConsumableCapacity, KEP-5075): one device per GPU that many claims may
// share, each consuming some of its "memory" and "compute" capacity. Pure:
// builds and compares JSON; publishing is kube_client.h's SlicePublisher.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace vgpu::k8s {

inline constexpr char kDriverName[] = "vgpu.io";
// The taint a drained GPU carries: new claims stay off it, running ones stay.
inline constexpr char kDrainedTaintKey[] = "vgpu.io/drained";
// A slice whose devices carry taints may hold at most this many devices.
inline constexpr size_t kMaxDevicesWithTaints = 64;

// GPU `index` is the slice's device "gpu-<index>"; the inverse accepts
// exactly that spelling (what a claim's allocation result names).
std::string GpuDeviceName(int index);
bool ParseGpuDeviceName(std::string_view name, int* index);

struct SliceGpu {
  int index = 0;  // the node's device index: the device is "gpu-<index>"
  std::string uuid, product;
  int cc_major = 0, cc_minor = 0;
  uint64_t memory_bytes = 0;  // physical
  bool drained = false;
};

struct SliceOptions {
  std::string driver = kDriverName;
  std::string node_name;
  // Advertised memory = physical × memory_overcommit. Above 1 only when vgpud
  // time-slices the GPU (jobs whose memory does not fit together take turns);
  // the caller decides, this code does not check.
  double memory_overcommit = 1.0;
  // Request policy of "memory": a request consumes at least min_memory, in
  // steps of memory_step; advertised memory is rounded down to a step so that
  // the default (the whole device) is a valid amount.
  int64_t min_memory = int64_t{256} << 20;
  int64_t memory_step = int64_t{256} << 20;
  // RFC 3339 time written as a new taint's timeAdded; empty: now.
  std::string taint_time;
};

// The ResourceSlice for `gpus` at `pool_generation`. Named "<node>-<driver>"
// (deterministic: a second publisher, or one restarted after a crash,
// collides with 409 on create instead of adding a duplicate slice that
// consumers would see as a broken pool); when that exceeds the 253 characters
// of an object name, metadata.generateName "<node>-" instead.
//
// Each GPU: attributes uuid, productName (strings, cut to the API's 64
// characters), index (int), computeCapability (version "M.m.0");
// capacity memory {value, requestPolicy default = all of it, validRange
// {min, step}} and compute {"100", default 100, validRange 1..100 step 1};
// allowMultipleAllocations; a drained GPU a NoSchedule taint kDrainedTaintKey.
// A claim that asks for no capacity thus gets the whole GPU, as a classic
// device plugin would give it.
nlohmann::json BuildResourceSlice(const std::vector<SliceGpu>& gpus, const SliceOptions& options,
                                  int64_t pool_generation);

// Whether two slices (objects or their specs) publish the same thing: their
// specs are equal once pool.generation and the taints' timeAdded are ignored.
bool SliceSpecEqual(const nlohmann::json& a, const nlohmann::json& b);

}  // namespace vgpu::k8s
