#include "ctl/vgpuctl/vgpuctl_cli.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "common/byte_size.h"

namespace vgpu::ctl::cli {
namespace {

bool ParseInt(const std::string& s, int min, int max, int* out) {
  try {
    size_t used = 0;
    long v = std::stol(s, &used);
    if (used != s.size() || v < min || v > max) return false;
    *out = static_cast<int>(v);
    return true;
  } catch (...) {
    return false;
  }
}

bool NeedsValue(const std::string& name) {
  return name == "--run-dir" || name == "--timeout" || name == "--dir" || name == "--from" ||
         name == "--memory-limit" || name == "--compute-share" || name == "--device" ||
         name == "--weight" || name == "--priority" || name == "--group" || name == "--to" ||
         name == "--map";
}

// Stores one option's value; false with *error set if it is invalid.
bool Apply(const std::string& name, const std::string& value, Options* o, std::string* error) {
  int n = 0;
  // An empty path (a script's unset variable) must not mean "the default".
  if ((name == "--run-dir" || name == "--dir" || name == "--from") && value.empty()) {
    return *error = name + " wants a directory, not an empty string", false;
  }
  if (name == "--json") o->json = true;
  if (name == "--quiet" || name == "-q") o->quiet = true;
  if (name == "--leave-running") o->leave_running = true;
  if (name == "--allocations") o->allocations = true;
  if (name == "--once") o->once = true;
  if (name == "--run-dir") o->run_dir = value;
  if (name == "--dir") o->dir = AbsolutePath(value);
  if (name == "--from") o->from = AbsolutePath(value);
  if (name == "--to") o->to = value;
  if (name == "--map") o->map = value;
  if (name == "--timeout") {
    if (!ParseInt(value, 1, 86400, &n)) return *error = "--timeout wants seconds (1..86400)", false;
    o->timeout_ms = n * 1000;
  }
  if (name == "--memory-limit") {
    uint64_t bytes = 0;
    if (!ParseByteSize(value, &bytes)) return *error = "--memory-limit wants a size (8GiB)", false;
    o->memory_limit = bytes;
  }
  if (name == "--compute-share") {
    if (!ParseInt(value, 1, 100, &n)) return *error = "--compute-share wants 1..100", false;
    o->compute_share = n;
  }
  if (name == "--weight") {
    if (!ParseInt(value, 1, 1000, &n)) return *error = "--weight wants 1..1000", false;
    o->weight = n;
  }
  if (name == "--priority") {
    if (std::find(std::begin(kPriorities), std::end(kPriorities), value) == std::end(kPriorities)) {
      return *error = "--priority wants high, normal or low", false;
    }
    o->priority = value;
  }
  if (name == "--group") {
    if (value.empty()) return *error = "--group wants a quota group name", false;
    o->group = value;
  }
  if (name == "--device") {
    if (!ParseInt(value, 0, 1023, &n)) return *error = "--device wants an index", false;
    o->device = n;
  }
  return true;
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

bool ParseOptions(const std::vector<std::string>& args, const std::vector<std::string>& allowed,
                  Options* out, std::string* error) {
  static const std::vector<std::string> kCommon = {"--json", "--quiet", "-q", "--run-dir",
                                                   "--timeout"};
  for (size_t i = 0; i < args.size(); ++i) {
    std::string arg = args[i];
    if (arg.size() < 2 || arg[0] != '-') {
      out->positional.push_back(arg);
      continue;
    }
    std::string name = arg, value;
    bool inline_value = false;
    if (size_t eq = arg.find('='); eq != std::string::npos && arg.starts_with("--")) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
      inline_value = true;
    }
    bool known = std::find(kCommon.begin(), kCommon.end(), name) != kCommon.end() ||
                 std::find(allowed.begin(), allowed.end(), name) != allowed.end();
    if (!known) return *error = "unknown option " + name, false;
    if (NeedsValue(name) && !inline_value) {
      if (i + 1 >= args.size()) return *error = name + " needs a value", false;
      value = args[++i];
    } else if (!NeedsValue(name) && inline_value) {
      return *error = name + " takes no value", false;
    }
    if (!Apply(name, value, out, error)) return false;
  }
  return true;
}

std::string AbsolutePath(const std::string& path) {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::absolute(path, ec);
  return ec ? path : p.lexically_normal().string();
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

int ReportFailure(const Options& o, int64_t pid, const Status& status, bool from_agent) {
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
