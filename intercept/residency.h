// Residency of the process's device memory: suspend/resume to host RAM and
// checkpoint/restore to an image on disk (docs/vmm.md), behind the quiesce
// gate (intercept/quiesce_gate.h).
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "intercept/quiesce_gate.h"

namespace vgpu::residency {

enum class State { kRunning, kSuspended, kCheckpointed };
const char* StateName(State s);
State CurrentState();

// A context was destroyed: forget it and the non-migratable memory noted with
// it (Runtime::non_migratable(), intercept/non_migratable.h; suspend refuses
// while any of that is held).
void ForgetContext(CUcontext ctx);
// Contexts to drain on suspend besides those holding VMM memory and the
// active primary contexts: those created through the hooks.
void NoteContext(CUcontext ctx);

// Operation results: ok, or an error (vgpu's one error type, common/status.h:
// EBUSY, EIO, ENOENT, EINVAL, EEXIST...) with a one-line message, and what
// the operation moved.
struct Result {
  bool ok = true;
  ErrorCode code = ErrorCode::kOk;
  std::string message;
  uint64_t bytes = 0;
  double seconds = 0;
  std::string path;
  // Named phases of the operation in seconds, in order (suspend: "drain",
  // "copy_out", "release"), so that the latency beyond the copy can be told
  // apart from the copy itself.
  std::vector<std::pair<std::string, double>> phases;
  static Result Ok() { return {}; }
  static Result Error(ErrorCode c, std::string m) {
    Result r;
    r.ok = false;
    r.code = c == ErrorCode::kOk ? ErrorCode::kIo : c;
    r.message = std::move(m);
    return r;
  }
};

using Progress = std::function<void(const char* phase, uint64_t done, uint64_t total)>;

// One operation at a time (serialized internally).
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


}  // namespace vgpu::residency
