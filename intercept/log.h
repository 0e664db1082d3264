// libvgpu's log: off unless VGPU_LOG_FILE names a file (or "stderr"), so the
// application's own output is never touched by default. Never called on a hot path.
#pragma once

#include "common/config/config.h"

namespace vgpu {

void InitLog(LogLevel level, const std::string& file);
bool LogEnabled(LogLevel level);
void Log(LogLevel level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace vgpu

#define VGPU_LOG(level, ...)                                       \
  do {                                                             \
    if (::vgpu::LogEnabled(::vgpu::LogLevel::level)) ::vgpu::Log(::vgpu::LogLevel::level, __VA_ARGS__); \
  } while (0)
