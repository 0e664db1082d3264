#include "sim/engine/graph.h"

#include <algorithm>
#include <thread>
#include <unordered_set>

#include "sim/engine/context.h"
#include "sim/engine/event.h"

namespace vgpu::sim {
namespace {

std::mutex g_mu;
auto* g_graphs = new std::unordered_set<Graph*>();
auto* g_execs = new std::unordered_set<GraphExec*>();
auto* g_user_objects = new std::unordered_set<UserObject*>();
std::atomic<uint64_t> g_ids{1};

}  // namespace

void RegisterExec(GraphExec* e) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_execs->insert(e);
}

bool UnregisterExec(GraphExec* e) {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_execs->erase(e) != 0;
}

GraphExec* LiveExec(CUgraphExec h) {
  auto* e = reinterpret_cast<GraphExec*>(h);
  std::lock_guard<std::mutex> lock(g_mu);
  return g_execs->count(e) != 0 ? e : nullptr;
}

UserObject* NewUserObject(void* ptr, CUhostFn destroy, uint64_t refs) {
  auto* o = new UserObject();
  o->ptr = ptr;
  o->destroy = destroy;
  o->refs.store(refs);
  std::lock_guard<std::mutex> lock(g_mu);
  g_user_objects->insert(o);
  return o;
}

bool LiveUserObject(UserObject* o) {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_user_objects->count(o) != 0;
}

void UserObjectRetain(UserObject* o, uint64_t n) { o->refs.fetch_add(n); }

void UserObjectRelease(UserObject* o, uint64_t n) {
  if (o->refs.fetch_sub(n) != n) return;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    g_user_objects->erase(o);
  }
  o->destroy(o->ptr);
  delete o;
}

void ReleaseAll(const UserRefs& refs) {
  for (const auto& [o, n] : refs) UserObjectRelease(o, n);
}

Graph* NewGraph() {
  auto* g = new Graph();
  g->id = g_ids.fetch_add(1);
  std::lock_guard<std::mutex> lock(g_mu);
  g_graphs->insert(g);
  return g;
}

bool LiveGraph(Graph* g) {
  std::lock_guard<std::mutex> lock(g_mu);
  return g != nullptr && g_graphs->count(g) != 0;
}

void DeleteGraph(Graph* g) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    g_graphs->erase(g);
  }
  for (const auto& n : g->nodes) {
    if (n->child != nullptr) DeleteGraph(n->child);
    if (n->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) GraphMemRelease(n->mem_ptr);
  }
  ReleaseAll(g->user_refs);
  delete g;
}

Graph* CloneGraph(Graph* src) {
  Graph* g = NewGraph();
  g->origin_id = src->id;
  std::lock_guard<std::mutex> lock(src->mu);
  std::unordered_map<const GraphNode*, GraphNode*> map;
  for (const auto& n : src->nodes) {
    auto c = std::make_unique<GraphNode>();
    c->id = g_ids.fetch_add(1);
    c->origin_id = n->id;
    c->type = n->type;
    CopyOp(n->op, &c->op);
    c->owner = g;
    c->copy_params = n->copy_params;
    c->set_params = n->set_params;
    c->kern = n->kern;
    c->kern_ctx = n->kern_ctx;
    c->attrs = n->attrs;
    CopyOps(n->batch, &c->batch);
    c->batch_params = n->batch_params;
    c->batch_ctx = n->batch_ctx;
    if (n->child != nullptr) {
      c->child = CloneGraph(n->child);
      c->child->parent = c.get();
    }
    map[n.get()] = c.get();
    g->nodes.push_back(std::move(c));
  }
  for (size_t i = 0; i < src->nodes.size(); ++i) {
    for (GraphNode* d : src->nodes[i]->deps) g->nodes[i]->deps.push_back(map.at(d));
  }
  g->user_refs = src->user_refs;
  for (const auto& [o, n] : g->user_refs) UserObjectRetain(o, n);
  return g;
}

void CopyOps(const std::vector<Op>& from, std::vector<Op>* to) {
  to->clear();
  to->resize(from.size());
  for (size_t i = 0; i < from.size(); ++i) CopyOp(from[i], &(*to)[i]);
}

CUgraphNodeType NodeTypeOf(OpKind k) {
  switch (k) {
    case OpKind::kKernel:
      return CU_GRAPH_NODE_TYPE_KERNEL;
    case OpKind::kCopy:
      return CU_GRAPH_NODE_TYPE_MEMCPY;
    case OpKind::kSet:
      return CU_GRAPH_NODE_TYPE_MEMSET;
    case OpKind::kHostFn:
      return CU_GRAPH_NODE_TYPE_HOST;
    case OpKind::kEventRecord:
      return CU_GRAPH_NODE_TYPE_EVENT_RECORD;
    case OpKind::kWaitValue:
    case OpKind::kWriteValue:
      return CU_GRAPH_NODE_TYPE_BATCH_MEM_OP;
    case OpKind::kExtSemaSignal:
      return CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL;
    case OpKind::kExtSemaWait:
      return CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT;
    default:
      return CU_GRAPH_NODE_TYPE_EMPTY;
  }
}

