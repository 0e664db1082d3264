// vgpuctl cdi generate|list: the command line of the CDI spec (ctl/cdi/,
// docs/containers.md).
#pragma once

#include <string>
#include <vector>

namespace vgpu::ctl::cli {

// args: what follows "cdi". Exit codes: 0 ok, 1 failed, 2 usage.
int Cdi(const std::vector<std::string>& args);

}  // namespace vgpu::ctl::cli
