// Process and environment helpers of the conformance suite, shared by the
// tests and by conformance_child. No GoogleTest here.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace vgpu::conformance {

// Before anything touches CUDA: gives this process a private simulated node
// (VGPU_SIM_NODE=conf-<pid>) unless one is set, defaults VGPU_SIM_KERNELS to
// the suite's kernel library, and arranges for the node's shared memory to be
// unlinked at exit if this process created it.
void PrepareSimEnvironment(const char* default_kernels_library);

// "/vgpu-sim-<name>", the POSIX shm object of a simulated node.
std::string NodeShmName(const std::string& node_name);
bool NodeShmExists(const std::string& node_name);
// Removes the node's shm object; true if it existed.
bool UnlinkNodeShm(const std::string& node_name);

// True if the libcuda.so.1 this process uses is the simulator's (judged from
// the file that defines cuInit). Works before cuInit.
bool DriverLibraryIsSim();

// CLOCK_MONOTONIC in ns: comparable across processes.
uint64_t MonotonicNs();
double NowMs();

// A child process with pipes on its stdin and stdout.
struct Child {
  pid_t pid = -1;
  int to_child = -1;    // child's stdin
  int from_child = -1;  // child's stdout
  std::string buffered;
};

// Starts `path args...` with posix_spawn. extra_env entries ("K=V") override
// or extend this process's environment; "K=" with an empty value removes K.
// If pass_fd >= 0 it becomes the child's fd 3.
bool SpawnChild(const std::string& path, const std::vector<std::string>& args,
                const std::vector<std::string>& extra_env, Child* out, int pass_fd = -1);
// One line of the child's stdout without the newline; false on EOF or timeout.
bool ReadLine(Child* c, std::string* line, int timeout_ms);
// All remaining output until EOF (or timeout).
std::string ReadRest(Child* c, int timeout_ms);
bool WriteLine(Child* c, const std::string& line);
// waitpid; returns the raw status. Closes the pipes.
int WaitChild(Child* c);
// SIGKILL and reap.
void KillChild(Child* c);

// SCM_RIGHTS over a unix socket.
bool SendFd(int sock, int fd);
int ReceiveFd(int sock);

}  // namespace vgpu::conformance
