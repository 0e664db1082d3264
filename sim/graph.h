// CUDA graphs: built by stream capture or explicitly, replayed by launching
// copies of their operations in a topological order on one stream.
#pragma once

#include <cuda.h>

#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "sim/stream.h"

namespace vgpu::sim {

struct GraphNode {
  CUgraphNodeType type = CU_GRAPH_NODE_TYPE_EMPTY;
  Op op;
  std::vector<GraphNode*> deps;
  struct Graph* owner = nullptr;
  // The parameters an explicit cuGraphAdd*Node was given, returned as they
  // were by the node's Get*Params query (captured nodes rebuild theirs from op).
  std::optional<CUDA_MEMCPY3D> copy_params;
  std::optional<CUDA_MEMSET_NODE_PARAMS> set_params;
  CUkernel kern = nullptr;  // cuGraphAddKernelNode's kern, when it named one
  CUcontext kern_ctx = nullptr;
  // Storage the node owns for what its queries return by pointer.
  std::vector<void*> kernel_args;
  CUstreamBatchMemOpParams mem_op{};
};

struct Graph {
  std::mutex mu;
  std::vector<std::unique_ptr<GraphNode>> nodes;  // insertion order is topological
  Stream* capturing = nullptr;
  bool capture_invalidated = false;
};

struct GraphExec {
  std::mutex mu;        // guards ops against cuGraphExecUpdate during a launch
  std::vector<Op> ops;  // replayed in order
  // The instantiated graph's shape, for cuGraphExecUpdate: node i's type and
  // the indices of its dependencies (in the graph's node order).
  std::vector<CUgraphNodeType> types;
  std::vector<std::vector<size_t>> deps;
  unsigned long long flags = 0;
  Context* ctx = nullptr;
  // The instantiated graph's nodes (compared, never dereferenced: the graph
  // may be gone), for cuGraphNodeGetEnabled.
  std::vector<const GraphNode*> nodes;
};

// Called by Stream::Commit while the stream captures.
void GraphAppendCaptured(Graph* g, const Op& op);
// Adds a node holding a copy of op (its stream dependencies dropped).
GraphNode* GraphAddNode(Graph* g, const Op& op, GraphNode* const* deps, size_t n);
CUgraphNodeType NodeTypeOf(OpKind k);

}  // namespace vgpu::sim
