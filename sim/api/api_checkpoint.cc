// The driver checkpoint API, caller side: cuCheckpointProcess* on another
// process of the same simulated node. The request goes through the target's
// node slot to its restore thread (sim/api/checkpoint_process.h), which does the
// work inside the target, as the real driver's restore thread does.
#include <signal.h>
#include <unistd.h>

#include <cstring>

#include "common/process_info.h"
#include "sim/api/api_common.h"
#include "sim/api/checkpoint_process.h"
#include "sim/engine/futex.h"
#include "sim/engine/sim_state.h"

using namespace vgpu::sim;  // NOLINT: entry points below are the C ABI

namespace {

// Whether `slot` is the live process the caller names `pid`. Callers name
// processes by pids of their own namespace, as with the real driver: a
// process of the same namespace by its slot's pid, one in another namespace
// (a container's, seen from the host) by the kernel's translation of the
// owner of its slot's lock.
bool Alive(const ProcessSlot* slot, int pid) {
  static const uint64_t kOurNamespace = vgpu::PidNamespaceId();
  if (slot->pid_ns.load() == kOurNamespace) {
    return slot->pid.load() == pid && vgpu::ProcessAlive(pid, slot->start_time.load());
  }
  return slot->pid.load() > 0 && Node().PidHere(*slot) == pid;
}

ProcessSlot* FindProcess(int pid) {
  if (pid <= 0) return nullptr;
  for (ProcessSlot& slot : Node().header()->processes) {
    if (slot.pid.load(std::memory_order_acquire) > 0 && Alive(&slot, pid)) return &slot;
  }
  return nullptr;
}

template <typename T>
bool Zeroed(const T& v) {
  static const T zero{};
  return std::memcmp(&v, &zero, sizeof(T)) == 0;
}

// Claims the target's channel (one request at a time per process; a dead
// caller's claim is taken over), posts the request and waits for its result.
CUresult Post(int pid, CheckpointOp op, const CUcheckpointLockArgs* lock,
              const CUcheckpointRestoreArgs* restore) {
  ProcessSlot* slot = FindProcess(pid);
  if (slot == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CheckpointChannel* ch = &slot->checkpoint;
  const int32_t me = getpid();
  for (;;) {
    int32_t owner = 0;
    if (ch->owner.compare_exchange_strong(owner, me)) break;
    if (owner != me && kill(owner, 0) != 0 && ch->owner.compare_exchange_strong(owner, me)) break;
    if (!Alive(slot, pid)) return CUDA_ERROR_INVALID_VALUE;
    usleep(1000);
  }
  ch->op = static_cast<uint32_t>(op);
  ch->timeout_ms = lock != nullptr ? lock->timeoutMs : 0;
  ch->pair_count = 0;
  if (restore != nullptr && restore->gpuPairsCount != 0) {
    ch->pair_count = restore->gpuPairsCount;
    for (uint32_t i = 0; i < restore->gpuPairsCount && i < kMaxDevices; ++i) {
      std::memcpy(ch->pairs[i][0], restore->gpuPairs[i].oldUuid.bytes, 16);
      std::memcpy(ch->pairs[i][1], restore->gpuPairs[i].newUuid.bytes, 16);
    }
  }
  const uint32_t seq = ch->request.fetch_add(1, std::memory_order_acq_rel) + 1;
  FutexWakeShared(&ch->request);
  CUresult result = CUDA_SUCCESS;
  for (;;) {
    uint32_t done = ch->done.load(std::memory_order_acquire);
    if (done == seq) {
      result = static_cast<CUresult>(ch->result.load());
      break;
    }
    if (!Alive(slot, pid)) {  // died while we waited: nothing left to act on
      result = CUDA_ERROR_INVALID_VALUE;
      break;
    }
    FutexWaitShared(&ch->done, done, 50'000'000ull);
  }
  ch->owner.store(0);
  return result;
}

}  // namespace

SIM_EXPORT CUresult CUDAAPI cuCheckpointProcessGetRestoreThreadId(int pid, int* tid) {
  SIM_ENTER("cuCheckpointProcessGetRestoreThreadId");
  ProcessSlot* slot = FindProcess(pid);
  if (tid == nullptr || slot == nullptr) return CUDA_ERROR_INVALID_VALUE;
  int32_t t = slot->checkpoint.restore_tid.load();
  if (t == 0) return CUDA_ERROR_NOT_READY;  // the thread has not started yet
  *tid = t;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuCheckpointProcessGetState(int pid, CUprocessState* state) {
  SIM_ENTER("cuCheckpointProcessGetState");
  ProcessSlot* slot = FindProcess(pid);
  if (state == nullptr || slot == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *state = static_cast<CUprocessState>(slot->checkpoint.state.load());
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuCheckpointProcessLock(int pid, CUcheckpointLockArgs* args) {
  SIM_ENTER("cuCheckpointProcessLock");
  if (args != nullptr && (args->reserved0 != 0 || !Zeroed(args->reserved1))) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (pid == getpid()) return CUDA_ERROR_INVALID_VALUE;  // it would wait for itself
  return Post(pid, CheckpointOp::kLock, args, nullptr);
}

SIM_EXPORT CUresult CUDAAPI cuCheckpointProcessCheckpoint(int pid, CUcheckpointCheckpointArgs* args) {
  SIM_ENTER("cuCheckpointProcessCheckpoint");
  if (args != nullptr && !Zeroed(args->reserved)) return CUDA_ERROR_INVALID_VALUE;
  return Post(pid, CheckpointOp::kCheckpoint, nullptr, nullptr);
}

SIM_EXPORT CUresult CUDAAPI cuCheckpointProcessRestore(int pid, CUcheckpointRestoreArgs* args) {
  SIM_ENTER("cuCheckpointProcessRestore");
  if (args != nullptr) {
    if (!Zeroed(args->reserved) || args->reserved1 != 0) return CUDA_ERROR_INVALID_VALUE;
    if (args->gpuPairsCount != 0 && args->gpuPairs == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (args->gpuPairsCount > kMaxDevices) return CUDA_ERROR_INVALID_VALUE;
  }
  return Post(pid, CheckpointOp::kRestore, nullptr, args);
}

SIM_EXPORT CUresult CUDAAPI cuCheckpointProcessUnlock(int pid, CUcheckpointUnlockArgs* args) {
  SIM_ENTER("cuCheckpointProcessUnlock");
  if (args != nullptr && !Zeroed(args->reserved)) return CUDA_ERROR_INVALID_VALUE;
  return Post(pid, CheckpointOp::kUnlock, nullptr, nullptr);
}
