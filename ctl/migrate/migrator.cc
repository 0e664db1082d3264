#include "ctl/migrate/migrator.h"

#include <time.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "driver/real_driver.h"

namespace vgpu::migrate {
namespace {

using nlohmann::json;

constexpr unsigned kLockTimeoutMs = 10000;
constexpr int kAgentTimeoutMs = 60000;

double NowMs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

Status AskAgent(pid_t pid, const std::string& cmd, json args, const ctl::ClientOptions& client,
                ctl::Response* r) {
  ctl::Request req;
  req.id = 1;
  req.cmd = cmd;
  req.args = std::move(args);
  ctl::ClientOptions o = client;
  o.timeout_ms = kAgentTimeoutMs;
  Status st = ctl::Call(pid, req, nullptr, r, o);
  if (st.ok() && !r->ok) st = Status::Error(r->code, r->error);
  return st;
}

std::string CuText(CUresult r) {
  switch (r) {
    case CUDA_ERROR_OUT_OF_MEMORY: return "CUDA_ERROR_OUT_OF_MEMORY";
    case CUDA_ERROR_INVALID_VALUE: return "CUDA_ERROR_INVALID_VALUE";
    case CUDA_ERROR_NOT_READY: return "CUDA_ERROR_NOT_READY: the job did not quiesce in time";
    case CUDA_ERROR_ILLEGAL_STATE: return "CUDA_ERROR_ILLEGAL_STATE";
    case CUDA_ERROR_NOT_SUPPORTED: return "CUDA_ERROR_NOT_SUPPORTED: needs driver r580+";
    default: return "CUresult " + std::to_string(static_cast<int>(r));
  }
}

// Unlock, asked again if it fails: a job must not stay locked for want of a
// second try.
CUresult Unlock(const driver::RealCuda& cu, pid_t pid) {
  CUresult r = CUDA_ERROR_UNKNOWN;
  for (int attempt = 0; attempt < 3 && r != CUDA_SUCCESS; ++attempt) {
    r = TABLE_CALL(cu, cuCheckpointProcessUnlock, pid, nullptr);
    if (r == CUDA_ERROR_ILLEGAL_STATE) return CUDA_SUCCESS;  // not locked (any more)
  }
  return r;
}

std::vector<CUcheckpointGpuPair> DriverPairs(const std::vector<GpuPair>& pairs) {
  std::vector<CUcheckpointGpuPair> dp(pairs.size());
  for (size_t i = 0; i < pairs.size(); ++i) {
    ParseUuid(pairs[i].from.uuid, reinterpret_cast<unsigned char*>(dp[i].oldUuid.bytes));
    ParseUuid(pairs[i].to.uuid, reinterpret_cast<unsigned char*>(dp[i].newUuid.bytes));
  }
  return dp;
}

// Restores a CHECKPOINTED job onto the pairs' targets (or where it was, if
// that fails) and unlocks it; *stranded when neither restore worked.
CUresult RestoreAndUnlock(const driver::RealCuda& cu, pid_t pid, const std::vector<GpuPair>& pairs,
                          bool* stranded, std::string* step) {
  std::vector<CUcheckpointGpuPair> dp = DriverPairs(pairs);
  CUcheckpointRestoreArgs args{};
  args.gpuPairs = dp.data();
  args.gpuPairsCount = static_cast<unsigned>(dp.size());
  CUresult restored = TABLE_CALL(cu, cuCheckpointProcessRestore, pid, &args);
  if (restored != CUDA_SUCCESS &&
      TABLE_CALL(cu, cuCheckpointProcessRestore, pid, nullptr) != CUDA_SUCCESS) {
    *stranded = true;
    *step = "restore onto the target";
    return restored;
  }
  CUresult unlocked = Unlock(cu, pid);
  if (restored != CUDA_SUCCESS) return *step = "restore onto the target", restored;
  if (unlocked != CUDA_SUCCESS) return *step = "unlock", unlocked;
  return CUDA_SUCCESS;
}

// The driver half. After a failed restore onto the targets the job goes back
// where it was (restore without pairs), so it never runs half-moved. A job
// already CHECKPOINTED (a migration that could restore it nowhere) is only
// restored onto the targets and unlocked: that finishes its recovery.
Outcome MoveWithDriver(pid_t pid, const std::vector<GpuPair>& pairs) {
  Outcome out;
  const driver::RealCuda& cu = driver::Cuda();
  auto fail = [&](const std::string& step, CUresult r) {
    out.step = step;
    out.status = Status::Error(ErrorCode::kIo, step + " failed (" + CuText(r) + ")");
    return out;
  };
  if (cu.handle == nullptr) return fail("loading libcuda.so.1", CUDA_ERROR_NOT_FOUND);
  if (CUresult r = TABLE_CALL(cu, cuInit, 0); r != CUDA_SUCCESS) return fail("cuInit", r);
  CUprocessState state = CU_PROCESS_STATE_RUNNING;
  TABLE_CALL(cu, cuCheckpointProcessGetState, pid, &state);
  if (state == CU_PROCESS_STATE_CHECKPOINTED) {
    const double t0 = NowMs();
    CUresult r = RestoreAndUnlock(cu, pid, pairs, &out.stranded, &out.step);
    out.stopped_ms = NowMs() - t0;
    return r == CUDA_SUCCESS ? out : fail(out.step, r);
  }
  CUcheckpointLockArgs lock{};
  lock.timeoutMs = kLockTimeoutMs;
  const double asked = NowMs();
  if (CUresult r = TABLE_CALL(cu, cuCheckpointProcessLock, pid, &lock); r != CUDA_SUCCESS) {
    return fail("lock", r);
  }
  // The job stops here: until the lock returns, its queued work still ran.
  const double t0 = NowMs();
  out.lock_wait_ms = t0 - asked;
  if (CUresult r = TABLE_CALL(cu, cuCheckpointProcessCheckpoint, pid, nullptr); r != CUDA_SUCCESS) {
    Unlock(cu, pid);
    return fail("checkpoint", r);
  }
  CUresult r = RestoreAndUnlock(cu, pid, pairs, &out.stranded, &out.step);
  out.stopped_ms = NowMs() - t0;
  return r == CUDA_SUCCESS ? out : fail(out.step, r);
}

bool DriverSays(pid_t pid, CUprocessState want) {
  const driver::RealCuda& cu = driver::Cuda();
  CUprocessState st = CU_PROCESS_STATE_RUNNING;
  return cu.handle != nullptr && TABLE_CALL(cu, cuInit, 0) == CUDA_SUCCESS &&
         TABLE_CALL(cu, cuCheckpointProcessGetState, pid, &st) == CUDA_SUCCESS && st == want;
}

}  // namespace

bool ParseUuid(const std::string& text, unsigned char out[16]) {
  std::string hex;
  for (char c : text.rfind("GPU-", 0) == 0 ? text.substr(4) : text) {
    if (c != '-') hex += c;
  }
  if (hex.size() != 32) return false;
  for (int i = 0; i < 16; ++i) {
    char* end = nullptr;
    const std::string byte = hex.substr(2 * static_cast<size_t>(i), 2);
    long v = std::strtol(byte.c_str(), &end, 16);
    if (end != byte.c_str() + 2) return false;
    out[i] = static_cast<unsigned char>(v);
  }
  return true;
}

Status CheckRoom(const std::vector<GpuPair>& pairs) {
  for (const GpuPair& p : pairs) {
    if (p.from.uuid == p.to.uuid || p.to.free() >= p.bytes) continue;
    return Status::Error(ErrorCode::kBusy, p.to.uuid + " has " + std::to_string(p.to.free() >> 20) +
                                               " MiB free, the job needs " +
                                               std::to_string(p.bytes >> 20) + " MiB there");
  }
  return Status::Ok();
}

Outcome MigrateJob(pid_t pid, const std::vector<GpuPair>& pairs, const ctl::ClientOptions& client) {
  Outcome out;
  for (const GpuPair& p : pairs) out.bytes += p.bytes;
  if (Status st = CheckRoom(pairs); !st.ok()) {
    out.status = st;
    out.step = "room on the target";
    return out;
  }
  json jp = json::array();
  for (const GpuPair& p : pairs) jp.push_back({{"from", p.from.uuid}, {"to", p.to.uuid}});
  ctl::Response r;
  Status prep = AskAgent(pid, "migrate_prepare", {{"pairs", jp}, {"hold_ms", 300000}}, client, &r);
  // EBUSY "in progress" from a job an earlier migration left CHECKPOINTED:
  // the driver step below recovers it (restore onto the targets, unlock).
  if (!prep.ok() && !(prep.code == ErrorCode::kBusy && DriverSays(pid, CU_PROCESS_STATE_CHECKPOINTED))) {
    out.status = prep;
    out.step = "prepare";
    return out;
  }
  Outcome moved = MoveWithDriver(pid, pairs);
  moved.bytes = out.bytes;
  // Stranded: the agent keeps the job's threads held until the driver lets
  // the job run again (its watchdog then reconciles); nothing to finish now.
  if (moved.stranded) return moved;
  Status fin = AskAgent(pid, "migrate_finish", json::object(), client, &r);
  if (moved.status.ok() && !fin.ok()) {
    moved.status = fin;  // moved, but libvgpu's view may lag until its watchdog
    moved.step = "finish";
  }
  return moved;
}

}  // namespace vgpu::migrate
