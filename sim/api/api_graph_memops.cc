// Explicit batch memory operation nodes (cuGraphAddBatchMemOpNode and its
// parameter updates). A node runs its operations in order when its launch
// reaches it, as cuStreamBatchMemOp would on the launch stream; captured
// cuStreamWaitValue*/cuStreamWriteValue* calls make one-operation nodes of
// the same type (sim/engine/graph.cc).
#include <mutex>
#include <vector>

#include "sim/api/api_common.h"
#include "sim/engine/context.h"
#include "sim/engine/graph.h"
#include "sim/api/graph_api.h"

using namespace vgpu::sim;  // NOLINT: entry points below are the C ABI

namespace {

// The operations of p, validated as cuStreamBatchMemOp_v2 validates them.
CUresult Prepare(const CUDA_BATCH_MEM_OP_NODE_PARAMS* p, std::vector<Op>* ops) {
  if (p == nullptr || p->count == 0 || !IsValidContext(p->ctx)) return CUDA_ERROR_INVALID_VALUE;
  return MakeBatchOps(*p, ops);
}

void Store(GraphNode* node, const CUDA_BATCH_MEM_OP_NODE_PARAMS& p, std::vector<Op> ops) {
  node->batch = std::move(ops);
  node->batch_params.assign(p.paramArray, p.paramArray + p.count);
  node->batch_ctx = p.ctx;
}

// What an executable graph may change (cuda.h): addresses, values and the
// wait condition; not the count, the operations' types or the flush bit.
bool Updatable(const std::vector<const Op*>& was, const std::vector<const Op*>& now) {
  if (was.size() != now.size()) return false;
  for (size_t i = 0; i < was.size(); ++i) {
    if (was[i]->kind != now[i]->kind || was[i]->elem != now[i]->elem ||
        (was[i]->mem_flags & CU_STREAM_WAIT_VALUE_FLUSH) !=
            (now[i]->mem_flags & CU_STREAM_WAIT_VALUE_FLUSH)) {
      return false;
    }
  }
  return true;
}

// A node's operations: a captured node holds its one operation in op.
std::vector<const Op*> OpsOf(const ExecNode& n) {
  if (n.batch.empty()) return {&n.op};
  std::vector<const Op*> out;
  for (const Op& op : n.batch) out.push_back(&op);
  return out;
}

}  // namespace

namespace vgpu::sim {

CUresult AddBatchMemOpNode(CUgraphNode* out, CUgraph hg, const CUgraphNode* deps, size_t n,
                           const CUDA_BATCH_MEM_OP_NODE_PARAMS* p) {
  std::vector<Op> ops;
  if (CUresult r = Prepare(p, &ops); r != CUDA_SUCCESS) return r;
  if (CUresult r = AddGraphNode(out, hg, deps, n, CU_GRAPH_NODE_TYPE_BATCH_MEM_OP, Op{});
      r != CUDA_SUCCESS) {
    return r;
  }
  GraphNode* node = NodeOf(*out);
  std::lock_guard<std::mutex> lock(node->owner->mu);
  Store(node, *p, std::move(ops));
  return CUDA_SUCCESS;
}

CUresult SetBatchMemOpNode(GraphNode* node, const CUDA_BATCH_MEM_OP_NODE_PARAMS* p) {
  if (node == nullptr || node->type != CU_GRAPH_NODE_TYPE_BATCH_MEM_OP) return CUDA_ERROR_INVALID_VALUE;
  std::vector<Op> ops;
  if (CUresult r = Prepare(p, &ops); r != CUDA_SUCCESS) return r;
  std::lock_guard<std::mutex> lock(node->owner->mu);
  node->op.kind = OpKind::kNop;  // a captured node becomes an explicit one
  Store(node, *p, std::move(ops));
  return CUDA_SUCCESS;
}

CUresult ExecSetBatchMemOpNode(CUgraphExec h, CUgraphNode hNode,
                               const CUDA_BATCH_MEM_OP_NODE_PARAMS* p) {
  GraphExec* e = LiveExec(h);
  if (e == nullptr || hNode == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::vector<Op> ops;
  if (CUresult r = Prepare(p, &ops); r != CUDA_SUCCESS) return r;
  std::lock_guard<std::mutex> lock(e->mu);
  for (ExecNode& n : e->nodes) {
    if (n.node != NodeOf(hNode)) continue;
    std::vector<const Op*> now;
    for (const Op& op : ops) now.push_back(&op);
    if (n.type != CU_GRAPH_NODE_TYPE_BATCH_MEM_OP || !Updatable(OpsOf(n), now))
      return CUDA_ERROR_INVALID_VALUE;
    n.op.kind = OpKind::kNop;
    n.batch = std::move(ops);
    return CUDA_SUCCESS;
  }
  return CUDA_ERROR_INVALID_VALUE;
}

bool BatchUpdatable(const ExecNode& was, const ExecNode& now) {
  if (was.type != CU_GRAPH_NODE_TYPE_BATCH_MEM_OP) return true;
  return Updatable(OpsOf(was), OpsOf(now));
}

}  // namespace vgpu::sim

SIM_EXPORT CUresult CUDAAPI cuGraphAddBatchMemOpNode(CUgraphNode* phGraphNode, CUgraph hGraph,
                                                     const CUgraphNode* dependencies,
                                                     size_t numDependencies,
                                                     const CUDA_BATCH_MEM_OP_NODE_PARAMS* nodeParams) {
  SIM_ENTER("cuGraphAddBatchMemOpNode");
  return AddBatchMemOpNode(phGraphNode, hGraph, dependencies, numDependencies, nodeParams);
}

SIM_EXPORT CUresult CUDAAPI cuGraphBatchMemOpNodeSetParams(
    CUgraphNode hNode, const CUDA_BATCH_MEM_OP_NODE_PARAMS* nodeParams) {
  SIM_ENTER("cuGraphBatchMemOpNodeSetParams");
  return SetBatchMemOpNode(NodeOf(hNode), nodeParams);
}

SIM_EXPORT CUresult CUDAAPI cuGraphExecBatchMemOpNodeSetParams(
    CUgraphExec hGraphExec, CUgraphNode hNode, const CUDA_BATCH_MEM_OP_NODE_PARAMS* nodeParams) {
  SIM_ENTER("cuGraphExecBatchMemOpNodeSetParams");
  return ExecSetBatchMemOpNode(hGraphExec, hNode, nodeParams);
}
