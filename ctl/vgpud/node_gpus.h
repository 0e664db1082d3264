// The node's GPUs as vgpud sees them: physical memory used and total per
// device UUID, through NVML (the driver's libnvidia-ml.so.1, or the simulated
// node's). vgpud is not interposed: these are the physical figures.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace vgpu::vgpud {

struct GpuMemory {
  std::string uuid;
  int index = 0;
  uint64_t used = 0;
  uint64_t total = 0;
  uint64_t free() const { return used >= total ? 0 : total - used; }
};

class NodeGpus {
 public:
  // Loads NVML (once); an error if it cannot be loaded or initialized.
  Status Init();
  // Every device's memory now; empty if NVML is unusable.
  std::vector<GpuMemory> Read() const;
  // One device's, by UUID; false if unknown.
  bool Read(const std::string& uuid, GpuMemory* out) const;

 private:
  bool ready_ = false;
};

}  // namespace vgpu::vgpud
