// vgpuctl slurm gres: the node's gres.conf lines (gpu and shard), the
// slurm.conf Gres= hint and the plugstack.conf line of spank_vgpu.so, from
// the GPUs NVML lists (docs/slurm.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace vgpu::ctl::cli {

struct SlurmGresCommand {
  uint64_t shard_mem = 1ull << 30;
  uint32_t shard_compute_permille = 0;  // 0: not given
  double overcommit = 1.0;
  std::string dev_dir = "/dev";
  std::string libvgpu;  // default: <vgpuctl's dir>/../lib/libvgpu.so
  std::string plugin;   // default: <vgpuctl's dir>/../lib/spank_vgpu.so
};

// One GPU as gres.conf names it.
struct GresGpu {
  int index = 0;
  std::string uuid;
  uint64_t memory = 0;
};

// The text `vgpuctl slurm gres` prints for `gpus` (pure, for tests); an
// empty string and *error when a GPU holds no shard.
std::string GresText(const SlurmGresCommand& c, const std::vector<GresGpu>& gpus,
                     const std::string& node_name, std::string* error);

int SlurmGres(SlurmGresCommand c);

}  // namespace vgpu::ctl::cli
