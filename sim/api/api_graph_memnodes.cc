// Memory allocation and free nodes (cuGraphAddMemAllocNode,
// cuGraphAddMemFreeNode, and the same nodes from cuGraphAddNode and from
// cuMemAllocAsync/cuMemFreeAsync captured into a graph). What an allocation
// is and when its bytes are charged: graph_memory.h.
#include <mutex>
#include <unordered_set>
#include <vector>

#include "sim/api/api_common.h"
#include "sim/engine/context.h"
#include "sim/engine/graph.h"
#include "sim/api/graph_api.h"
#include "sim/engine/graph_memory.h"
#include "sim/engine/mem_pool.h"
#include "sim/engine/sim_state.h"

using namespace vgpu::sim;  // NOLINT: entry points below are the C ABI

namespace {

// cuda.h: pinned device memory, no IPC handle types.
CUresult CheckAllocParams(const CUDA_MEM_ALLOC_NODE_PARAMS& p) {
  const CUmemPoolProps& pp = p.poolProps;
  if (RawEnum(pp.allocType) != CU_MEM_ALLOCATION_TYPE_PINNED ||
      RawEnum(pp.handleTypes) != CU_MEM_HANDLE_TYPE_NONE ||
      RawEnum(pp.location.type) != CU_MEM_LOCATION_TYPE_DEVICE ||
      pp.win32SecurityAttributes != nullptr || p.bytesize == 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (!ValidDevice(pp.location.id)) return CUDA_ERROR_INVALID_DEVICE;
  if (p.accessDescCount > 0 && p.accessDescs == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (p.accessDescCount > static_cast<size_t>(Node().device_count()))
    return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < p.accessDescCount; ++i) {
    // An allocation node's access descriptors follow a pool's (cuMemPoolSetAccess).
    if (CUresult r = CheckPoolAccess(pp.location.id, p.accessDescs[i]); r != CUDA_SUCCESS) return r;
  }
  return CUDA_SUCCESS;
}

// Checked before the allocation exists: memory nodes go only into a graph
// that is not a child graph node's.
CUresult CheckTarget(CUgraphNode* out, CUgraph hg, const CUgraphNode* deps, size_t n) {
  if (CUresult r = CheckNewNode(out, hg, deps, n); r != CUDA_SUCCESS) return r;
  return reinterpret_cast<Graph*>(hg)->parent != nullptr ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

// True if `target` is one of `from` or an ancestor of one (g->mu held).
bool Reaches(std::vector<const GraphNode*> from, const GraphNode* target) {
  std::unordered_set<const GraphNode*> seen;
  while (!from.empty()) {
    const GraphNode* n = from.back();
    from.pop_back();
    if (n == target) return true;
    if (!seen.insert(n).second) continue;
    for (const GraphNode* d : n->deps) from.push_back(d);
  }
  return false;
}

// A free node in the allocation's own graph must come after its allocation node.
CUresult CheckOrder(Graph* g, const CUgraphNode* deps, size_t n, CUdeviceptr dptr) {
  std::lock_guard<std::mutex> lock(g->mu);
  for (const auto& node : g->nodes) {
    if (node->type != CU_GRAPH_NODE_TYPE_MEM_ALLOC || node->mem_ptr != dptr) continue;
    std::vector<const GraphNode*> from;
    for (size_t i = 0; i < n; ++i) from.push_back(NodeOf(deps[i]));
    return Reaches(std::move(from), node.get()) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

void StoreFree(GraphNode* node, CUdeviceptr dptr) {
  std::lock_guard<std::mutex> lock(node->owner->mu);
  node->mem_ptr = dptr;
}

void StoreAlloc(GraphNode* node, const CUDA_MEM_ALLOC_NODE_PARAMS& p) {
  std::lock_guard<std::mutex> lock(node->owner->mu);
  node->mem_ptr = p.dptr;
  node->mem_alloc = p;
  node->mem_access.assign(p.accessDescs, p.accessDescs + p.accessDescCount);
  node->mem_alloc.accessDescs = node->mem_access.data();
}

}  // namespace

namespace vgpu::sim {

CUresult AddMemAllocNode(CUgraphNode* out, CUgraph hg, const CUgraphNode* deps, size_t n,
                         CUDA_MEM_ALLOC_NODE_PARAMS* p) {
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = CheckTarget(out, hg, deps, n); r != CUDA_SUCCESS) return r;
  if (CUresult r = CheckAllocParams(*p); r != CUDA_SUCCESS) return r;
  auto* g = reinterpret_cast<Graph*>(hg);
  CUdeviceptr dptr = 0;
  if (CUresult r = GraphMemCreate(p->poolProps.location.id, p->bytesize, g->id, &dptr);
      r != CUDA_SUCCESS) {
    return r;
  }
  if (CUresult r = AddGraphNode(out, hg, deps, n, CU_GRAPH_NODE_TYPE_MEM_ALLOC, Op{});
      r != CUDA_SUCCESS) {
    GraphMemRelease(dptr);
    return r;
  }
  p->dptr = dptr;
  StoreAlloc(NodeOf(*out), *p);
  return CUDA_SUCCESS;
}

CUresult AddMemFreeNode(CUgraphNode* out, CUgraph hg, const CUgraphNode* deps, size_t n,
                        CUdeviceptr dptr) {
  if (CUresult r = CheckTarget(out, hg, deps, n); r != CUDA_SUCCESS) return r;
  auto* g = reinterpret_cast<Graph*>(hg);
  if (!IsGraphAllocation(dptr)) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = CheckOrder(g, deps, n, dptr); r != CUDA_SUCCESS) return r;
  if (CUresult r = GraphMemAddFree(dptr, g->id); r != CUDA_SUCCESS) return r;
  CUresult r = AddGraphNode(out, hg, deps, n, CU_GRAPH_NODE_TYPE_MEM_FREE, Op{});
  if (r == CUDA_SUCCESS) StoreFree(NodeOf(*out), dptr);
  return r;
}

CUresult CaptureMemAlloc(Stream* s, size_t bytes, CUdeviceptr* dptr) {
  Graph* g = s->capture_graph();
  CUDA_MEM_ALLOC_NODE_PARAMS p{};
  p.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.poolProps.location = {CU_MEM_LOCATION_TYPE_DEVICE, s->ctx()->device};
  p.bytesize = bytes;
  if (CUresult r = GraphMemCreate(s->ctx()->device, bytes, g->id, &p.dptr); r != CUDA_SUCCESS) {
    return r;
  }
  StoreAlloc(GraphAppendCapturedNode(g, CU_GRAPH_NODE_TYPE_MEM_ALLOC, Op{}), p);
  *dptr = p.dptr;
  return CUDA_SUCCESS;
}

CUresult CaptureMemFree(Stream* s, CUdeviceptr dptr) {
  Graph* g = s->capture_graph();
  if (!IsGraphAllocation(dptr)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  if (CUresult r = GraphMemAddFree(dptr, g->id); r != CUDA_SUCCESS) return r;
  StoreFree(GraphAppendCapturedNode(g, CU_GRAPH_NODE_TYPE_MEM_FREE, Op{}), dptr);
  return CUDA_SUCCESS;
}

}  // namespace vgpu::sim

SIM_EXPORT CUresult CUDAAPI cuGraphAddMemAllocNode(CUgraphNode* phGraphNode, CUgraph hGraph,
                                                   const CUgraphNode* dependencies,
                                                   size_t numDependencies,
                                                   CUDA_MEM_ALLOC_NODE_PARAMS* nodeParams) {
  SIM_ENTER("cuGraphAddMemAllocNode");
  return AddMemAllocNode(phGraphNode, hGraph, dependencies, numDependencies, nodeParams);
}

SIM_EXPORT CUresult CUDAAPI cuGraphAddMemFreeNode(CUgraphNode* phGraphNode, CUgraph hGraph,
                                                  const CUgraphNode* dependencies,
                                                  size_t numDependencies, CUdeviceptr dptr) {
  SIM_ENTER("cuGraphAddMemFreeNode");
  return AddMemFreeNode(phGraphNode, hGraph, dependencies, numDependencies, dptr);
}
