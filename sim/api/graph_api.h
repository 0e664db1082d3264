// Helpers shared by the graph entry points (api_graph*.cc).
#pragma once

#include <cuda.h>

#include <vector>

#include "sim/engine/graph.h"

namespace vgpu::sim {

inline GraphNode* NodeOf(CUgraphNode h) { return reinterpret_cast<GraphNode*>(h); }

// The op a node with these parameters runs (validated as the Add call does).
CUresult MakeKernelOp(const CUDA_KERNEL_NODE_PARAMS& p, Op* op);
// CUDA 10-11's kernel node parameters (no kern, no ctx) in the current form.
CUDA_KERNEL_NODE_PARAMS FromV1(const CUDA_KERNEL_NODE_PARAMS_v1& p);
CUresult MakeCopyOp(const CUDA_MEMCPY3D& p, Op* op);
CUresult MakeSetOp(const CUDA_MEMSET_NODE_PARAMS& p, Op* op);
CUresult MakeHostOp(const CUDA_HOST_NODE_PARAMS& p, Op* op);
// A batch memory operation node's operations (api_streamops.cc).
CUresult MakeBatchOps(const CUDA_BATCH_MEM_OP_NODE_PARAMS& p, std::vector<Op>* ops);

// The checks AddGraphNode makes: an output, a live graph, dependencies of it.
CUresult CheckNewNode(CUgraphNode* out, CUgraph hg, const CUgraphNode* deps, size_t n);
// Adds a node of the given type after checking the graph and dependencies.
CUresult AddGraphNode(CUgraphNode* out, CUgraph hg, const CUgraphNode* deps, size_t n,
                      CUgraphNodeType type, const Op& op);
// cuGraphAdd{Kernel,Memcpy,Memset,ChildGraph}Node without the entry point.
CUresult AddKernelNode(CUgraphNode* out, CUgraph hg, const CUgraphNode* deps, size_t n,
                       const CUDA_KERNEL_NODE_PARAMS& p);
CUresult AddMemcpyNode(CUgraphNode* out, CUgraph hg, const CUgraphNode* deps, size_t n,
                       const CUDA_MEMCPY3D& p);
CUresult AddMemsetNode(CUgraphNode* out, CUgraph hg, const CUgraphNode* deps, size_t n,
                       const CUDA_MEMSET_NODE_PARAMS& p);
CUresult AddChildGraphNode(CUgraphNode* out, CUgraph hg, const CUgraphNode* deps, size_t n,
                           CUgraph child, bool move);
CUresult AddEventNode(CUgraphNode* out, CUgraph hg, const CUgraphNode* deps, size_t n,
                      CUgraphNodeType type, CUevent ev);

// Memory allocation and free nodes (api_graph_memnodes.cc): added explicitly,
// or captured from cuMemAllocAsync/cuMemFreeAsync on a capturing stream.
CUresult AddMemAllocNode(CUgraphNode* out, CUgraph hg, const CUgraphNode* deps, size_t n,
                         CUDA_MEM_ALLOC_NODE_PARAMS* p);
CUresult AddMemFreeNode(CUgraphNode* out, CUgraph hg, const CUgraphNode* deps, size_t n,
                        CUdeviceptr dptr);
CUresult CaptureMemAlloc(Stream* s, size_t bytes, CUdeviceptr* dptr);
CUresult CaptureMemFree(Stream* s, CUdeviceptr dptr);

// Replaces a graph node's parameters (the node's type must match).
CUresult SetKernelNode(GraphNode* node, const CUDA_KERNEL_NODE_PARAMS& p);
CUresult SetMemcpyNode(GraphNode* node, const CUDA_MEMCPY3D& p);
CUresult SetMemsetNode(GraphNode* node, const CUDA_MEMSET_NODE_PARAMS& p);
CUresult SetHostNode(GraphNode* node, const CUDA_HOST_NODE_PARAMS& p);
CUresult SetEventNode(GraphNode* node, CUgraphNodeType type, CUevent ev);

// Replaces what an executable graph's node does at its next launch.
CUresult ExecSetOp(CUgraphExec h, CUgraphNode node, CUgraphNodeType type, const Op& op);
CUresult ExecSetChild(CUgraphExec h, CUgraphNode node, CUgraph child);

// Batch memory operation nodes (api_graph_memops.cc).
CUresult AddBatchMemOpNode(CUgraphNode* out, CUgraph hg, const CUgraphNode* deps, size_t n,
                           const CUDA_BATCH_MEM_OP_NODE_PARAMS* p);
CUresult SetBatchMemOpNode(GraphNode* node, const CUDA_BATCH_MEM_OP_NODE_PARAMS* p);
CUresult ExecSetBatchMemOpNode(CUgraphExec h, CUgraphNode node,
                               const CUDA_BATCH_MEM_OP_NODE_PARAMS* p);
// Whether cuGraphExecUpdate may give `was` the operations of `now`.
bool BatchUpdatable(const ExecNode& was, const ExecNode& now);

}  // namespace vgpu::sim
