// libvgpu's NVML view (hooks_nvml.cc): which real NVML device each virtual
// device index answers with.
#pragma once

namespace vgpu {

// After a migration: each virtual device answers with the NVML device its
// driver ordinal names now (node_devices.h), so that memory, utilization and
// UUID queries describe the GPU the job runs on.
void FollowMigrationInNvmlView();

}  // namespace vgpu
