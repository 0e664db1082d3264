#include "common/log.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <spdlog/details/null_mutex.h>
#include <spdlog/sinks/base_sink.h>

namespace vgpu {
namespace {

// The level names of libvgpu's log lines since its first release.
const char* LevelName(spdlog::level::level_enum l) {
  switch (l) {
    case spdlog::level::err: return "error";
    case spdlog::level::warn: return "warn";
    case spdlog::level::info: return "info";
    default: return "debug";
  }
}

// Formats each line itself (no shared formatter state, so no lock is
// needed) and writes it with one write(2).
class FdSink final : public spdlog::sinks::base_sink<spdlog::details::null_mutex> {
 public:
  FdSink(int fd, std::string name) : fd_(fd), name_(std::move(name)) {}

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t line;
    fmt::format_to(std::back_inserter(line), "{}[{}] {}: ", name_, static_cast<int>(getpid()),
                   LevelName(msg.level));
    line.append(msg.payload.begin(), msg.payload.end());
    line.push_back('\n');
    ssize_t w = write(fd_, line.data(), line.size());
    (void)w;
  }
  void flush_() override {}

 private:
  int fd_;
  std::string name_;
};

// Process-wide, outside any composition root: every layer logs (vgpud and
// vgpuctl too, which have no Runtime), and a disabled level costs one load.
std::atomic<int> g_level{static_cast<int>(LogLevel::kOff)};
// Never destroyed: components may log during exit. A replaced logger is kept
// too: a racing caller may still be using it.
std::atomic<spdlog::logger*> g_logger{nullptr};

}  // namespace

spdlog::level::level_enum ToSpdlog(LogLevel level) {
  switch (level) {
    case LogLevel::kError: return spdlog::level::err;
    case LogLevel::kWarn: return spdlog::level::warn;
    case LogLevel::kInfo: return spdlog::level::info;
    case LogLevel::kDebug: return spdlog::level::debug;
    default: return spdlog::level::off;
  }
}

bool InitLog(const char* name, LogLevel level, const std::string& target) {
  if (target.empty() || level == LogLevel::kOff) return true;
  int fd = target == "stderr" ? fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3)
                              : open(target.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  auto* logger = new spdlog::logger(name, std::make_shared<FdSink>(fd, name));
  logger->set_level(ToSpdlog(level));
  g_logger.store(logger, std::memory_order_release);
  g_level.store(static_cast<int>(level), std::memory_order_release);
  return true;
}

bool LogEnabled(LogLevel level) {
  return level != LogLevel::kOff && static_cast<int>(level) <= g_level.load(std::memory_order_acquire);
}

spdlog::logger& Logger() {
  static spdlog::logger* const silent = new spdlog::logger("vgpu");  // no sink: drops all
  spdlog::logger* l = g_logger.load(std::memory_order_acquire);
  return l != nullptr ? *l : *silent;
}

}  // namespace vgpu
