// The JSON file named by VGPU_CONFIG (a container hook writes it): one object
// whose keys are the options' json_key (option_table.h). Internal to
// vgpu_config; callers use config.h.
#pragma once

#include <string>

#include "common/config/option_table.h"
#include "common/status.h"

namespace vgpu::config_internal {

// Reads the regular file `path` (at most 1 MiB) and applies each of its keys
// through the option table. An error with a one-line message naming the file and
// the key on a missing or unreadable file, invalid JSON, a key given twice, an
// unknown key, a value of the wrong type or a malformed value.
// `kind` names the file in messages and origins: the user's file (VGPU_CONFIG)
// or an admin's ("admin file", ceilings.h).
inline constexpr const char* kUserFileKind = "VGPU_CONFIG file";
Status ApplyJsonFile(const std::string& path, LoadState* st, const char* kind = kUserFileKind);

}  // namespace vgpu::config_internal
