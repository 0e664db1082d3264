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
#include "residency/engine.h"
#include "residency/quiesce_gate.h"

namespace vgpu {
namespace {

constexpr int kRoomTimeoutMs = 30000;  // silence tolerated; vgpud sends keepalives
constexpr int kPingTimeoutMs = 1000;
// How long an allocation waits for a vgpud that went away mid-request to come
// back before it fails as it would without vgpud.
constexpr int kReconnectMs = 30000;
constexpr uint64_t kGranularity = 2ull << 20;

}  // namespace

bool Coordination::DaemonListening() const {
  struct stat st {};
  return stat(ctl::DaemonSocketPath(ports_.run_dir).c_str(), &st) == 0 && S_ISSOCK(st.st_mode);
}

bool Coordination::DaemonAnswers() const {
  ctl::Request req;
  req.cmd = "ping";
  ctl::Response resp;
  return ctl::CallDaemon(ports_.run_dir, req, {}, &resp, kPingTimeoutMs).ok() && resp.ok;
}

// Free physical memory of every device this job has memory on is at least
// what it needs there (NVML, which is node-wide).
bool Coordination::MemoryFits() const {
  for (const auto& [device, bytes] : ports_.live_bytes()) {
    const std::string uuid = ports_.uuid_of(device);
    nvmlDevice_t h = nullptr;
    nvmlMemory_t m{};
    if (REAL_NVML_CALL(nvmlDeviceGetHandleByUUID, uuid.c_str(), &h) != NVML_SUCCESS ||
        REAL_NVML_CALL(nvmlDeviceGetMemoryInfo, h, &m) != NVML_SUCCESS || m.free < bytes) {
      return false;
    }
  }
  return true;
}

void Coordination::WatchdogLoop() {
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);  // signals are the application's
  auto lost_since = std::chrono::steady_clock::now();
  bool lost = false;
  bool nvml_ready = false;
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    residency::Engine& engine = ports_.residency();
    if (!parked_.load() || engine.state() == residency::State::kRunning) {
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
    if (now - lost_since < std::chrono::milliseconds(grace_ms_.load())) continue;
    // NVML counts its inits: once for the life of the watchdog.
    if (!nvml_ready) nvml_ready = REAL_NVML_CALL(nvmlInit_v2) == NVML_SUCCESS;
    if (!nvml_ready || !MemoryFits()) continue;
    const bool on_disk = engine.state() == residency::State::kCheckpointed;
    residency::Result r = on_disk ? engine.Restore("", {}) : engine.Resume({});
    if (r.ok()) {
      NoteUnparked();
      // The image was vgpud's parking place, not a checkpoint anyone asked
      // for (vgpud deletes it too when it restores a job itself).
      if (on_disk && !r->path.empty()) unlink(r->path.c_str());
      VGPU_LOG(kWarn, "vgpud gone for {} ms: resumed by itself", grace_ms_.load());
    }
  }
}

bool Coordination::AskForRoom(int device, uint64_t bytes) {
  if (!DaemonListening()) return false;
  ctl::Request req;
  req.cmd = "make_room";
  req.args = {{"pid", getpid()},
              {"device", ports_.uuid_of(device)},
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
      s = ctl::CallDaemon(ports_.run_dir, req, {}, &resp, kRoomTimeoutMs);
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

void Coordination::NoteParkedByCoordinator(int64_t grace_ms) {
  grace_ms_.store(grace_ms > 0 ? grace_ms : 60000);
  parked_.store(true);
  StartWatchdog();
}

void Coordination::StartWatchdog() {
  std::call_once(watchdog_once_, [this] {
    try {
      std::thread([this] { WatchdogLoop(); }).detach();  // the Runtime is never destroyed
    } catch (const std::exception& e) {
      VGPU_LOG(kWarn, "coordination watchdog not started: {}", e.what());
    }
  });
}

}  // namespace vgpu
