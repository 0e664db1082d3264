// Residency of the process's device memory: suspend/resume to host RAM and
// checkpoint/restore to an image on disk (docs/vmm.md), behind the quiesce
// gate (residency/quiesce_gate.h). A mechanism below libvgpu's hooks: the
// Engine reaches the driver only through the table it is given, the memory
// only through the vmm::Manager it is given, and asks its owner how much
// memory suspend cannot move; tests/unit/residency_engine_test.cc runs it on
// the simulated driver linked directly.
#pragma once

#include <cuda.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "driver/real_driver.h"
#include "residency/quiesce_gate.h"
#include "residency/staging.h"
#include "vmm/vmm.h"

namespace vgpu::residency {

enum class State { kRunning, kSuspended, kCheckpointed };
const char* StateName(State s);

// What a completed operation moved. An operation returns Result (vgpu's one
// error type, common/status.h): a Report, or the Status of a refusal or a
// failure (EBUSY, EIO, ENOENT, EINVAL, EEXIST...) with a one-line message.
struct Report {
  uint64_t bytes = 0;
  double seconds = 0;
  std::string path;
  // Named phases of the operation in seconds, in order (suspend: "drain",
  // "copy_out", "release"), so that the latency beyond the copy can be told
  // apart from the copy itself.
  std::vector<std::pair<std::string, double>> phases;
};
using Result = vgpu::Result<Report>;

using Progress = std::function<void(const char* phase, uint64_t done, uint64_t total)>;

// What the engine is given by its owner (libvgpu: the Runtime).
struct EnginePorts {
  const driver::RealCuda* cuda = nullptr;  // every driver call
  vmm::Manager* vmm = nullptr;             // the memory it moves
  // Bytes of device memory suspend cannot move (driver-path allocations),
  // after giving back what can be (graph pools' caches). Suspend and
  // checkpoint refuse while it is not 0.
  std::function<uint64_t()> non_migratable_bytes;
  // Why the process's memory cannot move ("" if it can): it shares device
  // memory with another process (ipc_sharing.h). Suspend and checkpoint refuse.
  std::function<std::string()> sharing_refusal;
};

class Engine {
 public:
  explicit Engine(EnginePorts ports);
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  State state() const { return state_.load(); }

  // Contexts to drain on suspend besides those holding VMM memory and the
  // active primary contexts: those created through the hooks.
  void NoteContext(CUcontext ctx);
  void ForgetContext(CUcontext ctx);

  // One operation at a time (serialized internally). Each completed one is
  // counted (common/counters.h); a refused or failed one counts nothing.
  Result Suspend(const Progress& progress);
  Result Resume(const Progress& progress);
  // dir (non-empty): the image is <dir>/vgpu-<pid>-<start time>.vgpuckpt. An
  // existing file there is replaced only if this process wrote it (atomically:
  // it stays whole until the new image is); anything else is refused (EEXIST).
  // A checkpointed process refuses (EBUSY), so the image replaced is never the
  // only copy of the memory. leave_running: the process goes on afterwards;
  // else it stays suspended with its device memory released and the image as
  // the only copy (resume restores from it).
  Result Checkpoint(const std::string& dir, bool leave_running, const Progress& progress);
  // from: a directory holding this process's image (named as above), or an
  // image file (any name: e.g. the image of this job before a restart, under
  // its old pid); empty: the most recent checkpoint. The image is validated
  // completely before anything changes; on failure the process stays as it was.
  Result Restore(const std::string& from, const Progress& progress);

 private:
  Result DoSuspend(const Progress& progress);
  Result DoResume(const Progress& progress);
  Result DoCheckpoint(const std::string& dir, bool leave_running, const Progress& progress);
  Result RestoreLocked(const std::string& from, const Progress& progress);
  void Quiesce();
  Status RefuseNonMigratable();
  Status WriteImage(const std::string& path, bool replace, bool from_device,
                    const std::vector<vmm::AllocationInfo>& allocs, uint64_t total,
                    const Progress& progress);
  Status AppendHostCopy(const vmm::AllocationInfo& a, checkpoint::ImageWriter* w);
  Status MatchImage(const checkpoint::ImageReader& reader, const std::string& path,
                    std::vector<RestoreTarget>* targets);
  std::string MapAndLoad(const checkpoint::ImageReader& reader,
                         const std::vector<RestoreTarget>& targets, const Progress& progress);
  Status CheckImageTarget(const std::string& path, bool* replace);
  void NoteOwnImage(const std::string& path);

  EnginePorts ports_;
  StagingPorts staging_;
  std::mutex book_mu_;
  std::set<CUcontext> contexts_;  // book_mu_
  std::mutex op_mu_;              // one operation at a time
  std::atomic<State> state_{State::kRunning};
  std::string last_path_;  // op_mu_
  // The image files this process wrote: the only existing files a checkpoint
  // may replace. Device and inode alone would take a file someone else made
  // after deleting ours (the inode is reused at once) for ours: its size and
  // change time as we left them count too. Guarded by op_mu_.
  struct FileIdentity {
    dev_t dev;
    ino_t ino;
    off_t size;
    int64_t ctime_ns;
    auto operator<=>(const FileIdentity&) const = default;
  };
  static FileIdentity IdentityOf(const struct stat& st);
  std::set<FileIdentity> own_images_;
};

}  // namespace vgpu::residency
