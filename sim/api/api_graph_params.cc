// The generic CUgraphNodeParams entry points (CUDA 12.2+): cuGraphAddNode,
// cuGraphNodeSetParams and cuGraphExecNodeSetParams, for the node types the
// sim models. Memory allocation and free nodes and conditional nodes are not
// modelled: NOT_SUPPORTED.
#include <cstring>

#include "sim/api/api_common.h"
#include "sim/engine/event.h"
#include "sim/engine/external.h"
#include "sim/engine/graph.h"
#include "sim/api/graph_api.h"

using namespace vgpu::sim;  // NOLINT: entry points below are the C ABI

namespace {

CUDA_KERNEL_NODE_PARAMS KernelOf(const CUDA_KERNEL_NODE_PARAMS_v3& k) {
  CUDA_KERNEL_NODE_PARAMS p{};
  p.func = k.func;
  p.gridDimX = k.gridDimX, p.gridDimY = k.gridDimY, p.gridDimZ = k.gridDimZ;
  p.blockDimX = k.blockDimX, p.blockDimY = k.blockDimY, p.blockDimZ = k.blockDimZ;
  p.sharedMemBytes = k.sharedMemBytes;
  p.kernelParams = k.kernelParams;
  p.extra = k.extra;
  p.kern = k.kern;
  p.ctx = k.ctx;
  return p;
}

CUDA_MEMSET_NODE_PARAMS MemsetOf(const CUDA_MEMSET_NODE_PARAMS_v2& m) {
  CUDA_MEMSET_NODE_PARAMS p{};
  p.dst = m.dst;
  p.pitch = m.pitch;
  p.value = m.value;
  p.elementSize = m.elementSize;
  p.width = m.width;
  p.height = m.height;
  return p;
}

CUDA_HOST_NODE_PARAMS HostOf(const CUDA_HOST_NODE_PARAMS_v2& h) { return {h.fn, h.userData}; }
// The two batch parameter structs have the same fields.
const CUDA_BATCH_MEM_OP_NODE_PARAMS* BatchOf(const CUDA_BATCH_MEM_OP_NODE_PARAMS_v2& m) {
  static_assert(sizeof(CUDA_BATCH_MEM_OP_NODE_PARAMS) == sizeof(CUDA_BATCH_MEM_OP_NODE_PARAMS_v2));
  return reinterpret_cast<const CUDA_BATCH_MEM_OP_NODE_PARAMS*>(&m);
}

// The op of an external semaphore node (the _v2 structs have the v1 layout).
CUresult ExtSemaOpOf(const CUgraphNodeParams& p, Op* op) {
  if (p.type == CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL) {
    const auto& s = p.extSemSignal;
    return MakeExtSemaSignalOp({s.extSemArray, s.paramsArray, s.numExtSems}, op);
  }
  const auto& w = p.extSemWait;
  return MakeExtSemaWaitOp({w.extSemArray, w.paramsArray, w.numExtSems}, op);
}

// What the reserved fields must hold, and the node types the sim has no
// model for.
CUresult CheckParams(const CUgraphNodeParams* p) {
  if (p == nullptr || p->reserved0[0] != 0 || p->reserved0[1] != 0 || p->reserved0[2] != 0 ||
      p->reserved2 != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  switch (RawEnum(p->type)) {
    case CU_GRAPH_NODE_TYPE_KERNEL:
    case CU_GRAPH_NODE_TYPE_MEMCPY:
    case CU_GRAPH_NODE_TYPE_MEMSET:
    case CU_GRAPH_NODE_TYPE_HOST:
    case CU_GRAPH_NODE_TYPE_GRAPH:
    case CU_GRAPH_NODE_TYPE_EMPTY:
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
    case CU_GRAPH_NODE_TYPE_BATCH_MEM_OP:
    case CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL:
    case CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT:
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC:
    case CU_GRAPH_NODE_TYPE_MEM_FREE:
      break;
    case CU_GRAPH_NODE_TYPE_CONDITIONAL:
      return CUDA_ERROR_NOT_SUPPORTED;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
  if (p->type == CU_GRAPH_NODE_TYPE_MEMCPY && (p->memcpy.flags != 0 || p->memcpy.reserved != 0)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

CUresult AddNode(CUgraphNode* out, CUgraph hg, const CUgraphNode* deps, const CUgraphEdgeData* data,
                 size_t n, CUgraphNodeParams* p) {
  if (CUresult r = CheckParams(p); r != CUDA_SUCCESS) return r;
  for (size_t i = 0; data != nullptr && i < n; ++i) {
    if (data[i].from_port != 0 || data[i].to_port != 0 ||
        data[i].type != CU_GRAPH_DEPENDENCY_TYPE_DEFAULT) {
      return CUDA_ERROR_INVALID_VALUE;  // the sim's edges are default ones
    }
  }
  switch (p->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL:
      return AddKernelNode(out, hg, deps, n, KernelOf(p->kernel));
    case CU_GRAPH_NODE_TYPE_MEMCPY:
      return AddMemcpyNode(out, hg, deps, n, p->memcpy.copyParams);
    case CU_GRAPH_NODE_TYPE_MEMSET:
      return AddMemsetNode(out, hg, deps, n, MemsetOf(p->memset));
    case CU_GRAPH_NODE_TYPE_HOST: {
      Op op;
      if (CUresult r = MakeHostOp(HostOf(p->host), &op); r != CUDA_SUCCESS) return r;
      return AddGraphNode(out, hg, deps, n, CU_GRAPH_NODE_TYPE_HOST, op);
    }
    case CU_GRAPH_NODE_TYPE_GRAPH: {
      int own = RawEnum(p->graph.ownership);
      if (own != CU_GRAPH_CHILD_GRAPH_OWNERSHIP_CLONE &&
          own != CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE) {
        return CUDA_ERROR_INVALID_VALUE;
      }
      return AddChildGraphNode(out, hg, deps, n, p->graph.graph,
                               own == CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE);
    }
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
      return AddEventNode(out, hg, deps, n, p->type, p->eventWait.event);
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
      return AddEventNode(out, hg, deps, n, p->type, p->eventRecord.event);
    case CU_GRAPH_NODE_TYPE_BATCH_MEM_OP:
      return AddBatchMemOpNode(out, hg, deps, n, BatchOf(p->memOp));
    case CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL:
    case CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT: {
      Op op;
      if (CUresult r = ExtSemaOpOf(*p, &op); r != CUDA_SUCCESS) return r;
      return AddGraphNode(out, hg, deps, n, p->type, op);
    }
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC: {
      // The _v2 parameters have the v1 layout (cuda.h).
      CUDA_MEM_ALLOC_NODE_PARAMS a{p->alloc.poolProps, p->alloc.accessDescs,
                                   p->alloc.accessDescCount, p->alloc.bytesize, 0};
      CUresult r = AddMemAllocNode(out, hg, deps, n, &a);
      if (r == CUDA_SUCCESS) p->alloc.dptr = a.dptr;
      return r;
    }
    case CU_GRAPH_NODE_TYPE_MEM_FREE:
      return AddMemFreeNode(out, hg, deps, n, p->free.dptr);
    default:
      return AddGraphNode(out, hg, deps, n, CU_GRAPH_NODE_TYPE_EMPTY, Op{});
  }
}

CUresult SetNode(GraphNode* node, CUgraphNodeParams* p) {
  if (CUresult r = CheckParams(p); r != CUDA_SUCCESS) return r;
  if (node == nullptr || node->type != p->type) return CUDA_ERROR_INVALID_VALUE;
  switch (p->type) {
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC:  // cuda.h: "API unsupported" for memory nodes
    case CU_GRAPH_NODE_TYPE_MEM_FREE:
      return CUDA_ERROR_NOT_SUPPORTED;
    case CU_GRAPH_NODE_TYPE_KERNEL:
      return SetKernelNode(node, KernelOf(p->kernel));
    case CU_GRAPH_NODE_TYPE_MEMCPY:
      return SetMemcpyNode(node, p->memcpy.copyParams);
    case CU_GRAPH_NODE_TYPE_MEMSET:
      return SetMemsetNode(node, MemsetOf(p->memset));
    case CU_GRAPH_NODE_TYPE_HOST:
      return SetHostNode(node, HostOf(p->host));
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
      return SetEventNode(node, p->type, p->eventWait.event);
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
      return SetEventNode(node, p->type, p->eventRecord.event);
    case CU_GRAPH_NODE_TYPE_BATCH_MEM_OP:
      return SetBatchMemOpNode(node, BatchOf(p->memOp));
    case CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL:
    case CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT: {
      Op op;
      if (CUresult r = ExtSemaOpOf(*p, &op); r != CUDA_SUCCESS) return r;
      return SetExtSemaNode(node, p->type, op);
    }
    case CU_GRAPH_NODE_TYPE_EMPTY:
      return CUDA_SUCCESS;
    // A child graph node's graph is edited through cuGraphChildGraphNodeGetGraph.
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult ExecSetNode(CUgraphExec h, CUgraphNode node, CUgraphNodeParams* p) {
  if (CUresult r = CheckParams(p); r != CUDA_SUCCESS) return r;
  Op op;
  CUresult r = CUDA_SUCCESS;
  switch (p->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL:
      r = MakeKernelOp(KernelOf(p->kernel), &op);
      break;
    case CU_GRAPH_NODE_TYPE_MEMCPY:
      r = MakeCopyOp(p->memcpy.copyParams, &op);
      break;
    case CU_GRAPH_NODE_TYPE_MEMSET:
      r = MakeSetOp(MemsetOf(p->memset), &op);
      break;
    case CU_GRAPH_NODE_TYPE_HOST:
      r = MakeHostOp(HostOf(p->host), &op);
      break;
    case CU_GRAPH_NODE_TYPE_GRAPH:
      return ExecSetChild(h, node, p->graph.graph);
    case CU_GRAPH_NODE_TYPE_BATCH_MEM_OP:
      return ExecSetBatchMemOpNode(h, node, BatchOf(p->memOp));
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
      op.event = reinterpret_cast<Event*>(p->eventWait.event);
      break;
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
      op.event = reinterpret_cast<Event*>(p->eventRecord.event);
      break;
    case CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL:
    case CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT:
      r = ExtSemaOpOf(*p, &op);
      break;
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC:
    case CU_GRAPH_NODE_TYPE_MEM_FREE:
      return CUDA_ERROR_NOT_SUPPORTED;
    default:
      break;
  }
  if (r != CUDA_SUCCESS) return r;
  if (op.event != nullptr && !IsLiveEvent(op.event)) return CUDA_ERROR_INVALID_VALUE;
  return ExecSetOp(h, node, p->type, op);
}

}  // namespace

#undef cuGraphAddNode
SIM_EXPORT CUresult CUDAAPI cuGraphAddNode(CUgraphNode* phGraphNode, CUgraph hGraph,
                                           const CUgraphNode* dependencies, size_t numDependencies,
                                           CUgraphNodeParams* nodeParams) {
  SIM_ENTER("cuGraphAddNode");
  return AddNode(phGraphNode, hGraph, dependencies, nullptr, numDependencies, nodeParams);
}
SIM_EXPORT CUresult CUDAAPI cuGraphAddNode_v2(CUgraphNode* phGraphNode, CUgraph hGraph,
                                              const CUgraphNode* dependencies,
                                              const CUgraphEdgeData* dependencyData,
                                              size_t numDependencies,
                                              CUgraphNodeParams* nodeParams) {
  SIM_ENTER("cuGraphAddNode_v2");
  return AddNode(phGraphNode, hGraph, dependencies, dependencyData, numDependencies, nodeParams);
}
SIM_EXPORT CUresult CUDAAPI cuGraphNodeSetParams(CUgraphNode hNode, CUgraphNodeParams* nodeParams) {
  SIM_ENTER("cuGraphNodeSetParams");
  return SetNode(NodeOf(hNode), nodeParams);
}
SIM_EXPORT CUresult CUDAAPI cuGraphExecNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                     CUgraphNodeParams* nodeParams) {
  SIM_ENTER("cuGraphExecNodeSetParams");
  return ExecSetNode(hGraphExec, hNode, nodeParams);
}
