// The node's GPUs: index, UUID, physical memory used and total, through NVML
// (the driver's libnvidia-ml.so.1, or the simulated node's). For the tools
// that are not interposed (vgpud, vgpuctl cdi): these are the physical figures.
// Here, below them, so that both read the GPUs the same way.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace vgpu::driver {

struct GpuMemory {
  std::string uuid;
  int index = 0;
  uint64_t used = 0;
  uint64_t total = 0;
  uint64_t free() const { return used >= total ? 0 : total - used; }
};

// What a cluster scheduler is told about a GPU (cluster/k8s's ResourceSlice).
struct GpuModel {
  GpuMemory memory;
  std::string product;  // nvmlDeviceGetName; empty if NVML does not say
  int cc_major = 0;     // compute capability; 0.0 if NVML does not say
  int cc_minor = 0;
};

class NodeGpus {
 public:
  // Loads NVML (once); an error if it cannot be loaded or initialized.
  Status Init();
  // Every device's memory now; empty if NVML is unusable.
  std::vector<GpuMemory> Read() const;
  // One device's, by UUID; false if unknown.
  bool Read(const std::string& uuid, GpuMemory* out) const;
  // Every device's memory, product name and compute capability.
  std::vector<GpuModel> Models() const;

 private:
  bool ready_ = false;
};

}  // namespace vgpu::driver
