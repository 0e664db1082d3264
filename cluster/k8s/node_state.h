// What the plugin publishes about this node: its GPUs (NVML) and, from
// vgpud, which are drained and whether vgpud time-slices devices whose jobs
// do not fit (which decides the memory advertised).
#pragma once

#include <string>
#include <vector>

#include "cluster/k8s/claim_files.h"
#include "cluster/k8s/resource_slice.h"
#include "common/status.h"
#include "driver/node_gpus.h"

namespace vgpu::k8s {

struct NodeState {
  std::vector<driver::GpuModel> gpus;
  std::vector<std::string> drained;  // UUIDs
  bool vgpud = false;                // vgpud answered
  bool oversubscribe = false;        // vgpud time-slices (only when it answered)
  bool operator==(const NodeState& o) const;
};

// NVML must answer; vgpud not answering leaves drained empty and
// oversubscribe false (the physical memory is advertised), with *warning.
Status ReadNodeState(const driver::NodeGpus& nvml, const std::string& run_dir, NodeState* out,
                     std::string* warning);

// The slice's GPUs.
std::vector<SliceGpu> SliceGpus(const NodeState& s);
// The claims' view of the same GPUs (device nodes from `dev_dir` if there).
std::vector<NodeGpu> ClaimGpus(const std::vector<driver::GpuModel>& gpus,
                               const std::string& dev_dir);

// Advertised memory: the physical memory times `overcommit` when vgpud
// time-slices, else the physical memory (an allocation past it would fail).
double EffectiveOvercommit(const NodeState& s, double overcommit);

}  // namespace vgpu::k8s
