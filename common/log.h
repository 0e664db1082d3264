// Logging for every vgpu component, through spdlog. Off unless a target is
// configured, so that an application's own output is never touched by
// default: libvgpu logs to the file VGPU_LOG_FILE names (or "stderr"); the
// daemon to stderr (journald). Never called on a hot path.
//
// spdlog and fmt are compiled from their headers into each binary (once, in
// log_impl.cc), never linked as shared libraries, and libvgpu's version script
// keeps all of it local: an application's own spdlog (its registry, its
// default logger) is never disturbed.
#pragma once

#include <spdlog/logger.h>

#include <memory>
#include <string>

namespace vgpu {

enum class LogLevel { kOff, kError, kWarn, kInfo, kDebug };

// Opens `target` ("" = off, "stderr", or a file appended to) for lines
// "<name>[pid] level: message". One write(2) per line, with O_APPEND for a
// file: lines of many processes never interleave, and no lock is held (a
// fork() while another thread logs cannot leave the child's log locked).
// False (and logging off) if the file cannot be opened.
bool InitLog(const char* name, LogLevel level, const std::string& target);
bool LogEnabled(LogLevel level);
spdlog::logger& Logger();  // a logger that drops everything while logging is off

spdlog::level::level_enum ToSpdlog(LogLevel level);

}  // namespace vgpu

// VGPU_LOG(kWarn, "quota {} exceeded on device {}", q, d): fmt syntax, the
// format string checked at compile time.
#define VGPU_LOG(level, ...)                                                         \
  do {                                                                               \
    if (::vgpu::LogEnabled(::vgpu::LogLevel::level)) {                               \
      ::vgpu::Logger().log(::vgpu::ToSpdlog(::vgpu::LogLevel::level), __VA_ARGS__); \
    }                                                                                \
  } while (0)
