// Host-side context and device operations that need no simulated hardware:
// profiler control, context-wide event record/wait, context flags and cache
// settings, RDMA flushes, async notifications and graph-memory trimming.
#include <mutex>
#include <set>
#include <vector>

#include <cudaProfiler.h>

#include "sim/api/api_common.h"
#include "sim/engine/context.h"
#include "sim/engine/ctx_events.h"
#include "sim/engine/event.h"
#include "sim/engine/graph_memory.h"
#include "sim/engine/sim_state.h"
#include "sim/engine/stream.h"

using namespace vgpu::sim;  // NOLINT: entry points below are the C ABI

namespace {

// The context a cuCtx* call names: hCtx, or the current one for NULL.
Context* NamedContext(CUcontext h) {
  Context* c = h == nullptr ? CurrentContextOrNull() : AsContext(h);
  return c != nullptr && IsValidContext(AsHandle(c)) ? c : nullptr;
}

// Every stream of ctx with its latest submitted operation, and whether one of
// them is capturing (cuCtxRecordEvent/WaitEvent refuse to mix with capture).
bool SnapshotStreams(Context* ctx, std::vector<StreamDep>* out, Stream* skip) {
  std::lock_guard<std::mutex> lock(ctx->mu);
  for (Stream* s : ctx->streams) {
    // A destroyed stream stays listed until its worker drains, then frees its
    // ring: it takes no new operation (cuCtxWaitEvent would write into it).
    if (s == skip || !IsLiveStream(s)) continue;
    if (s->capture_graph() != nullptr) return false;
    out->push_back({s, s->submitted()});
  }
  return true;
}

Stream* RecordStream(Context* ctx) {
  std::lock_guard<std::mutex> lock(ctx->mu);
  if (ctx->record_stream == nullptr || !IsLiveStream(ctx->record_stream)) {
    // Non-blocking: it must not take the legacy stream's implicit barriers,
    // its one operation names every stream explicitly.
    ctx->record_stream = new Stream(ctx, CU_STREAM_NON_BLOCKING, 0, false);
    RegisterStream(ctx->record_stream);
    ctx->streams.push_back(ctx->record_stream);
  }
  return ctx->record_stream;
}

std::mutex g_notify_mu;
std::set<CUasyncCallbackHandle>* g_notify = new std::set<CUasyncCallbackHandle>();
// Handles are the addresses of these records (never dereferenced by clients).
struct NotifyRecord {
  CUdevice device;
  CUasyncCallback fn;
  void* user;
};

}  // namespace

