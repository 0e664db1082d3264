// Graph memory: the allocations that memory allocation nodes own
// (cuGraphAddMemAllocNode, cuMemAllocAsync captured into a graph).
//
// An allocation's address is fixed when its node is created and stays valid
// while the owning graph or its executable graph exists, or while a launch has
// allocated it and nothing has freed it yet. Its bytes are charged on the node
// only while a launch holds it: each device keeps a graph pool whose reserved
// memory grows to the most the launches have held at once and shrinks only on
// cuDeviceGraphMemTrim, as the driver's graph memory does. A launch does its
// allocations and in-graph frees when cuGraphLaunch is called, in the
// executable graph's node order (the sim charges capacity and time, not the
// placement of concurrently running nodes).
#pragma once

#include <cuda.h>

#include <cstdint>
#include <vector>

namespace vgpu::sim {

// Reserves the address of a new graph allocation of `bytes` on `device`,
// owned by the graph with id `graph_id`; the owning graph holds it.
CUresult GraphMemCreate(int device, size_t bytes, uint64_t graph_id, CUdeviceptr* out);
// An owner (graph or executable graph) takes or lets go of an allocation; the
// address is given back when no owner remains and no launch holds its bytes.
void GraphMemRetain(CUdeviceptr base);
void GraphMemRelease(CUdeviceptr base);
// True if base is the address of a graph allocation.
bool IsGraphAllocation(CUdeviceptr base);
// cuGraphAddMemFreeNode's rules for freeing `base` in graph `graph_id`
// (CUDA_ERROR_INVALID_VALUE if they are broken); records the free node.
CUresult GraphMemAddFree(CUdeviceptr base, uint64_t graph_id);

// One allocation or free node of a launch, in the order the launch runs them.
struct GraphMemStep {
  bool alloc = false;
  CUdeviceptr ptr = 0;
};
// Runs a launch's steps. With auto_free, allocations a previous launch left
// allocated are freed first; without, such a launch fails with
// CUDA_ERROR_INVALID_VALUE. No room on a device: CUDA_ERROR_OUT_OF_MEMORY and
// nothing changed.
CUresult GraphMemLaunch(const std::vector<GraphMemStep>& steps, bool auto_free);
// cuMemFree or cuMemFreeAsync of a graph allocation (both at the call).
// check_only validates without freeing.
CUresult GraphMemFree(CUdeviceptr base, bool check_only);

// cuDeviceGetGraphMemAttribute / cuDeviceSetGraphMemAttribute / cuDeviceGraphMemTrim.
CUresult GraphMemGetAttribute(int device, CUgraphMem_attribute attr, void* value);
CUresult GraphMemSetAttribute(int device, CUgraphMem_attribute attr, const void* value);
void GraphMemTrim(int device);

}  // namespace vgpu::sim
