// vgpuctl migrate PID --to DEVICE | --map OLD:NEW,... (docs/migration.md).
// Through vgpud when it runs (it records the decision and keeps its view of
// the node right), else directly (ctl/migrate/migrator.h).
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "ctl/control/client.h"
#include "ctl/control/protocol.h"
#include "ctl/migrate/migrator.h"
#include "ctl/vgpuctl/vgpuctl_cli.h"
#include "ctl/vgpuctl/vgpuctl_process.h"
#include "driver/node_gpus.h"

namespace vgpu::ctl::cli {
namespace {

using nlohmann::json;

constexpr int kQueryTimeoutMs = 5000;
constexpr int kMigrateTimeoutMs = 600000;

// A device named by NVML index or UUID.
bool Resolve(const std::vector<driver::GpuMemory>& gpus, const std::string& name,
             driver::GpuMemory* out) {
  for (const auto& g : gpus) {
    if (g.uuid == name || std::to_string(g.index) == name) return *out = g, true;
  }
  return false;
}

bool ParsePairs(const MigrateCommand& o, const InfoResult& info,
                const std::vector<driver::GpuMemory>& gpus, std::vector<migrate::GpuPair>* out,
                std::string* error) {
  std::vector<std::pair<std::string, std::string>> names;
  if (!o.to.empty()) {
    // The GPU the job holds memory on (it may see more).
    std::vector<const DeviceInfo*> holding;
    for (const DeviceInfo& d : info.devices) {
      if (d.used != 0) holding.push_back(&d);
    }
    if (holding.size() > 1) return *error = "the job holds memory on several GPUs: use --map", false;
    if (holding.empty() && info.devices.empty()) return *error = "the job has no GPU", false;
    names.emplace_back(holding.empty() ? info.devices[0].uuid : holding[0]->uuid, o.to);
  }
  for (size_t start = 0; !o.map.empty();) {
    size_t end = o.map.find(',', start);
    std::string item = o.map.substr(start, end == std::string::npos ? std::string::npos : end - start);
    size_t colon = item.find(':');
    if (colon == std::string::npos) return *error = "--map wants OLD:NEW[,OLD:NEW...]", false;
    names.emplace_back(item.substr(0, colon), item.substr(colon + 1));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  if (names.empty()) return *error = "say where: --to DEVICE or --map OLD:NEW,...", false;
  for (const auto& [from, to] : names) {
    migrate::GpuPair p;
    if (!Resolve(gpus, from, &p.from)) return *error = "no GPU " + from + " on this node", false;
    if (!Resolve(gpus, to, &p.to)) return *error = "no GPU " + to + " on this node", false;
    for (const DeviceInfo& d : info.devices) {
      if (d.uuid == p.from.uuid) p.bytes = d.used;
    }
    out->push_back(p);
  }
  return true;
}

// The job's agent's "info"; an exit code (reported) if it cannot be had.
int AskInfo(pid_t pid, const CommonOptions& o, Response* r, InfoResult* info) {
  Request req;
  req.id = 1;
  req.cmd = "info";
  Status st = Call(pid, req, nullptr, r, {o.run_dir, o.timeout_ms.value_or(kQueryTimeoutMs)});
  if (st.ok() && !r->ok) return ReportFailure(o, pid, Status::Error(r->code, r->error), true);
  if (!st.ok()) return ReportFailure(o, pid, st, false);
  ParseInfoResult(r->result, info);
  return kExitOk;
}

void PrintMoved(pid_t pid, const std::vector<migrate::GpuPair>& pairs, double stopped_ms) {
  for (const migrate::GpuPair& p : pairs) {
    std::printf("migrated %d from GPU %d (%s) to GPU %d (%s): %llu MiB, job stopped %.0f ms\n", pid,
                p.from.index, p.from.uuid.c_str(), p.to.index, p.to.uuid.c_str(),
                static_cast<unsigned long long>(p.bytes >> 20), stopped_ms);
  }
}

int Report(const CommonOptions& o, pid_t pid, const migrate::Outcome& m) {
  if (m.stranded) {
    std::fprintf(stderr,
                 "vgpuctl: migrate: %s; the job could not be restored where it was either. It is "
                 "CHECKPOINTED, its data intact in its own memory, its threads held. Once a GPU "
                 "has room for it, finish its recovery with: vgpuctl migrate %d --to DEVICE\n",
                 m.status.message.c_str(), pid);
    return kExitFailed;
  }
  if (m.step == "prepare" || m.step == "room on the target") {
    return ReportFailure(o, pid, m.status, m.status.code != ErrorCode::kNoEnt);
  }
  std::fprintf(stderr, "vgpuctl: migrate: %s; the job runs where it was\n",
               m.status.message.c_str());
  return kExitFailed;
}

}  // namespace

int MoveBeforeRestore(pid_t pid, int device, const CommonOptions& o) {
  Response r;
  InfoResult info;
  if (int rc = AskInfo(pid, o, &r, &info); rc != kExitOk) return rc;
  // The device whose memory the image holds: the one with a footprint.
  std::string from;
  uint64_t footprint = 0;
  const json devs = r.result.value("devices", json::array());
  for (size_t i = 0; i < devs.size() && i < info.devices.size(); ++i) {
    if (devs[i].value("footprint", uint64_t{0}) != 0 || info.devices.size() == 1) {
      from = info.devices[i].uuid;
      footprint = devs[i].value("footprint", uint64_t{0});
    }
  }
  driver::NodeGpus node;
  migrate::GpuPair p;
  std::vector<driver::GpuMemory> gpus;
  if (Status s = node.Init(); s.ok()) gpus = node.Read();
  if (from.empty() || !Resolve(gpus, from, &p.from) || !Resolve(gpus, std::to_string(device), &p.to)) {
    std::fprintf(stderr, "vgpuctl: restore --device %d: no such GPU, or the job's GPU is unknown\n", device);
    return kExitUsage;
  }
  if (p.from.uuid == p.to.uuid) return kExitOk;
  p.bytes = footprint;
  migrate::Outcome m = migrate::MigrateJob(pid, {p}, {o.run_dir, o.timeout_ms.value_or(kQueryTimeoutMs)});
  if (!m.status.ok()) return Report(o, pid, m);
  if (!o.quiet && !o.json) {
    std::printf("moved %d to GPU %d (%s) for the restore\n", pid, p.to.index, p.to.uuid.c_str());
  }
  return kExitOk;
}

int Migrate(const MigrateCommand& o) {
  const pid_t pid = o.pid;
  Response r;
  InfoResult info;
  if (int rc = AskInfo(pid, o, &r, &info); rc != kExitOk) return rc;
  driver::NodeGpus node;
  if (Status s = node.Init(); !s.ok()) {
    std::fprintf(stderr, "vgpuctl: migrate: %s\n", s.message.c_str());
    return kExitFailed;
  }
  std::vector<migrate::GpuPair> pairs;
  std::string error;
  if (!ParsePairs(o, info, node.Read(), &pairs, &error)) {
    std::fprintf(stderr, "vgpuctl: migrate: %s\n", error.c_str());
    return kExitUsage;
  }
  // vgpud, when it runs, does it: it knows the room it holds for others.
  json jp = json::array();
  for (const migrate::GpuPair& p : pairs) jp.push_back({{"from", p.from.uuid}, {"to", p.to.uuid}});
  Request dreq;
  dreq.id = 1;
  dreq.cmd = "migrate";
  dreq.args = {{"pid", pid}, {"pairs", jp}};
  Response dr;
  Status ds = CallDaemon(o.run_dir, dreq, nullptr, &dr, o.timeout_ms.value_or(kMigrateTimeoutMs));
  migrate::Outcome m;
  if (ds.ok()) {
    if (!dr.ok) return ReportFailure(o, pid, Status::Error(dr.code, dr.error), true);
    m.stopped_ms = dr.result.value("stopped_ms", 0.0);
  } else if (ds.code == ErrorCode::kNoEnt) {
    m = migrate::MigrateJob(pid, pairs, {o.run_dir, o.timeout_ms.value_or(kQueryTimeoutMs)});
    if (!m.status.ok()) return Report(o, pid, m);
  } else {
    return ReportFailure(o, pid, ds, false);
  }
  if (o.json) {
    std::printf("%s\n",
                json({{"pid", pid}, {"ok", true}, {"stopped_ms", m.stopped_ms},
                      {"lock_wait_ms", m.lock_wait_ms}, {"pairs", jp}}).dump().c_str());
  } else {
    PrintMoved(pid, pairs, m.stopped_ms);
  }
  return kExitOk;
}

}  // namespace vgpu::ctl::cli
