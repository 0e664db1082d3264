// vgpuctl cdi: writes the node's CDI spec and lists the devices of specs
// (docs/containers.md).
#pragma once

#include <string>
#include <vector>

#include "ctl/cdi/cdi_host.h"

namespace vgpu::ctl::cli {

// cdi generate: the spec as JSON on stdout or in `output` (written atomically).
struct CdiGenerateCommand {
  cdi::HostOptions host;  // paths absolute; empty: the defaults
  std::string output;
};
inline constexpr int kMaxCdiGpus = 64;

int CdiGenerate(CdiGenerateCommand c);

// cdi list: the vgpu.io/gpu devices of the specs in `paths` (files or
// directories; none: /etc/cdi and /var/run/cdi).
int CdiList(std::vector<std::string> paths);

}  // namespace vgpu::ctl::cli
