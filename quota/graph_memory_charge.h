// Graph memory in the quota. A CUDA graph's memory allocation nodes (added
// with cuGraphAddMemAllocNode or cuGraphAddNode, or captured from
// cuMemAllocAsync) take their memory when the graph is launched, from the
// driver's per-device graph pool, which keeps what it took until
// cuDeviceGraphMemTrim. The group's quota is charged for that pool:
//
//   - at instantiation the hooks walk the graph (child graphs too) and give
//     the bytes its allocation nodes can take, per device (OnInstantiated);
//   - a launch of such an executable graph first reserves those bytes less
//     what the pool holds unused (no room: the launch is refused, nothing
//     launched), then, after the driver's launch, settles the device's charge
//     on the pool's reserved size and returns the rest (LaunchScope);
//   - a trim and the destruction of an executable graph settle it again (the
//     pool only shrinks there).
//
// The charge is never below what the pool holds after a settled launch (on a
// real driver the pool may round up beyond the nodes' sizes; that excess is
// charged after the launch and logged if the quota cannot hold it). Graph
// pool memory is driver memory: suspend cannot move it, so every change of a
// device's charge is reported (`on_charge`, libvgpu's non-migratable book),
// and suspend first trims what the pools cache (TrimUnused).
// Launches of graphs without allocation nodes pay one relaxed atomic load,
// and a brief lock while the process has an executable graph with them.
// Devices are the accounting's (libvgpu: driver ordinals).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <unordered_map>

#include "quota/allocation_accounting.h"
#include "quota/quota_ledger.h"

namespace vgpu {

// The driver's graph pools, as the charge sees them (libvgpu: the real
// driver's graph memory attributes; tests: a fake).
class GraphPools {
 public:
  virtual ~GraphPools() = default;
  virtual uint64_t Used(int device) = 0;      // CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT
  virtual uint64_t Reserved(int device) = 0;  // CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT
  virtual void Trim(int device) = 0;          // cuDeviceGraphMemTrim
};

class GraphMemoryCharge {
 public:
  static constexpr int kDevices = kLedgerDevices;
  using Bytes = std::array<uint64_t, kDevices>;
  // What a device's pool is charged now (0: nothing).
  using ChargeObserver = std::function<void(int device, uint64_t charged)>;

  GraphMemoryCharge(GraphPools* pools, AllocationAccounting* accounting, ChargeObserver on_charge);

  // True once some executable graph with allocation nodes exists (the launch
  // hooks' fast path).
  bool Active() const { return active_.load(std::memory_order_relaxed) != 0; }
  // `exec` was instantiated from a graph whose allocation nodes take `bytes`.
  void OnInstantiated(const void* exec, const Bytes& bytes);
  // `exec` is gone (its destruction succeeded).
  void OnDestroyed(const void* exec);
  // The pool of `device` may have shrunk (trim).
  void Settle(int device);
  // Gives back what the pools hold unused and settles: before suspend or
  // checkpoint, so that only graph memory a launch still holds keeps the
  // process from being moved.
  void TrimUnused();
  uint64_t Charged(int device) const;

  // Around one launch of an executable graph: if it has allocation nodes,
  // holds the charge's lock, reserves what the launch can add to the pools,
  // and on destruction settles the charges on the pools' sizes. Launches of
  // such graphs are serialized within the process.
  class LaunchScope {
   public:
    LaunchScope(GraphMemoryCharge& charge, const void* exec);
    ~LaunchScope();
    LaunchScope(const LaunchScope&) = delete;
    LaunchScope& operator=(const LaunchScope&) = delete;
    // False: the quota cannot hold the launch's allocations (do not launch).
    bool ok() const { return ok_; }

   private:
    GraphMemoryCharge& c_;
    bool held_ = false;
    bool ok_ = true;
    uint32_t devices_ = 0;  // bit d: the launch allocates on device d
  };

 private:
  void SettleLocked(int device);

  GraphPools* pools_;
  AllocationAccounting* accounting_;
  ChargeObserver on_charge_;
  mutable std::mutex mu_;
  // Executable graphs with allocation nodes: their nodes' bytes per device.
  std::unordered_map<const void*, Bytes> execs_;
  std::atomic<int> active_{0};  // execs_.size(), read without the lock
  Bytes charged_ = {};          // what the quota is charged for each pool (mu_)
};

}  // namespace vgpu
