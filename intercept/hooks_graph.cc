// Graphs: memory allocation nodes (their devices translated; an address when
// added, memory when a launch takes it) and what the graph-memory accounting
// needs to see: instantiation, executable-graph destruction, pool trims
// (intercept/graph_memory.h; the launches are in hooks_launch.cc).
#include <vector>

#include "driver/real_driver.h"
#include "intercept/graph_memory.h"
#include "intercept/hook_body.h"
#include "intercept/hooks.h"
#include "intercept/runtime.h"

namespace vgpu {
namespace {

// A device location named by the application, made physical; false if hidden.
bool LocationToOrdinal(CUmemLocation* loc) {
  if (loc->type != CU_MEM_LOCATION_TYPE_DEVICE) return true;
  loc->id = Runtime::Get().devices().ToOrdinal(VisibleIndex(loc->id)).value();
  return loc->id >= 0;
}

// Allocation node parameters with physical devices; `access` holds the
// translated access descriptors the copy points to.
bool Translate(CUDA_MEM_ALLOC_NODE_PARAMS* p, std::vector<CUmemAccessDesc>* access) {
  if (!LocationToOrdinal(&p->poolProps.location)) return false;
  if (p->accessDescs == nullptr) return true;
  access->assign(p->accessDescs, p->accessDescs + p->accessDescCount);
  for (CUmemAccessDesc& d : *access) {
    if (!LocationToOrdinal(&d.location)) return false;
  }
  p->accessDescs = access->data();
  return true;
}

// Calls add with translated copies of params and hands the address back.
template <typename Add>
CUresult AddAllocation(CUDA_MEM_ALLOC_NODE_PARAMS* params, Add&& add) {
  if (params == nullptr) return add(params);
  CUDA_MEM_ALLOC_NODE_PARAMS p = *params;
  std::vector<CUmemAccessDesc> access;
  if (!Translate(&p, &access)) return CUDA_ERROR_INVALID_DEVICE;
  CUresult r = add(&p);
  if (r == CUDA_SUCCESS) params->dptr = p.dptr;
  return r;
}

// The generic node API's allocation node: the same translation.
template <typename Add>
CUresult AddNode(CUgraphNodeParams* np, Add&& add) {
  if (np == nullptr || np->type != CU_GRAPH_NODE_TYPE_MEM_ALLOC) return add(np);
  CUDA_MEM_ALLOC_NODE_PARAMS v1{np->alloc.poolProps, np->alloc.accessDescs,
                                np->alloc.accessDescCount, np->alloc.bytesize, 0};
  return AddAllocation(&v1, [&](CUDA_MEM_ALLOC_NODE_PARAMS* p) {
    CUgraphNodeParams copy = *np;
    copy.alloc.poolProps = p->poolProps;
    copy.alloc.accessDescs = p->accessDescs;
    CUresult r = add(&copy);
    p->dptr = copy.alloc.dptr;
    if (r == CUDA_SUCCESS) np->alloc.dptr = copy.alloc.dptr;
    return r;
  });
}

template <typename Instantiate>
CUresult Instantiated(CUgraphExec* exec, CUgraph graph, Instantiate&& instantiate) {
  CUresult r = instantiate();
  if (r == CUDA_SUCCESS && exec != nullptr) {
    Runtime::Get().graph_memory().OnInstantiated(*exec, graph_memory::AllocationBytes(graph));
  }
  return r;
}

}  // namespace
}  // namespace vgpu

VGPU_HOOK(cuGraphAddMemAllocNode) CUresult CUDAAPI vgpu_hook_cuGraphAddMemAllocNode(CUgraphNode* phGraphNode, CUgraph hGraph, const CUgraphNode* dependencies, size_t numDependencies, CUDA_MEM_ALLOC_NODE_PARAMS* nodeParams) {
  return vgpu::WhenReady([&] {
    return vgpu::AddAllocation(nodeParams, [&](CUDA_MEM_ALLOC_NODE_PARAMS* p) {
      return REAL_CALL(cuGraphAddMemAllocNode, phGraphNode, hGraph, dependencies, numDependencies, p);
    });
  });
}

VGPU_HOOK(cuGraphAddNode) CUresult CUDAAPI vgpu_hook_cuGraphAddNode(CUgraphNode* phGraphNode, CUgraph hGraph, const CUgraphNode* dependencies, size_t numDependencies, CUgraphNodeParams* nodeParams) {
  return vgpu::WhenReady([&] {
    return vgpu::AddNode(nodeParams, [&](CUgraphNodeParams* p) {
      return REAL_CALL(cuGraphAddNode, phGraphNode, hGraph, dependencies, numDependencies, p);
    });
  });
}

