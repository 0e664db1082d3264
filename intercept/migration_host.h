// What the process's half of a migration (residency/migration.h) reaches in
// libvgpu: the real driver's table, the device map, the node-device table
// (node_devices.h), the NVML view, the quiesce gate, and the quota and compute
// share the Runtime owns.
#pragma once

#include <functional>
#include <string>

#include "residency/migration.h"

namespace vgpu {

class DeviceMap;

class DriverMigrationHost : public MigrationHost {
 public:
  DriverMigrationHost(DeviceMap* devices, std::function<QuotaLedger*()> ledger,
                      std::function<ComputeShare*()> share, std::function<bool()> running,
                      std::function<std::string()> sharing_refusal)
      : devices_(devices),
        ledger_(std::move(ledger)),
        share_(std::move(share)),
        running_(std::move(running)),
        sharing_refusal_(std::move(sharing_refusal)) {}

  int DriverDeviceCount() override;
  std::string DriverUuid(DriverOrdinal p) override;
  bool DriverSaysRunning() override;
  int VisibleCount() override;
  std::string VisibleUuid(VisibleIndex v) override;
  DriverOrdinal OrdinalOf(VisibleIndex v) override;
  void SetVisibleUuid(VisibleIndex v, const std::string& uuid) override;
  NodeIndex NodeOf(DriverOrdinal p) override;
  void SetNode(DriverOrdinal p, NodeIndex n) override;
  void ViewMoved() override;
  QuotaLedger* ledger() override { return ledger_(); }
  ComputeShare* share() override { return share_(); }
  bool Running() override { return running_(); }
  void CloseGate() override;
  void OpenGate() override;
  std::string SharingRefusal() override { return sharing_refusal_(); }

 private:
  DeviceMap* devices_;
  std::function<QuotaLedger*()> ledger_;
  std::function<ComputeShare*()> share_;
  std::function<bool()> running_;
  std::function<std::string()> sharing_refusal_;
};

}  // namespace vgpu
