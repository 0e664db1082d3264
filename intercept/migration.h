// libvgpu's half of a migration (docs/migration.md). vgpuctl moves the job
// with the driver's checkpoint API (lock, checkpoint, restore with GPU pairs,
// unlock); around it the agent:
//   migrate_prepare {pairs: [{from, to}], hold_ms}: refuses a job that is not
//     running or a target over the group's quota (before anything is locked),
//     reserves the job's charge on the targets, and closes the quiesce gate so
//     that the driver lock never catches a job thread inside libvgpu;
//   migrate_finish: reads from the driver which GPU each ordinal names now,
//     moves the quota charge, the compute-share membership and the device
//     map's UUIDs accordingly (or drops the reservation if the job stayed),
//     and opens the gate.
// If no finish comes within hold_ms (vgpuctl killed), the agent finishes by
// itself once the driver says the job runs: a job is never left held.
#pragma once

#include <nlohmann/json.hpp>

#include "ctl/control/protocol.h"

namespace vgpu::migration {

ctl::Response Prepare(const nlohmann::json& args);
ctl::Response Finish();

}  // namespace vgpu::migration
