// External semaphores as stream work (api_external.cc): what a signal or wait
// operation carries through streams and graphs.
#pragma once

#include <cuda.h>

#include <memory>
#include <vector>

namespace vgpu::sim {

struct ExtSema;  // an imported semaphore: its payload mapping (api_external.cc)
struct Op;
struct GraphNode;

// One cuSignal/cuWaitExternalSemaphoresAsync call or one graph node. The
// arrays are kept as given so that the node's GetParams can return them; the
// semaphores are held so that their payload stays mapped while queued work,
// a graph or an executable graph may still reach it.
struct ExtSemaBatch {
  bool signal = false;
  std::vector<CUexternalSemaphore> handles;
  std::vector<CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS> signal_params;
  std::vector<CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS> wait_params;
  std::vector<std::shared_ptr<ExtSema>> semas;
};

// Runs the batch on a stream's worker: a wait blocks until satisfied.
void RunExtSemaBatch(const ExtSemaBatch& b);

// The op of an external semaphore signal or wait node (validated as the
// cuGraphAdd*Node entry points do).
CUresult MakeExtSemaSignalOp(const CUDA_EXT_SEM_SIGNAL_NODE_PARAMS& p, Op* op);
CUresult MakeExtSemaWaitOp(const CUDA_EXT_SEM_WAIT_NODE_PARAMS& p, Op* op);
// Replaces a graph node's op (the node's type must be `type`).
CUresult SetExtSemaNode(GraphNode* node, CUgraphNodeType type, const Op& op);

}  // namespace vgpu::sim
