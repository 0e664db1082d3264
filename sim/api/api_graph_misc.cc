// User objects, kernel node attributes, conditional handles and DOT output.
#include <atomic>
#include <climits>
#include <cstdio>
#include <mutex>

#include "sim/api/api_common.h"
#include "sim/engine/graph.h"
#include "sim/api/graph_api.h"

using namespace vgpu::sim;  // NOLINT: entry points below are the C ABI

// ---- User objects ----

namespace {

UserObject* UserObjectOf(CUuserObject h) {
  auto* o = reinterpret_cast<UserObject*>(h);
  return LiveUserObject(o) ? o : nullptr;
}

bool ValidCount(unsigned count) { return count != 0 && count <= INT_MAX; }

}  // namespace

SIM_EXPORT CUresult CUDAAPI cuUserObjectCreate(CUuserObject* object_out, void* ptr,
                                               CUhostFn destroy, unsigned int initialRefcount,
                                               unsigned int flags) {
  SIM_ENTER("cuUserObjectCreate");
  // NO_DESTRUCTOR_SYNC is required: the only defined flag.
  if (object_out == nullptr || destroy == nullptr || !ValidCount(initialRefcount) ||
      flags != CU_USER_OBJECT_NO_DESTRUCTOR_SYNC) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *object_out = reinterpret_cast<CUuserObject>(NewUserObject(ptr, destroy, initialRefcount));
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuUserObjectRetain(CUuserObject object, unsigned int count) {
  SIM_ENTER("cuUserObjectRetain");
  UserObject* o = UserObjectOf(object);
  if (o == nullptr || !ValidCount(count)) return CUDA_ERROR_INVALID_VALUE;
  UserObjectRetain(o, count);
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuUserObjectRelease(CUuserObject object, unsigned int count) {
  SIM_ENTER("cuUserObjectRelease");
  UserObject* o = UserObjectOf(object);
  if (o == nullptr || !ValidCount(count)) return CUDA_ERROR_INVALID_VALUE;
  UserObjectRelease(o, count);
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuGraphRetainUserObject(CUgraph graph, CUuserObject object,
                                                    unsigned int count, unsigned int flags) {
  SIM_ENTER("cuGraphRetainUserObject");
  auto* g = reinterpret_cast<Graph*>(graph);
  UserObject* o = UserObjectOf(object);
  if (!LiveGraph(g) || o == nullptr || !ValidCount(count) ||
      (flags & ~CU_GRAPH_USER_OBJECT_MOVE) != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  // MOVE hands over the caller's references instead of taking new ones.
  if ((flags & CU_GRAPH_USER_OBJECT_MOVE) == 0) UserObjectRetain(o, count);
  std::lock_guard<std::mutex> lock(g->mu);
  g->user_refs[o] += count;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuGraphReleaseUserObject(CUgraph graph, CUuserObject object,
                                                     unsigned int count) {
  SIM_ENTER("cuGraphReleaseUserObject");
  auto* g = reinterpret_cast<Graph*>(graph);
  UserObject* o = UserObjectOf(object);
  if (!LiveGraph(g) || o == nullptr || !ValidCount(count)) return CUDA_ERROR_INVALID_VALUE;
  {
    std::lock_guard<std::mutex> lock(g->mu);
    auto it = g->user_refs.find(o);
    // A graph cannot give back references it does not own.
    if (it == g->user_refs.end() || it->second < count) return CUDA_ERROR_INVALID_VALUE;
    it->second -= count;
    if (it->second == 0) g->user_refs.erase(it);
  }
  UserObjectRelease(o, count);
  return CUDA_SUCCESS;
}

// ---- Kernel node attributes ----

namespace {

// The launch attributes that apply to a kernel node.
bool KernelNodeAttr(CUkernelNodeAttrID attr) {
  switch (RawEnum(attr)) {
    case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW:
    case CU_LAUNCH_ATTRIBUTE_COOPERATIVE:
    case CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION:
    case CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
    case CU_LAUNCH_ATTRIBUTE_PRIORITY:
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP:
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN:
    case CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION:
    case CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE:
    case CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
      return true;
    default:
      return false;
  }
}

GraphNode* KernelNodeOf(CUgraphNode h) {
  GraphNode* n = NodeOf(h);
  return n != nullptr && n->type == CU_GRAPH_NODE_TYPE_KERNEL ? n : nullptr;
}

}  // namespace

SIM_EXPORT CUresult CUDAAPI cuGraphKernelNodeGetAttribute(CUgraphNode hNode,
                                                          CUkernelNodeAttrID attr,
                                                          CUkernelNodeAttrValue* value_out) {
  SIM_ENTER("cuGraphKernelNodeGetAttribute");
  GraphNode* n = KernelNodeOf(hNode);
  if (n == nullptr || value_out == nullptr || !KernelNodeAttr(attr))
    return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(n->owner->mu);
  auto it = n->attrs.find(RawEnum(attr));
  CUkernelNodeAttrValue v{};
  if (RawEnum(attr) == CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP)
    v.memSyncDomainMap = {0, 1};  // as streams'
  *value_out = it != n->attrs.end() ? it->second : v;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuGraphKernelNodeSetAttribute(CUgraphNode hNode,
                                                          CUkernelNodeAttrID attr,
                                                          const CUkernelNodeAttrValue* value) {
  SIM_ENTER("cuGraphKernelNodeSetAttribute");
  GraphNode* n = KernelNodeOf(hNode);
  if (n == nullptr || value == nullptr || !KernelNodeAttr(attr)) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(n->owner->mu);
  n->attrs[RawEnum(attr)] = *value;  // recorded: the sim schedules no node by them
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuGraphKernelNodeCopyAttributes(CUgraphNode dst, CUgraphNode src) {
  SIM_ENTER("cuGraphKernelNodeCopyAttributes");
  GraphNode* d = KernelNodeOf(dst);
  GraphNode* s = KernelNodeOf(src);
  if (d == nullptr || s == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (d == s) return CUDA_SUCCESS;
  std::map<int, CUkernelNodeAttrValue> attrs;
  {
    std::lock_guard<std::mutex> lock(s->owner->mu);
    attrs = s->attrs;
  }
  std::lock_guard<std::mutex> lock(d->owner->mu);
  d->attrs = std::move(attrs);
  return CUDA_SUCCESS;
}

// ---- Conditional handles ----

// Handles are created (and unique), but the sim builds no conditional nodes
// (cuGraphAddNode answers NOT_SUPPORTED for them), so none is ever read.
SIM_EXPORT CUresult CUDAAPI cuGraphConditionalHandleCreate(CUgraphConditionalHandle* pHandle_out,
                                                           CUgraph hGraph, CUcontext ctx,
                                                           unsigned int defaultLaunchValue,
                                                           unsigned int flags) {
  SIM_ENTER("cuGraphConditionalHandleCreate");
  static std::atomic<cuuint64_t> next{1};
  if (pHandle_out == nullptr || !LiveGraph(reinterpret_cast<Graph*>(hGraph)) ||
      (flags & ~static_cast<unsigned>(CU_GRAPH_COND_ASSIGN_DEFAULT)) != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *pHandle_out = next.fetch_add(1);
  return CUDA_SUCCESS;
}

// ---- DOT output ----

namespace {

const char* TypeName(CUgraphNodeType t) {
  switch (t) {
    case CU_GRAPH_NODE_TYPE_KERNEL:
      return "KERNEL";
    case CU_GRAPH_NODE_TYPE_MEMCPY:
      return "MEMCPY";
    case CU_GRAPH_NODE_TYPE_MEMSET:
      return "MEMSET";
    case CU_GRAPH_NODE_TYPE_HOST:
      return "HOST";
    case CU_GRAPH_NODE_TYPE_GRAPH:
      return "GRAPH";
    case CU_GRAPH_NODE_TYPE_EMPTY:
      return "EMPTY";
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
      return "WAIT_EVENT";
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
      return "EVENT_RECORD";
    case CU_GRAPH_NODE_TYPE_BATCH_MEM_OP:
      return "BATCH_MEM_OP";
    default:
      return "NODE";
  }
}

// One cluster per graph; a child graph node links to its graph's cluster.
void WriteGraph(FILE* f, Graph* g) {
  std::lock_guard<std::mutex> lock(g->mu);
  std::fprintf(f, "subgraph cluster_%llu {\nlabel=\"graph_%llu\";\n",
               static_cast<unsigned long long>(g->id), static_cast<unsigned long long>(g->id));
  for (const auto& n : g->nodes) {
    std::fprintf(f, "\"node_%llu\" [label=\"%s\\nnode_%llu\"];\n",
                 static_cast<unsigned long long>(n->id), TypeName(n->type),
                 static_cast<unsigned long long>(n->id));
  }
  for (const auto& n : g->nodes) {
    for (const GraphNode* d : n->deps) {
      std::fprintf(f, "\"node_%llu\" -> \"node_%llu\";\n", static_cast<unsigned long long>(d->id),
                   static_cast<unsigned long long>(n->id));
    }
  }
  std::fprintf(f, "}\n");
  for (const auto& n : g->nodes) {
    if (n->child != nullptr) WriteGraph(f, n->child);
  }
}

}  // namespace

SIM_EXPORT CUresult CUDAAPI cuGraphDebugDotPrint(CUgraph hGraph, const char* path,
                                                 unsigned int flags) {
  SIM_ENTER("cuGraphDebugDotPrint");
  auto* g = reinterpret_cast<Graph*>(hGraph);
  if (!LiveGraph(g) || path == nullptr) return CUDA_ERROR_INVALID_VALUE;
  FILE* f = std::fopen(path, "w");
  if (f == nullptr) return CUDA_ERROR_OPERATING_SYSTEM;
  // flags choose extra detail per node; the sim writes types and edges only.
  std::fprintf(f, "digraph dot {\n");
  WriteGraph(f, g);
  std::fprintf(f, "}\n");
  return std::fclose(f) == 0 ? CUDA_SUCCESS : CUDA_ERROR_OPERATING_SYSTEM;
}
