#include "intercept/graph_memory.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "common/config/config.h"
#include "common/log.h"
#include "driver/real_driver.h"
#include "intercept/runtime.h"

namespace vgpu::graph_memory {
namespace {

constexpr int kDevices = Config::kMaxDevices;
using Bytes = std::array<uint64_t, kDevices>;

std::mutex g_mu;
// Executable graphs with allocation nodes: their nodes' bytes per physical device.
auto* g_execs = new std::unordered_map<CUgraphExec, Bytes>();
std::atomic<int> g_active{0};  // g_execs->size(), read without the lock
// What the quota is charged for each device's graph pool (g_mu).
Bytes g_charged = {};

// Suspend cannot move the pool: its charge is noted as driver memory.
uint64_t NonMigratableKey(int device) { return 0x6772617068000000ull + device; }  // "graph"

// Adds the allocation nodes of graph (and of its child graphs) to *bytes.
void Walk(CUgraph graph, Bytes* bytes, int depth = 0) {
  size_t n = 0;
  if (depth > 64 || REAL_CALL(cuGraphGetNodes, graph, nullptr, &n) != CUDA_SUCCESS || n == 0)
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

// Moves the device's charge to the pool's reserved size (g_mu held).
void SettleLocked(int device) {
  const uint64_t reserved = PoolAttribute(device, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT);
  uint64_t& charged = g_charged[device];
  if (reserved < charged) {
    Runtime::Get().accounting().Release(device, charged - reserved);
    charged = reserved;
  } else if (reserved > charged) {
    // The driver rounded its pool up beyond the nodes' sizes, after the fact.
    if (Runtime::Get().accounting().Reserve(device, reserved - charged)) {
      charged = reserved;
    } else {
      VGPU_LOG(kWarn, "graph memory pool of device {} holds {} bytes, {} charged to the quota",
               device, reserved, charged);
    }
  }
  if (charged == 0) {
    Runtime::Get().non_migratable().Forget(NonMigratableKey(device));
  } else {
    Runtime::Get().non_migratable().Note(NonMigratableKey(device), charged, nullptr);
  }
}

}  // namespace

bool Active() { return g_active.load(std::memory_order_relaxed) != 0; }

void OnInstantiated(CUgraphExec exec, CUgraph graph) {
  Bytes bytes = {};
  Walk(graph, &bytes);
  if (std::all_of(bytes.begin(), bytes.end(), [](uint64_t b) { return b == 0; })) return;
  std::lock_guard<std::mutex> lock(g_mu);
  (*g_execs)[exec] = bytes;
  g_active.store(static_cast<int>(g_execs->size()), std::memory_order_relaxed);
}

void OnDestroyed(CUgraphExec exec) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_execs->find(exec);
  if (it == g_execs->end()) return;
  const Bytes bytes = it->second;
  g_execs->erase(it);
  g_active.store(static_cast<int>(g_execs->size()), std::memory_order_relaxed);
  for (int d = 0; d < kDevices; ++d) {
    if (bytes[d] != 0) SettleLocked(d);
  }
}

void Settle(int device) {
  if (device < 0 || device >= kDevices) return;
  std::lock_guard<std::mutex> lock(g_mu);
  SettleLocked(device);
}

void TrimUnused() {
  std::lock_guard<std::mutex> lock(g_mu);
  for (int d = 0; d < kDevices; ++d) {
    if (g_charged[d] == 0) continue;
    REAL_CALL(cuDeviceGraphMemTrim, d);
    SettleLocked(d);
  }
}

LaunchScope::LaunchScope(CUgraphExec exec) {
  g_mu.lock();
  auto it = g_execs->find(exec);
  if (it == g_execs->end()) {
    g_mu.unlock();
    return;
  }
  held_ = true;
  // The launch can grow a pool by its nodes' bytes less what the pool holds unused.
  const Bytes& bytes = it->second;
  for (int d = 0; d < kDevices; ++d) {
    if (bytes[d] == 0) continue;
    devices_ |= 1u << d;
    const uint64_t used = PoolAttribute(d, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT);
    const uint64_t reserved = PoolAttribute(d, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT);
    const uint64_t room = reserved > used ? reserved - used : 0;
    const uint64_t grow = bytes[d] > room ? bytes[d] - room : 0;
    if (!Runtime::Get().accounting().Reserve(d, grow)) {
      ok_ = false;
      for (int u = 0; u < d; ++u) {
        if ((devices_ >> u) & 1u) SettleLocked(u);  // gives back what this launch took
      }
      return;
    }
    g_charged[d] += grow;
  }
}

LaunchScope::~LaunchScope() {
  if (!held_) return;
  if (ok_) {
    for (int d = 0; d < kDevices; ++d) {
      if ((devices_ >> d) & 1u) SettleLocked(d);
    }
  }
  g_mu.unlock();
}

}  // namespace vgpu::graph_memory
