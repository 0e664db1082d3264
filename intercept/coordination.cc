#include "intercept/coordination.h"

#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "common/log.h"
#include "ctl/control/client.h"
#include "driver/real_driver.h"
#include "intercept/runtime.h"
#include "residency/engine.h"
#include "residency/quiesce_gate.h"
#include "vmm/vmm.h"

namespace vgpu::coordination {
namespace {

constexpr int kRoomTimeoutMs = 30000;  // silence tolerated; vgpud sends keepalives
constexpr int kPingTimeoutMs = 1000;
// How long an allocation waits for a vgpud that went away mid-request to come
// back before it fails as it would without vgpud.
constexpr int kReconnectMs = 30000;
constexpr uint64_t kGranularity = 2ull << 20;

std::atomic<bool> g_parked{false};
std::atomic<int64_t> g_grace_ms{60000};

std::string RunDir() { return Runtime::Get().config().run_dir; }

bool DaemonListening() {
  struct stat st {};
  return stat(ctl::DaemonSocketPath(RunDir()).c_str(), &st) == 0 && S_ISSOCK(st.st_mode);
}

bool DaemonAnswers() {
  ctl::Request req;
  req.cmd = "ping";
  ctl::Response resp;
  return ctl::CallDaemon(RunDir(), req, {}, &resp, kPingTimeoutMs).ok() && resp.ok;
}

// Free physical memory of every device this job has memory on is at least
// what it needs there (NVML, which is node-wide).
bool MemoryFits() {
  for (const auto& [device, bytes] : Runtime::Get().vmm().LiveBytesByDevice()) {
    Runtime& rt = Runtime::Get();
    const std::string uuid = rt.devices().uuid(rt.devices().ToVirtual(DriverOrdinal(device)));
    nvmlDevice_t h = nullptr;
    nvmlMemory_t m{};
    if (REAL_NVML_CALL(nvmlDeviceGetHandleByUUID, uuid.c_str(), &h) != NVML_SUCCESS ||
        REAL_NVML_CALL(nvmlDeviceGetMemoryInfo, h, &m) != NVML_SUCCESS || m.free < bytes) {
      return false;
    }
  }
  return true;
}

void WatchdogLoop() {
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);  // signals are the application's
  auto lost_since = std::chrono::steady_clock::now();
  bool lost = false;
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    if (!g_parked.load() || Runtime::Get().residency().state() == residency::State::kRunning) {
      lost = false;
      continue;
    }
    if (DaemonAnswers()) {
      lost = false;
      continue;
    }
    const auto now = std::chrono::steady_clock::now();
    if (!lost) {
      lost = true;
      lost_since = now;
    }
    if (now - lost_since < std::chrono::milliseconds(g_grace_ms.load())) continue;
    // NVML counts its inits: once for the life of the watchdog.
    static const bool nvml_ready = REAL_NVML_CALL(nvmlInit_v2) == NVML_SUCCESS;
    if (!nvml_ready || !MemoryFits()) continue;
    const bool on_disk = Runtime::Get().residency().state() == residency::State::kCheckpointed;
    residency::Result r = on_disk ? Runtime::Get().residency().Restore("", {})
                                  : Runtime::Get().residency().Resume({});
    if (r.ok) {
      NoteUnparked();
      // The image was vgpud's parking place, not a checkpoint anyone asked
      // for (vgpud deletes it too when it restores a job itself).
      if (on_disk && !r.path.empty()) unlink(r.path.c_str());
      VGPU_LOG(kWarn, "vgpud gone for {} ms: resumed by itself", g_grace_ms.load());
    }
  }
}

}  // namespace

bool AskForRoom(int device, uint64_t bytes) {
  if (!DaemonListening()) return false;
  Runtime& rt = Runtime::Get();
  ctl::Request req;
  req.cmd = "make_room";
  req.args = {{"pid", getpid()},
              {"device", rt.devices().uuid(rt.devices().ToVirtual(DriverOrdinal(device)))},
              {"bytes", (bytes + kGranularity - 1) / kGranularity * kGranularity}};
  ctl::Response resp;
  ctl::Status s;
  {
    // vgpud may suspend this job while it waits: its suspension needs the gate.
    residency::GateStepOut out;
    // A vgpud that dies while we wait (or restarts) is waited for, up to the
    // reconnect limit: the answer, not the transport, decides the allocation.
    // A socket nobody listens on at the first try is one a killed vgpud
    // left behind: there is no vgpud to wait for.
    // A vgpud that went silent but still answers a ping is busy (a victim's
    // suspend of many GiB can outlast the silence limit): ask again, with
    // the reconnect limit counted from that ping.
    auto give_up = std::chrono::steady_clock::now() + std::chrono::milliseconds(kReconnectMs);
    for (bool first = true;; first = false) {
      s = ctl::CallDaemon(RunDir(), req, {}, &resp, kRoomTimeoutMs);
      if (s.ok() || s.code == ctl::ErrorCode::kUntrusted ||
          (first && s.code == ctl::ErrorCode::kNoEnt)) {
        break;
      }
      if (s.code == ctl::ErrorCode::kTimedOut && DaemonAnswers()) {
        give_up = std::chrono::steady_clock::now() + std::chrono::milliseconds(kReconnectMs);
      }
      if (std::chrono::steady_clock::now() >= give_up) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  if (!s.ok() || !resp.ok) {
    VGPU_LOG(kWarn, "vgpud could not make room for {} bytes: {}", bytes,
             s.ok() ? resp.error : s.message);
    return false;
  }
  return true;
}

void NoteParkedByCoordinator(int64_t grace_ms) {
  g_grace_ms.store(grace_ms > 0 ? grace_ms : 60000);
  g_parked.store(true);
  StartWatchdog();
}

void NoteUnparked() { g_parked.store(false); }

bool ParkedByCoordinator() { return g_parked.load(); }

void StartWatchdog() {
  static std::once_flag once;
  std::call_once(once, [] {
    try {
      std::thread(WatchdogLoop).detach();
    } catch (const std::exception& e) {
      VGPU_LOG(kWarn, "coordination watchdog not started: {}", e.what());
    }
  });
}

}  // namespace vgpu::coordination
