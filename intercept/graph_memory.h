// Graph memory in the quota. A CUDA graph's memory allocation nodes (added
// with cuGraphAddMemAllocNode or cuGraphAddNode, or captured from
// cuMemAllocAsync) take their memory when the graph is launched, from the
// driver's per-device graph pool, which keeps what it took until
// cuDeviceGraphMemTrim. libvgpu charges the group's quota for that pool:
//
//   - at instantiation it walks the graph (child graphs too) and notes, per
//     physical device, the bytes its allocation nodes can take;
//   - a launch of such an executable graph first reserves those bytes (no
//     room: CUDA_ERROR_OUT_OF_MEMORY, nothing launched), then, after the
//     driver's launch, settles the device's charge on the pool's reserved
//     size (CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT) and returns the rest;
//   - cuDeviceGraphMemTrim and the destruction of an executable graph settle
//     it again (the pool only shrinks there).
//
// The charge is never below what the pool holds after a settled launch (on
// a real driver the pool may round up beyond the nodes' sizes; that excess is
// charged after the launch and logged if the quota cannot hold it). Graph pool
// memory is driver memory: suspend and checkpoint trim the pools' cached part
// (TrimUnused) and refuse while a launch's allocations are held.
// Launches of graphs without allocation nodes pay one relaxed atomic load, and
// a brief lock while the process has an executable graph with them.
#pragma once

#include <cuda.h>

#include <cstdint>

namespace vgpu::graph_memory {

// True once some executable graph with allocation nodes exists (the launch
// hooks' fast path).
bool Active();
// hGraph was instantiated into exec: notes its allocation nodes' bytes.
void OnInstantiated(CUgraphExec exec, CUgraph graph);
// exec is gone (cuGraphExecDestroy succeeded).
void OnDestroyed(CUgraphExec exec);
// The pool of physical device `device` may have shrunk (trim).
void Settle(int device);
// Gives back what the pools hold unused (cuDeviceGraphMemTrim) and settles:
// before suspend or checkpoint, so that only graph memory a launch still
// holds keeps the process from being moved.
void TrimUnused();

// Around one launch of an executable graph: if it has allocation nodes, holds
// the accounting's lock, reserves what the launch can add to the pools
// (their bytes beyond what the pools hold unused), and on destruction
// settles the charges on the pools' sizes. Launches of such graphs are
// serialized within the process; others only take the lock to look the
// executable graph up (while Active()).
class LaunchScope {
 public:
  explicit LaunchScope(CUgraphExec exec);
  ~LaunchScope();
  LaunchScope(const LaunchScope&) = delete;
  LaunchScope& operator=(const LaunchScope&) = delete;
  // False: the quota cannot hold the launch's allocations (do not launch).
  bool ok() const { return ok_; }

 private:
  bool held_ = false;
  bool ok_ = true;
  uint32_t devices_ = 0;  // bit d: the launch allocates on physical device d
};

}  // namespace vgpu::graph_memory
