#include "sim/api/checkpoint_process.h"

#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "sim/api/api_common.h"
#include "sim/engine/context.h"
#include "sim/engine/futex.h"
#include "sim/engine/sim_state.h"

namespace vgpu::sim {
namespace {

// Threads of this process inside an entry point (outermost calls only), and
// the lock word they wait on while a checkpoint lock holds the process.
std::atomic<int> g_in_api{0};
std::atomic<uint32_t> g_locked{0};
thread_local int t_depth = 0;

// What the last checkpoint released, per node device: bytes, and whether the
// process used the device at all (a context there), which gpuPairs must cover.
struct Released {
  uint64_t bytes[kMaxDevices] = {};
  bool used[kMaxDevices] = {};
};
Released g_released;

// Entry points a locked process still gets through: driver 580 let
// cuStreamQuery, cuDeviceGetAttribute and cuCtxSynchronize (nothing queued)
// return at once while it held cuMemsetD32Async, cuMemAlloc and
// cuLaunchKernel (H100, 2026-11-26); the other queries and waits here by
// analogy (they read state or wait for work the lock already drained).
bool PassesLock(const char* name) {
  static constexpr const char* kPrefixes[] = {
      "cuDeviceGet", "cuDeviceTotalMem", "cuDeviceComputeCapability", "cuDriverGetVersion",
      "cuCtxGet", "cuCtxSynchronize", "cuStreamQuery", "cuStreamSynchronize", "cuStreamGet",
      "cuEventQuery", "cuEventSynchronize", "cuEventElapsedTime", "cuPointerGetAttribute",
      "cuFuncGetAttribute", "cuGetErrorName", "cuGetErrorString", "cuCheckpointProcess"};
  for (const char* p : kPrefixes) {
    if (std::strncmp(name, p, std::strlen(p)) == 0) return true;
  }
  return false;
}

void SleepNs(uint64_t ns) {
  timespec ts{static_cast<time_t>(ns / 1'000'000'000ull), static_cast<long>(ns % 1'000'000'000ull)};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

// The time the checkpoint (or restore) copy of `bytes` on device p takes.
uint64_t CopyNs(int p, uint64_t bytes, bool restore) {
  const DeviceState& dev = Node().physical(p);
  uint64_t bw = restore ? dev.restore_bytes_per_s : dev.checkpoint_bytes_per_s;
  if (bw == 0 || bytes == 0) return 0;
  return static_cast<uint64_t>(static_cast<double>(bytes) * 1e9 / static_cast<double>(bw));
}

CUprocessState StateOf(const CheckpointChannel* ch) {
  return static_cast<CUprocessState>(ch->state.load());
}

void Unblock() {
  g_locked.store(0);
  FutexWakeAll(&g_locked);
}

CUresult Lock(CheckpointChannel* ch) {
  if (StateOf(ch) != CU_PROCESS_STATE_RUNNING) return CUDA_ERROR_ILLEGAL_STATE;
  g_locked.store(1);
  const uint64_t deadline = ch->timeout_ms == 0 ? UINT64_MAX : NowNs() + ch->timeout_ms * 1'000'000ull;
  // Calls in flight finish (a synchronize returns once its work is done) and
  // queued work drains; then nothing of the process runs on a device.
  while (g_in_api.load() != 0 || !AllStreamsIdle()) {
    if (NowNs() >= deadline) {
      Unblock();
      return CUDA_ERROR_NOT_READY;
    }
    SleepNs(100'000);
  }
  ch->state.store(CU_PROCESS_STATE_LOCKED);
  return CUDA_SUCCESS;
}

CUresult Checkpoint(CheckpointChannel* ch) {
  if (StateOf(ch) != CU_PROCESS_STATE_LOCKED) return CUDA_ERROR_ILLEGAL_STATE;
  NodeRegion& node = Node();
  ProcessSlot* self = node.self();
  if (self == nullptr) return CUDA_ERROR_ILLEGAL_STATE;
  uint32_t mask = 0;  // node devices with an active context of the process
  for (uint32_t ordinals = ActiveContextDevices(); ordinals != 0; ordinals &= ordinals - 1) {
    mask |= 1u << node.Phys(__builtin_ctz(ordinals));
  }
  uint64_t ns = 0;
  g_released = Released{};
  for (int p = 0; p < node.device_count(); ++p) {
    uint64_t b = self->used_bytes[p].load();
    g_released.bytes[p] = b;
    g_released.used[p] = b != 0 || (mask & (1u << p)) != 0;
    node.UnreservePhysical(p, b);
    ns += CopyNs(p, b, false);
  }
  self->context_mask.store(0);
  SleepNs(ns);  // device -> host, one device after another
  ch->state.store(CU_PROCESS_STATE_CHECKPOINTED);
  return CUDA_SUCCESS;
}

int FindByUuid(const uint8_t* uuid) {
  for (int p = 0; p < Node().device_count(); ++p) {
    if (std::memcmp(Node().physical(p).uuid, uuid, 16) == 0) return p;
  }
  return -1;
}

bool SameChip(const DeviceState& a, const DeviceState& b) {
  return a.cc_major == b.cc_major && a.cc_minor == b.cc_minor && a.sm_count == b.sm_count;
}

// to[p]: the node device that device p's state goes to. An error leaves to[]
// undefined; the process stays CHECKPOINTED.
CUresult PairTargets(const CheckpointChannel* ch, int* to) {
  const int n = Node().device_count();
  for (int p = 0; p < kMaxDevices; ++p) to[p] = p;
  if (ch->pair_count == 0) return CUDA_SUCCESS;
  if (ch->pair_count > static_cast<uint32_t>(n)) return CUDA_ERROR_INVALID_VALUE;
  bool paired[kMaxDevices] = {}, taken[kMaxDevices] = {};
  for (uint32_t i = 0; i < ch->pair_count; ++i) {
    int from = FindByUuid(ch->pairs[i][0]), dest = FindByUuid(ch->pairs[i][1]);
    if (from < 0 || dest < 0 || paired[from] || taken[dest]) {
      SimLog("cuCheckpointProcessRestore: GPU pair %u names an unknown GPU or one paired twice", i);
      return CUDA_ERROR_INVALID_VALUE;
    }
    if (!SameChip(Node().physical(from), Node().physical(dest))) return CUDA_ERROR_NOT_SUPPORTED;
    paired[from] = taken[dest] = true;
    to[from] = dest;
  }
  for (int p = 0; p < n; ++p) {
    if (g_released.used[p] && !paired[p]) {  // every checkpointed GPU must be listed
      SimLog("cuCheckpointProcessRestore: the process used device %d, which no GPU pair names", p);
      return CUDA_ERROR_INVALID_VALUE;
    }
  }
  return CUDA_SUCCESS;
}

// The process's new ordinal map: an ordinal on a paired device follows it; an
// ordinal whose device became a pair's target takes a device the pairs freed,
// so the ordinals stay a permutation of the node's devices.
void RemapOrdinals(const int* to) {
  NodeRegion& node = Node();
  const int n = node.device_count();
  bool target[kMaxDevices] = {}, source[kMaxDevices] = {};
  for (int p = 0; p < n; ++p) {
    if (to[p] != p) target[to[p]] = source[p] = true;
  }
  int freed[kMaxDevices], nfreed = 0, next = 0;
  for (int p = 0; p < n; ++p) {
    if (source[p] && !target[p]) freed[nfreed++] = p;
  }
  int phys[kMaxDevices];
  for (int d = 0; d < kMaxDevices; ++d) {
    int p = node.Phys(d);
    if (d >= n || p >= n) {
      phys[d] = p;
    } else if (source[p]) {
      phys[d] = to[p];
    } else if (target[p] && next < nfreed) {
      phys[d] = freed[next++];
    } else {
      phys[d] = p;
    }
  }
  node.Remap(phys);
}

CUresult Restore(CheckpointChannel* ch) {
  if (StateOf(ch) != CU_PROCESS_STATE_CHECKPOINTED) return CUDA_ERROR_ILLEGAL_STATE;
  NodeRegion& node = Node();
  ProcessSlot* self = node.self();
  int to[kMaxDevices];
  if (CUresult r = PairTargets(ch, to); r != CUDA_SUCCESS) return r;
  const int n = node.device_count();
  for (int p = 0; p < n; ++p) {
    if (node.ReservePhysical(to[p], g_released.bytes[p])) continue;
    for (int q = 0; q < p; ++q) node.UnreservePhysical(to[q], g_released.bytes[q]);
    return CUDA_ERROR_OUT_OF_MEMORY;  // stays CHECKPOINTED, nothing changed
  }
  RemapOrdinals(to);
  uint64_t ns = 0;
  uint32_t mask = 0;
  for (int p = 0; p < n; ++p) {
    if (g_released.used[p]) mask |= 1u << to[p];
    ns += CopyNs(to[p], g_released.bytes[p], true);
  }
  if (self != nullptr) self->context_mask.store(mask);
  g_released = Released{};
  SleepNs(ns);  // host -> device
  ch->state.store(CU_PROCESS_STATE_LOCKED);
  return CUDA_SUCCESS;
}

CUresult Unlock(CheckpointChannel* ch) {
  if (StateOf(ch) != CU_PROCESS_STATE_LOCKED) return CUDA_ERROR_ILLEGAL_STATE;
  ch->state.store(CU_PROCESS_STATE_RUNNING);
  Unblock();
  return CUDA_SUCCESS;
}

void RestoreThreadMain(ProcessSlot* self) {
  CheckpointChannel* ch = &self->checkpoint;
  ch->restore_tid.store(static_cast<int32_t>(syscall(SYS_gettid)));
  uint32_t seen = ch->done.load();
  for (;;) {
    uint32_t r = ch->request.load(std::memory_order_acquire);
    if (r == seen) {
      FutexWaitShared(&ch->request, seen, 1'000'000'000ull);
      continue;
    }
    seen = r;
    ch->result.store(ExecuteCheckpointOp(ch));
    ch->done.store(seen, std::memory_order_release);
    FutexWakeShared(&ch->done);
  }
}

}  // namespace

ApiScope::ApiScope(const char* name) : result_(ApiEnter(name)) {
  if (result_ != CUDA_SUCCESS) return;
  counted_ = true;
  if (t_depth++ > 0) return;
  for (;;) {
    g_in_api.fetch_add(1);
    if (g_locked.load() == 0 || PassesLock(name)) return;
    g_in_api.fetch_sub(1);
    while (g_locked.load() != 0) FutexWait(&g_locked, 1);
  }
}

ApiScope::~ApiScope() {
  if (counted_ && --t_depth == 0) g_in_api.fetch_sub(1);
}

CUresult ExecuteCheckpointOp(CheckpointChannel* ch) {
  switch (static_cast<CheckpointOp>(ch->op)) {
    case CheckpointOp::kLock:
      return Lock(ch);
    case CheckpointOp::kCheckpoint:
      return Checkpoint(ch);
    case CheckpointOp::kRestore:
      return Restore(ch);
    case CheckpointOp::kUnlock:
      return Unlock(ch);
  }
  return CUDA_ERROR_INVALID_VALUE;
}

void StartRestoreThread(ProcessSlot* self) {
  if (self == nullptr) return;
  std::thread(RestoreThreadMain, self).detach();
}

}  // namespace vgpu::sim
