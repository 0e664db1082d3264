// Stream capture, explicit graph construction, instantiation and launch.
// Nodes are kept in insertion order, which is a topological order (a node's
// dependencies must exist before it), and a launch replays them in that order
// on the launch stream.
#include <atomic>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "sim/address_space.h"
#include "sim/api_common.h"
#include "sim/context.h"
#include "sim/copy_engine.h"
#include "sim/graph.h"
#include "sim/module.h"

using namespace vgpu::sim;  // NOLINT: entry points below are the C ABI

namespace {

std::mutex g_mu;
auto* g_graphs = new std::unordered_set<Graph*>();
auto* g_execs = new std::unordered_set<GraphExec*>();
std::atomic<uint64_t> g_capture_ids{1};

bool LiveGraph(Graph* g) {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_graphs->count(g) != 0;
}

Graph* NewGraph() {
  auto* g = new Graph();
  std::lock_guard<std::mutex> lock(g_mu);
  g_graphs->insert(g);
  return g;
}

CUresult BeginCapture(CUstream h, CUstreamCaptureMode mode, bool ptds) {
  Stream* s = nullptr;
  if (CUresult r = ResolveStream(h, ptds, &s); r != CUDA_SUCCESS) return r;
  if (s->legacy()) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  if (s->capture_graph() != nullptr) return CUDA_ERROR_ILLEGAL_STATE;
  if (mode > CU_STREAM_CAPTURE_MODE_RELAXED) return CUDA_ERROR_INVALID_VALUE;
  Graph* g = NewGraph();
  g->capturing = s;
  s->set_capture(g, mode, g_capture_ids.fetch_add(1));
  return CUDA_SUCCESS;
}

CUresult EndCapture(CUstream h, CUgraph* out, bool ptds) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Stream* s = nullptr;
  if (CUresult r = ResolveStream(h, ptds, &s); r != CUDA_SUCCESS) return r;
  Graph* g = s->capture_graph();
  if (g == nullptr) return CUDA_ERROR_ILLEGAL_STATE;
  s->set_capture(nullptr, CU_STREAM_CAPTURE_MODE_GLOBAL, 0);
  g->capturing = nullptr;
  if (g->capture_invalidated) {
    *out = nullptr;
    {
      std::lock_guard<std::mutex> lock(g_mu);
      g_graphs->erase(g);
    }
    delete g;
    return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  }
  *out = reinterpret_cast<CUgraph>(g);
  return CUDA_SUCCESS;
}

CUresult IsCapturing(CUstream h, CUstreamCaptureStatus* status, bool ptds) {
  if (status == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Stream* s = nullptr;
  if (CUresult r = ResolveStream(h, ptds, &s); r != CUDA_SUCCESS) return r;
  *status = s->capture_graph() != nullptr ? CU_STREAM_CAPTURE_STATUS_ACTIVE
                                          : CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}

CUresult CaptureInfo(CUstream h, CUstreamCaptureStatus* status, cuuint64_t* id, CUgraph* graph,
                     const CUgraphNode** deps, const CUgraphEdgeData** edges, size_t* num,
                     bool ptds) {
  if (status == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Stream* s = nullptr;
  if (CUresult r = ResolveStream(h, ptds, &s); r != CUDA_SUCCESS) return r;
  Graph* g = s->capture_graph();
  *status = g != nullptr ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
  if (id != nullptr && g != nullptr) *id = s->capture_id();
  if (graph != nullptr) *graph = reinterpret_cast<CUgraph>(g);
  // The chain's tail is the single dependency of the next captured node.
  static thread_local CUgraphNode tail;
  size_t n = 0;
  if (g != nullptr) {
    std::lock_guard<std::mutex> lock(g->mu);
    if (!g->nodes.empty()) {
      tail = reinterpret_cast<CUgraphNode>(g->nodes.back().get());
      n = 1;
    }
  }
  if (deps != nullptr) *deps = n != 0 ? &tail : nullptr;
  if (edges != nullptr) *edges = nullptr;
  if (num != nullptr) *num = n;
  return CUDA_SUCCESS;
}

CUresult Launch(CUgraphExec h, CUstream hs, bool ptds) {
  auto* e = reinterpret_cast<GraphExec*>(h);
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (g_execs->count(e) == 0) return CUDA_ERROR_INVALID_VALUE;
  }
  Stream* s = nullptr;
  if (CUresult r = ResolveStream(hs, ptds, &s); r != CUDA_SUCCESS) return r;
  if (CUresult r = StickyError(s->ctx()); r != CUDA_SUCCESS) return r;
  std::lock_guard<std::mutex> lock(e->mu);
  for (const Op& op : e->ops) {
    Op* slot = s->Begin();
    CopyOp(op, slot);
    slot->dep = {nullptr, 0};
    slot->extra_deps.clear();
    s->Commit();
  }
  return CUDA_SUCCESS;
}

CUresult AddNode(CUgraphNode* out, CUgraph hg, const CUgraphNode* deps, size_t n, const Op& op) {
  auto* g = reinterpret_cast<Graph*>(hg);
  if (out == nullptr || !LiveGraph(g) || (n > 0 && deps == nullptr)) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < n; ++i) {
    auto* d = reinterpret_cast<GraphNode*>(deps[i]);
    if (d == nullptr || d->owner != g) return CUDA_ERROR_INVALID_VALUE;
  }
  *out = reinterpret_cast<CUgraphNode>(
      GraphAddNode(g, op, reinterpret_cast<GraphNode* const*>(deps), n));
  return CUDA_SUCCESS;
}

}  // namespace

