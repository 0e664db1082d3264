#include "sim/graph.h"

namespace vgpu::sim {

CUgraphNodeType NodeTypeOf(OpKind k) {
  switch (k) {
    case OpKind::kKernel: return CU_GRAPH_NODE_TYPE_KERNEL;
    case OpKind::kCopy: return CU_GRAPH_NODE_TYPE_MEMCPY;
    case OpKind::kSet: return CU_GRAPH_NODE_TYPE_MEMSET;
    case OpKind::kHostFn: return CU_GRAPH_NODE_TYPE_HOST;
    case OpKind::kEventRecord: return CU_GRAPH_NODE_TYPE_EVENT_RECORD;
    case OpKind::kWaitValue:
    case OpKind::kWriteValue: return CU_GRAPH_NODE_TYPE_BATCH_MEM_OP;
    default: return CU_GRAPH_NODE_TYPE_EMPTY;
  }
}

GraphNode* GraphAddNode(Graph* g, const Op& op, GraphNode* const* deps, size_t n) {
  auto node = std::make_unique<GraphNode>();
  node->type = NodeTypeOf(op.kind);
  CopyOp(op, &node->op);
  node->op.dep = {nullptr, 0};
  node->op.extra_deps.clear();
  node->deps.assign(deps, deps + n);
  node->owner = g;
  std::lock_guard<std::mutex> lock(g->mu);
  g->nodes.push_back(std::move(node));
  return g->nodes.back().get();
}

void GraphAppendCaptured(Graph* g, const Op& op) {
  GraphNode* last = nullptr;
  {
    std::lock_guard<std::mutex> lock(g->mu);
    if (!g->nodes.empty()) last = g->nodes.back().get();
  }
  // A captured stream is a chain: each node depends on the one before.
  GraphAddNode(g, op, &last, last != nullptr ? 1 : 0);
}

}  // namespace vgpu::sim
