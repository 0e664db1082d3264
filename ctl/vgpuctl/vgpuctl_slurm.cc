#include "ctl/vgpuctl/vgpuctl_slurm.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "common/byte_size.h"
#include "common/parse.h"
#include "ctl/cdi/cdi_host.h"
#include "ctl/vgpuctl/vgpuctl_cli.h"
#include "driver/node_gpus.h"

namespace vgpu::ctl::cli {
namespace {

int Fail(const std::string& message) {
  std::fprintf(stderr, "vgpuctl slurm: %s\n", message.c_str());
  return kExitFailed;
}

std::string Normal(const std::string& path) {
  return std::filesystem::path(path).lexically_normal().string();
}

std::string ShortHostName() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "<node>";
  std::string s = name;
  return s.substr(0, s.find('.'));
}

}  // namespace

std::string GresText(const SlurmGresCommand& c, const std::vector<GresGpu>& gpus,
                     const std::string& node_name, std::string* error) {
  std::string out = "# gres.conf for " + node_name +
                    " (vgpuctl slurm gres): " + std::to_string(gpus.size()) + " GPUs, shards of " +
                    FormatByteSize(c.shard_mem) + "\n";
  if (c.overcommit > 1.0) {
    char f[32];
    std::snprintf(f, sizeof f, "%g", c.overcommit);
    out += std::string("# --overcommit ") + f +
           ": more shards than device memory; the node needs vgpud to time-slice the GPUs' "
           "memory (docs/vgpud.md)\n";
  }
  std::string devices, file_lines, shard_lines;
  uint64_t total_shards = 0;
  for (const GresGpu& g : gpus) {
    const std::string file = Normal(c.dev_dir + "/nvidia" + std::to_string(g.index));
    const auto shards = static_cast<uint64_t>(
        std::floor(static_cast<long double>(g.memory) * c.overcommit / c.shard_mem));
    if (shards == 0) {
      *error = "GPU " + std::to_string(g.index) + " has " + FormatByteSize(g.memory) +
               ", less than one shard of " + FormatByteSize(c.shard_mem);
      return "";
    }
    total_shards += shards;
    file_lines += "Name=gpu File=" + file + "\n";
    shard_lines += "Name=shard Count=" + std::to_string(shards) + " File=" + file + "\n";
    devices += (devices.empty() ? "" : ",") + g.uuid;
  }
  out += file_lines + shard_lines;
  out += "# slurm.conf: GresTypes=gpu,shard\n";
  out += "# slurm.conf: NodeName=" + node_name + " Gres=gpu:" + std::to_string(gpus.size()) +
         ",shard:" + std::to_string(total_shards) + "\n";
  out += "# plugstack.conf:\n# required " + c.plugin + " lib=" + c.libvgpu +
         " shard_mem=" + std::to_string(c.shard_mem);
  if (c.shard_compute_permille > 0) {
    std::string pct = FormatPercent(c.shard_compute_permille);
    out += " shard_compute=" + pct.substr(0, pct.size() - 1);
  }
  out += " devices=" + devices + "\n";
  return out;
}

int SlurmGres(SlurmGresCommand c) {
  const std::string exe_dir = cdi::RunningExeDir();
  if (c.libvgpu.empty()) c.libvgpu = Normal(exe_dir + "/../lib/libvgpu.so");
  if (c.plugin.empty()) c.plugin = Normal(exe_dir + "/../lib/spank_vgpu.so");
  driver::NodeGpus nvml;
  if (Status st = nvml.Init(); !st.ok()) {
    return Fail("cannot list the GPUs through NVML: " + st.message);
  }
  std::vector<GresGpu> gpus;
  for (const driver::GpuMemory& g : nvml.Read()) gpus.push_back({g.index, g.uuid, g.total});
  if (gpus.empty()) return Fail("NVML lists no GPU");
  // slurmd stats every File= at its start: a missing one is the node's error now.
  for (const GresGpu& g : gpus) {
    const std::string file = c.dev_dir + "/nvidia" + std::to_string(g.index);
    struct stat st {};
    if (stat(file.c_str(), &st) != 0) {
      return Fail(file + " does not exist (the GPU's device node; --dev-dir DIR)");
    }
    // slurmd drops such a File= ("not a valid character or block device"):
    // its jobs then get no SLURM_JOB_GPUS, and the plugin refuses them.
    if (!S_ISCHR(st.st_mode) && !S_ISBLK(st.st_mode)) {
      std::fprintf(stderr, "vgpuctl slurm: warning: %s is not a device node: slurmd ignores it\n",
                   file.c_str());
    }
  }
  std::string error;
  const std::string text = GresText(c, gpus, ShortHostName(), &error);
  if (text.empty()) return Fail(error);
  return std::fputs(text.c_str(), stdout) < 0 ? kExitFailed : kExitOk;
}

}  // namespace vgpu::ctl::cli
