// Executable graphs: instantiation, whole-graph update, per-node updates,
// enabling and disabling nodes, launch and destruction.
#include <mutex>
#include <vector>

#include "sim/api/api_common.h"
#include "sim/engine/context.h"
#include "sim/engine/event.h"
#include "sim/engine/external.h"
#include "sim/engine/graph.h"
#include "sim/api/graph_api.h"
#include "sim/engine/graph_memory.h"

using namespace vgpu::sim;  // NOLINT: entry points below are the C ABI

namespace {

// Instantiates g (live) into a new registered exec graph.
CUresult Instantiate(Graph* g, unsigned long long flags, GraphExec** out,
                     const GraphNode** bad = nullptr) {
  // cuda.h: a graph with memory nodes has one executable graph at a time.
  const bool mem = HasMemNodes(g);
  if (mem && g->instances->fetch_add(1) != 0) {
    g->instances->fetch_sub(1);
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  auto* e = new GraphExec();
  e->ctx = CurrentContextOrNull();
  e->flags = flags;
  if (CUresult r = BuildExec(g, e, bad); r != CUDA_SUCCESS) {
    if (mem) g->instances->fetch_sub(1);
    delete e;
    return r;
  }
  if (mem) {
    e->instances = g->instances;
    CollectMemSteps(*e, &e->mem_steps);
    for (const GraphMemStep& s : e->mem_steps) {
      if (s.alloc) GraphMemRetain(s.ptr);  // the exec keeps its allocations' addresses
    }
  }
  RegisterExec(e);
  *out = e;
  return CUDA_SUCCESS;
}

CUresult Launch(CUgraphExec h, CUstream hs, bool ptds) {
  GraphExec* e = LiveExec(h);
  if (e == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Stream* s = nullptr;
  if (CUresult r = ResolveStream(hs, ptds, &s); r != CUDA_SUCCESS) return r;
  if (CUresult r = StickyError(s->ctx()); r != CUDA_SUCCESS) return r;
  std::lock_guard<std::mutex> lock(e->mu);
  if (e->instances != nullptr) {  // memory nodes: allocate and free now (graph_memory.h)
    if (s->capture_graph() != nullptr) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    const bool auto_free = (e->flags & CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH) != 0;
    if (CUresult r = GraphMemLaunch(e->mem_steps, auto_free); r != CUDA_SUCCESS) return r;
  }
  EnqueueExec(e, s);
  if (s->capture_graph() != nullptr) return CUDA_SUCCESS;
  // Remember the launch: the exec's user objects outlive it.
  for (StreamDep& d : e->launches) {
    if (d.stream == s) {
      d.seq = s->submitted();
      return CUDA_SUCCESS;
    }
  }
  e->launches.push_back({s, s->submitted()});
  return CUDA_SUCCESS;
}

constexpr unsigned long long kInstantiateFlags =
    CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD |
    CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY;

// Device launch takes only kernel, memcpy and memset nodes, and at least one.
CUresult CheckDeviceLaunch(Graph* g, CUDA_GRAPH_INSTANTIATE_PARAMS* p) {
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
  return CUDA_SUCCESS;
}

CUresult InstantiateWithParams(CUgraphExec* out, CUgraph hGraph, CUDA_GRAPH_INSTANTIATE_PARAMS* p,
                               bool ptsz) {
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  p->hErrNode_out = nullptr;
  p->result_out = CUDA_GRAPH_INSTANTIATE_ERROR;
  auto* g = reinterpret_cast<Graph*>(hGraph);
  if (out == nullptr || !LiveGraph(g) || (p->flags & ~kInstantiateFlags) != 0)
    return CUDA_ERROR_INVALID_VALUE;
  const bool device_launch = (p->flags & CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH) != 0;
  if (device_launch && (p->flags & CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH) != 0) {
    return CUDA_ERROR_INVALID_VALUE;  // "cannot be used in conjunction"
  }
  Stream* upload = nullptr;
  if ((p->flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD) != 0) {
    if (CUresult r = ResolveStream(p->hUploadStream, ptsz, &upload); r != CUDA_SUCCESS) return r;
  }
  if (device_launch) {
    if (CUresult r = CheckDeviceLaunch(g, p); r != CUDA_SUCCESS) return r;
  }
  // The upload has nothing to move here (the exec graph is host data).
  GraphExec* e = nullptr;
  const GraphNode* bad = nullptr;
  if (CUresult r = Instantiate(g, p->flags, &e, &bad); r != CUDA_SUCCESS) {
    p->hErrNode_out = reinterpret_cast<CUgraphNode>(const_cast<GraphNode*>(bad));
    return r;
  }
  *out = reinterpret_cast<CUgraphExec>(e);
  p->result_out = CUDA_GRAPH_INSTANTIATE_SUCCESS;
  return CUDA_SUCCESS;
}

// Sets the result (and nodes) of a failed update.
CUresult UpdateFailed(CUgraphExecUpdateResultInfo* info, CUgraphExecUpdateResult why,
                      const GraphNode* node, const GraphNode* from = nullptr) {
  info->result = why;
  info->errorNode = reinterpret_cast<CUgraphNode>(const_cast<GraphNode*>(node));
  info->errorFromNode = reinterpret_cast<CUgraphNode>(const_cast<GraphNode*>(from));
  return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
}

// A memset may change only its address and value (a 2D one) and keeps its
// element size; a memcpy stays 1D or 2D.
bool ParamsUpdatable(CUgraphNodeType type, const Op& was, const Op& now) {
  if (type == CU_GRAPH_NODE_TYPE_MEMSET) {
    bool two_d = was.height > 1 || now.height > 1;
    return now.elem == was.elem && (!two_d || (now.width == was.width && now.height == was.height &&
                                               now.dst_pitch == was.dst_pitch));
  }
  if (type == CU_GRAPH_NODE_TYPE_MEMCPY) return (now.height > 1) == (was.height > 1);
  if (type == CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL || type == CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT) {
    // cuda.h: "Changing nodeParams->numExtSems is not supported."
    return was.ext_semas != nullptr && now.ext_semas != nullptr &&
           was.ext_semas->handles.size() == now.ext_semas->handles.size();
  }
  return true;
}

// Why `now` (built from the new graph) cannot replace e's nodes, or SUCCESS.
CUresult CheckUpdate(const GraphExec& e, const GraphExec& now, CUgraphExecUpdateResultInfo* info) {
  const size_t n = now.nodes.size();
  if (n != e.nodes.size())
    return UpdateFailed(info, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED, nullptr);
  for (size_t i = 0; i < n; ++i) {
    const ExecNode& x = now.nodes[i];
    const auto& was = e.nodes[i].deps;
    if (x.deps.size() != was.size())
      return UpdateFailed(info, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED, x.node);
    for (size_t k = 0; k < x.deps.size(); ++k) {
      if (x.deps[k] != was[k]) {
        return UpdateFailed(info, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED, x.node,
                            now.nodes[x.deps[k]].node);
      }
    }
  }
  for (size_t i = 0; i < n; ++i) {
    const ExecNode& x = now.nodes[i];
    if (x.type != e.nodes[i].type)
      return UpdateFailed(info, CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED, x.node);
    if (x.child != nullptr && !SameShape(*x.child, *e.nodes[i].child)) {
      return UpdateFailed(info, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED, x.node);
    }
    // A memory node keeps its address: the executable graph's allocation.
    if (!ParamsUpdatable(x.type, e.nodes[i].op, x.op) || !BatchUpdatable(e.nodes[i], x) ||
        x.mem_ptr != e.nodes[i].mem_ptr) {
      return UpdateFailed(info, CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED, x.node);
    }
  }
  return CUDA_SUCCESS;
}

// cuGraphExecUpdate: nodes are paired in creation order (a topologically
// identical graph built the same way pairs node for node); the update is all
// or nothing.
CUresult ExecUpdate(CUgraphExec hExec, CUgraph hGraph, CUgraphExecUpdateResultInfo* info) {
  if (info == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *info = {CU_GRAPH_EXEC_UPDATE_ERROR, nullptr, nullptr};
  GraphExec* e = LiveExec(hExec);
  auto* g = reinterpret_cast<Graph*>(hGraph);
  if (e == nullptr || !LiveGraph(g)) return CUDA_ERROR_INVALID_VALUE;
  GraphExec now;
  const GraphNode* bad = nullptr;
  if (BuildExec(g, &now, &bad) != CUDA_SUCCESS) {
    return UpdateFailed(info, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED, bad);
  }
  std::lock_guard<std::mutex> exec_lock(e->mu);
  if (CUresult r = CheckUpdate(*e, now, info); r != CUDA_SUCCESS) {
    ReleaseAll(now.user_refs);
    return r;
  }
  for (size_t i = 0; i < now.nodes.size(); ++i) {
    CopyOp(now.nodes[i].op, &e->nodes[i].op);
    CopyOps(now.nodes[i].batch, &e->nodes[i].batch);
    e->nodes[i].child = now.nodes[i].child;
  }
  // The new graph's user objects replace the old graph's.
  ReleaseAfter(e->user_refs, e->launches);
  e->user_refs = std::move(now.user_refs);
  info->result = CU_GRAPH_EXEC_UPDATE_SUCCESS;
  return CUDA_SUCCESS;
}

// The 5-argument instantiate of CUDA 10 and 11 (cuGetProcAddress hands it out
// for "cuGraphInstantiate" at versions 10000-12xxx): no error node and an
// empty log on success, as the driver leaves them.
CUresult InstantiateWithLog(CUgraphExec* phGraphExec, CUgraph hGraph, CUgraphNode* phErrorNode,
                            char* logBuffer, size_t bufferSize) {
  if (phErrorNode != nullptr) *phErrorNode = nullptr;
  if (logBuffer != nullptr && bufferSize > 0) logBuffer[0] = '\0';
  auto* g = reinterpret_cast<Graph*>(hGraph);
  if (phGraphExec == nullptr || !LiveGraph(g)) return CUDA_ERROR_INVALID_VALUE;
  GraphExec* e = nullptr;
  const GraphNode* bad = nullptr;
  if (CUresult r = Instantiate(g, 0, &e, &bad); r != CUDA_SUCCESS) {
    if (phErrorNode != nullptr)
      *phErrorNode = reinterpret_cast<CUgraphNode>(const_cast<GraphNode*>(bad));
    return r;
  }
  *phGraphExec = reinterpret_cast<CUgraphExec>(e);
  return CUDA_SUCCESS;
}

}  // namespace

SIM_EXPORT CUresult CUDAAPI cuGraphInstantiateWithFlags(CUgraphExec* phGraphExec, CUgraph hGraph,
                                                        unsigned long long flags) {
  SIM_ENTER("cuGraphInstantiateWithFlags");
  auto* g = reinterpret_cast<Graph*>(hGraph);
  if (phGraphExec == nullptr || !LiveGraph(g)) return CUDA_ERROR_INVALID_VALUE;
  GraphExec* e = nullptr;
  if (CUresult r = Instantiate(g, flags, &e); r != CUDA_SUCCESS) return r;
  *phGraphExec = reinterpret_cast<CUgraphExec>(e);
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuGraphInstantiateWithParams(
    CUgraphExec* phGraphExec, CUgraph hGraph, CUDA_GRAPH_INSTANTIATE_PARAMS* instantiateParams) {
  SIM_ENTER("cuGraphInstantiateWithParams");
  return InstantiateWithParams(phGraphExec, hGraph, instantiateParams, false);
}
SIM_EXPORT CUresult CUDAAPI cuGraphInstantiateWithParams_ptsz(
    CUgraphExec* phGraphExec, CUgraph hGraph, CUDA_GRAPH_INSTANTIATE_PARAMS* instantiateParams) {
  SIM_ENTER("cuGraphInstantiateWithParams_ptsz");
  return InstantiateWithParams(phGraphExec, hGraph, instantiateParams, true);
}

#undef cuGraphInstantiate  // cuda.h maps the name to cuGraphInstantiateWithFlags
SIM_EXPORT CUresult CUDAAPI cuGraphInstantiate(CUgraphExec* phGraphExec, CUgraph hGraph,
                                               CUgraphNode* phErrorNode, char* logBuffer,
                                               size_t bufferSize) {
  SIM_ENTER("cuGraphInstantiate");
  return InstantiateWithLog(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);
}
SIM_EXPORT CUresult CUDAAPI cuGraphInstantiate_v2(CUgraphExec* phGraphExec, CUgraph hGraph,
                                                  CUgraphNode* phErrorNode, char* logBuffer,
                                                  size_t bufferSize) {
  SIM_ENTER("cuGraphInstantiate_v2");
  return InstantiateWithLog(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);
}

SIM_EXPORT CUresult CUDAAPI cuGraphExecUpdate_v2(CUgraphExec hGraphExec, CUgraph hGraph,
                                                 CUgraphExecUpdateResultInfo* resultInfo) {
  SIM_ENTER("cuGraphExecUpdate_v2");
  return ExecUpdate(hGraphExec, hGraph, resultInfo);
}

// The CUDA 10.2-11.x form: the error node and the result separately.
#undef cuGraphExecUpdate  // cuda.h maps the name to cuGraphExecUpdate_v2
SIM_EXPORT CUresult CUDAAPI cuGraphExecUpdate(CUgraphExec hGraphExec, CUgraph hGraph,
                                              CUgraphNode* hErrorNode_out,
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
  if (!UnregisterExec(e)) return CUDA_ERROR_INVALID_VALUE;
  ReleaseAfter(e->user_refs, e->launches);
  if (e->instances != nullptr) e->instances->fetch_sub(1);
  for (const GraphMemStep& s : e->mem_steps) {
    if (s.alloc) GraphMemRelease(s.ptr);
  }
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
  return LiveExec(hGraphExec) != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
SIM_EXPORT CUresult CUDAAPI cuGraphUpload_ptsz(CUgraphExec hGraphExec, CUstream hStream) {
  SIM_ENTER("cuGraphUpload_ptsz");
  return LiveExec(hGraphExec) != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SIM_EXPORT CUresult CUDAAPI cuGraphExecGetFlags(CUgraphExec hGraphExec, cuuint64_t* flags) {
  SIM_ENTER("cuGraphExecGetFlags");
  GraphExec* e = LiveExec(hGraphExec);
  if (flags == nullptr || e == nullptr) return CUDA_ERROR_INVALID_VALUE;
  // Driver 580 does not report USE_NODE_PRIORITY back (H100, 2026-11-26).
  *flags = e->flags & ~static_cast<cuuint64_t>(CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY);
  return CUDA_SUCCESS;
}

// ---- Per-node state of an executable graph ----

namespace {

// The exec node instantiated from hNode (e->mu held), or nullptr.
ExecNode* FindExecNode(GraphExec* e, CUgraphNode hNode) {
  for (ExecNode& n : e->nodes) {
    if (n.node == NodeOf(hNode)) return &n;
  }
  return nullptr;
}

// Only kernel, memcpy and memset nodes can be enabled or disabled.
bool Switchable(CUgraphNodeType t) {
  return t == CU_GRAPH_NODE_TYPE_KERNEL || t == CU_GRAPH_NODE_TYPE_MEMCPY ||
         t == CU_GRAPH_NODE_TYPE_MEMSET;
}

}  // namespace

namespace vgpu::sim {

CUresult ExecSetOp(CUgraphExec h, CUgraphNode hNode, CUgraphNodeType type, const Op& op) {
  GraphExec* e = LiveExec(h);
  if (e == nullptr || hNode == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(e->mu);
  ExecNode* n = FindExecNode(e, hNode);
  if (n == nullptr || n->type != type || !ParamsUpdatable(type, n->op, op))
    return CUDA_ERROR_INVALID_VALUE;
  CopyOp(op, &n->op);
  n->op.dep = {nullptr, 0};
  n->op.extra_deps.clear();
  return CUDA_SUCCESS;
}

CUresult ExecSetChild(CUgraphExec h, CUgraphNode hNode, CUgraph child) {
  GraphExec* e = LiveExec(h);
  auto* g = reinterpret_cast<Graph*>(child);
  if (e == nullptr || hNode == nullptr || !LiveGraph(g)) return CUDA_ERROR_INVALID_VALUE;
  auto now = std::make_shared<GraphExec>();
  if (CUresult r = BuildExec(g, now.get()); r != CUDA_SUCCESS) return r;
  std::lock_guard<std::mutex> lock(e->mu);
  ExecNode* n = FindExecNode(e, hNode);
  // The new graph must have the child's topology and node order.
  if (n == nullptr || n->type != CU_GRAPH_NODE_TYPE_GRAPH || !SameShape(*n->child, *now)) {
    ReleaseAll(now->user_refs);
    return CUDA_ERROR_INVALID_VALUE;
  }
  for (const auto& [o, c] : now->user_refs) e->user_refs[o] += c;
  now->user_refs.clear();
  n->child = std::move(now);
  return CUDA_SUCCESS;
}

}  // namespace vgpu::sim

SIM_EXPORT CUresult CUDAAPI cuGraphNodeGetEnabled(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                  unsigned int* isEnabled) {
  SIM_ENTER("cuGraphNodeGetEnabled");
  GraphExec* e = LiveExec(hGraphExec);
  if (isEnabled == nullptr || hNode == nullptr || e == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(e->mu);
  ExecNode* n = FindExecNode(e, hNode);
  if (n == nullptr || !Switchable(n->type)) return CUDA_ERROR_INVALID_VALUE;
  *isEnabled = n->enabled ? 1 : 0;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuGraphNodeSetEnabled(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                  unsigned int isEnabled) {
  SIM_ENTER("cuGraphNodeSetEnabled");
  GraphExec* e = LiveExec(hGraphExec);
  if (hNode == nullptr || e == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(e->mu);
  ExecNode* n = FindExecNode(e, hNode);
  if (n == nullptr || !Switchable(n->type)) return CUDA_ERROR_INVALID_VALUE;
  n->enabled = isEnabled != 0;  // a disabled node runs as an empty one
  return CUDA_SUCCESS;
}
