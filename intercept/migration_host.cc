#include "intercept/migration_host.h"

#include <unistd.h>

#include <algorithm>

#include "driver/real_driver.h"
#include "intercept/device_map.h"
#include "intercept/node_devices.h"
#include "intercept/nvml_view.h"
#include "residency/quiesce_gate.h"

namespace vgpu {

int DriverMigrationHost::DriverDeviceCount() {
  int n = 0;
  if (REAL_CALL(cuDeviceGetCount, &n) != CUDA_SUCCESS) return 0;
  return std::min(n, kNodeDevices);
}

std::string DriverMigrationHost::DriverUuid(DriverOrdinal p) {
  CUuuid u{};
  if (REAL_CALL(cuDeviceGetUuid_v2, &u, p.value()) != CUDA_SUCCESS) return "";
  return FormatUuid(u);
}

bool DriverMigrationHost::DriverSaysRunning() {
  CUprocessState st = CU_PROCESS_STATE_RUNNING;
  CUresult r = REAL_CALL(cuCheckpointProcessGetState, getpid(), &st);
  return r != CUDA_SUCCESS || st == CU_PROCESS_STATE_RUNNING;
}

int DriverMigrationHost::VisibleCount() { return devices_->count(); }
std::string DriverMigrationHost::VisibleUuid(VisibleIndex v) { return devices_->uuid(v); }
DriverOrdinal DriverMigrationHost::OrdinalOf(VisibleIndex v) { return devices_->ToOrdinal(v); }
void DriverMigrationHost::SetVisibleUuid(VisibleIndex v, const std::string& uuid) {
  devices_->SetUuid(v, uuid);
}
NodeIndex DriverMigrationHost::NodeOf(DriverOrdinal p) { return NodeDevice(p); }
void DriverMigrationHost::SetNode(DriverOrdinal p, NodeIndex n) { SetNodeDevice(p, n); }
void DriverMigrationHost::ViewMoved() { FollowMigrationInNvmlView(); }
void DriverMigrationHost::CloseGate() { residency::CloseGate(); }
void DriverMigrationHost::OpenGate() { residency::OpenGate(); }

}  // namespace vgpu
