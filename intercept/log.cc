#include "intercept/log.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>

namespace vgpu {
namespace {

std::atomic<int> g_level{static_cast<int>(LogLevel::kOff)};
int g_fd = -1;

const char* Name(LogLevel l) {
  switch (l) {
    case LogLevel::kError: return "error";
    case LogLevel::kWarn: return "warn";
    case LogLevel::kInfo: return "info";
    case LogLevel::kDebug: return "debug";
    default: return "";
  }
}

}  // namespace

void InitLog(LogLevel level, const std::string& file) {
  if (file.empty()) return;
  g_fd = file == "stderr" ? dup(STDERR_FILENO)
                          : open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (g_fd >= 0) {
    fcntl(g_fd, F_SETFD, FD_CLOEXEC);
    g_level.store(static_cast<int>(level));
  }
}

bool LogEnabled(LogLevel level) {
  return static_cast<int>(level) <= g_level.load(std::memory_order_relaxed) &&
         level != LogLevel::kOff;
}

void Log(LogLevel level, const char* fmt, ...) {
  char buf[1024];
  int n = std::snprintf(buf, sizeof buf, "vgpu[%d] %s: ", static_cast<int>(getpid()), Name(level));
  va_list ap;
  va_start(ap, fmt);
  n += std::vsnprintf(buf + n, sizeof buf - static_cast<size_t>(n) - 1, fmt, ap);
  va_end(ap);
  if (n > static_cast<int>(sizeof buf) - 2) n = sizeof buf - 2;
  buf[n++] = '\n';
  // One write(2) per line: lines from many processes never interleave.
  ssize_t w = write(g_fd, buf, static_cast<size_t>(n));
  (void)w;
}

}  // namespace vgpu
