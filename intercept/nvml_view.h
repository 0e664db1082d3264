// libvgpu's NVML view (hooks_nvml.cc): which real NVML device each virtual
// device index answers with.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "driver/nvml_abi.h"
#include "quota/quota_ledger.h"

namespace vgpu {

// Built after a successful real nvmlInit (sticky); owned by the Runtime.
struct NvmlView {
  std::mutex mu;                            // building and following migrations
  std::atomic<int> init_count{0};           // NVML's init is reference-counted
  std::vector<nvmlDevice_t> handles;        // by virtual index
  std::vector<int> physical;                // NVML index of each (== CUDA ordinal on one node)
  std::unique_ptr<QuotaLedger> own_ledger;  // when CUDA was never initialized here
  nvmlReturn_t status = NVML_ERROR_UNINITIALIZED;
};

// After a migration: each virtual device answers with the NVML device its
// driver ordinal names now (node_devices.h), so that memory, utilization and
// UUID queries describe the GPU the job runs on.
void FollowMigrationInNvmlView();

}  // namespace vgpu
