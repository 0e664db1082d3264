#include "sim/engine/graph_memory.h"

#include <algorithm>
#include <map>
#include <mutex>

#include "sim/engine/address_space.h"
#include "sim/engine/device_memory.h"
#include "sim/node/node_region.h"
#include "sim/engine/sim_state.h"

namespace vgpu::sim {
namespace {

struct Allocation {
  int device = 0;
  uint64_t size = 0;      // page-rounded: what the graph pool charges
  uint64_t graph_id = 0;  // the graph whose node made it
  int owners = 0;         // the graph and its executable graph
  bool held = false;      // a launch allocated it and nothing freed it yet
  bool freed_in_owner = false;
  bool freed_elsewhere = false;
};

// A device's graph pool: what launches hold now, what the pool keeps charged
// on the node (never less than used), and their high watermarks.
struct Pool {
  uint64_t used = 0, used_high = 0;
  uint64_t reserved = 0, reserved_high = 0;
};

std::mutex g_mu;
auto* g_allocs = new std::map<CUdeviceptr, Allocation>();
Pool g_pools[kMaxDevices];

Allocation* Find(CUdeviceptr base) {  // g_mu held
  auto it = g_allocs->find(base);
  return it == g_allocs->end() ? nullptr : &it->second;
}

// Gives the address back once nothing can reach it any more (g_mu held).
void MaybeUnmap(CUdeviceptr base) {
  auto it = g_allocs->find(base);
  if (it == g_allocs->end() || it->second.owners > 0 || it->second.held) return;
  g_allocs->erase(it);
  UnmapGraphMemory(base);
}

// Allocates a's bytes from its device's graph pool (g_mu held).
bool Hold(Allocation* a) {
  Pool& p = g_pools[a->device];
  uint64_t used = p.used + a->size;
  if (used > p.reserved) {
    if (!Node().Reserve(a->device, used - p.reserved)) return false;
    p.reserved = used;
    p.reserved_high = std::max(p.reserved_high, p.reserved);
  }
  p.used = used;
  p.used_high = std::max(p.used_high, used);
  a->held = true;
  return true;
}

void Drop(Allocation* a) {  // g_mu held
  if (!a->held) return;
  g_pools[a->device].used -= a->size;
  a->held = false;
}

}  // namespace

CUresult GraphMemCreate(int device, size_t bytes, uint64_t graph_id, CUdeviceptr* out) {
  if (device < 0 || device >= kMaxDevices) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = MapGraphMemory(device, bytes, out); r != CUDA_SUCCESS) return r;
  std::lock_guard<std::mutex> lock(g_mu);
  Allocation& a = (*g_allocs)[*out];
  a.device = device;
  a.size = RoundUp(bytes, kPageSize);
  a.graph_id = graph_id;
  a.owners = 1;
  return CUDA_SUCCESS;
}

void GraphMemRetain(CUdeviceptr base) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (Allocation* a = Find(base)) ++a->owners;
}

void GraphMemRelease(CUdeviceptr base) {
  std::lock_guard<std::mutex> lock(g_mu);
  Allocation* a = Find(base);
  if (a == nullptr) return;
  --a->owners;
  MaybeUnmap(base);
}

bool IsGraphAllocation(CUdeviceptr base) {
  std::lock_guard<std::mutex> lock(g_mu);
  return Find(base) != nullptr;
}

CUresult GraphMemAddFree(CUdeviceptr base, uint64_t graph_id) {
  std::lock_guard<std::mutex> lock(g_mu);
  Allocation* a = Find(base);
  // cuda.h: an allocation is freed once in its own graph, or by other graphs
  // (then never in its own).
  if (a == nullptr || a->freed_in_owner) return CUDA_ERROR_INVALID_VALUE;
  if (a->graph_id == graph_id) {
    if (a->freed_elsewhere) return CUDA_ERROR_INVALID_VALUE;
    a->freed_in_owner = true;
  } else {
    a->freed_elsewhere = true;
  }
  return CUDA_SUCCESS;
}

CUresult GraphMemLaunch(const std::vector<GraphMemStep>& steps, bool auto_free) {
  std::lock_guard<std::mutex> lock(g_mu);
  for (const GraphMemStep& s : steps) {
    Allocation* a = Find(s.ptr);
    if (s.alloc && a != nullptr && a->held && !auto_free) return CUDA_ERROR_INVALID_VALUE;
  }
  // A failure part way undoes the steps done: nothing changes.
  std::vector<std::pair<CUdeviceptr, bool>> was;  // each step's allocation and its held before
  Pool saved[kMaxDevices];
  std::copy(std::begin(g_pools), std::end(g_pools), std::begin(saved));
  for (const GraphMemStep& s : steps) {
    Allocation* a = Find(s.ptr);
    if (a == nullptr) continue;
    was.emplace_back(s.ptr, a->held);
    Drop(a);  // a free node, or AUTO_FREE_ON_LAUNCH before the allocation
    if (s.alloc && !Hold(a)) {
      for (auto it = was.rbegin(); it != was.rend(); ++it) Find(it->first)->held = it->second;
      for (int d = 0; d < kMaxDevices; ++d) {
        if (g_pools[d].reserved > saved[d].reserved)
          Node().Unreserve(d, g_pools[d].reserved - saved[d].reserved);
        g_pools[d] = saved[d];
      }
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
  }
  for (const auto& step : was) MaybeUnmap(step.first);
  return CUDA_SUCCESS;
}

CUresult GraphMemFree(CUdeviceptr base, bool check_only) {
  std::lock_guard<std::mutex> lock(g_mu);
  Allocation* a = Find(base);
  // Freed in its own graph: no one else may free it; not held: nothing to free.
  if (a == nullptr || a->freed_in_owner || !a->held) return CUDA_ERROR_INVALID_VALUE;
  if (check_only) return CUDA_SUCCESS;
  Drop(a);
  MaybeUnmap(base);
  return CUDA_SUCCESS;
}

CUresult GraphMemGetAttribute(int device, CUgraphMem_attribute attr, void* value) {
  std::lock_guard<std::mutex> lock(g_mu);
  const Pool& p = g_pools[device];
  cuuint64_t v = 0;
  switch (attr) {
    case CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT:
      v = p.used;
      break;
    case CU_GRAPH_MEM_ATTR_USED_MEM_HIGH:
      v = p.used_high;
      break;
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT:
      v = p.reserved;
      break;
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH:
      v = p.reserved_high;
      break;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
  *static_cast<cuuint64_t*>(value) = v;
  return CUDA_SUCCESS;
}

CUresult GraphMemSetAttribute(int device, CUgraphMem_attribute attr, const void* value) {
  // "High watermark can only be reset to zero": it restarts from the current value.
  if (*static_cast<const cuuint64_t*>(value) != 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(g_mu);
  Pool& p = g_pools[device];
  switch (attr) {
    case CU_GRAPH_MEM_ATTR_USED_MEM_HIGH:
      p.used_high = p.used;
      return CUDA_SUCCESS;
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH:
      p.reserved_high = p.reserved;
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

void GraphMemTrim(int device) {
  std::lock_guard<std::mutex> lock(g_mu);
  Pool& p = g_pools[device];
  if (p.reserved > p.used) Node().Unreserve(device, p.reserved - p.used);
  p.reserved = p.used;
}

}  // namespace vgpu::sim
