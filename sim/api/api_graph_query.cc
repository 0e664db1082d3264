// Graph and node queries: roots, edges, dependencies and each node type's
// parameters.
#include <mutex>
#include <vector>

#include "sim/engine/address_space.h"
#include "sim/api/api_common.h"
#include "sim/engine/graph.h"
#include "sim/api/graph_api.h"
#include "sim/engine/module.h"

using namespace vgpu::sim;  // NOLINT: entry points below are the C ABI

// ---- Graph and node queries ----

namespace {

// Fills out[0..cap) from list (the rest NULL) and sets *num as the driver
// documents: the total when out is NULL, else the number written.
void FillNodes(const std::vector<GraphNode*>& list, CUgraphNode* out, CUgraphEdgeData* edges,
               size_t* num) {
  if (out == nullptr) {
    *num = list.size();
    return;
  }
  const size_t cap = *num;
  size_t i = 0;
  for (; i < cap && i < list.size(); ++i) {
    out[i] = reinterpret_cast<CUgraphNode>(list[i]);
    if (edges != nullptr) edges[i] = CUgraphEdgeData{};  // every edge here is a default one
  }
  *num = i;
  for (size_t k = i; k < cap; ++k) {
    out[k] = nullptr;
    if (edges != nullptr) edges[k] = CUgraphEdgeData{};
  }
}

CUresult RootNodes(CUgraph hGraph, CUgraphNode* out, size_t* num) {
  auto* g = reinterpret_cast<Graph*>(hGraph);
  if (num == nullptr || !LiveGraph(g)) return CUDA_ERROR_INVALID_VALUE;
  std::vector<GraphNode*> roots;
  std::lock_guard<std::mutex> lock(g->mu);
  for (const auto& n : g->nodes) {
    if (n->deps.empty()) roots.push_back(n.get());
  }
  FillNodes(roots, out, nullptr, num);
  return CUDA_SUCCESS;
}

CUresult Edges(CUgraph hGraph, CUgraphNode* from, CUgraphNode* to, CUgraphEdgeData* edges,
               size_t* num) {
  auto* g = reinterpret_cast<Graph*>(hGraph);
  if (num == nullptr || !LiveGraph(g) || ((from == nullptr) != (to == nullptr)))
    return CUDA_ERROR_INVALID_VALUE;
  if (from == nullptr && edges != nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::vector<GraphNode*> froms, tos;
  std::lock_guard<std::mutex> lock(g->mu);
  for (const auto& n : g->nodes) {
    for (GraphNode* d : n->deps) {
      froms.push_back(d);
      tos.push_back(n.get());
    }
  }
  if (from == nullptr) {
    *num = froms.size();
    return CUDA_SUCCESS;
  }
  size_t cap = *num;
  FillNodes(froms, from, edges, num);
  FillNodes(tos, to, nullptr, &cap);
  return CUDA_SUCCESS;
}

CUresult Dependencies(CUgraphNode hNode, CUgraphNode* out, CUgraphEdgeData* edges, size_t* num) {
  GraphNode* node = NodeOf(hNode);
  if (node == nullptr || num == nullptr || (out == nullptr && edges != nullptr))
    return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(node->owner->mu);
  FillNodes(node->deps, out, edges, num);
  return CUDA_SUCCESS;
}

CUresult Dependents(CUgraphNode hNode, CUgraphNode* out, CUgraphEdgeData* edges, size_t* num) {
  GraphNode* node = NodeOf(hNode);
  if (node == nullptr || num == nullptr || (out == nullptr && edges != nullptr))
    return CUDA_ERROR_INVALID_VALUE;
  std::vector<GraphNode*> list;
  std::lock_guard<std::mutex> lock(node->owner->mu);
  for (const auto& n : node->owner->nodes) {
    for (GraphNode* d : n->deps) {
      if (d == node) {
        list.push_back(n.get());
        break;
      }
    }
  }
  FillNodes(list, out, edges, num);
  return CUDA_SUCCESS;
}

// The device address a translated pointer came from, or the pointer itself
// (host memory translates to itself).
CUdeviceptr Untranslate(const void* p) {
  AddressSpace& as = AddressSpace::Get();
  auto dev = reinterpret_cast<CUdeviceptr>(p) - reinterpret_cast<CUdeviceptr>(as.Shadow(0));
  return as.InWindow(dev, 1) ? dev : reinterpret_cast<CUdeviceptr>(p);
}

// A kernel node's parameters; node->kernel_args holds the argument pointers
// (into the node's packed copy) that kernelParams points to.
CUresult KernelParams(CUgraphNode hNode, CUfunction* func, unsigned* dims, unsigned* shmem,
                      void*** args, void*** extra) {
  GraphNode* node = NodeOf(hNode);
  if (node == nullptr || node->type != CU_GRAPH_NODE_TYPE_KERNEL) return CUDA_ERROR_INVALID_VALUE;
  std::vector<uint32_t> offsets;
  if (!KernelParamOffsets(node->op.fn, &offsets)) return CUDA_ERROR_INVALID_VALUE;
  auto* base = const_cast<uint8_t*>(node->op.params.data());
  node->kernel_args.clear();
  for (uint32_t off : offsets) node->kernel_args.push_back(base + off);
  *func = node->op.fn;
  for (int d = 0; d < 3; ++d) {
    dims[d] = node->op.dims.grid[d];
    dims[3 + d] = node->op.dims.block[d];
  }
  *shmem = node->op.dims.shared_mem_bytes;
  *args = node->kernel_args.empty() ? nullptr : node->kernel_args.data();
  *extra = nullptr;
  return CUDA_SUCCESS;
}

}  // namespace

SIM_EXPORT CUresult CUDAAPI cuGraphGetRootNodes(CUgraph hGraph, CUgraphNode* rootNodes,
                                                size_t* numRootNodes) {
  SIM_ENTER("cuGraphGetRootNodes");
  return RootNodes(hGraph, rootNodes, numRootNodes);
}

#undef cuGraphGetEdges
#undef cuGraphNodeGetDependencies
#undef cuGraphNodeGetDependentNodes
#undef cuGraphKernelNodeGetParams

SIM_EXPORT CUresult CUDAAPI cuGraphGetEdges_v2(CUgraph hGraph, CUgraphNode* from, CUgraphNode* to,
                                               CUgraphEdgeData* edgeData, size_t* numEdges) {
  SIM_ENTER("cuGraphGetEdges_v2");
  return Edges(hGraph, from, to, edgeData, numEdges);
}
SIM_EXPORT CUresult CUDAAPI cuGraphGetEdges(CUgraph hGraph, CUgraphNode* from, CUgraphNode* to,
                                            size_t* numEdges) {
  SIM_ENTER("cuGraphGetEdges");
  return Edges(hGraph, from, to, nullptr, numEdges);
}
SIM_EXPORT CUresult CUDAAPI cuGraphNodeGetDependencies_v2(CUgraphNode hNode,
                                                          CUgraphNode* dependencies,
                                                          CUgraphEdgeData* edgeData,
                                                          size_t* numDependencies) {
  SIM_ENTER("cuGraphNodeGetDependencies_v2");
  return Dependencies(hNode, dependencies, edgeData, numDependencies);
}
SIM_EXPORT CUresult CUDAAPI cuGraphNodeGetDependencies(CUgraphNode hNode, CUgraphNode* dependencies,
                                                       size_t* numDependencies) {
  SIM_ENTER("cuGraphNodeGetDependencies");
  return Dependencies(hNode, dependencies, nullptr, numDependencies);
}
SIM_EXPORT CUresult CUDAAPI cuGraphNodeGetDependentNodes_v2(CUgraphNode hNode,
                                                            CUgraphNode* dependentNodes,
                                                            CUgraphEdgeData* edgeData,
                                                            size_t* numDependentNodes) {
  SIM_ENTER("cuGraphNodeGetDependentNodes_v2");
  return Dependents(hNode, dependentNodes, edgeData, numDependentNodes);
}
SIM_EXPORT CUresult CUDAAPI cuGraphNodeGetDependentNodes(CUgraphNode hNode,
                                                         CUgraphNode* dependentNodes,
                                                         size_t* numDependentNodes) {
  SIM_ENTER("cuGraphNodeGetDependentNodes");
  return Dependents(hNode, dependentNodes, nullptr, numDependentNodes);
}

SIM_EXPORT CUresult CUDAAPI cuGraphKernelNodeGetParams_v2(CUgraphNode hNode,
                                                          CUDA_KERNEL_NODE_PARAMS* p) {
  SIM_ENTER("cuGraphKernelNodeGetParams_v2");
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUDA_KERNEL_NODE_PARAMS out{};
  unsigned dims[6];
  if (CUresult r =
          KernelParams(hNode, &out.func, dims, &out.sharedMemBytes, &out.kernelParams, &out.extra);
      r != CUDA_SUCCESS) {
    return r;
  }
  out.gridDimX = dims[0], out.gridDimY = dims[1], out.gridDimZ = dims[2];
  out.blockDimX = dims[3], out.blockDimY = dims[4], out.blockDimZ = dims[5];
  if (NodeOf(hNode)->kern != nullptr) {
    out.func = nullptr;
    out.kern = NodeOf(hNode)->kern;
    out.ctx = NodeOf(hNode)->kern_ctx;
  }
  *p = out;
  return CUDA_SUCCESS;
}
SIM_EXPORT CUresult CUDAAPI cuGraphKernelNodeGetParams(CUgraphNode hNode,
                                                       CUDA_KERNEL_NODE_PARAMS_v1* p) {
  SIM_ENTER("cuGraphKernelNodeGetParams");
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUDA_KERNEL_NODE_PARAMS_v1 out{};
  unsigned dims[6];
  if (CUresult r =
          KernelParams(hNode, &out.func, dims, &out.sharedMemBytes, &out.kernelParams, &out.extra);
      r != CUDA_SUCCESS) {
    return r;
  }
  out.gridDimX = dims[0], out.gridDimY = dims[1], out.gridDimZ = dims[2];
  out.blockDimX = dims[3], out.blockDimY = dims[4], out.blockDimZ = dims[5];
  *p = out;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuGraphMemcpyNodeGetParams(CUgraphNode hNode, CUDA_MEMCPY3D* p) {
  SIM_ENTER("cuGraphMemcpyNodeGetParams");
  GraphNode* node = NodeOf(hNode);
  if (node == nullptr || p == nullptr || node->type != CU_GRAPH_NODE_TYPE_MEMCPY)
    return CUDA_ERROR_INVALID_VALUE;
  if (node->copy_params) {
    *p = *node->copy_params;
    return CUDA_SUCCESS;
  }
  // A captured copy: its resolved addresses, as unified-addressing pointers.
  const Op& op = node->op;
  CUDA_MEMCPY3D c{};
  c.srcMemoryType = CU_MEMORYTYPE_UNIFIED;
  c.srcDevice = Untranslate(op.src);
  c.srcPitch = op.height > 1 ? op.src_pitch : op.width;
  c.dstMemoryType = CU_MEMORYTYPE_UNIFIED;
  c.dstDevice = Untranslate(op.dst);
  c.dstPitch = op.height > 1 ? op.dst_pitch : op.width;
  c.WidthInBytes = op.width;
  c.Height = op.height;
  c.Depth = 1;
  *p = c;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuGraphMemsetNodeGetParams(CUgraphNode hNode,
                                                       CUDA_MEMSET_NODE_PARAMS* p) {
  SIM_ENTER("cuGraphMemsetNodeGetParams");
  GraphNode* node = NodeOf(hNode);
  if (node == nullptr || p == nullptr || node->type != CU_GRAPH_NODE_TYPE_MEMSET)
    return CUDA_ERROR_INVALID_VALUE;
  if (node->set_params) {
    *p = *node->set_params;
    return CUDA_SUCCESS;
  }
  const Op& op = node->op;
  CUDA_MEMSET_NODE_PARAMS m{};
  m.dst = Untranslate(op.dst);
  m.elementSize = op.elem;
  m.width = op.elem != 0 ? op.width / op.elem : op.width;
  m.height = op.height;
  m.pitch = op.height > 1 ? op.dst_pitch : op.width;
  m.value = op.value;
  *p = m;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuGraphHostNodeGetParams(CUgraphNode hNode, CUDA_HOST_NODE_PARAMS* p) {
  SIM_ENTER("cuGraphHostNodeGetParams");
  GraphNode* node = NodeOf(hNode);
  if (node == nullptr || p == nullptr || node->type != CU_GRAPH_NODE_TYPE_HOST)
    return CUDA_ERROR_INVALID_VALUE;
  p->fn = node->op.host_fn;
  p->userData = node->op.user;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuGraphChildGraphNodeGetGraph(CUgraphNode hNode, CUgraph* phGraph) {
  SIM_ENTER("cuGraphChildGraphNodeGetGraph");
  GraphNode* node = NodeOf(hNode);
  if (node == nullptr || phGraph == nullptr || node->type != CU_GRAPH_NODE_TYPE_GRAPH)
    return CUDA_ERROR_INVALID_VALUE;
  *phGraph = reinterpret_cast<CUgraph>(node->child);  // not a clone: edits reach the node
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuGraphEventWaitNodeGetEvent(CUgraphNode hNode, CUevent* event_out) {
  SIM_ENTER("cuGraphEventWaitNodeGetEvent");
  GraphNode* node = NodeOf(hNode);
  if (node == nullptr || event_out == nullptr || node->type != CU_GRAPH_NODE_TYPE_WAIT_EVENT) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *event_out = reinterpret_cast<CUevent>(node->op.event);
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuGraphEventRecordNodeGetEvent(CUgraphNode hNode, CUevent* event_out) {
  SIM_ENTER("cuGraphEventRecordNodeGetEvent");
  GraphNode* node = NodeOf(hNode);
  if (node == nullptr || event_out == nullptr || node->type != CU_GRAPH_NODE_TYPE_EVENT_RECORD) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *event_out = reinterpret_cast<CUevent>(node->op.event);
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuGraphBatchMemOpNodeGetParams(CUgraphNode hNode,
                                                           CUDA_BATCH_MEM_OP_NODE_PARAMS* p) {
  SIM_ENTER("cuGraphBatchMemOpNodeGetParams");
  GraphNode* node = NodeOf(hNode);
  if (node == nullptr || p == nullptr || node->type != CU_GRAPH_NODE_TYPE_BATCH_MEM_OP)
    return CUDA_ERROR_INVALID_VALUE;
  if (!node->batch_params.empty()) {  // an explicit node: as it was given
    p->ctx = node->batch_ctx;
    p->count = static_cast<unsigned>(node->batch_params.size());
    p->paramArray = node->batch_params.data();
    p->flags = 0;
    return CUDA_SUCCESS;
  }
  // A captured cuStreamWaitValue*/cuStreamWriteValue*: one operation.
  const Op& op = node->op;
  CUstreamBatchMemOpParams& m = node->mem_op;
  m = CUstreamBatchMemOpParams{};
  if (op.kind == OpKind::kWaitValue) {
    m.waitValue.operation =
        op.elem == 8 ? CU_STREAM_MEM_OP_WAIT_VALUE_64 : CU_STREAM_MEM_OP_WAIT_VALUE_32;
    m.waitValue.address = Untranslate(op.dst);
    if (op.elem == 8)
      m.waitValue.value64 = op.value64;
    else
      m.waitValue.value = static_cast<cuuint32_t>(op.value64);
    m.waitValue.flags = op.mem_flags;
  } else {
    m.writeValue.operation =
        op.elem == 8 ? CU_STREAM_MEM_OP_WRITE_VALUE_64 : CU_STREAM_MEM_OP_WRITE_VALUE_32;
    m.writeValue.address = Untranslate(op.dst);
    if (op.elem == 8)
      m.writeValue.value64 = op.value64;
    else
      m.writeValue.value = static_cast<cuuint32_t>(op.value64);
    m.writeValue.flags = op.mem_flags;
  }
  p->ctx = nullptr;
  p->count = 1;
  p->paramArray = &m;
  p->flags = 0;
  return CUDA_SUCCESS;
}

// The parameters an allocation node was added with, its address in dptr (a
// captured one: the stream's device, no access descriptors).
SIM_EXPORT CUresult CUDAAPI cuGraphMemAllocNodeGetParams(CUgraphNode hNode,
                                                         CUDA_MEM_ALLOC_NODE_PARAMS* params_out) {
  SIM_ENTER("cuGraphMemAllocNodeGetParams");
  GraphNode* node = NodeOf(hNode);
  if (node == nullptr || params_out == nullptr || node->type != CU_GRAPH_NODE_TYPE_MEM_ALLOC) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  std::lock_guard<std::mutex> lock(node->owner->mu);
  *params_out = node->mem_alloc;
  params_out->accessDescs = node->mem_access.empty() ? nullptr : node->mem_access.data();
  return CUDA_SUCCESS;
}
SIM_EXPORT CUresult CUDAAPI cuGraphMemFreeNodeGetParams(CUgraphNode hNode, CUdeviceptr* dptr_out) {
  SIM_ENTER("cuGraphMemFreeNodeGetParams");
  GraphNode* node = NodeOf(hNode);
  if (node == nullptr || dptr_out == nullptr || node->type != CU_GRAPH_NODE_TYPE_MEM_FREE) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *dptr_out = node->mem_ptr;
  return CUDA_SUCCESS;
}
