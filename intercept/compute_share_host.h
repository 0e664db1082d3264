// The compute share bound to this process (compute_share_host.cc): the real
// driver, CLOCK_MONOTONIC, the configuration and a thread of its own.
#pragma once

#include <string>

#include "common/config/config.h"
#include "common/status.h"
#include "intercept/device_map.h"
#include "intercept/runtime_settings.h"
#include "share/compute_share.h"

namespace vgpu {

// Builds the process's compute share after cuInit succeeded: nullptr when
// the policy is native (launches pass straight through); an error when the
// process cannot be governed (it must not start: it would run uncapped). The share and its host are
// never destroyed: the accountant thread runs for the life of the process. `cfg`, `devices` and
// `settings` are the Runtime's and outlive the share.
Result<ComputeShare*> StartComputeShare(const Config& cfg, const DeviceMap& devices,
                                        RuntimeSettings& settings);

}  // namespace vgpu