GraphNode* GraphAddTypedNode(Graph* g, CUgraphNodeType type, const Op& op, GraphNode* const* deps,
                             size_t n) {
  auto node = std::make_unique<GraphNode>();
  node->id = g_ids.fetch_add(1);
  node->type = type;
  CopyOp(op, &node->op);
  node->op.dep = {nullptr, 0};
  node->op.extra_deps.clear();
  node->deps.assign(deps, deps + n);
  node->owner = g;
  std::lock_guard<std::mutex> lock(g->mu);
  g->nodes.push_back(std::move(node));
  return g->nodes.back().get();
}

GraphNode* GraphAddNode(Graph* g, const Op& op, GraphNode* const* deps, size_t n) {
  return GraphAddTypedNode(g, NodeTypeOf(op.kind), op, deps, n);
}

GraphNode* GraphAppendCapturedNode(Graph* g, CUgraphNodeType type, const Op& op) {
  std::vector<GraphNode*> deps;
  {
    std::lock_guard<std::mutex> lock(g->mu);
    deps = g->capture_deps;
  }
  GraphNode* node = GraphAddTypedNode(g, type, op, deps.data(), deps.size());
  // A captured stream is a chain: the next node depends on this one.
  std::lock_guard<std::mutex> lock(g->mu);
  g->capture_deps.assign(1, node);
  return node;
}

void GraphAppendCaptured(Graph* g, const Op& op) {
  GraphAppendCapturedNode(g, NodeTypeOf(op.kind), op);
}

namespace {

// Kahn's algorithm, ties broken by creation order so an acyclic graph built in
// dependency order launches in that order. False on a cycle.
bool TopoOrder(const std::vector<ExecNode>& nodes, std::vector<size_t>* order) {
  std::vector<size_t> pending(nodes.size());
  std::vector<std::vector<size_t>> dependents(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    pending[i] = nodes[i].deps.size();
    for (size_t d : nodes[i].deps) dependents[d].push_back(i);
  }
  std::vector<size_t> ready;
  for (size_t i = nodes.size(); i-- > 0;) {
    if (pending[i] == 0) ready.push_back(i);
  }
  order->clear();
  while (!ready.empty()) {
    size_t i = ready.back();
    ready.pop_back();
    order->push_back(i);
    for (size_t k : dependents[i]) {
      if (--pending[k] != 0) continue;
      ready.insert(std::upper_bound(ready.begin(), ready.end(), k, std::greater<size_t>()), k);
    }
  }
  return order->size() == nodes.size();
}

void CollectRefs(Graph* g, UserRefs* refs) {
  for (const auto& [o, n] : g->user_refs) (*refs)[o] += n;
}

}  // namespace

