#include "sim/nvml/nvml_state.h"

#include <sys/mman.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <new>
#include <string>

#include "sim/node/sim_config.h"

namespace vgpu::sim::nvml {
namespace {

constexpr unsigned int kKnownInitFlags = NVML_INIT_FLAG_NO_GPUS | NVML_INIT_FLAG_NO_ATTACH;

nvmlDevice_st g_devices[kMaxDevices] = {{0}, {1}, {2},  {3},  {4},  {5},  {6},  {7},
                                        {8}, {9}, {10}, {11}, {12}, {13}, {14}, {15}};
static_assert(kMaxDevices == 16, "extend g_devices");

std::mutex g_init_mu;
int g_refcount = 0;                        // under g_init_mu
std::atomic<bool> g_initialized{false};    // g_refcount > 0, for lock-free checks
std::atomic<NodeRegion*> g_node{nullptr};  // the node of the current initialization
std::atomic<unsigned int> g_device_count{0};
// Bit b of g_peers[a]: devices a and b have a peer path (VGPU_SIM_P2P).
std::atomic<uint32_t> g_peers[kMaxDevices];

void Log(const std::string& message) {
  std::fprintf(stderr, "vgpu-sim: nvmlInit: %s\n", message.c_str());
}

// The mapping is released at re-initialization, not at nvmlShutdown: as with
// the real library, calls racing with the last shutdown must not fault.
void Release(NodeRegion* node) {
  if (node == nullptr) return;
  munmap(node->header(), sizeof(NodeHeader));
  delete node;
}

// Attaches to the running node; if there is none, creates it from the same
// configuration libcuda reads. Open registers a process slot, which NVML gives
// back at once: a monitor is not a compute process.
NodeRegion* AttachOrCreate(nvmlReturn_t* result) {
  SimConfig config;
  std::string error;
  if (!LoadSimConfig(&config, &error)) {
    Log(error);
    *result = NVML_ERROR_UNKNOWN;
    return nullptr;
  }
  for (auto& p : g_peers) p.store(0, std::memory_order_relaxed);
  for (const auto& [a, b] : config.p2p) {
    g_peers[a].fetch_or(1u << b, std::memory_order_relaxed);
    g_peers[b].fetch_or(1u << a, std::memory_order_relaxed);
  }
  std::string attach_error;
  if (NodeRegion* node = NodeRegion::Attach(config.node_name, &attach_error)) return node;
  NodeRegion* node = NodeRegion::Open(config, &error);
  if (node == nullptr) {
    Log(error);
    *result = NVML_ERROR_DRIVER_NOT_LOADED;
    return nullptr;
  }
  node->Unregister();
  return node;
}

nvmlReturn_t FirstInit(unsigned int flags) {
  nvmlReturn_t result = NVML_SUCCESS;
  NodeRegion* node = AttachOrCreate(&result);
  unsigned int count = node != nullptr ? static_cast<unsigned int>(node->device_count()) : 0;
  if (count > static_cast<unsigned int>(kMaxDevices)) count = kMaxDevices;
  if (node == nullptr || count == 0) {
    if ((flags & NVML_INIT_FLAG_NO_GPUS) == 0) {
      Release(node);
      return node == nullptr ? result : NVML_ERROR_GPU_NOT_FOUND;
    }
  }
  Release(g_node.exchange(node));
  g_device_count.store(count);
  return NVML_SUCCESS;
}

}  // namespace

nvmlReturn_t Init(unsigned int flags) {
  if ((flags & ~kKnownInitFlags) != 0) return NVML_ERROR_INVALID_ARGUMENT;
  try {
    std::lock_guard<std::mutex> lock(g_init_mu);
    if (g_refcount == 0) {
      if (nvmlReturn_t r = FirstInit(flags); r != NVML_SUCCESS) return r;
    }
    ++g_refcount;
    g_initialized.store(true, std::memory_order_release);
    return NVML_SUCCESS;
  } catch (const std::bad_alloc&) {
    return NVML_ERROR_MEMORY;
  } catch (...) {
    return NVML_ERROR_UNKNOWN;
  }
}

nvmlReturn_t Shutdown() {
  std::lock_guard<std::mutex> lock(g_init_mu);
  if (g_refcount == 0) return NVML_ERROR_UNINITIALIZED;
  if (--g_refcount == 0) g_initialized.store(false, std::memory_order_release);
  return NVML_SUCCESS;
}

NodeRegion* Node() { return g_node.load(std::memory_order_acquire); }

unsigned int DeviceCount() { return g_device_count.load(std::memory_order_relaxed); }

nvmlDevice_t Handle(unsigned int index) { return &g_devices[index]; }

bool PeerLinked(int a, int b) {
  if (a < 0 || b < 0 || a >= kMaxDevices || b >= kMaxDevices || a == b) return false;
  return (g_peers[a].load(std::memory_order_relaxed) >> b) & 1u;
}

bool HasPeer(int d) {
  if (d < 0 || d >= kMaxDevices) return false;
  // Only peers that exist on this node count.
  uint32_t present = DeviceCount() >= 32 ? ~0u : (1u << DeviceCount()) - 1;
  return (g_peers[d].load(std::memory_order_relaxed) & present) != 0;
}

nvmlReturn_t CheckInit() {
  return g_initialized.load(std::memory_order_acquire) ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED;
}

nvmlReturn_t Resolve(nvmlDevice_t device, int* index) {
  if (nvmlReturn_t r = CheckInit(); r != NVML_SUCCESS) return r;
  // Compared as integers: a garbage pointer must not be dereferenced.
  auto p = reinterpret_cast<uintptr_t>(device);
  auto base = reinterpret_cast<uintptr_t>(&g_devices[0]);
  if (p < base || p >= base + sizeof g_devices || (p - base) % sizeof(nvmlDevice_st) != 0) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  auto i = static_cast<unsigned int>((p - base) / sizeof(nvmlDevice_st));
  if (i >= DeviceCount()) return NVML_ERROR_INVALID_ARGUMENT;
  *index = static_cast<int>(i);
  return NVML_SUCCESS;
}

nvmlReturn_t CopyOut(const char* text, char* buf, unsigned int length) {
  if (buf == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  size_t n = std::strlen(text);
  if (length <= n) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::memcpy(buf, text, n + 1);
  return NVML_SUCCESS;
}

void FormatUuid(const uint8_t (&u)[16], char* out) {
  std::snprintf(out, 41, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12],
                u[13], u[14], u[15]);
}

}  // namespace vgpu::sim::nvml
