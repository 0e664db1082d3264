// vgpuctl's process-control commands: they talk to the agents of interposed
// processes (ctl/client.h) and need no daemon.
#pragma once

#include <string>
#include <vector>

namespace vgpu::ctl::cli {

// `args` are the words after the command name. Each returns an exit code.
int Ps(const std::vector<std::string>& args);
int Info(const std::vector<std::string>& args);
int Suspend(const std::vector<std::string>& args);
int Resume(const std::vector<std::string>& args);
int Checkpoint(const std::vector<std::string>& args);
int Restore(const std::vector<std::string>& args);
int Set(const std::vector<std::string>& args);

}  // namespace vgpu::ctl::cli
