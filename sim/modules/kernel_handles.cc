#include "sim/modules/kernel_handles.h"

#include <sched.h>
#include <sys/mman.h>
#include <time.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <new>

namespace vgpu::sim {
namespace {

// Enough for any realistic number of loaded kernels; only touched pages cost
// memory. Recycled slots are reused oldest first, so a stale handle keeps
// failing for as long as possible.
constexpr size_t kMaxHandles = size_t{1} << 18;

std::mutex g_mu;
std::deque<KernelHandle*>* g_free;  // retired slots, under g_mu

}  // namespace

void KernelAttributes::Reset() {
  max_dynamic_shared.store(-1);
  carveout.store(-1);
  non_portable_cluster.store(0);
  cluster_policy.store(0);
  cache_config.store(CU_FUNC_CACHE_PREFER_NONE);
  for (auto& d : cluster_dims) d.store(0);
}

HandleTable& HandleTable::Get() {
  static HandleTable* table = new HandleTable();  // never destroyed: handles outlive exit
  return *table;
}

HandleTable::HandleTable() {
  const size_t bytes = kMaxHandles * sizeof(KernelHandle);
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    std::fprintf(stderr, "vgpu-sim: cannot reserve the kernel handle table\n");
    std::abort();
  }
  base_ = static_cast<KernelHandle*>(p);
  capacity_ = kMaxHandles;
  g_free = new std::deque<KernelHandle*>();
}

KernelHandle* HandleTable::Allocate() {
  std::lock_guard<std::mutex> lock(g_mu);
  KernelHandle* h = nullptr;
  if (const size_t n = constructed_.load(std::memory_order_relaxed); n < capacity_) {
    h = new (base_ + n) KernelHandle();
    // Published after construction: Acquire never pins a slot mid-construction.
    constructed_.store(n + 1, std::memory_order_release);
  } else if (!g_free->empty()) {
    h = g_free->front();
    g_free->pop_front();
  } else {
    return nullptr;
  }
  h->kind = HandleKind::kFunction;
  h->kernel = nullptr;
  h->module = nullptr;
  h->library = nullptr;
  h->attrs_owner = h;
  h->attrs.Reset();
  h->last_ctx.store(nullptr);
  return h;
}

void HandleTable::Retire(KernelHandle* h) {
  h->live.store(0, std::memory_order_seq_cst);
  // Users are launches in flight (microseconds) or a kernel running on a
  // stream worker (possibly long): yield first, then sleep between checks.
  for (int spins = 0; h->users.load(std::memory_order_seq_cst) != 0; ++spins) {
    if (spins < 100) {
      sched_yield();
    } else {
      timespec ts{0, 100'000};
      nanosleep(&ts, nullptr);
    }
  }
  std::lock_guard<std::mutex> lock(g_mu);
  g_free->push_back(h);
}

KernelHandle* HandleTable::Find(const void* handle) const {
  const auto p = reinterpret_cast<uintptr_t>(handle);
  const auto base = reinterpret_cast<uintptr_t>(base_);
  if (p < base || p >= base + capacity_ * sizeof(KernelHandle)) return nullptr;
  const size_t offset = p - base;
  if (offset % sizeof(KernelHandle) != 0) return nullptr;
  if (offset / sizeof(KernelHandle) >= constructed_.load(std::memory_order_acquire)) return nullptr;
  return reinterpret_cast<KernelHandle*>(p);
}

KernelHandle* HandleTable::Acquire(const void* handle) {
  KernelHandle* h = Find(handle);
  if (h == nullptr) return nullptr;
  h->users.fetch_add(1, std::memory_order_seq_cst);
  if (h->live.load(std::memory_order_seq_cst) == 0) {
    Release(h);
    return nullptr;
  }
  return h;
}

}  // namespace vgpu::sim