namespace vgpu::sim {

// The event completes when every stream of ctx has finished what it had been
// given at the time of the call: one record operation on the context's own
// stream that depends on each of them.
CUresult RecordContextEvent(Context* ctx, Event* ev) {
  Stream* rs = RecordStream(ctx);
  std::vector<StreamDep> deps;
  if (!SnapshotStreams(ctx, &deps, rs)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  std::lock_guard<std::mutex> lock(ev->mu);
  Op* op = rs->Begin();
  op->kind = OpKind::kEventRecord;
  op->event = ev;
  op->event_gen = NextRecordGen(ev);
  for (const StreamDep& d : deps) {
    if (d.stream->completed() < d.seq) op->extra_deps.push_back(d);
  }
  ev->stream = rs;
  ev->seq = rs->Commit();
  ev->captured = false;
  return CUDA_SUCCESS;
}

// Every stream the context has now waits (on the device) for the event.
// Streams created later do not: the sim has no context-wide gate on future
// work (docs/sim.md).
CUresult WaitContextEvent(Context* ctx, Event* ev) {
  if (ev->ipc != nullptr) {
    std::vector<StreamDep> streams;
    if (!SnapshotStreams(ctx, &streams, nullptr)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    for (const StreamDep& d : streams) IpcEventWaitStream(d.stream, ev);
    return CUDA_SUCCESS;
  }
  StreamDep target{nullptr, 0};
  {
    std::lock_guard<std::mutex> lock(ev->mu);
    if (ev->captured) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    target = {ev->stream, ev->seq};
  }
  std::vector<StreamDep> streams;
  if (!SnapshotStreams(ctx, &streams, nullptr)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  if (target.stream == nullptr) return CUDA_SUCCESS;  // never recorded: nothing to wait for
  for (const StreamDep& d : streams) {
    if (d.stream == target.stream) continue;  // in order already
    Op* op = d.stream->Begin();
    op->kind = OpKind::kNop;
    op->dep = target;
    d.stream->Commit();
  }
  return CUDA_SUCCESS;
}

}  // namespace vgpu::sim

SIM_EXPORT CUresult CUDAAPI cuCtxRecordEvent(CUcontext hCtx, CUevent hEvent) {
  SIM_ENTER("cuCtxRecordEvent");
  Context* ctx = NamedContext(hCtx);
  if (ctx == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  auto* ev = reinterpret_cast<Event*>(hEvent);
  if (!IsLiveEvent(ev) || ev->ctx != ctx) return CUDA_ERROR_INVALID_HANDLE;
  return RecordContextEvent(ctx, ev);
}

SIM_EXPORT CUresult CUDAAPI cuCtxWaitEvent(CUcontext hCtx, CUevent hEvent) {
  SIM_ENTER("cuCtxWaitEvent");
  Context* ctx = NamedContext(hCtx);
  if (ctx == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  auto* ev = reinterpret_cast<Event*>(hEvent);
  if (!IsLiveEvent(ev)) return CUDA_ERROR_INVALID_HANDLE;
  return WaitContextEvent(ctx, ev);
}

// The profiler entry points control an attached profiling tool; none is ever
// attached to the simulated driver, so they only check their arguments.
SIM_EXPORT CUresult CUDAAPI cuProfilerInitialize(const char* configFile, const char* outputFile,
                                                 CUoutput_mode outputMode) {
  SIM_ENTER("cuProfilerInitialize");
  const int mode = RawEnum(outputMode);
  if (configFile == nullptr || outputFile == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (mode != CU_OUT_KEY_VALUE_PAIR && mode != CU_OUT_CSV) return CUDA_ERROR_INVALID_VALUE;
  return CurrentContextOrNull() != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

SIM_EXPORT CUresult CUDAAPI cuProfilerStart() {
  SIM_ENTER("cuProfilerStart");
  return CurrentContextOrNull() != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

SIM_EXPORT CUresult CUDAAPI cuProfilerStop() {
  SIM_ENTER("cuProfilerStop");
  return CurrentContextOrNull() != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

// The sim has no L2 cache to reset (access policy windows are recorded only).
SIM_EXPORT CUresult CUDAAPI cuCtxResetPersistingL2Cache() {
  SIM_ENTER("cuCtxResetPersistingL2Cache");
  return CurrentContextOrNull() != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

// Deprecated; sm_90 has one bank width, so a valid request changes nothing
// (cuCtxGetSharedMemConfig keeps answering 4-byte banks, as on an H100).
SIM_EXPORT CUresult CUDAAPI cuCtxSetSharedMemConfig(CUsharedconfig config) {
  SIM_ENTER("cuCtxSetSharedMemConfig");
  const int v = RawEnum(config);
  if (v < CU_SHARED_MEM_CONFIG_DEFAULT_BANK_SIZE || v > CU_SHARED_MEM_CONFIG_EIGHT_BYTE_BANK_SIZE) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CurrentContextOrNull() != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

// Same flag rules as cuDevicePrimaryCtxSetFlags: at most one scheduling mode.
SIM_EXPORT CUresult CUDAAPI cuCtxSetFlags(unsigned int flags) {
  SIM_ENTER("cuCtxSetFlags");
  const unsigned sched = flags & CU_CTX_SCHED_MASK;
  if ((flags & ~static_cast<unsigned>(CU_CTX_FLAGS_MASK)) != 0 || (sched & (sched - 1)) != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  Context* c = CurrentContextOrNull();
  if (c == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  c->flags = flags;
  return CUDA_SUCCESS;
}

// Nothing is ever written to device memory by a third-party device here, so
// a flush has nothing to wait for; the arguments are checked as documented.
SIM_EXPORT CUresult CUDAAPI cuFlushGPUDirectRDMAWrites(CUflushGPUDirectRDMAWritesTarget target,
                                                       CUflushGPUDirectRDMAWritesScope scope) {
  SIM_ENTER("cuFlushGPUDirectRDMAWrites");
  const int s = RawEnum(scope);
  if (RawEnum(target) != CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TARGET_CURRENT_CTX) return CUDA_ERROR_INVALID_VALUE;
  if (s != CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_OWNER && s != CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_ALL_DEVICES) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CurrentContextOrNull() != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

// Async notifications report device events (e.g. over-budget); the simulated
// device raises none, so a registered callback is kept but never called.
SIM_EXPORT CUresult CUDAAPI cuDeviceRegisterAsyncNotification(CUdevice device, CUasyncCallback callbackFunc,
                                                              void* userData, CUasyncCallbackHandle* callback) {
  SIM_ENTER("cuDeviceRegisterAsyncNotification");
  if (!ValidDevice(device)) return CUDA_ERROR_INVALID_DEVICE;
  if (callbackFunc == nullptr || callback == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto* h = reinterpret_cast<CUasyncCallbackHandle>(new NotifyRecord{device, callbackFunc, userData});
  std::lock_guard<std::mutex> lock(g_notify_mu);
  g_notify->insert(h);
  *callback = h;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuDeviceUnregisterAsyncNotification(CUdevice device, CUasyncCallbackHandle callback) {
  SIM_ENTER("cuDeviceUnregisterAsyncNotification");
  if (!ValidDevice(device)) return CUDA_ERROR_INVALID_DEVICE;
  std::lock_guard<std::mutex> lock(g_notify_mu);
  auto it = g_notify->find(callback);
  if (it == g_notify->end() || reinterpret_cast<NotifyRecord*>(callback)->device != device) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  g_notify->erase(it);
  delete reinterpret_cast<NotifyRecord*>(callback);
  return CUDA_SUCCESS;
}

// Gives the device's graph pool memory that no launch holds back to the node.
SIM_EXPORT CUresult CUDAAPI cuDeviceGraphMemTrim(CUdevice device) {
  SIM_ENTER("cuDeviceGraphMemTrim");
  if (!ValidDevice(device)) return CUDA_ERROR_INVALID_DEVICE;
  GraphMemTrim(device);
  return CUDA_SUCCESS;
}
