// The names of the log levels ("off", "error", "warn", "info", "debug"), as
// VGPU_LOG_LEVEL, vgpud's log_level and the plugins' --log-level take them.
#pragma once

#include <string_view>

#include "common/log.h"

namespace vgpu {

// Case-sensitive, exact; false (and *out unchanged) for anything else.
bool ParseLogLevelName(std::string_view name, LogLevel* out);

}  // namespace vgpu
