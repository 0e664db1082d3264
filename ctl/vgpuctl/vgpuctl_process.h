// vgpuctl's process-control commands: they talk to the agents of interposed
// processes (ctl/client.h) and need no daemon.
#pragma once

#include <sys/types.h>

#include <cstddef>
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
int Migrate(const std::vector<std::string>& args);  // vgpuctl_migrate.cc
struct Options;
// restore --device N: moves the (checkpointed) job to GPU N first; an exit code.
int MoveBeforeRestore(pid_t pid, int device, const Options& o);  // vgpuctl_migrate.cc

// Shared by the process commands: options and positional count, with the
// usage message and exit code on error; a process id argument.
bool ParseOrUsage(const std::vector<std::string>& args, const std::vector<std::string>& allowed,
                  size_t positional, Options* o, int* exit_code);
bool ParsePid(const std::string& s, pid_t* pid);

}  // namespace vgpu::ctl::cli
