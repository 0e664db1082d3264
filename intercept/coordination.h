// libvgpu's side of vgpud (docs/vgpud.md): an allocation that does not fit in
// the device's free physical memory asks vgpud to make room (when it runs)
// instead of failing; a job vgpud suspended remembers it, and resumes by
// itself once no coordinator has answered for the grace period and its memory
// fits, so that no job stays suspended for ever. Owned by the Runtime, which
// gives it what it reaches (no include of runtime.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "residency/engine.h"

namespace vgpu {

struct CoordinationPorts {
  std::string run_dir;  // where vgpud's socket is (empty: the default)
  // The UUID of physical device `device` ("" if unknown).
  std::function<std::string(int device)> uuid_of;
  // Live bytes of this job by physical device (what a resume needs there).
  std::function<std::map<int, uint64_t>()> live_bytes;
  std::function<residency::Engine&()> residency;
};

class Coordination {
 public:
  explicit Coordination(CoordinationPorts ports) : ports_(std::move(ports)) {}

  // An allocation of `bytes` on physical device `device` failed for lack of
  // device memory (not quota). Asks vgpud, outside the quiesce gate, and
  // returns true when the allocation should be retried; false without vgpud,
  // or when vgpud says it cannot fit.
  bool AskForRoom(int device, uint64_t bytes);

  // The agent's part: a suspend or checkpoint asked by vgpud (args "by":
  // "vgpud") succeeded / the job is running again.
  void NoteParkedByCoordinator(int64_t grace_ms);
  void NoteUnparked() { parked_.store(false); }
  bool ParkedByCoordinator() const { return parked_.load(); }

 private:
  // Starts (once) the watchdog that resumes a job parked by a vgpud that has
  // not come back within the grace period.
  void StartWatchdog();
  void WatchdogLoop();
  bool DaemonListening() const;
  bool DaemonAnswers() const;
  bool MemoryFits() const;

  CoordinationPorts ports_;
  std::atomic<bool> parked_{false};
  std::atomic<int64_t> grace_ms_{60000};
  std::once_flag watchdog_once_;
};

}  // namespace vgpu
