// Explicit graph construction: graphs and their kernel, memcpy, memset, host
// and empty nodes, and the parameter translation shared with the SetParams
// entry points. A node holds the op a stream would have run for the same call.
#include <mutex>

#include "sim/engine/address_space.h"
#include "sim/api/api_common.h"
#include "sim/engine/context.h"
#include "sim/engine/copy_engine.h"
#include "sim/engine/graph.h"
#include "sim/api/graph_api.h"
#include "sim/engine/module.h"

using namespace vgpu::sim;  // NOLINT: entry points below are the C ABI

namespace vgpu::sim {

CUDA_KERNEL_NODE_PARAMS FromV1(const CUDA_KERNEL_NODE_PARAMS_v1& p) {
  CUDA_KERNEL_NODE_PARAMS v2{};
  v2.func = p.func;
  v2.gridDimX = p.gridDimX, v2.gridDimY = p.gridDimY, v2.gridDimZ = p.gridDimZ;
  v2.blockDimX = p.blockDimX, v2.blockDimY = p.blockDimY, v2.blockDimZ = p.blockDimZ;
  v2.sharedMemBytes = p.sharedMemBytes;
  v2.kernelParams = p.kernelParams;
  v2.extra = p.extra;
  return v2;
}

CUresult MakeKernelOp(const CUDA_KERNEL_NODE_PARAMS& p, Op* op) {
  op->kind = OpKind::kKernel;
  op->fn = p.func != nullptr ? p.func : reinterpret_cast<CUfunction>(p.kern);
  if (op->fn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  op->dims = {{p.gridDimX, p.gridDimY, p.gridDimZ},
              {p.blockDimX, p.blockDimY, p.blockDimZ},
              p.sharedMemBytes};
  if (CUresult r = CheckLaunchDims(op->fn, op->dims); r != CUDA_SUCCESS) return r;
  return PackKernelParams(op->fn, p.kernelParams, p.extra, &op->params);
}

CUresult MakeCopyOp(const CUDA_MEMCPY3D& p, Op* op) {
  if (p.Depth > 1) return CUDA_ERROR_INVALID_VALUE;
  CUDA_MEMCPY2D c2{};
  c2.srcXInBytes = p.srcXInBytes;
  c2.srcY = p.srcY;
  c2.srcMemoryType = p.srcMemoryType;
  c2.srcHost = p.srcHost;
  c2.srcDevice = p.srcDevice;
  c2.srcArray = p.srcArray;
  c2.srcPitch = p.srcPitch;
  c2.dstXInBytes = p.dstXInBytes;
  c2.dstY = p.dstY;
  c2.dstMemoryType = p.dstMemoryType;
  c2.dstHost = p.dstHost;
  c2.dstDevice = p.dstDevice;
  c2.dstArray = p.dstArray;
  c2.dstPitch = p.dstPitch;
  c2.WidthInBytes = p.WidthInBytes;
  c2.Height = p.Height == 0 ? 1 : p.Height;
  // Resolve through a private capture so the node holds the same op a stream would.
  CUstream s = nullptr;
  if (CUresult r = cuStreamCreate(&s, CU_STREAM_NON_BLOCKING); r != CUDA_SUCCESS) return r;
  Graph* tmp = NewGraph();
  reinterpret_cast<Stream*>(s)->set_capture(tmp, CU_STREAM_CAPTURE_MODE_RELAXED, 0);
  CUresult r = Copy2D(&c2, s, false, Sync::kAsync);
  reinterpret_cast<Stream*>(s)->set_capture(nullptr, CU_STREAM_CAPTURE_MODE_GLOBAL, 0);
  cuStreamDestroy_v2(s);
  if (r == CUDA_SUCCESS && tmp->nodes.size() != 1) r = CUDA_ERROR_INVALID_VALUE;
  if (r == CUDA_SUCCESS) CopyOp(tmp->nodes[0]->op, op);
  DeleteGraph(tmp);
  return r;
}

CUresult MakeSetOp(const CUDA_MEMSET_NODE_PARAMS& p, Op* op) {
  if (p.elementSize != 1 && p.elementSize != 2 && p.elementSize != 4)
    return CUDA_ERROR_INVALID_VALUE;
  size_t rows = p.height == 0 ? 1 : p.height;
  size_t width = p.width * p.elementSize;
  Endpoint e;
  size_t span = (rows - 1) * p.pitch + width;
  if (CUresult r = ResolveEndpoint(CU_MEMORYTYPE_DEVICE, p.dst, span, &e); r != CUDA_SUCCESS)
    return r;
  op->kind = OpKind::kSet;
  op->dst = e.p;
  op->width = width;
  op->height = rows;
  op->dst_pitch = rows > 1 ? p.pitch : width;
  op->value = p.value;
  op->elem = static_cast<uint8_t>(p.elementSize);
  return CUDA_SUCCESS;
}

CUresult MakeHostOp(const CUDA_HOST_NODE_PARAMS& p, Op* op) {
  if (p.fn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  op->kind = OpKind::kHostFn;
  op->host_fn = p.fn;
  op->user = p.userData;
  return CUDA_SUCCESS;
}

CUresult CheckNewNode(CUgraphNode* out, CUgraph hg, const CUgraphNode* deps, size_t n) {
  auto* g = reinterpret_cast<Graph*>(hg);
  if (out == nullptr || !LiveGraph(g) || (n > 0 && deps == nullptr))
    return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < n; ++i) {
    GraphNode* d = NodeOf(deps[i]);
    if (d == nullptr || d->owner != g) return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

CUresult AddGraphNode(CUgraphNode* out, CUgraph hg, const CUgraphNode* deps, size_t n,
                      CUgraphNodeType type, const Op& op) {
  if (CUresult r = CheckNewNode(out, hg, deps, n); r != CUDA_SUCCESS) return r;
  auto* g = reinterpret_cast<Graph*>(hg);
  *out = reinterpret_cast<CUgraphNode>(
      GraphAddTypedNode(g, type, op, reinterpret_cast<GraphNode* const*>(deps), n));
  return CUDA_SUCCESS;
}

namespace {

void StoreKernel(GraphNode* node, const CUDA_KERNEL_NODE_PARAMS& p) {
  node->kern = p.func == nullptr ? p.kern : nullptr;
  node->kern_ctx = p.func == nullptr ? p.ctx : nullptr;
}

// Replaces node's op (node->owner->mu taken) if its type is `type`.
CUresult ReplaceOp(GraphNode* node, CUgraphNodeType type, const Op& op) {
  if (node->type != type) return CUDA_ERROR_INVALID_VALUE;
  CopyOp(op, &node->op);
  node->op.dep = {nullptr, 0};
  node->op.extra_deps.clear();
  return CUDA_SUCCESS;
}

}  // namespace

CUresult AddKernelNode(CUgraphNode* out, CUgraph hg, const CUgraphNode* deps, size_t n,
                       const CUDA_KERNEL_NODE_PARAMS& p) {
  Op op;
  if (CUresult r = MakeKernelOp(p, &op); r != CUDA_SUCCESS) return r;
  CUresult r = AddGraphNode(out, hg, deps, n, CU_GRAPH_NODE_TYPE_KERNEL, op);
  if (r == CUDA_SUCCESS) StoreKernel(NodeOf(*out), p);
  return r;
}

CUresult AddMemcpyNode(CUgraphNode* out, CUgraph hg, const CUgraphNode* deps, size_t n,
                       const CUDA_MEMCPY3D& p) {
  Op op;
  if (CUresult r = MakeCopyOp(p, &op); r != CUDA_SUCCESS) return r;
  CUresult r = AddGraphNode(out, hg, deps, n, CU_GRAPH_NODE_TYPE_MEMCPY, op);
  if (r == CUDA_SUCCESS) NodeOf(*out)->copy_params = p;
  return r;
}

CUresult AddMemsetNode(CUgraphNode* out, CUgraph hg, const CUgraphNode* deps, size_t n,
                       const CUDA_MEMSET_NODE_PARAMS& p) {
  Op op;
  if (CUresult r = MakeSetOp(p, &op); r != CUDA_SUCCESS) return r;
  CUresult r = AddGraphNode(out, hg, deps, n, CU_GRAPH_NODE_TYPE_MEMSET, op);
  if (r == CUDA_SUCCESS) NodeOf(*out)->set_params = p;
  return r;
}

CUresult SetKernelNode(GraphNode* node, const CUDA_KERNEL_NODE_PARAMS& p) {
  Op op;
  if (CUresult r = MakeKernelOp(p, &op); r != CUDA_SUCCESS) return r;
  std::lock_guard<std::mutex> lock(node->owner->mu);
  if (CUresult r = ReplaceOp(node, CU_GRAPH_NODE_TYPE_KERNEL, op); r != CUDA_SUCCESS) return r;
  StoreKernel(node, p);
  return CUDA_SUCCESS;
}

CUresult SetMemcpyNode(GraphNode* node, const CUDA_MEMCPY3D& p) {
  Op op;
  if (CUresult r = MakeCopyOp(p, &op); r != CUDA_SUCCESS) return r;
  std::lock_guard<std::mutex> lock(node->owner->mu);
  if (CUresult r = ReplaceOp(node, CU_GRAPH_NODE_TYPE_MEMCPY, op); r != CUDA_SUCCESS) return r;
  node->copy_params = p;
  return CUDA_SUCCESS;
}

CUresult SetMemsetNode(GraphNode* node, const CUDA_MEMSET_NODE_PARAMS& p) {
  Op op;
  if (CUresult r = MakeSetOp(p, &op); r != CUDA_SUCCESS) return r;
  std::lock_guard<std::mutex> lock(node->owner->mu);
  if (CUresult r = ReplaceOp(node, CU_GRAPH_NODE_TYPE_MEMSET, op); r != CUDA_SUCCESS) return r;
  node->set_params = p;
  return CUDA_SUCCESS;
}

CUresult SetHostNode(GraphNode* node, const CUDA_HOST_NODE_PARAMS& p) {
  Op op;
  if (CUresult r = MakeHostOp(p, &op); r != CUDA_SUCCESS) return r;
  std::lock_guard<std::mutex> lock(node->owner->mu);
  return ReplaceOp(node, CU_GRAPH_NODE_TYPE_HOST, op);
}

}  // namespace vgpu::sim

SIM_EXPORT CUresult CUDAAPI cuGraphCreate(CUgraph* phGraph, unsigned int flags) {
  SIM_ENTER("cuGraphCreate");
  if (phGraph == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  *phGraph = reinterpret_cast<CUgraph>(NewGraph());
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuGraphDestroy(CUgraph hGraph) {
  SIM_ENTER("cuGraphDestroy");
  auto* g = reinterpret_cast<Graph*>(hGraph);
  // A child graph node's graph goes with its node.
  if (!LiveGraph(g) || g->parent != nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (g->capturing != nullptr) {
    // The capture still writes to it: cuStreamEndCapture frees it and fails.
    g->capture_invalidated = true;
    g->capture_into_existing = false;
    return CUDA_SUCCESS;
  }
  DeleteGraph(g);
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuGraphAddKernelNode_v2(CUgraphNode* phGraphNode, CUgraph hGraph,
                                                    const CUgraphNode* dependencies,
                                                    size_t numDependencies,
                                                    const CUDA_KERNEL_NODE_PARAMS* p) {
  SIM_ENTER("cuGraphAddKernelNode_v2");
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return AddKernelNode(phGraphNode, hGraph, dependencies, numDependencies, *p);
}


// CUDA 10-11's form: CUDA_KERNEL_NODE_PARAMS_v1 (no kern, no ctx).
#undef cuGraphAddKernelNode
SIM_EXPORT CUresult CUDAAPI cuGraphAddKernelNode(CUgraphNode* phGraphNode, CUgraph hGraph,
                                                 const CUgraphNode* dependencies,
                                                 size_t numDependencies,
                                                 const CUDA_KERNEL_NODE_PARAMS_v1* p) {
  SIM_ENTER("cuGraphAddKernelNode");
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return AddKernelNode(phGraphNode, hGraph, dependencies, numDependencies, FromV1(*p));
}

#undef cuGraphKernelNodeSetParams
SIM_EXPORT CUresult CUDAAPI cuGraphKernelNodeSetParams_v2(CUgraphNode hNode,
                                                          const CUDA_KERNEL_NODE_PARAMS* p) {
  SIM_ENTER("cuGraphKernelNodeSetParams_v2");
  if (hNode == nullptr || p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return SetKernelNode(NodeOf(hNode), *p);
}
SIM_EXPORT CUresult CUDAAPI cuGraphKernelNodeSetParams(CUgraphNode hNode,
                                                       const CUDA_KERNEL_NODE_PARAMS_v1* p) {
  SIM_ENTER("cuGraphKernelNodeSetParams");
  if (hNode == nullptr || p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return SetKernelNode(NodeOf(hNode), FromV1(*p));
}

SIM_EXPORT CUresult CUDAAPI cuGraphAddMemcpyNode(CUgraphNode* phGraphNode, CUgraph hGraph,
                                                 const CUgraphNode* dependencies,
                                                 size_t numDependencies,
                                                 const CUDA_MEMCPY3D* copyParams, CUcontext ctx) {
  SIM_ENTER("cuGraphAddMemcpyNode");
  if (copyParams == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return AddMemcpyNode(phGraphNode, hGraph, dependencies, numDependencies, *copyParams);
}
SIM_EXPORT CUresult CUDAAPI cuGraphMemcpyNodeSetParams(CUgraphNode hNode,
                                                       const CUDA_MEMCPY3D* nodeParams) {
  SIM_ENTER("cuGraphMemcpyNodeSetParams");
  if (hNode == nullptr || nodeParams == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return SetMemcpyNode(NodeOf(hNode), *nodeParams);
}

SIM_EXPORT CUresult CUDAAPI cuGraphAddMemsetNode(CUgraphNode* phGraphNode, CUgraph hGraph,
                                                 const CUgraphNode* dependencies,
                                                 size_t numDependencies,
                                                 const CUDA_MEMSET_NODE_PARAMS* p, CUcontext ctx) {
  SIM_ENTER("cuGraphAddMemsetNode");
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return AddMemsetNode(phGraphNode, hGraph, dependencies, numDependencies, *p);
}
SIM_EXPORT CUresult CUDAAPI cuGraphMemsetNodeSetParams(CUgraphNode hNode,
                                                       const CUDA_MEMSET_NODE_PARAMS* nodeParams) {
  SIM_ENTER("cuGraphMemsetNodeSetParams");
  if (hNode == nullptr || nodeParams == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return SetMemsetNode(NodeOf(hNode), *nodeParams);
}

SIM_EXPORT CUresult CUDAAPI cuGraphAddHostNode(CUgraphNode* phGraphNode, CUgraph hGraph,
                                               const CUgraphNode* dependencies,
                                               size_t numDependencies,
                                               const CUDA_HOST_NODE_PARAMS* p) {
  SIM_ENTER("cuGraphAddHostNode");
  Op op;
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = MakeHostOp(*p, &op); r != CUDA_SUCCESS) return r;
  return AddGraphNode(phGraphNode, hGraph, dependencies, numDependencies, CU_GRAPH_NODE_TYPE_HOST,
                      op);
}
SIM_EXPORT CUresult CUDAAPI cuGraphHostNodeSetParams(CUgraphNode hNode,
                                                     const CUDA_HOST_NODE_PARAMS* nodeParams) {
  SIM_ENTER("cuGraphHostNodeSetParams");
  if (hNode == nullptr || nodeParams == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return SetHostNode(NodeOf(hNode), *nodeParams);
}

SIM_EXPORT CUresult CUDAAPI cuGraphAddEmptyNode(CUgraphNode* phGraphNode, CUgraph hGraph,
                                                const CUgraphNode* dependencies,
                                                size_t numDependencies) {
  SIM_ENTER("cuGraphAddEmptyNode");
  return AddGraphNode(phGraphNode, hGraph, dependencies, numDependencies, CU_GRAPH_NODE_TYPE_EMPTY,
                      Op{});
}

SIM_EXPORT CUresult CUDAAPI cuGraphGetNodes(CUgraph hGraph, CUgraphNode* nodes, size_t* numNodes) {
  SIM_ENTER("cuGraphGetNodes");
  auto* g = reinterpret_cast<Graph*>(hGraph);
  if (numNodes == nullptr || !LiveGraph(g)) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(g->mu);
  if (nodes != nullptr) {
    for (size_t i = 0; i < *numNodes && i < g->nodes.size(); ++i) {
      nodes[i] = reinterpret_cast<CUgraphNode>(g->nodes[i].get());
    }
  }
  *numNodes = g->nodes.size();
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuGraphNodeGetType(CUgraphNode hNode, CUgraphNodeType* type) {
  SIM_ENTER("cuGraphNodeGetType");
  if (hNode == nullptr || type == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *type = NodeOf(hNode)->type;
  return CUDA_SUCCESS;
}
