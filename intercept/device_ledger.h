// The group's quota ledger as this process addresses it: by driver ordinal,
// translated to the node device the ledger is indexed by (node_devices.h).
#pragma once

#include <cstdint>

#include "intercept/node_devices.h"
#include "quota/allocation_accounting.h"
#include "quota/quota_ledger.h"

namespace vgpu {

class DeviceLedger final : public DeviceQuota {
 public:
  explicit DeviceLedger(QuotaLedger* ledger) : l_(ledger) {}
  bool TryReserve(int p, uint64_t bytes) override { return l_->TryReserve(Node(p), bytes); }
  void Release(int p, uint64_t bytes) override { l_->Release(Node(p), bytes); }
  uint64_t Used(int p) const override { return l_->Used(Node(p)); }
  uint64_t Limit(int p) const override { return l_->Limit(Node(p)); }
  uint64_t SelfUsed(int p) const { return l_->SelfUsed(Node(p)); }
  void SetLimit(int p, uint64_t bytes) { l_->SetLimit(Node(p), bytes); }
  bool TrySetLimit(int p, uint64_t bytes, uint64_t* used) {
    return l_->TrySetLimit(Node(p), bytes, used);
  }
  // By node device (migration moves charges between node devices).
  QuotaLedger* node() const { return l_; }

 private:
  static int Node(int ordinal) { return NodeDevice(DriverOrdinal(ordinal)).value(); }

  QuotaLedger* l_;
};

}  // namespace vgpu
