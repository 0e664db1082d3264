// The agent's "set" command and the runtime settings in "info"
// (docs/control-protocol.md): memory limits go to the quota ledger, compute
// share, weight and priority to RuntimeSettings and the compute scheduler.
#pragma once

#include "ctl/control/protocol.h"

namespace vgpu {

ctl::Response HandleSet(const ctl::Request& request);

// Priority, weight, compute policy and each device's compute share.
void FillRuntimeSettings(ctl::InfoResult* info);

}  // namespace vgpu
