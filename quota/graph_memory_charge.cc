#include "quota/graph_memory_charge.h"

#include <algorithm>
#include <utility>

#include "common/log.h"

namespace vgpu {

GraphMemoryCharge::GraphMemoryCharge(GraphPools* pools, AllocationAccounting* accounting,
                                     ChargeObserver on_charge)
    : pools_(pools), accounting_(accounting), on_charge_(std::move(on_charge)) {}

// Moves the device's charge to the pool's reserved size (mu_ held).
void GraphMemoryCharge::SettleLocked(int device) {
  const uint64_t reserved = pools_->Reserved(device);
  uint64_t& charged = charged_[device];
  if (reserved < charged) {
    accounting_->Release(device, charged - reserved);
    charged = reserved;
  } else if (reserved > charged) {
    // The driver rounded its pool up beyond the nodes' sizes, after the fact.
    if (accounting_->Reserve(device, reserved - charged)) {
      charged = reserved;
    } else {
      VGPU_LOG(kWarn, "graph memory pool of device {} holds {} bytes, {} charged to the quota",
               device, reserved, charged);
    }
  }
  if (on_charge_) on_charge_(device, charged);
}

void GraphMemoryCharge::OnInstantiated(const void* exec, const Bytes& bytes) {
  if (std::all_of(bytes.begin(), bytes.end(), [](uint64_t b) { return b == 0; })) return;
  std::lock_guard<std::mutex> lock(mu_);
  execs_[exec] = bytes;
  active_.store(static_cast<int>(execs_.size()), std::memory_order_relaxed);
}

void GraphMemoryCharge::OnDestroyed(const void* exec) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = execs_.find(exec);
  if (it == execs_.end()) return;
  const Bytes bytes = it->second;
  execs_.erase(it);
  active_.store(static_cast<int>(execs_.size()), std::memory_order_relaxed);
  for (int d = 0; d < kDevices; ++d) {
    if (bytes[d] != 0) SettleLocked(d);
  }
}

void GraphMemoryCharge::Settle(int device) {
  if (device < 0 || device >= kDevices) return;
  std::lock_guard<std::mutex> lock(mu_);
  SettleLocked(device);
}

void GraphMemoryCharge::TrimUnused() {
  std::lock_guard<std::mutex> lock(mu_);
  for (int d = 0; d < kDevices; ++d) {
    if (charged_[d] == 0) continue;
    pools_->Trim(d);
    SettleLocked(d);
  }
}

uint64_t GraphMemoryCharge::Charged(int device) const {
  std::lock_guard<std::mutex> lock(mu_);
  return device < 0 || device >= kDevices ? 0 : charged_[device];
}

GraphMemoryCharge::LaunchScope::LaunchScope(GraphMemoryCharge& charge, const void* exec)
    : c_(charge) {
  c_.mu_.lock();
  auto it = c_.execs_.find(exec);
  if (it == c_.execs_.end()) {
    c_.mu_.unlock();
    return;
  }
  held_ = true;
  // The launch can grow a pool by its nodes' bytes less what the pool holds unused.
  const Bytes& bytes = it->second;
  for (int d = 0; d < kDevices; ++d) {
    if (bytes[d] == 0) continue;
    devices_ |= 1u << d;
    const uint64_t used = c_.pools_->Used(d);
    const uint64_t reserved = c_.pools_->Reserved(d);
    const uint64_t room = reserved > used ? reserved - used : 0;
    const uint64_t grow = bytes[d] > room ? bytes[d] - room : 0;
    if (!c_.accounting_->Reserve(d, grow)) {
      ok_ = false;
      for (int u = 0; u < d; ++u) {
        if ((devices_ >> u) & 1u) c_.SettleLocked(u);  // gives back what this launch took
      }
      return;
    }
    c_.charged_[d] += grow;
  }
}

GraphMemoryCharge::LaunchScope::~LaunchScope() {
  if (!held_) return;
  if (ok_) {
    for (int d = 0; d < kDevices; ++d) {
      if ((devices_ >> d) & 1u) c_.SettleLocked(d);
    }
  }
  c_.mu_.unlock();
}

}  // namespace vgpu