namespace {

// BuildExec without taking the user object references.
CUresult BuildNodes(Graph* g, GraphExec* e, const GraphNode** bad) {
  std::lock_guard<std::mutex> lock(g->mu);
  std::unordered_map<const GraphNode*, size_t> index;
  for (size_t i = 0; i < g->nodes.size(); ++i) index[g->nodes[i].get()] = i;
  e->nodes.clear();
  e->nodes.resize(g->nodes.size());
  CollectRefs(g, &e->user_refs);
  for (size_t i = 0; i < g->nodes.size(); ++i) {
    const GraphNode* n = g->nodes[i].get();
    ExecNode& x = e->nodes[i];
    x.node = n;
    x.type = n->type;
    CopyOp(n->op, &x.op);
    CopyOps(n->batch, &x.batch);
    x.mem_ptr = n->mem_ptr;
    for (const GraphNode* d : n->deps) x.deps.push_back(index.at(d));
    if (n->child != nullptr) {
      x.child = std::make_shared<GraphExec>();
      if (CUresult r = BuildNodes(n->child, x.child.get(), bad); r != CUDA_SUCCESS) return r;
      for (const auto& [o, c] : x.child->user_refs) e->user_refs[o] += c;
      x.child->user_refs.clear();  // the top-level exec holds them
    }
  }
  if (!TopoOrder(e->nodes, &e->order)) {
    if (bad != nullptr && !g->nodes.empty()) *bad = g->nodes.front().get();
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

}  // namespace

CUresult BuildExec(Graph* g, GraphExec* e, const GraphNode** bad) {
  e->user_refs.clear();
  if (CUresult r = BuildNodes(g, e, bad); r != CUDA_SUCCESS) {
    e->user_refs.clear();
    return r;
  }
  for (const auto& [o, n] : e->user_refs) UserObjectRetain(o, n);
  return CUDA_SUCCESS;
}

bool HasMemNodes(Graph* g) {
  std::lock_guard<std::mutex> lock(g->mu);
  for (const auto& n : g->nodes) {
    if (n->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC || n->type == CU_GRAPH_NODE_TYPE_MEM_FREE)
      return true;
    if (n->child != nullptr && HasMemNodes(n->child)) return true;
  }
  return false;
}

void CollectMemSteps(const GraphExec& e, std::vector<GraphMemStep>* steps) {
  for (size_t i : e.order) {
    const ExecNode& n = e.nodes[i];
    if (n.type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) steps->push_back({true, n.mem_ptr});
    if (n.type == CU_GRAPH_NODE_TYPE_MEM_FREE) steps->push_back({false, n.mem_ptr});
    if (n.child != nullptr) CollectMemSteps(*n.child, steps);
  }
}

bool SameShape(const GraphExec& a, const GraphExec& b) {
  if (a.nodes.size() != b.nodes.size()) return false;
  for (size_t i = 0; i < a.nodes.size(); ++i) {
    const ExecNode& x = a.nodes[i];
    const ExecNode& y = b.nodes[i];
    // A memory node's address is part of the shape: the exec's mem_steps stay valid.
    if (x.type != y.type || x.deps != y.deps || x.mem_ptr != y.mem_ptr) return false;
    if (x.child != nullptr && (y.child == nullptr || !SameShape(*x.child, *y.child))) return false;
  }
  return true;
}

namespace {

// An event record node: the event now names this launch's record, as
// cuEventRecord would (so cuEventSynchronize and cuStreamWaitEvent wait for it).
void EnqueueRecord(Event* ev, Stream* s) {
  if (!IsLiveEvent(ev)) return;
  std::lock_guard<std::mutex> lock(ev->mu);
  uint64_t gen = NextRecordGen(ev);
  Op* op = s->Begin();
  op->kind = OpKind::kEventRecord;
  op->event = ev;
  op->event_gen = gen;
  uint64_t seq = s->Commit();
  ev->stream = s;
  ev->seq = seq;
  ev->captured = seq == 0;
}

// An event wait node: the work after it waits for the event's latest record.
void EnqueueWait(Event* ev, Stream* s) {
  if (!IsLiveEvent(ev)) return;
  std::lock_guard<std::mutex> lock(ev->mu);
  if (ev->stream == nullptr || ev->stream == s || ev->captured) return;
  Op* op = s->Begin();
  op->kind = OpKind::kNop;
  op->dep = {ev->stream, ev->seq};
  s->Commit();
}

void EnqueueOp(const Op& op, Stream* s) {
  Op* slot = s->Begin();
  CopyOp(op, slot);
  slot->dep = {nullptr, 0};
  slot->extra_deps.clear();
  s->Commit();
}

}  // namespace

void EnqueueExec(GraphExec* e, Stream* s) {
  for (size_t i : e->order) {
    ExecNode& n = e->nodes[i];
    if (!n.enabled) continue;
    switch (n.type) {
      case CU_GRAPH_NODE_TYPE_EMPTY:
      case CU_GRAPH_NODE_TYPE_MEM_ALLOC:  // done at the launch call (graph_memory.h)
      case CU_GRAPH_NODE_TYPE_MEM_FREE:
        break;
      case CU_GRAPH_NODE_TYPE_GRAPH:
        EnqueueExec(n.child.get(), s);
        break;
      case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
        EnqueueRecord(n.op.event, s);
        break;
      case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
        EnqueueWait(n.op.event, s);
        break;
      case CU_GRAPH_NODE_TYPE_BATCH_MEM_OP:
        if (n.batch.empty()) EnqueueOp(n.op, s);  // captured: one operation
        for (const Op& op : n.batch) EnqueueOp(op, s);
        break;
      default:
        EnqueueOp(n.op, s);
        break;
    }
  }
}

void ReleaseAfter(const UserRefs& refs, const std::vector<StreamDep>& launches) {
  std::vector<StreamDep> pending;
  for (const StreamDep& d : launches) {
    if (d.stream->completed() < d.seq) pending.push_back(d);
  }
  if (pending.empty()) {
    ReleaseAll(refs);
    return;
  }
  // Launches still running keep the objects alive (streams are never freed).
  std::thread([refs, pending] {
    for (const StreamDep& d : pending) d.stream->WaitFor(d.seq);
    ReleaseAll(refs);
  }).detach();
}

}  // namespace vgpu::sim
