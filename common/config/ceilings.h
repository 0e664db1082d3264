// The admin's files as ceilings over the tenant's own configuration
// (config.h, docs/configuration.md "Ceilings"). Internal to vgpu_config.
#pragma once

#include <string>

#include "common/config/option_table.h"
#include "common/status.h"

namespace vgpu::config_internal {

inline constexpr const char* kAdminFileKind = "admin file";

// Reads the admin file `path` and makes its values ceilings over what `user`
// has loaded: fixed options (group, devices, scheduler region, compute policy,
// claim and pod labels) take the admin's value; limit, share, weight and
// priority keep the tenant's only where it is tighter; preemptible is the
// admin's, or true when the admin file names none. Each tenant value refused is a line in
// user->cfg->refusals. An error with a one-line message if the file is
// malformed (the caller fails closed).
Status ApplyCeilingFile(const std::string& path, LoadState* user);

}  // namespace vgpu::config_internal