SIM_EXPORT CUresult CUDAAPI cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode) {
  SIM_ENTER("cuStreamBeginCapture_v2");
  return BeginCapture(hStream, mode, false);
}
SIM_EXPORT CUresult CUDAAPI cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode) {
  SIM_ENTER("cuStreamBeginCapture_v2_ptsz");
  return BeginCapture(hStream, mode, true);
}
SIM_EXPORT CUresult CUDAAPI cuStreamEndCapture(CUstream hStream, CUgraph* phGraph) {
  SIM_ENTER("cuStreamEndCapture");
  return EndCapture(hStream, phGraph, false);
}
SIM_EXPORT CUresult CUDAAPI cuStreamEndCapture_ptsz(CUstream hStream, CUgraph* phGraph) {
  SIM_ENTER("cuStreamEndCapture_ptsz");
  return EndCapture(hStream, phGraph, true);
}
SIM_EXPORT CUresult CUDAAPI cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus* captureStatus) {
  SIM_ENTER("cuStreamIsCapturing");
  return IsCapturing(hStream, captureStatus, false);
}
SIM_EXPORT CUresult CUDAAPI cuStreamIsCapturing_ptsz(CUstream hStream, CUstreamCaptureStatus* captureStatus) {
  SIM_ENTER("cuStreamIsCapturing_ptsz");
  return IsCapturing(hStream, captureStatus, true);
}
SIM_EXPORT CUresult CUDAAPI cuStreamGetCaptureInfo_v2(CUstream hStream, CUstreamCaptureStatus* captureStatus_out, cuuint64_t* id_out, CUgraph* graph_out, const CUgraphNode** dependencies_out, size_t* numDependencies_out) {
  SIM_ENTER("cuStreamGetCaptureInfo_v2");
  return CaptureInfo(hStream, captureStatus_out, id_out, graph_out, dependencies_out, nullptr, numDependencies_out, false);
}
SIM_EXPORT CUresult CUDAAPI cuStreamGetCaptureInfo_v2_ptsz(CUstream hStream, CUstreamCaptureStatus* captureStatus_out, cuuint64_t* id_out, CUgraph* graph_out, const CUgraphNode** dependencies_out, size_t* numDependencies_out) {
  SIM_ENTER("cuStreamGetCaptureInfo_v2_ptsz");
  return CaptureInfo(hStream, captureStatus_out, id_out, graph_out, dependencies_out, nullptr, numDependencies_out, true);
}
SIM_EXPORT CUresult CUDAAPI cuStreamGetCaptureInfo_v3(CUstream hStream, CUstreamCaptureStatus* captureStatus_out, cuuint64_t* id_out, CUgraph* graph_out, const CUgraphNode** dependencies_out, const CUgraphEdgeData** edgeData_out, size_t* numDependencies_out) {
  SIM_ENTER("cuStreamGetCaptureInfo_v3");
  return CaptureInfo(hStream, captureStatus_out, id_out, graph_out, dependencies_out, edgeData_out, numDependencies_out, false);
}
SIM_EXPORT CUresult CUDAAPI cuStreamGetCaptureInfo_v3_ptsz(CUstream hStream, CUstreamCaptureStatus* captureStatus_out, cuuint64_t* id_out, CUgraph* graph_out, const CUgraphNode** dependencies_out, const CUgraphEdgeData** edgeData_out, size_t* numDependencies_out) {
  SIM_ENTER("cuStreamGetCaptureInfo_v3_ptsz");
  return CaptureInfo(hStream, captureStatus_out, id_out, graph_out, dependencies_out, edgeData_out, numDependencies_out, true);
}

