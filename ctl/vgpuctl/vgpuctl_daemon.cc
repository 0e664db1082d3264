#include "ctl/vgpuctl/vgpuctl_daemon.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <map>
#include <thread>

#include "common/byte_size.h"
#include "ctl/control/client.h"

namespace vgpu::ctl::cli {
namespace {

using nlohmann::json;

constexpr int kDaemonTimeoutMs = 5000;

Status AskDaemon(const CommonOptions& o, const std::string& cmd, json args, Response* r) {
  Request req;
  req.cmd = cmd;
  req.args = std::move(args);
  Status s = CallDaemon(o.run_dir, req, {}, r, o.timeout_ms.value_or(kDaemonTimeoutMs));
  if (s.ok() && !r->ok) s = Status::Error(r->code, r->error);
  return s;
}

std::string Bar(uint64_t used, uint64_t total, int width) {
  int n = total == 0 ? 0 : static_cast<int>(static_cast<double>(used) * width / static_cast<double>(total));
  n = std::min(n, width);
  return "[" + std::string(static_cast<size_t>(n), '#') + std::string(static_cast<size_t>(width - n), '.') + "]";
}

struct Gpu {
  int index = 0;
  uint64_t total = 0;
};

// uuid -> the GPU as vgpud reports it.
std::map<std::string, Gpu> GpusByUuid(const json& result) {
  std::map<std::string, Gpu> out;
  for (const json& d : result.value("devices", json::array())) {
    out[d.value("uuid", std::string())] = {d.value("index", 0), d.value("total", uint64_t{0})};
  }
  return out;
}

// "achieved/cap" compute share ("29%/30%"; "-" when the job is not governed).
std::string Share(const json& j) {
  const json& got = j.contains("compute_share_achieved") ? j["compute_share_achieved"] : json();
  const json& cap_json = j.contains("compute_share") ? j["compute_share"] : json();
  const double cap = cap_json.is_number() ? cap_json.get<double>() : 0;
  char capped[24];
  std::snprintf(capped, sizeof capped, "%g%%", cap);
  if (!got.is_number()) return cap > 0 ? std::string("?/") + capped : "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f%%", 100 * got.get<double>());
  return cap > 0 ? std::string(buf) + "/" + capped : buf;
}

// A job's string field; "-" when absent, empty or not a string.
std::string Field(const json& j, const char* key) {
  const json& v = j.contains(key) ? j[key] : json();
  return v.is_string() && !v.get<std::string>().empty() ? v.get<std::string>() : "-";
}

// The CLAIM and POD columns only when some job has one of those labels, the
// SLURM column only when some job runs in a Slurm job: a node without them
// shows the table as it was.
struct Labels {
  bool k8s = false;
  bool slurm = false;
};

Labels AnyLabel(const json& result) {
  Labels l;
  for (const json& j : result.value("processes", json::array())) {
    if (!j.is_object()) continue;
    l.k8s = l.k8s || Field(j, "claim") != "-" || Field(j, "pod") != "-";
    l.slurm = l.slurm || Field(j, "slurm_job") != "-";
  }
  return l;
}

std::string LabelColumns(const std::string& claim, const std::string& pod,
                         const std::string& slurm_job, Labels labels) {
  std::string out;
  if (labels.k8s) out += PadRight(claim, 30) + " " + PadRight(pod, 30) + " ";
  if (labels.slurm) out += PadRight(slurm_job, 9) + " ";
  return out;
}

void PrintJobs(const json& result, bool bars) {
  const auto gpus = GpusByUuid(result);
  const Labels labels = AnyLabel(result);
  std::printf("%-8s %-16s %-19s %-7s %-4s %-11s %-11s %-11s %-9s %s%s\n", "PID", "COMMAND", "STATE",
              "PRIO", "GPU", "USED", "NEEDS", "QUOTA", "SHARE",
              LabelColumns("CLAIM", "POD", "SLURM", labels).c_str(), bars ? "MEMORY" : "REASON");
  for (const json& j : result.value("processes", json::array())) {
    bool shown = false;
    for (const json& d : j.value("devices", json::array())) {
      const uint64_t used = d.value("used", uint64_t{0}), need = d.value("footprint", uint64_t{0});
      if (used == 0 && need == 0) continue;
      shown = true;
      const uint64_t quota = d.value("quota", uint64_t{0});
      const auto it = gpus.find(d.value("uuid", std::string()));
      const uint64_t total = it == gpus.end() ? 0 : it->second.total;
      std::printf(
          "%-8lld %-16.16s %-19s %-7s %-4s %-11s %-11s %-11s %-9s %s%s\n",
          static_cast<long long>(j.value("pid", 0)), j.value("command", std::string("-")).c_str(),
          j.value("state", std::string()).c_str(), j.value("priority", std::string()).c_str(),
          it == gpus.end() ? "?" : std::to_string(it->second.index).c_str(),
          FormatByteSize(used).c_str(), FormatByteSize(need).c_str(),
          quota == 0 ? "-" : FormatByteSize(quota).c_str(), Share(j).c_str(),
          LabelColumns(Field(j, "claim"), Field(j, "pod"), Field(j, "slurm_job"), labels).c_str(),
          bars ? Bar(used, total, 20).c_str() : j.value("reason", std::string()).c_str());
    }
    // A stopped job vgpud never saw running holds memory it cannot tell: one row all the same.
    if (!shown && j.value("stopped", false)) {
      std::printf(
          "%-8lld %-16.16s %-19s %-7s %-4s %-11s %-11s %-11s %-9s %s%s\n",
          static_cast<long long>(j.value("pid", 0)), j.value("command", std::string("-")).c_str(),
          "stopped", j.value("priority", std::string()).c_str(), "-", "?", "?", "-", "-",
          LabelColumns(Field(j, "claim"), Field(j, "pod"), Field(j, "slurm_job"), labels).c_str(),
          j.value("reason", std::string()).c_str());
    }
  }
}

void PrintDevices(const json& result) {
  for (const json& g : result.value("devices", json::array())) {
    const uint64_t used = g.value("used", uint64_t{0}), total = g.value("total", uint64_t{0});
    uint64_t need = 0;
    for (const json& j : result.value("processes", json::array())) {
      for (const json& d : j.value("devices", json::array())) {
        if (d.value("uuid", std::string()) == g.value("uuid", std::string())) need += d.value("footprint", uint64_t{0});
      }
    }
    std::printf("GPU %d %s %s / %s, jobs need %s (%.0f%%)\n", g.value("index", 0), Bar(used, total, 30).c_str(),
                FormatByteSize(used).c_str(), FormatByteSize(total).c_str(), FormatByteSize(need).c_str(),
                total == 0 ? 0.0 : 100.0 * static_cast<double>(need) / static_cast<double>(total));
  }
}

}  // namespace

