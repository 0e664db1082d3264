#include "common/log_level.h"

#include <utility>

namespace vgpu {

bool ParseLogLevelName(std::string_view name, LogLevel* out) {
  static constexpr std::pair<std::string_view, LogLevel> kLevels[] = {
      {"off", LogLevel::kOff},   {"error", LogLevel::kError}, {"warn", LogLevel::kWarn},
      {"info", LogLevel::kInfo}, {"debug", LogLevel::kDebug},
  };
  for (const auto& [n, level] : kLevels) {
    if (name == n) {
      *out = level;
      return true;
    }
  }
  return false;
}

}  // namespace vgpu
