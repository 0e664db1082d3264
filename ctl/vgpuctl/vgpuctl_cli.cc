#include "ctl/vgpuctl/vgpuctl_cli.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "common/byte_size.h"

namespace vgpu::ctl::cli {
namespace {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

std::string AbsolutePath(const std::string& path) {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::absolute(path, ec);
  return ec ? path : p.lexically_normal().string();
}

std::string PadRight(const std::string& s, size_t width) {
  return s.size() >= width ? s : s + std::string(width - s.size(), ' ');
}

int ExitCodeFor(ErrorCode code, bool from_agent) {
  switch (code) {
    case ErrorCode::kOk:
      return kExitOk;
    case ErrorCode::kPerm:
      return kExitPermission;
    case ErrorCode::kBusy:
      return kExitBusy;
    case ErrorCode::kNoEnt:
      // From the transport: no such process/agent. From the agent: e.g. no image.
      return from_agent ? kExitFailed : kExitNotFound;
    case ErrorCode::kTimedOut:
    case ErrorCode::kProto:
      return kExitComm;
    case ErrorCode::kIo:
      return from_agent ? kExitFailed : kExitComm;
    case ErrorCode::kUntrusted:
      return kExitUntrusted;
    default:
      return kExitFailed;
  }
}

int ReportFailure(const CommonOptions& o, int64_t pid, const Status& status, bool from_agent) {
  if (o.json) {
    nlohmann::json j = {{"pid", pid},
                        {"ok", false},
                        {"error", status.message},
                        {"code", ErrorCodeName(status.code)}};
    std::fputs(DumpLine(j).c_str(), stdout);
  } else {
    // Transport messages name the process already; the agent's do not.
    std::string who = from_agent && pid > 0 ? std::to_string(pid) + ": " : "";
    std::fprintf(stderr, "vgpuctl: %s%s\n", who.c_str(), status.message.c_str());
  }
  return ExitCodeFor(status.code, from_agent);
}

ProgressDisplay::ProgressDisplay(std::string verb, bool enabled)
    : verb_(std::move(verb)), enabled_(enabled), tty_(isatty(STDERR_FILENO) == 1) {}

ProgressDisplay::~ProgressDisplay() { Finish(); }

void ProgressDisplay::Update(const Progress& p) {
  if (!enabled_) return;
  int64_t now = NowMs();
  double frac = p.total > 0 ? std::min(1.0, static_cast<double>(p.done) / p.total) : 0.0;
  std::string amount =
      FormatByteSize(p.done) + (p.total > 0 ? " / " + FormatByteSize(p.total) : "");
  std::string phase = p.phase.empty() ? "" : " " + p.phase;
  if (tty_) {
    if (drawn_ && now - last_ms_ < 100 && frac < 1.0) return;
    constexpr int kWidth = 30;
    int filled = static_cast<int>(frac * kWidth);
    std::fprintf(stderr, "\r%s [%s%s] %3d%%  %s%s\033[K", verb_.c_str(),
                 std::string(filled, '#').c_str(), std::string(kWidth - filled, '.').c_str(),
                 static_cast<int>(frac * 100), amount.c_str(), phase.c_str());
  } else {
    int decile = static_cast<int>(frac * 10);
    if (drawn_ && decile == last_decile_ && now - last_ms_ < 2000) return;
    last_decile_ = decile;
    std::fprintf(stderr, "%s: %d%% (%s)%s\n", verb_.c_str(), static_cast<int>(frac * 100),
                 amount.c_str(), phase.c_str());
  }
  std::fflush(stderr);
  drawn_ = true;
  last_ms_ = now;
}

void ProgressDisplay::Finish() {
  if (enabled_ && tty_ && drawn_) std::fputc('\n', stderr);
  drawn_ = false;
  enabled_ = false;
}

}  // namespace vgpu::ctl::cli