bool DaemonPs(const CommonOptions& o, int* rc) {
  Response r;
  Status s = AskDaemon(o, "ps", json::object(), &r);
  if (s.code == ErrorCode::kNoEnt) return false;  // no vgpud: ask the agents
  if (!s.ok()) {
    *rc = ReportFailure(o, 0, s, /*from_agent=*/false);
    return true;
  }
  if (o.json) {
    std::fputs(DumpLine(r.result).c_str(), stdout);
  } else {
    PrintJobs(r.result, /*bars=*/false);
  }
  *rc = kExitOk;
  return true;
}

int Top(const TopCommand& o) {
  const bool tty = isatty(STDOUT_FILENO) != 0;
  for (;;) {
    Response r;
    if (Status s = AskDaemon(o, "ps", json::object(), &r); !s.ok()) {
      return ReportFailure(o, 0, Status::Error(s.code, "vgpud: " + s.message), false);
    }
    if (tty && !o.once) std::fputs("\033[H\033[2J", stdout);
    std::time_t now = std::time(nullptr);
    char when[32];
    std::strftime(when, sizeof when, "%H:%M:%S", std::localtime(&now));
    std::printf("vgpuctl top - %s\n", when);
    PrintDevices(r.result);
    std::printf("\n");
    PrintJobs(r.result, /*bars=*/true);
    std::fflush(stdout);
    if (o.once) return kExitOk;
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
}

int Events(const CommonOptions& o) {
  Response r;
  if (Status s = AskDaemon(o, "events", {{"n", 100}}, &r); !s.ok()) {
    return ReportFailure(o, 0, Status::Error(s.code, "vgpud: " + s.message), false);
  }
  if (o.json) {
    std::fputs(DumpLine(r.result).c_str(), stdout);
    return kExitOk;
  }
  std::printf("%-12s %-10s %-8s %-8s %-10s %-9s %s\n", "TIME", "DECISION", "PID", "FOR", "BYTES", "SECONDS", "WHY");
  for (const json& e : r.result.value("events", json::array())) {
    const int64_t ms = e.value("time_ms", int64_t{0});
    std::time_t t = static_cast<std::time_t>(ms / 1000);
    char when[32];
    std::strftime(when, sizeof when, "%H:%M:%S", std::localtime(&t));
    const int for_pid = e.value("for_pid", 0);
    std::printf("%s.%03d %-10s %-8d %-8s %-10s %-9.3f %s\n", when, static_cast<int>(ms % 1000),
                e.value("kind", std::string()).c_str(), e.value("pid", 0),
                for_pid == 0 ? "-" : std::to_string(for_pid).c_str(),
                FormatByteSize(e.value("bytes", uint64_t{0})).c_str(), e.value("seconds", 0.0),
                e.value("message", std::string()).c_str());
  }
  return kExitOk;
}

int Drain(const DrainCommand& o, bool on) {
  Response r;
  CommonOptions wait = o;
  // A drain moves every job off the device: give it the time the moves take.
  if (!wait.timeout_ms) wait.timeout_ms = 600000;
  if (Status s = AskDaemon(wait, on ? "drain" : "undrain", {{"device", o.device}}, &r); !s.ok()) {
    return ReportFailure(o, 0, Status::Error(s.code, "vgpud: " + s.message), false);
  }
  if (o.json) {
    std::fputs(DumpLine(r.result).c_str(), stdout);
    return kExitOk;
  }
  const json left = r.result.value("jobs_left", json::array());
  std::printf("%s %s%s\n", on ? "drained" : "undrained", r.result.value("device", std::string()).c_str(),
              !on ? "" : left.empty() ? ": no job left on it" : (": " + std::to_string(left.size()) +
                                                                 " job(s) could not move (no room)").c_str());
  return left.empty() ? kExitOk : kExitBusy;
}

}  // namespace vgpu::ctl::cli
