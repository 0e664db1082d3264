// Editing graphs after their nodes exist: edges, node removal, clones, child
// graph and event nodes, per-node parameter updates of graphs and executable
// graphs, and the generic CUgraphNodeParams entry points.
#include <algorithm>
#include <mutex>
#include <vector>

#include "sim/api/api_common.h"
#include "sim/engine/event.h"
#include "sim/engine/graph.h"
#include "sim/api/graph_api.h"

using namespace vgpu::sim;  // NOLINT: entry points below are the C ABI

namespace {

bool DefaultEdge(const CUgraphEdgeData* data, size_t i) {
  if (data == nullptr) return true;
  const CUgraphEdgeData& d = data[i];
  return d.from_port == 0 && d.to_port == 0 && d.type == CU_GRAPH_DEPENDENCY_TYPE_DEFAULT;
}

bool HasEdge(const GraphNode* from, const GraphNode* to) {
  return std::find(to->deps.begin(), to->deps.end(), from) != to->deps.end();
}

// Adds (or removes) the edges from[i] -> to[i], all or none: every node must
// belong to g, and each edge must not exist yet (must exist, to remove). The
// sim's edges are default ones; other edge data names no edge here.
CUresult EditEdges(CUgraph hg, const CUgraphNode* from, const CUgraphNode* to,
                   const CUgraphEdgeData* data, size_t n, bool add) {
  auto* g = reinterpret_cast<Graph*>(hg);
  if (!LiveGraph(g)) return CUDA_ERROR_INVALID_VALUE;
  if (n == 0) return CUDA_SUCCESS;
  // cuda.h: no edge of a graph with memory nodes can be removed.
  if (!add && HasMemNodes(g)) return CUDA_ERROR_NOT_SUPPORTED;
  if (from == nullptr || to == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(g->mu);
  std::vector<std::pair<GraphNode*, GraphNode*>> edges;
  for (size_t i = 0; i < n; ++i) {
    GraphNode* f = NodeOf(from[i]);
    GraphNode* t = NodeOf(to[i]);
    if (f == nullptr || t == nullptr || f->owner != g || t->owner != g || f == t)
      return CUDA_ERROR_INVALID_VALUE;
    if (!DefaultEdge(data, i) || HasEdge(f, t) != !add) return CUDA_ERROR_INVALID_VALUE;
    if (std::find(edges.begin(), edges.end(), std::make_pair(f, t)) != edges.end())
      return CUDA_ERROR_INVALID_VALUE;
    edges.emplace_back(f, t);
  }
  for (auto [f, t] : edges) {
    if (add) {
      t->deps.push_back(f);
    } else {
      t->deps.erase(std::find(t->deps.begin(), t->deps.end(), f));
    }
  }
  return CUDA_SUCCESS;
}

}  // namespace

#undef cuGraphAddDependencies
#undef cuGraphRemoveDependencies
SIM_EXPORT CUresult CUDAAPI cuGraphAddDependencies(CUgraph hGraph, const CUgraphNode* from,
                                                   const CUgraphNode* to, size_t numDependencies) {
  SIM_ENTER("cuGraphAddDependencies");
  return EditEdges(hGraph, from, to, nullptr, numDependencies, true);
}
SIM_EXPORT CUresult CUDAAPI cuGraphAddDependencies_v2(CUgraph hGraph, const CUgraphNode* from,
                                                      const CUgraphNode* to,
                                                      const CUgraphEdgeData* edgeData,
                                                      size_t numDependencies) {
  SIM_ENTER("cuGraphAddDependencies_v2");
  return EditEdges(hGraph, from, to, edgeData, numDependencies, true);
}
SIM_EXPORT CUresult CUDAAPI cuGraphRemoveDependencies(CUgraph hGraph, const CUgraphNode* from,
                                                      const CUgraphNode* to,
                                                      size_t numDependencies) {
  SIM_ENTER("cuGraphRemoveDependencies");
  return EditEdges(hGraph, from, to, nullptr, numDependencies, false);
}
SIM_EXPORT CUresult CUDAAPI cuGraphRemoveDependencies_v2(CUgraph hGraph, const CUgraphNode* from,
                                                         const CUgraphNode* to,
                                                         const CUgraphEdgeData* edgeData,
                                                         size_t numDependencies) {
  SIM_ENTER("cuGraphRemoveDependencies_v2");
  return EditEdges(hGraph, from, to, edgeData, numDependencies, false);
}

SIM_EXPORT CUresult CUDAAPI cuGraphDestroyNode(CUgraphNode hNode) {
  SIM_ENTER("cuGraphDestroyNode");
  GraphNode* node = NodeOf(hNode);
  if (node == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Graph* g = node->owner;
  // cuda.h: no node of a graph with memory nodes can be destroyed.
  if (HasMemNodes(g)) return CUDA_ERROR_NOT_SUPPORTED;
  Graph* child = nullptr;
  {
    std::lock_guard<std::mutex> lock(g->mu);
    // The node's edges go with it, in both directions.
    for (const auto& n : g->nodes) {
      auto& d = n->deps;
      d.erase(std::remove(d.begin(), d.end(), node), d.end());
    }
    auto& open = g->capture_deps;
    open.erase(std::remove(open.begin(), open.end(), node), open.end());
    auto it = std::find_if(g->nodes.begin(), g->nodes.end(),
                           [node](const auto& n) { return n.get() == node; });
    if (it == g->nodes.end()) return CUDA_ERROR_INVALID_VALUE;
    child = node->child;
    g->nodes.erase(it);
  }
  if (child != nullptr) DeleteGraph(child);
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuGraphClone(CUgraph* phGraphClone, CUgraph originalGraph) {
  SIM_ENTER("cuGraphClone");
  auto* g = reinterpret_cast<Graph*>(originalGraph);
  if (phGraphClone == nullptr || !LiveGraph(g)) return CUDA_ERROR_INVALID_VALUE;
  if (HasMemNodes(g)) return CUDA_ERROR_NOT_SUPPORTED;  // cuda.h: such graphs cannot be cloned
  *phGraphClone = reinterpret_cast<CUgraph>(CloneGraph(g));
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuGraphNodeFindInClone(CUgraphNode* phNode, CUgraphNode hOriginalNode,
                                                   CUgraph hClonedGraph) {
  SIM_ENTER("cuGraphNodeFindInClone");
  auto* clone = reinterpret_cast<Graph*>(hClonedGraph);
  GraphNode* orig = NodeOf(hOriginalNode);
  if (phNode == nullptr || orig == nullptr || !LiveGraph(clone)) return CUDA_ERROR_INVALID_VALUE;
  if (clone->origin_id != orig->owner->id) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(clone->mu);
  for (const auto& n : clone->nodes) {
    if (n->origin_id == orig->id) {
      *phNode = reinterpret_cast<CUgraphNode>(n.get());
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_INVALID_VALUE;
}

// ---- Child graph and event nodes ----

namespace vgpu::sim {

// The node embeds a clone of child (or child itself, moved: the parent owns it).
CUresult AddChildGraphNode(CUgraphNode* out, CUgraph hg, const CUgraphNode* deps, size_t n,
                           CUgraph child, bool move) {
  auto* c = reinterpret_cast<Graph*>(child);
  if (!LiveGraph(c) || c == reinterpret_cast<Graph*>(hg) || c->parent != nullptr ||
      c->capturing != nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  // A graph with memory nodes becomes a child only by moving it (it cannot be cloned).
  if (!move && HasMemNodes(c)) return CUDA_ERROR_INVALID_VALUE;
  Graph* embedded = move ? c : CloneGraph(c);
  CUresult r = AddGraphNode(out, hg, deps, n, CU_GRAPH_NODE_TYPE_GRAPH, Op{});
  if (r != CUDA_SUCCESS) {
    if (!move) DeleteGraph(embedded);
    return r;
  }
  NodeOf(*out)->child = embedded;
  embedded->parent = NodeOf(*out);
  return CUDA_SUCCESS;
}

CUresult AddEventNode(CUgraphNode* out, CUgraph hg, const CUgraphNode* deps, size_t n,
                      CUgraphNodeType type, CUevent ev) {
  if (!IsLiveEvent(reinterpret_cast<Event*>(ev))) return CUDA_ERROR_INVALID_VALUE;
  Op op;
  op.event = reinterpret_cast<Event*>(ev);
  return AddGraphNode(out, hg, deps, n, type, op);
}

CUresult SetEventNode(GraphNode* node, CUgraphNodeType type, CUevent ev) {
  if (node == nullptr || node->type != type || !IsLiveEvent(reinterpret_cast<Event*>(ev))) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  std::lock_guard<std::mutex> lock(node->owner->mu);
  node->op.event = reinterpret_cast<Event*>(ev);
  return CUDA_SUCCESS;
}

}  // namespace vgpu::sim

SIM_EXPORT CUresult CUDAAPI cuGraphAddChildGraphNode(CUgraphNode* phGraphNode, CUgraph hGraph,
                                                     const CUgraphNode* dependencies,
                                                     size_t numDependencies, CUgraph childGraph) {
  SIM_ENTER("cuGraphAddChildGraphNode");
  return AddChildGraphNode(phGraphNode, hGraph, dependencies, numDependencies, childGraph, false);
}
SIM_EXPORT CUresult CUDAAPI cuGraphAddEventRecordNode(CUgraphNode* phGraphNode, CUgraph hGraph,
                                                      const CUgraphNode* dependencies,
                                                      size_t numDependencies, CUevent event) {
  SIM_ENTER("cuGraphAddEventRecordNode");
  return AddEventNode(phGraphNode, hGraph, dependencies, numDependencies,
                      CU_GRAPH_NODE_TYPE_EVENT_RECORD, event);
}
SIM_EXPORT CUresult CUDAAPI cuGraphAddEventWaitNode(CUgraphNode* phGraphNode, CUgraph hGraph,
                                                    const CUgraphNode* dependencies,
                                                    size_t numDependencies, CUevent event) {
  SIM_ENTER("cuGraphAddEventWaitNode");
  return AddEventNode(phGraphNode, hGraph, dependencies, numDependencies,
                      CU_GRAPH_NODE_TYPE_WAIT_EVENT, event);
}
SIM_EXPORT CUresult CUDAAPI cuGraphEventRecordNodeSetEvent(CUgraphNode hNode, CUevent event) {
  SIM_ENTER("cuGraphEventRecordNodeSetEvent");
  return SetEventNode(NodeOf(hNode), CU_GRAPH_NODE_TYPE_EVENT_RECORD, event);
}
SIM_EXPORT CUresult CUDAAPI cuGraphEventWaitNodeSetEvent(CUgraphNode hNode, CUevent event) {
  SIM_ENTER("cuGraphEventWaitNodeSetEvent");
  return SetEventNode(NodeOf(hNode), CU_GRAPH_NODE_TYPE_WAIT_EVENT, event);
}

// ---- Executable graph node updates ----

namespace {

CUresult ExecSetEvent(CUgraphExec h, CUgraphNode node, CUgraphNodeType type, CUevent ev) {
  if (!IsLiveEvent(reinterpret_cast<Event*>(ev))) return CUDA_ERROR_INVALID_VALUE;
  Op op;
  op.event = reinterpret_cast<Event*>(ev);
  return ExecSetOp(h, node, type, op);
}

template <typename P>
CUresult ExecSet(CUgraphExec h, CUgraphNode node, const P* p, CUgraphNodeType type,
                 CUresult (*make)(const P&, Op*)) {
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Op op;
  if (CUresult r = make(*p, &op); r != CUDA_SUCCESS) return r;
  return ExecSetOp(h, node, type, op);
}

}  // namespace

#undef cuGraphExecKernelNodeSetParams
SIM_EXPORT CUresult CUDAAPI cuGraphExecKernelNodeSetParams_v2(
    CUgraphExec hGraphExec, CUgraphNode hNode, const CUDA_KERNEL_NODE_PARAMS* nodeParams) {
  SIM_ENTER("cuGraphExecKernelNodeSetParams_v2");
  return ExecSet(hGraphExec, hNode, nodeParams, CU_GRAPH_NODE_TYPE_KERNEL, &MakeKernelOp);
}
SIM_EXPORT CUresult CUDAAPI cuGraphExecKernelNodeSetParams(
    CUgraphExec hGraphExec, CUgraphNode hNode, const CUDA_KERNEL_NODE_PARAMS_v1* nodeParams) {
  SIM_ENTER("cuGraphExecKernelNodeSetParams");
  if (nodeParams == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUDA_KERNEL_NODE_PARAMS p = FromV1(*nodeParams);
  return ExecSet(hGraphExec, hNode, &p, CU_GRAPH_NODE_TYPE_KERNEL, &MakeKernelOp);
}
SIM_EXPORT CUresult CUDAAPI cuGraphExecMemcpyNodeSetParams(CUgraphExec hGraphExec,
                                                           CUgraphNode hNode,
                                                           const CUDA_MEMCPY3D* copyParams,
                                                           CUcontext ctx) {
  SIM_ENTER("cuGraphExecMemcpyNodeSetParams");
  return ExecSet(hGraphExec, hNode, copyParams, CU_GRAPH_NODE_TYPE_MEMCPY, &MakeCopyOp);
}
// gen_proc_table.py finds an entry point by its first line.
// clang-format off
SIM_EXPORT CUresult CUDAAPI cuGraphExecMemsetNodeSetParams(
    CUgraphExec hGraphExec, CUgraphNode hNode, const CUDA_MEMSET_NODE_PARAMS* memsetParams,
    CUcontext ctx) {
  // clang-format on
  SIM_ENTER("cuGraphExecMemsetNodeSetParams");
  return ExecSet(hGraphExec, hNode, memsetParams, CU_GRAPH_NODE_TYPE_MEMSET, &MakeSetOp);
}
SIM_EXPORT CUresult CUDAAPI cuGraphExecHostNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                         const CUDA_HOST_NODE_PARAMS* nodeParams) {
  SIM_ENTER("cuGraphExecHostNodeSetParams");
  return ExecSet(hGraphExec, hNode, nodeParams, CU_GRAPH_NODE_TYPE_HOST, &MakeHostOp);
}
SIM_EXPORT CUresult CUDAAPI cuGraphExecChildGraphNodeSetParams(CUgraphExec hGraphExec,
                                                               CUgraphNode hNode,
                                                               CUgraph childGraph) {
  SIM_ENTER("cuGraphExecChildGraphNodeSetParams");
  return ExecSetChild(hGraphExec, hNode, childGraph);
}
SIM_EXPORT CUresult CUDAAPI cuGraphExecEventRecordNodeSetEvent(CUgraphExec hGraphExec,
                                                               CUgraphNode hNode, CUevent event) {
  SIM_ENTER("cuGraphExecEventRecordNodeSetEvent");
  return ExecSetEvent(hGraphExec, hNode, CU_GRAPH_NODE_TYPE_EVENT_RECORD, event);
}
SIM_EXPORT CUresult CUDAAPI cuGraphExecEventWaitNodeSetEvent(CUgraphExec hGraphExec,
                                                             CUgraphNode hNode, CUevent event) {
  SIM_ENTER("cuGraphExecEventWaitNodeSetEvent");
  return ExecSetEvent(hGraphExec, hNode, CU_GRAPH_NODE_TYPE_WAIT_EVENT, event);
}
