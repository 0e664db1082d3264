// CUDA graphs: built by stream capture or explicitly, instantiated into an
// executable graph whose nodes a launch enqueues, in a topological order, on
// the launch stream (one valid schedule of the graph).
#pragma once

#include <cuda.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "sim/engine/graph_memory.h"
#include "sim/engine/stream.h"

namespace vgpu::sim {

struct Graph;

// A cuUserObjectCreate object: the destructor runs when the last reference
// (the caller's, a graph's or an executable graph's) goes.
struct UserObject {
  std::atomic<uint64_t> refs{0};
  void* ptr = nullptr;
  CUhostFn destroy = nullptr;
};
// References a graph or an executable graph owns, per object.
using UserRefs = std::unordered_map<UserObject*, uint64_t>;
UserObject* NewUserObject(void* ptr, CUhostFn destroy, uint64_t refs);
bool LiveUserObject(UserObject* o);
void UserObjectRetain(UserObject* o, uint64_t n);
// Drops n references; the last one runs the destructor (on this thread).
void UserObjectRelease(UserObject* o, uint64_t n);
void ReleaseAll(const UserRefs& refs);

struct GraphNode {
  uint64_t id = 0;         // unique for the process
  uint64_t origin_id = 0;  // the node this one was cloned from (cuGraphNodeFindInClone)
  CUgraphNodeType type = CU_GRAPH_NODE_TYPE_EMPTY;
  // Kernel, memcpy, memset, host: the work. Event record and wait: op.event.
  Op op;
  std::vector<GraphNode*> deps;
  Graph* owner = nullptr;
  // The parameters an explicit cuGraphAdd*Node was given, returned as they
  // were by the node's Get*Params query (captured nodes rebuild theirs from op).
  std::optional<CUDA_MEMCPY3D> copy_params;
  std::optional<CUDA_MEMSET_NODE_PARAMS> set_params;
  CUkernel kern = nullptr;  // cuGraphAddKernelNode's kern, when it named one
  CUcontext kern_ctx = nullptr;
  // Storage the node owns for what its queries return by pointer.
  std::vector<void*> kernel_args;
  CUstreamBatchMemOpParams mem_op{};
  Graph* child = nullptr;  // CU_GRAPH_NODE_TYPE_GRAPH: the graph the node owns
  // cuGraphKernelNodeSetAttribute's values (stored; an unset one reads as zero).
  std::map<int, CUkernelNodeAttrValue> attrs;
  // An explicit batch memory operation node: its operations, run in order
  // (barriers and flushes as no-ops), and the parameters it was given.
  std::vector<Op> batch;
  std::vector<CUstreamBatchMemOpParams> batch_params;
  CUcontext batch_ctx = nullptr;
  // A memory allocation node: its allocation's address and the parameters it
  // was given (access descriptors kept here); a memory free node: the address.
  CUdeviceptr mem_ptr = 0;
  CUDA_MEM_ALLOC_NODE_PARAMS mem_alloc{};
  std::vector<CUmemAccessDesc> mem_access;
};

struct Graph {
  std::mutex mu;
  uint64_t id = 0;
  uint64_t origin_id = 0;                         // the graph this one was cloned from
  std::vector<std::unique_ptr<GraphNode>> nodes;  // creation order
  GraphNode* parent = nullptr;                    // the child graph node that owns this graph
  Stream* capturing = nullptr;
  bool capture_invalidated = false;
  bool capture_into_existing = false;  // cuStreamBeginCaptureToGraph: the caller's graph
  // The dependencies of the next captured node (the capture's open ends).
  std::vector<GraphNode*> capture_deps;
  UserRefs user_refs;
  // Executable graphs of this graph that exist (one at most if it has memory nodes).
  std::shared_ptr<std::atomic<int>> instances = std::make_shared<std::atomic<int>>(0);
};

struct GraphExec;

struct ExecNode {
  const GraphNode* node = nullptr;  // compared, never dereferenced: the graph may be gone
  CUgraphNodeType type = CU_GRAPH_NODE_TYPE_EMPTY;
  std::vector<size_t> deps;  // indices into the exec's nodes
  Op op;
  std::shared_ptr<GraphExec> child;  // CU_GRAPH_NODE_TYPE_GRAPH
  bool enabled = true;
  std::vector<Op> batch;  // an explicit batch memory operation node's operations
  CUdeviceptr mem_ptr = 0;  // a memory allocation or free node's address
};

struct GraphExec {
  std::mutex mu;                // guards the nodes against updates during a launch
  std::vector<ExecNode> nodes;  // the graph's creation order (cuGraphExecUpdate pairs by it)
  std::vector<size_t> order;    // a topological order of nodes: what a launch enqueues
  unsigned long long flags = 0;
  Context* ctx = nullptr;
  UserRefs user_refs;               // the graph's (and its child graphs') at instantiation
  std::vector<StreamDep> launches;  // the latest launch on each stream
  // A graph with memory nodes: its instance count, and its allocation and
  // free nodes in launch order (fixed: no update may change them); the exec
  // holds the addresses of the allocations (graph_memory.h).
  std::shared_ptr<std::atomic<int>> instances;
  std::vector<GraphMemStep> mem_steps;
};

// The registry of live graph handles.
Graph* NewGraph();
bool LiveGraph(Graph* g);
// Unregisters and frees g, its child graphs and its user object references.
void DeleteGraph(Graph* g);
// A copy of g (nodes, edges, child graphs, user object references), registered.
Graph* CloneGraph(Graph* g);

// True if g or a graph nested in it has a memory allocation or free node.
bool HasMemNodes(Graph* g);
// The allocation and free nodes of e (and of its child graphs) in launch order.
void CollectMemSteps(const GraphExec& e, std::vector<GraphMemStep>* steps);

// Called by Stream::Commit while the stream captures.
void GraphAppendCaptured(Graph* g, const Op& op);
// The same for a node of the given type captured without the stream's ring
// (memory nodes); returns the node.
GraphNode* GraphAppendCapturedNode(Graph* g, CUgraphNodeType type, const Op& op);
// Adds a node holding a copy of op (its stream dependencies dropped).
GraphNode* GraphAddNode(Graph* g, const Op& op, GraphNode* const* deps, size_t n);
// Adds a node of the given type (event record/wait, child graph: op carries no work).
GraphNode* GraphAddTypedNode(Graph* g, CUgraphNodeType type, const Op& op, GraphNode* const* deps,
                             size_t n);
CUgraphNodeType NodeTypeOf(OpKind k);
// Deep copies of a batch node's operations.
void CopyOps(const std::vector<Op>& from, std::vector<Op>* to);

// Builds e's nodes from g (locked by the caller is not required): copies of
// the ops, child graphs instantiated recursively, a topological order.
// CUDA_ERROR_INVALID_VALUE (with *bad, if given) when the edges form a cycle.
CUresult BuildExec(Graph* g, GraphExec* e, const GraphNode** bad = nullptr);
// True if a and b have the same nodes' types and edges (recursively).
bool SameShape(const GraphExec& a, const GraphExec& b);
// Enqueues one launch of e (e->mu held by the caller) on s.
void EnqueueExec(GraphExec* e, Stream* s);
// Releases refs once the launches are done (at once if they are).
void ReleaseAfter(const UserRefs& refs, const std::vector<StreamDep>& launches);

// The registry of live executable graphs.
void RegisterExec(GraphExec* e);
bool UnregisterExec(GraphExec* e);
GraphExec* LiveExec(CUgraphExec h);  // nullptr if h is not a live one

}  // namespace vgpu::sim
