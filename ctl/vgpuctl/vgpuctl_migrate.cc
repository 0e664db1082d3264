// vgpuctl migrate PID --to DEVICE | --map OLD:NEW,... (docs/migration.md):
// the driver's checkpoint API moves the job's contexts, streams, modules and
// memory onto other GPUs at the same handles and addresses; the job's agent
// holds its threads and re-points libvgpu's view around it.
#include <time.h>

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "ctl/control/client.h"
#include "ctl/control/protocol.h"
#include "ctl/vgpuctl/vgpuctl_cli.h"
#include "ctl/vgpuctl/vgpuctl_process.h"
#include "driver/node_gpus.h"
#include "driver/real_driver.h"

namespace vgpu::ctl::cli {
namespace {

using nlohmann::json;

constexpr int kQueryTimeoutMs = 5000;
constexpr unsigned kLockTimeoutMs = 10000;

double NowMs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

bool Ask(pid_t pid, const std::string& cmd, json args, const Options& o, int timeout_ms,
         Response* r, int* rc) {
  Request req;
  req.id = 1;
  req.cmd = cmd;
  req.args = std::move(args);
  Status st = Call(pid, req, nullptr, r, {o.run_dir, o.timeout_ms.value_or(timeout_ms)});
  if (!st.ok()) {
    *rc = ReportFailure(o, pid, st, false);
    return false;
  }
  if (!r->ok) {
    *rc = ReportFailure(o, pid, Status::Error(r->code, r->error), true);
    return false;
  }
  return true;
}

// A device named by NVML index or UUID.
bool Resolve(const std::vector<driver::GpuMemory>& gpus, const std::string& name,
             driver::GpuMemory* out) {
  for (const auto& g : gpus) {
    if (g.uuid == name || std::to_string(g.index) == name) return *out = g, true;
  }
  return false;
}

struct Pair {
  driver::GpuMemory from, to;
  uint64_t bytes = 0;  // the job's footprint on `from`
};

bool ParseUuid(const std::string& s, CUuuid* out) {
  std::string hex;
  for (char c : s.rfind("GPU-", 0) == 0 ? s.substr(4) : s) {
    if (c != '-') hex += c;
  }
  if (hex.size() != 32) return false;
  for (int i = 0; i < 16; ++i) {
    out->bytes[i] = static_cast<char>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  }
  return true;
}

// The driver half: lock, checkpoint, restore with the pairs, unlock. On a
// failure after the lock it puts the job back where it was (restore without
// pairs) and unlocks; *stranded says the job could not be brought back.
CUresult MoveWithDriver(pid_t pid, const std::vector<Pair>& pairs, std::string* step,
                        bool* stranded, double* stopped_ms) {
  const driver::RealCuda& cu = driver::Cuda();
  *stranded = false;
  if (cu.handle == nullptr) return *step = "loading libcuda.so.1", CUDA_ERROR_NOT_FOUND;
  CUresult r = TABLE_CALL(cu, cuInit, 0);
  if (r != CUDA_SUCCESS) return *step = "cuInit", r;
  CUcheckpointLockArgs lock{};
  lock.timeoutMs = kLockTimeoutMs;
  const double t0 = NowMs();
  if ((r = TABLE_CALL(cu, cuCheckpointProcessLock, pid, &lock)) != CUDA_SUCCESS) {
    return *step = "lock", r;
  }
  if ((r = TABLE_CALL(cu, cuCheckpointProcessCheckpoint, pid, nullptr)) != CUDA_SUCCESS) {
    TABLE_CALL(cu, cuCheckpointProcessUnlock, pid, nullptr);
    return *step = "checkpoint", r;
  }
  std::vector<CUcheckpointGpuPair> dp;
  for (const Pair& p : pairs) {
    CUcheckpointGpuPair g{};
    ParseUuid(p.from.uuid, &g.oldUuid);
    ParseUuid(p.to.uuid, &g.newUuid);
    dp.push_back(g);
  }
  CUcheckpointRestoreArgs args{};
  args.gpuPairs = dp.data();
  args.gpuPairsCount = static_cast<unsigned>(dp.size());
  if ((r = TABLE_CALL(cu, cuCheckpointProcessRestore, pid, &args)) != CUDA_SUCCESS) {
    *step = "restore onto the target";
    if (TABLE_CALL(cu, cuCheckpointProcessRestore, pid, nullptr) != CUDA_SUCCESS) {
      *stranded = true;  // CHECKPOINTED, data in the job's host memory
      return r;
    }
  }
  CUresult u = TABLE_CALL(cu, cuCheckpointProcessUnlock, pid, nullptr);
  *stopped_ms = NowMs() - t0;
  if (r == CUDA_SUCCESS && u != CUDA_SUCCESS) return *step = "unlock", u;
  return r;
}

bool ParsePairs(const Options& o, const InfoResult& info, const std::vector<driver::GpuMemory>& gpus,
                std::vector<Pair>* out, std::string* error) {
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
  for (size_t start = 0; !o.map.empty() && start <= o.map.size();) {
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
    Pair p;
    if (!Resolve(gpus, from, &p.from)) return *error = "no GPU " + from + " on this node", false;
    if (!Resolve(gpus, to, &p.to)) return *error = "no GPU " + to + " on this node", false;
    for (const DeviceInfo& d : info.devices) {
      if (d.uuid == p.from.uuid) p.bytes = d.used;
    }
    out->push_back(p);
  }
  return true;
}

}  // namespace

int Migrate(const std::vector<std::string>& args) {
  Options o;
  pid_t pid = 0;
  int rc = kExitOk;
  if (!ParseOrUsage(args, {"--to", "--map"}, 1, &o, &rc)) return rc;
  if (!ParsePid(o.positional[0], &pid)) return kExitUsage;
  Response r;
  if (!Ask(pid, "info", json::object(), o, kQueryTimeoutMs, &r, &rc)) return rc;
  InfoResult info;
  ParseInfoResult(r.result, &info);
  driver::NodeGpus node;
  if (Status st = node.Init(); !st.ok()) {
    std::fprintf(stderr, "vgpuctl: migrate: %s\n", st.message.c_str());
    return kExitFailed;
  }
  std::vector<Pair> pairs;
  std::string error;
  if (!ParsePairs(o, info, node.Read(), &pairs, &error)) {
    std::fprintf(stderr, "vgpuctl: migrate: %s\n", error.c_str());
    return kExitUsage;
  }
  json jp = json::array();
  for (const Pair& p : pairs) {
    // Refused before anything is held: the target must have room for the job.
    if (p.from.uuid != p.to.uuid && p.to.free() < p.bytes) {
      std::fprintf(stderr, "vgpuctl: migrate: %s has %llu MiB free, the job needs %llu MiB there\n",
                   p.to.uuid.c_str(), static_cast<unsigned long long>(p.to.free() >> 20),
                   static_cast<unsigned long long>(p.bytes >> 20));
      return kExitBusy;
    }
    jp.push_back({{"from", p.from.uuid}, {"to", p.to.uuid}});
  }
  if (!Ask(pid, "migrate_prepare", {{"pairs", jp}, {"hold_ms", 300000}}, o, 60000, &r, &rc)) return rc;
  std::string step;
  bool stranded = false;
  double stopped_ms = 0;
  CUresult cr = MoveWithDriver(pid, pairs, &step, &stranded, &stopped_ms);
  Response fin;
  int frc = kExitOk;
  if (!stranded) Ask(pid, "migrate_finish", json::object(), o, 60000, &fin, &frc);
  if (stranded) {
    std::fprintf(stderr,
                 "vgpuctl: migrate: %s failed (CUresult %d) and the job could not be restored where "
                 "it was; it is CHECKPOINTED with its data intact in its own memory. Free room on "
                 "a GPU, then restore and unlock it with the driver's checkpoint API "
                 "(cuCheckpointProcessRestore + cuCheckpointProcessUnlock on pid %d, e.g. "
                 "cuda-checkpoint --action restore, then --action unlock); its agent then lets it "
                 "run\n",
                 step.c_str(), static_cast<int>(cr), pid);
    return kExitFailed;
  }
  if (cr != CUDA_SUCCESS) {
    std::fprintf(stderr, "vgpuctl: migrate: %s failed (CUresult %d); the job runs where it was\n",
                 step.c_str(), static_cast<int>(cr));
    return kExitFailed;
  }
  uint64_t bytes = 0;
  for (const Pair& p : pairs) bytes += p.bytes;
  if (o.json) {
    std::printf("%s\n", json({{"pid", pid}, {"ok", true}, {"stopped_ms", stopped_ms}, {"bytes", bytes},
                              {"result", fin.result}})
                            .dump()
                            .c_str());
  } else {
    for (const Pair& p : pairs) {
      std::printf("migrated %d from GPU %d (%s) to GPU %d (%s): %llu MiB, job stopped %.0f ms\n", pid,
                  p.from.index, p.from.uuid.c_str(), p.to.index, p.to.uuid.c_str(),
                  static_cast<unsigned long long>(p.bytes >> 20), stopped_ms);
    }
  }
  return frc;
}

}  // namespace vgpu::ctl::cli