SIM_EXPORT CUresult CUDAAPI cuGraphCreate(CUgraph* phGraph, unsigned int flags) {
  SIM_ENTER("cuGraphCreate");
  if (phGraph == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  *phGraph = reinterpret_cast<CUgraph>(NewGraph());
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuGraphDestroy(CUgraph hGraph) {
  SIM_ENTER("cuGraphDestroy");
  auto* g = reinterpret_cast<Graph*>(hGraph);
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (g_graphs->erase(g) == 0) return CUDA_ERROR_INVALID_VALUE;
  }
  if (g->capturing == nullptr) delete g;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuGraphAddKernelNode_v2(CUgraphNode* phGraphNode, CUgraph hGraph, const CUgraphNode* dependencies, size_t numDependencies, const CUDA_KERNEL_NODE_PARAMS* p) {
  SIM_ENTER("cuGraphAddKernelNode_v2");
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Op op;
  op.kind = OpKind::kKernel;
  op.fn = p->func != nullptr ? p->func : reinterpret_cast<CUfunction>(p->kern);
  op.dims = {{p->gridDimX, p->gridDimY, p->gridDimZ}, {p->blockDimX, p->blockDimY, p->blockDimZ}, p->sharedMemBytes};
  if (CUresult r = CheckLaunchDims(op.fn, op.dims); r != CUDA_SUCCESS) return r;
  if (CUresult r = PackKernelParams(op.fn, p->kernelParams, p->extra, &op.params); r != CUDA_SUCCESS) return r;
  CUresult r = AddNode(phGraphNode, hGraph, dependencies, numDependencies, op);
  if (r == CUDA_SUCCESS && p->func == nullptr) {
    auto* node = reinterpret_cast<GraphNode*>(*phGraphNode);
    node->kern = p->kern;
    node->kern_ctx = p->ctx;
  }
  return r;
}

SIM_EXPORT CUresult CUDAAPI cuGraphAddMemcpyNode(CUgraphNode* phGraphNode, CUgraph hGraph, const CUgraphNode* dependencies, size_t numDependencies, const CUDA_MEMCPY3D* copyParams, CUcontext ctx) {
  SIM_ENTER("cuGraphAddMemcpyNode");
  if (copyParams == nullptr || copyParams->Depth > 1) return CUDA_ERROR_INVALID_VALUE;
  CUDA_MEMCPY2D c2{};
  c2.srcXInBytes = copyParams->srcXInBytes;
  c2.srcY = copyParams->srcY;
  c2.srcMemoryType = copyParams->srcMemoryType;
  c2.srcHost = copyParams->srcHost;
  c2.srcDevice = copyParams->srcDevice;
  c2.srcArray = copyParams->srcArray;
  c2.srcPitch = copyParams->srcPitch;
  c2.dstXInBytes = copyParams->dstXInBytes;
  c2.dstY = copyParams->dstY;
  c2.dstMemoryType = copyParams->dstMemoryType;
  c2.dstHost = copyParams->dstHost;
  c2.dstDevice = copyParams->dstDevice;
  c2.dstArray = copyParams->dstArray;
  c2.dstPitch = copyParams->dstPitch;
  c2.WidthInBytes = copyParams->WidthInBytes;
  c2.Height = copyParams->Height == 0 ? 1 : copyParams->Height;
  // Resolve through a private capture so the node holds the same op a stream would.
  CUstream s = nullptr;
  if (CUresult r = cuStreamCreate(&s, CU_STREAM_NON_BLOCKING); r != CUDA_SUCCESS) return r;
  Graph* tmp = NewGraph();
  reinterpret_cast<Stream*>(s)->set_capture(tmp, CU_STREAM_CAPTURE_MODE_RELAXED, 0);
  CUresult r = Copy2D(&c2, s, false, Sync::kAsync);
  reinterpret_cast<Stream*>(s)->set_capture(nullptr, CU_STREAM_CAPTURE_MODE_GLOBAL, 0);
  cuStreamDestroy_v2(s);
  if (r == CUDA_SUCCESS && tmp->nodes.size() == 1) {
    r = AddNode(phGraphNode, hGraph, dependencies, numDependencies, tmp->nodes[0]->op);
    if (r == CUDA_SUCCESS) reinterpret_cast<GraphNode*>(*phGraphNode)->copy_params = *copyParams;
  }
  cuGraphDestroy(reinterpret_cast<CUgraph>(tmp));
  return r;
}

SIM_EXPORT CUresult CUDAAPI cuGraphAddMemsetNode(CUgraphNode* phGraphNode, CUgraph hGraph, const CUgraphNode* dependencies, size_t numDependencies, const CUDA_MEMSET_NODE_PARAMS* p, CUcontext ctx) {
  SIM_ENTER("cuGraphAddMemsetNode");
  if (p == nullptr || (p->elementSize != 1 && p->elementSize != 2 && p->elementSize != 4)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  size_t rows = p->height == 0 ? 1 : p->height;
  size_t width = p->width * p->elementSize;
  Endpoint e;
  size_t span = (rows - 1) * p->pitch + width;
  if (CUresult r = ResolveEndpoint(CU_MEMORYTYPE_DEVICE, p->dst, span, &e); r != CUDA_SUCCESS) return r;
  Op op;
  op.kind = OpKind::kSet;
  op.dst = e.p;
  op.width = width;
  op.height = rows;
  op.dst_pitch = rows > 1 ? p->pitch : width;
  op.value = p->value;
  op.elem = static_cast<uint8_t>(p->elementSize);
  CUresult r = AddNode(phGraphNode, hGraph, dependencies, numDependencies, op);
  if (r == CUDA_SUCCESS) reinterpret_cast<GraphNode*>(*phGraphNode)->set_params = *p;
  return r;
}

SIM_EXPORT CUresult CUDAAPI cuGraphAddHostNode(CUgraphNode* phGraphNode, CUgraph hGraph, const CUgraphNode* dependencies, size_t numDependencies, const CUDA_HOST_NODE_PARAMS* p) {
  SIM_ENTER("cuGraphAddHostNode");
  if (p == nullptr || p->fn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Op op;
  op.kind = OpKind::kHostFn;
  op.host_fn = p->fn;
  op.user = p->userData;
  return AddNode(phGraphNode, hGraph, dependencies, numDependencies, op);
}

SIM_EXPORT CUresult CUDAAPI cuGraphAddEmptyNode(CUgraphNode* phGraphNode, CUgraph hGraph, const CUgraphNode* dependencies, size_t numDependencies) {
  SIM_ENTER("cuGraphAddEmptyNode");
  return AddNode(phGraphNode, hGraph, dependencies, numDependencies, Op{});
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
  *type = reinterpret_cast<GraphNode*>(hNode)->type;
  return CUDA_SUCCESS;
}

namespace {

// Instantiates g (live) into a new exec graph: copies of the nodes' ops and
// the graph's shape.
GraphExec* Instantiate(Graph* g, unsigned long long flags) {
  auto* e = new GraphExec();
  e->ctx = CurrentContextOrNull();
  e->flags = flags;
  {
    std::lock_guard<std::mutex> lock(g->mu);
    std::unordered_map<const GraphNode*, size_t> index;
    e->ops.resize(g->nodes.size());
    e->types.resize(g->nodes.size());
    e->deps.resize(g->nodes.size());
    for (size_t i = 0; i < g->nodes.size(); ++i) {
      const GraphNode* n = g->nodes[i].get();
      index[n] = i;
      CopyOp(n->op, &e->ops[i]);
      e->types[i] = n->type;
      e->nodes.push_back(n);
      for (const GraphNode* d : n->deps) e->deps[i].push_back(index.at(d));
    }
  }
  std::lock_guard<std::mutex> lock(g_mu);
  g_execs->insert(e);
  return e;
}

}  // namespace

SIM_EXPORT CUresult CUDAAPI cuGraphInstantiateWithFlags(CUgraphExec* phGraphExec, CUgraph hGraph, unsigned long long flags) {
  SIM_ENTER("cuGraphInstantiateWithFlags");
  auto* g = reinterpret_cast<Graph*>(hGraph);
  if (phGraphExec == nullptr || !LiveGraph(g)) return CUDA_ERROR_INVALID_VALUE;
  *phGraphExec = reinterpret_cast<CUgraphExec>(Instantiate(g, flags));
  return CUDA_SUCCESS;
}

namespace {

constexpr unsigned long long kInstantiateFlags =
    CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD |
    CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY;

CUresult InstantiateWithParams(CUgraphExec* out, CUgraph hGraph, CUDA_GRAPH_INSTANTIATE_PARAMS* p, bool ptsz) {
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  p->hErrNode_out = nullptr;
  p->result_out = CUDA_GRAPH_INSTANTIATE_ERROR;
  auto* g = reinterpret_cast<Graph*>(hGraph);
  if (out == nullptr || !LiveGraph(g) || (p->flags & ~kInstantiateFlags) != 0) return CUDA_ERROR_INVALID_VALUE;
  const bool device_launch = (p->flags & CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH) != 0;
  if (device_launch && (p->flags & CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH) != 0) {
    return CUDA_ERROR_INVALID_VALUE;  // "cannot be used in conjunction"
  }
  Stream* upload = nullptr;
  if ((p->flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD) != 0) {
    if (CUresult r = ResolveStream(p->hUploadStream, ptsz, &upload); r != CUDA_SUCCESS) return r;
  }
  if (device_launch) {
    // Only kernel, memcpy and memset nodes, and at least one of them.
    std::lock_guard<std::mutex> lock(g->mu);
    if (g->nodes.empty()) return CUDA_ERROR_INVALID_VALUE;
    for (const auto& n : g->nodes) {
      if (n->type != CU_GRAPH_NODE_TYPE_KERNEL && n->type != CU_GRAPH_NODE_TYPE_MEMCPY &&
          n->type != CU_GRAPH_NODE_TYPE_MEMSET) {
        p->result_out = CUDA_GRAPH_INSTANTIATE_NODE_OPERATION_NOT_SUPPORTED;
        p->hErrNode_out = reinterpret_cast<CUgraphNode>(n.get());
        return CUDA_ERROR_INVALID_VALUE;
      }
    }
  }
  // The upload has nothing to move here (the exec graph is host data).
  *out = reinterpret_cast<CUgraphExec>(Instantiate(g, p->flags));
  p->result_out = CUDA_GRAPH_INSTANTIATE_SUCCESS;
  return CUDA_SUCCESS;
}

// Sets the result (and nodes) of a failed update.
CUresult UpdateFailed(CUgraphExecUpdateResultInfo* info, CUgraphExecUpdateResult why, const GraphNode* node,
                      const GraphNode* from = nullptr) {
  info->result = why;
  info->errorNode = reinterpret_cast<CUgraphNode>(const_cast<GraphNode*>(node));
  info->errorFromNode = reinterpret_cast<CUgraphNode>(const_cast<GraphNode*>(from));
  return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
}

// cuGraphExecUpdate: nodes are paired in creation order (a topologically
// identical graph built the same way pairs node for node); the update is all
// or nothing.
CUresult ExecUpdate(CUgraphExec hExec, CUgraph hGraph, CUgraphExecUpdateResultInfo* info) {
  if (info == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *info = {CU_GRAPH_EXEC_UPDATE_ERROR, nullptr, nullptr};
  auto* e = reinterpret_cast<GraphExec*>(hExec);
  auto* g = reinterpret_cast<Graph*>(hGraph);
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (g_execs->count(e) == 0 || g_graphs->count(g) == 0) return CUDA_ERROR_INVALID_VALUE;
  }
  std::lock_guard<std::mutex> graph_lock(g->mu);
  std::lock_guard<std::mutex> exec_lock(e->mu);
  const size_t n = g->nodes.size();
  if (n != e->ops.size()) return UpdateFailed(info, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED, nullptr);
  std::unordered_map<const GraphNode*, size_t> index;
  for (size_t i = 0; i < n; ++i) index[g->nodes[i].get()] = i;
  for (size_t i = 0; i < n; ++i) {
    const GraphNode* node = g->nodes[i].get();
    if (node->deps.size() != e->deps[i].size()) {
      return UpdateFailed(info, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED, node);
    }
    for (size_t k = 0; k < node->deps.size(); ++k) {
      if (index.at(node->deps[k]) != e->deps[i][k]) {
        return UpdateFailed(info, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED, node, node->deps[k]);
      }
    }
  }
  for (size_t i = 0; i < n; ++i) {
    const GraphNode* node = g->nodes[i].get();
    if (node->type != e->types[i]) return UpdateFailed(info, CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED, node);
    const Op& was = e->ops[i];
    const Op& now = node->op;
    if (node->type == CU_GRAPH_NODE_TYPE_MEMSET) {
      // A 2D memset may change only its address and value; any memset keeps its element size.
      bool two_d = was.height > 1 || now.height > 1;
      if (now.elem != was.elem ||
          (two_d && (now.width != was.width || now.height != was.height || now.dst_pitch != was.dst_pitch))) {
        return UpdateFailed(info, CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED, node);
      }
    }
    if (node->type == CU_GRAPH_NODE_TYPE_MEMCPY && (now.height > 1) != (was.height > 1)) {
      return UpdateFailed(info, CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED, node);
    }
  }
  for (size_t i = 0; i < n; ++i) CopyOp(g->nodes[i]->op, &e->ops[i]);
  info->result = CU_GRAPH_EXEC_UPDATE_SUCCESS;
  return CUDA_SUCCESS;
}

}  // namespace

SIM_EXPORT CUresult CUDAAPI cuGraphInstantiateWithParams(CUgraphExec* phGraphExec, CUgraph hGraph, CUDA_GRAPH_INSTANTIATE_PARAMS* instantiateParams) {
  SIM_ENTER("cuGraphInstantiateWithParams");
  return InstantiateWithParams(phGraphExec, hGraph, instantiateParams, false);
}
SIM_EXPORT CUresult CUDAAPI cuGraphInstantiateWithParams_ptsz(CUgraphExec* phGraphExec, CUgraph hGraph, CUDA_GRAPH_INSTANTIATE_PARAMS* instantiateParams) {
  SIM_ENTER("cuGraphInstantiateWithParams_ptsz");
  return InstantiateWithParams(phGraphExec, hGraph, instantiateParams, true);
}

SIM_EXPORT CUresult CUDAAPI cuGraphExecUpdate_v2(CUgraphExec hGraphExec, CUgraph hGraph, CUgraphExecUpdateResultInfo* resultInfo) {
  SIM_ENTER("cuGraphExecUpdate_v2");
  return ExecUpdate(hGraphExec, hGraph, resultInfo);
}

// The CUDA 10.2-11.x form: the error node and the result separately.
#undef cuGraphExecUpdate  // cuda.h maps the name to cuGraphExecUpdate_v2
SIM_EXPORT CUresult CUDAAPI cuGraphExecUpdate(CUgraphExec hGraphExec, CUgraph hGraph, CUgraphNode* hErrorNode_out,
                                              CUgraphExecUpdateResult* updateResult_out) {
  SIM_ENTER("cuGraphExecUpdate");
  if (hErrorNode_out == nullptr || updateResult_out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUgraphExecUpdateResultInfo info{};
  CUresult r = ExecUpdate(hGraphExec, hGraph, &info);
  *hErrorNode_out = info.errorNode;
  *updateResult_out = info.result;
  return r;
}

SIM_EXPORT CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec hGraphExec) {
  SIM_ENTER("cuGraphExecDestroy");
  auto* e = reinterpret_cast<GraphExec*>(hGraphExec);
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_execs->erase(e) == 0) return CUDA_ERROR_INVALID_VALUE;
  delete e;  // launches copied its ops into the stream ring
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream) {
  SIM_ENTER("cuGraphLaunch");
  return Launch(hGraphExec, hStream, false);
}
SIM_EXPORT CUresult CUDAAPI cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream) {
  SIM_ENTER("cuGraphLaunch_ptsz");
  return Launch(hGraphExec, hStream, true);
}
SIM_EXPORT CUresult CUDAAPI cuGraphUpload(CUgraphExec hGraphExec, CUstream hStream) {
  SIM_ENTER("cuGraphUpload");
  std::lock_guard<std::mutex> lock(g_mu);
  return g_execs->count(reinterpret_cast<GraphExec*>(hGraphExec)) != 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
SIM_EXPORT CUresult CUDAAPI cuGraphUpload_ptsz(CUgraphExec hGraphExec, CUstream hStream) {
  SIM_ENTER("cuGraphUpload_ptsz");
  std::lock_guard<std::mutex> lock(g_mu);
  return g_execs->count(reinterpret_cast<GraphExec*>(hGraphExec)) != 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

// The 5-argument instantiate of CUDA 10 and 11 (cuGetProcAddress hands it out
// for "cuGraphInstantiate" at versions 10000-11xxx): no error node and an
// empty log on success, as the driver leaves them.
static CUresult InstantiateWithLog(CUgraphExec* phGraphExec, CUgraph hGraph, CUgraphNode* phErrorNode,
                                   char* logBuffer, size_t bufferSize) {
  if (phErrorNode != nullptr) *phErrorNode = nullptr;
  if (logBuffer != nullptr && bufferSize > 0) logBuffer[0] = '\0';
  return cuGraphInstantiateWithFlags(phGraphExec, hGraph, 0);
}

#undef cuGraphInstantiate  // cuda.h maps the name to cuGraphInstantiateWithFlags
SIM_EXPORT CUresult CUDAAPI cuGraphInstantiate(CUgraphExec* phGraphExec, CUgraph hGraph, CUgraphNode* phErrorNode,
                                               char* logBuffer, size_t bufferSize) {
  SIM_ENTER("cuGraphInstantiate");
  return InstantiateWithLog(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);
}

SIM_EXPORT CUresult CUDAAPI cuGraphInstantiate_v2(CUgraphExec* phGraphExec, CUgraph hGraph, CUgraphNode* phErrorNode,
                                                  char* logBuffer, size_t bufferSize) {
  SIM_ENTER("cuGraphInstantiate_v2");
  return InstantiateWithLog(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);
}

// ---- Graph and node queries ----

namespace {

GraphNode* NodeOf(CUgraphNode h) { return reinterpret_cast<GraphNode*>(h); }

// Fills out[0..cap) from list (the rest NULL) and sets *num as the driver
// documents: the total when out is NULL, else the number written.
void FillNodes(const std::vector<GraphNode*>& list, CUgraphNode* out, CUgraphEdgeData* edges, size_t* num) {
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

CUresult Edges(CUgraph hGraph, CUgraphNode* from, CUgraphNode* to, CUgraphEdgeData* edges, size_t* num) {
  auto* g = reinterpret_cast<Graph*>(hGraph);
  if (num == nullptr || !LiveGraph(g) || ((from == nullptr) != (to == nullptr))) return CUDA_ERROR_INVALID_VALUE;
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
  if (node == nullptr || num == nullptr || (out == nullptr && edges != nullptr)) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(node->owner->mu);
  FillNodes(node->deps, out, edges, num);
  return CUDA_SUCCESS;
}

CUresult Dependents(CUgraphNode hNode, CUgraphNode* out, CUgraphEdgeData* edges, size_t* num) {
  GraphNode* node = NodeOf(hNode);
  if (node == nullptr || num == nullptr || (out == nullptr && edges != nullptr)) return CUDA_ERROR_INVALID_VALUE;
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
CUresult KernelParams(CUgraphNode hNode, CUfunction* func, unsigned* dims, unsigned* shmem, void*** args,
                      void*** extra) {
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

SIM_EXPORT CUresult CUDAAPI cuGraphGetRootNodes(CUgraph hGraph, CUgraphNode* rootNodes, size_t* numRootNodes) {
  SIM_ENTER("cuGraphGetRootNodes");
  return RootNodes(hGraph, rootNodes, numRootNodes);
}

#undef cuGraphGetEdges
#undef cuGraphNodeGetDependencies
#undef cuGraphNodeGetDependentNodes
#undef cuGraphKernelNodeGetParams

SIM_EXPORT CUresult CUDAAPI cuGraphGetEdges_v2(CUgraph hGraph, CUgraphNode* from, CUgraphNode* to, CUgraphEdgeData* edgeData, size_t* numEdges) {
  SIM_ENTER("cuGraphGetEdges_v2");
  return Edges(hGraph, from, to, edgeData, numEdges);
}
SIM_EXPORT CUresult CUDAAPI cuGraphGetEdges(CUgraph hGraph, CUgraphNode* from, CUgraphNode* to, size_t* numEdges) {
  SIM_ENTER("cuGraphGetEdges");
  return Edges(hGraph, from, to, nullptr, numEdges);
}
SIM_EXPORT CUresult CUDAAPI cuGraphNodeGetDependencies_v2(CUgraphNode hNode, CUgraphNode* dependencies, CUgraphEdgeData* edgeData, size_t* numDependencies) {
  SIM_ENTER("cuGraphNodeGetDependencies_v2");
  return Dependencies(hNode, dependencies, edgeData, numDependencies);
}
SIM_EXPORT CUresult CUDAAPI cuGraphNodeGetDependencies(CUgraphNode hNode, CUgraphNode* dependencies, size_t* numDependencies) {
  SIM_ENTER("cuGraphNodeGetDependencies");
  return Dependencies(hNode, dependencies, nullptr, numDependencies);
}
SIM_EXPORT CUresult CUDAAPI cuGraphNodeGetDependentNodes_v2(CUgraphNode hNode, CUgraphNode* dependentNodes, CUgraphEdgeData* edgeData, size_t* numDependentNodes) {
  SIM_ENTER("cuGraphNodeGetDependentNodes_v2");
  return Dependents(hNode, dependentNodes, edgeData, numDependentNodes);
}
SIM_EXPORT CUresult CUDAAPI cuGraphNodeGetDependentNodes(CUgraphNode hNode, CUgraphNode* dependentNodes, size_t* numDependentNodes) {
  SIM_ENTER("cuGraphNodeGetDependentNodes");
  return Dependents(hNode, dependentNodes, nullptr, numDependentNodes);
}

SIM_EXPORT CUresult CUDAAPI cuGraphKernelNodeGetParams_v2(CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS* p) {
  SIM_ENTER("cuGraphKernelNodeGetParams_v2");
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUDA_KERNEL_NODE_PARAMS out{};
  unsigned dims[6];
  if (CUresult r = KernelParams(hNode, &out.func, dims, &out.sharedMemBytes, &out.kernelParams, &out.extra);
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
SIM_EXPORT CUresult CUDAAPI cuGraphKernelNodeGetParams(CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS_v1* p) {
  SIM_ENTER("cuGraphKernelNodeGetParams");
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUDA_KERNEL_NODE_PARAMS_v1 out{};
  unsigned dims[6];
  if (CUresult r = KernelParams(hNode, &out.func, dims, &out.sharedMemBytes, &out.kernelParams, &out.extra);
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
  if (node == nullptr || p == nullptr || node->type != CU_GRAPH_NODE_TYPE_MEMCPY) return CUDA_ERROR_INVALID_VALUE;
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

SIM_EXPORT CUresult CUDAAPI cuGraphMemsetNodeGetParams(CUgraphNode hNode, CUDA_MEMSET_NODE_PARAMS* p) {
  SIM_ENTER("cuGraphMemsetNodeGetParams");
  GraphNode* node = NodeOf(hNode);
  if (node == nullptr || p == nullptr || node->type != CU_GRAPH_NODE_TYPE_MEMSET) return CUDA_ERROR_INVALID_VALUE;
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
  if (node == nullptr || p == nullptr || node->type != CU_GRAPH_NODE_TYPE_HOST) return CUDA_ERROR_INVALID_VALUE;
  p->fn = node->op.host_fn;
  p->userData = node->op.user;
  return CUDA_SUCCESS;
}

// The sim builds no child-graph or event-wait nodes (cuGraphAddChildGraphNode
// and cuGraphAddEventWaitNode are not modelled), so no node is of those types.
SIM_EXPORT CUresult CUDAAPI cuGraphChildGraphNodeGetGraph(CUgraphNode hNode, CUgraph* phGraph) {
  SIM_ENTER("cuGraphChildGraphNodeGetGraph");
  GraphNode* node = NodeOf(hNode);
  if (node == nullptr || phGraph == nullptr || node->type != CU_GRAPH_NODE_TYPE_GRAPH) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_ERROR_INVALID_VALUE;
}
SIM_EXPORT CUresult CUDAAPI cuGraphEventWaitNodeGetEvent(CUgraphNode hNode, CUevent* event_out) {
  SIM_ENTER("cuGraphEventWaitNodeGetEvent");
  GraphNode* node = NodeOf(hNode);
  if (node == nullptr || event_out == nullptr || node->type != CU_GRAPH_NODE_TYPE_WAIT_EVENT) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_ERROR_INVALID_VALUE;
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

SIM_EXPORT CUresult CUDAAPI cuGraphBatchMemOpNodeGetParams(CUgraphNode hNode, CUDA_BATCH_MEM_OP_NODE_PARAMS* p) {
  SIM_ENTER("cuGraphBatchMemOpNodeGetParams");
  GraphNode* node = NodeOf(hNode);
  if (node == nullptr || p == nullptr || node->type != CU_GRAPH_NODE_TYPE_BATCH_MEM_OP) return CUDA_ERROR_INVALID_VALUE;
  // A captured cuStreamWaitValue*/cuStreamWriteValue*: one operation.
  const Op& op = node->op;
  CUstreamBatchMemOpParams& m = node->mem_op;
  m = CUstreamBatchMemOpParams{};
  if (op.kind == OpKind::kWaitValue) {
    m.waitValue.operation = op.elem == 8 ? CU_STREAM_MEM_OP_WAIT_VALUE_64 : CU_STREAM_MEM_OP_WAIT_VALUE_32;
    m.waitValue.address = Untranslate(op.dst);
    if (op.elem == 8) m.waitValue.value64 = op.value64;
    else m.waitValue.value = static_cast<cuuint32_t>(op.value64);
    m.waitValue.flags = op.mem_flags;
  } else {
    m.writeValue.operation = op.elem == 8 ? CU_STREAM_MEM_OP_WRITE_VALUE_64 : CU_STREAM_MEM_OP_WRITE_VALUE_32;
    m.writeValue.address = Untranslate(op.dst);
    if (op.elem == 8) m.writeValue.value64 = op.value64;
    else m.writeValue.value = static_cast<cuuint32_t>(op.value64);
    m.writeValue.flags = op.mem_flags;
  }
  p->ctx = nullptr;
  p->count = 1;
  p->paramArray = &m;
  p->flags = 0;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuGraphExecGetFlags(CUgraphExec hGraphExec, cuuint64_t* flags) {
  SIM_ENTER("cuGraphExecGetFlags");
  auto* e = reinterpret_cast<GraphExec*>(hGraphExec);
  if (flags == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_execs->count(e) == 0) return CUDA_ERROR_INVALID_VALUE;
  // Driver 580 does not report USE_NODE_PRIORITY back (H100, 2026-11-26).
  *flags = e->flags & ~static_cast<cuuint64_t>(CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY);
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuGraphNodeGetEnabled(CUgraphExec hGraphExec, CUgraphNode hNode, unsigned int* isEnabled) {
  SIM_ENTER("cuGraphNodeGetEnabled");
  auto* e = reinterpret_cast<GraphExec*>(hGraphExec);
  if (isEnabled == nullptr || hNode == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_execs->count(e) == 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> exec_lock(e->mu);
  for (size_t i = 0; i < e->nodes.size(); ++i) {
    if (e->nodes[i] != NodeOf(hNode)) continue;
    // Only kernel, memcpy and memset nodes can be enabled or disabled; the
    // sim cannot disable one (cuGraphNodeSetEnabled is not modelled).
    CUgraphNodeType t = e->types[i];
    if (t != CU_GRAPH_NODE_TYPE_KERNEL && t != CU_GRAPH_NODE_TYPE_MEMCPY && t != CU_GRAPH_NODE_TYPE_MEMSET) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    *isEnabled = 1;
    return CUDA_SUCCESS;
  }
  return CUDA_ERROR_INVALID_VALUE;
}
