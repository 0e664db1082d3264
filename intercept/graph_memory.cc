#include "intercept/graph_memory.h"

#include <vector>

#include "driver/real_driver.h"

namespace vgpu::graph_memory {
namespace {

constexpr int kDevices = GraphMemoryCharge::kDevices;
constexpr int kMaxDepth = 64;  // child graphs nest; a cycle cannot, but stay bounded

void Walk(CUgraph graph, GraphMemoryCharge::Bytes* bytes, int depth) {
  size_t n = 0;
  if (depth > kMaxDepth || REAL_CALL(cuGraphGetNodes, graph, nullptr, &n) != CUDA_SUCCESS || n == 0)
    return;
  std::vector<CUgraphNode> nodes(n);
  if (REAL_CALL(cuGraphGetNodes, graph, nodes.data(), &n) != CUDA_SUCCESS) return;
  for (size_t i = 0; i < n && i < nodes.size(); ++i) {
    CUgraphNodeType t{};
    if (REAL_CALL(cuGraphNodeGetType, nodes[i], &t) != CUDA_SUCCESS) continue;
    if (t == CU_GRAPH_NODE_TYPE_MEM_ALLOC) {
      CUDA_MEM_ALLOC_NODE_PARAMS p{};
      if (REAL_CALL(cuGraphMemAllocNodeGetParams, nodes[i], &p) != CUDA_SUCCESS) continue;
      const int d = p.poolProps.location.id;
      if (d >= 0 && d < kDevices) (*bytes)[d] += p.bytesize;
    } else if (t == CU_GRAPH_NODE_TYPE_GRAPH) {
      CUgraph child = nullptr;
      if (REAL_CALL(cuGraphChildGraphNodeGetGraph, nodes[i], &child) == CUDA_SUCCESS)
        Walk(child, bytes, depth + 1);
    }
  }
}

uint64_t PoolAttribute(int device, CUgraphMem_attribute attr) {
  cuuint64_t v = 0;
  if (REAL_CALL(cuDeviceGetGraphMemAttribute, device, attr, &v) != CUDA_SUCCESS) return 0;
  return v;
}

}  // namespace

uint64_t DriverGraphPools::Used(int device) {
  return PoolAttribute(device, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT);
}

uint64_t DriverGraphPools::Reserved(int device) {
  return PoolAttribute(device, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT);
}

void DriverGraphPools::Trim(int device) { REAL_CALL(cuDeviceGraphMemTrim, device); }

GraphMemoryCharge::Bytes AllocationBytes(CUgraph graph) {
  GraphMemoryCharge::Bytes bytes = {};
  Walk(graph, &bytes, 0);
  return bytes;
}

}  // namespace vgpu::graph_memory
