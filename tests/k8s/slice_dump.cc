// Writes BuildResourceSlice's output for a few GPU sets into DIR, one file
// each, for validate_slices.py to check against the v1 schema.
//
//   k8s_slice_dump DIR
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "cluster/k8s/resource_slice.h"

namespace {

using vgpu::k8s::SliceGpu;
using vgpu::k8s::SliceOptions;

constexpr uint64_t kMi = uint64_t{1} << 20;

std::vector<SliceGpu> Node(int n, bool drain_odd) {
  std::vector<SliceGpu> gpus;
  for (int i = 0; i < n; ++i) {
    char uuid[64];
    std::snprintf(uuid, sizeof uuid, "GPU-%08x-0000-4000-8000-%012x", i, i);
    gpus.push_back({i, uuid, "NVIDIA H100 80GB HBM3", 9, 0, 81559 * kMi, drain_odd && i % 2});
  }
  return gpus;
}

bool Write(const std::string& dir, const std::string& name, const std::vector<SliceGpu>& gpus,
           const SliceOptions& options, int64_t generation) {
  std::ofstream out(dir + "/" + name + ".json");
  out << vgpu::k8s::BuildResourceSlice(gpus, options, generation).dump(2) << "\n";
  return static_cast<bool>(out);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  std::string dir = argv[1];
  SliceOptions options;
  options.node_name = "gpu-node-7.example.internal";
  bool ok = Write(dir, "plain", Node(2, false), options, 1);
  ok = ok && Write(dir, "drained", Node(4, true), options, 12);
  ok = ok && Write(dir, "empty", {}, options, 3);
  ok = ok && Write(dir, "max_tainted", Node(vgpu::k8s::kMaxDevicesWithTaints, true), options, 2);
  options.memory_overcommit = 2.5;
  options.taint_time = "2025-10-01T08:30:00Z";
  ok = ok && Write(dir, "overcommit", Node(3, true), options, 7);
  options.memory_overcommit = 1.0;
  ok = ok && Write(dir, "tiny", {{0, "GPU-t", "Tiny", 7, 5, 300 * kMi, false}}, options, 1);
  if (!ok) std::fprintf(stderr, "cannot write into %s\n", dir.c_str());
  return ok ? 0 : 1;
}