VGPU_HOOK(cuGraphAddNode_v2) CUresult CUDAAPI vgpu_hook_cuGraphAddNode_v2(CUgraphNode* phGraphNode, CUgraph hGraph, const CUgraphNode* dependencies, const CUgraphEdgeData* dependencyData, size_t numDependencies, CUgraphNodeParams* nodeParams) {
  return vgpu::WhenReady([&] {
    return vgpu::AddNode(nodeParams, [&](CUgraphNodeParams* p) {
      return REAL_CALL(cuGraphAddNode_v2, phGraphNode, hGraph, dependencies, dependencyData, numDependencies, p);
    });
  });
}

VGPU_HOOK(cuGraphInstantiateWithFlags) CUresult CUDAAPI vgpu_hook_cuGraphInstantiateWithFlags(CUgraphExec* phGraphExec, CUgraph hGraph, unsigned long long flags) {
  return vgpu::NoThrow(CUDA_ERROR_UNKNOWN, [&] {
    return vgpu::Instantiated(phGraphExec, hGraph, [&] { return REAL_CALL(cuGraphInstantiateWithFlags, phGraphExec, hGraph, flags); });
  });
}

VGPU_HOOK(cuGraphInstantiateWithParams) CUresult CUDAAPI vgpu_hook_cuGraphInstantiateWithParams(CUgraphExec* phGraphExec, CUgraph hGraph, CUDA_GRAPH_INSTANTIATE_PARAMS* instantiateParams) {
  return vgpu::NoThrow(CUDA_ERROR_UNKNOWN, [&] {
    return vgpu::Instantiated(phGraphExec, hGraph, [&] { return REAL_CALL(cuGraphInstantiateWithParams, phGraphExec, hGraph, instantiateParams); });
  });
}

VGPU_HOOK(cuGraphInstantiateWithParams_ptsz) CUresult CUDAAPI vgpu_hook_cuGraphInstantiateWithParams_ptsz(CUgraphExec* phGraphExec, CUgraph hGraph, CUDA_GRAPH_INSTANTIATE_PARAMS* instantiateParams) {
  return vgpu::NoThrow(CUDA_ERROR_UNKNOWN, [&] {
    return vgpu::Instantiated(phGraphExec, hGraph, [&] { return REAL_CALL(cuGraphInstantiateWithParams_ptsz, phGraphExec, hGraph, instantiateParams); });
  });
}

// The CUDA 10-11 five-argument forms (cuGetProcAddress's "cuGraphInstantiate" below 12000).
VGPU_HOOK(cuGraphInstantiate) CUresult CUDAAPI vgpu_hook_cuGraphInstantiate(CUgraphExec* phGraphExec, CUgraph hGraph, CUgraphNode* phErrorNode, char* logBuffer, size_t bufferSize) {
  return vgpu::NoThrow(CUDA_ERROR_UNKNOWN, [&] {
    return vgpu::Instantiated(phGraphExec, hGraph, [&] { return REAL_CALL(cuGraphInstantiate, phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize); });
  });
}

VGPU_HOOK(cuGraphInstantiate_v2) CUresult CUDAAPI vgpu_hook_cuGraphInstantiate_v2(CUgraphExec* phGraphExec, CUgraph hGraph, CUgraphNode* phErrorNode, char* logBuffer, size_t bufferSize) {
  return vgpu::NoThrow(CUDA_ERROR_UNKNOWN, [&] {
    return vgpu::Instantiated(phGraphExec, hGraph, [&] { return REAL_CALL(cuGraphInstantiate_v2, phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize); });
  });
}

VGPU_HOOK(cuGraphExecDestroy) CUresult CUDAAPI vgpu_hook_cuGraphExecDestroy(CUgraphExec hGraphExec) {
  return vgpu::NoThrow(CUDA_ERROR_UNKNOWN, [&] {
    CUresult r = REAL_CALL(cuGraphExecDestroy, hGraphExec);
    if (r == CUDA_SUCCESS) vgpu::Runtime::Get().graph_memory().OnDestroyed(hGraphExec);
    return r;
  });
}

VGPU_HOOK(cuDeviceGraphMemTrim) CUresult CUDAAPI vgpu_hook_cuDeviceGraphMemTrim(CUdevice device) {
  return vgpu::WhenReady([&] {
    const int p = vgpu::Runtime::Get().devices().ToOrdinal(vgpu::VisibleIndex(device)).value();
    if (p < 0) return CUDA_ERROR_INVALID_DEVICE;
    CUresult r = REAL_CALL(cuDeviceGraphMemTrim, p);
    if (r == CUDA_SUCCESS) vgpu::Runtime::Get().graph_memory().Settle(p);
    return r;
  });
}
