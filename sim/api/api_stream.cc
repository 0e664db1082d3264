// Streams, events, host functions and callbacks.
#include <algorithm>

#include "sim/api/api_common.h"
#include "sim/engine/context.h"
#include "sim/engine/event.h"
#include "sim/engine/graph.h"
#include "sim/engine/green_ctx.h"
#include "sim/engine/ipc.h"
#include "sim/engine/stream.h"

using namespace vgpu::sim;  // NOLINT: entry points below are the C ABI

namespace {

constexpr int kLeastPriority = 0;
constexpr int kGreatestPriority = -5;

CUresult CreateStream(CUstream* ph, unsigned flags, int priority) {
  if (ph == nullptr || (flags & ~static_cast<unsigned>(CU_STREAM_NON_BLOCKING)) != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  Context* ctx = CurrentContextOrNull();
  if (ctx == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  priority = std::clamp(priority, kGreatestPriority, kLeastPriority);
  auto* s = new Stream(ctx, flags, priority, false);
  RegisterStream(s);
  {
    std::lock_guard<std::mutex> lock(ctx->mu);
    ctx->streams.push_back(s);
  }
  *ph = reinterpret_cast<CUstream>(s);
  return CUDA_SUCCESS;
}

// cuStreamGetCtx_v2: a green context's stream names the green context and
// the device's primary context (cuda.h); any other its own context only.
void BothContexts(Stream* s, CUcontext* ctx, CUgreenCtx* green) {
  *green = GreenCtxOf(s->ctx());
  *ctx = AsHandle(*green != nullptr ? PrimaryContext(s->ctx()->device) : s->ctx());
}

CUresult Query(CUstream h, bool ptds) {
  Stream* s = nullptr;
  if (CUresult r = ResolveStream(h, ptds, &s); r != CUDA_SUCCESS) return r;
  if (Graph* g = s->capture_graph(); g != nullptr) {
    g->capture_invalidated = true;  // an illegal call during capture ends it
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  if (CUresult r = StickyError(s->ctx()); r != CUDA_SUCCESS) return r;
  return s->Idle() ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult Sync(CUstream h, bool ptds) {
  Stream* s = nullptr;
  if (CUresult r = ResolveStream(h, ptds, &s); r != CUDA_SUCCESS) return r;
  if (Graph* g = s->capture_graph(); g != nullptr) {
    g->capture_invalidated = true;
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  return s->Synchronize();
}

CUresult WaitEvent(CUstream h, CUevent e, unsigned flags, bool ptds) {
  auto* ev = reinterpret_cast<Event*>(e);
  if (!IsLiveEvent(ev)) return CUDA_ERROR_INVALID_HANDLE;
  if ((flags & ~static_cast<unsigned>(CU_EVENT_WAIT_EXTERNAL)) != 0) return CUDA_ERROR_INVALID_VALUE;
  Stream* s = nullptr;
  if (CUresult r = ResolveStream(h, ptds, &s); r != CUDA_SUCCESS) return r;
  if (ev->ipc != nullptr) return IpcEventWaitStream(s, ev);
  std::lock_guard<std::mutex> lock(ev->mu);
  if (ev->captured) {
    // Joining another stream's capture (fork/join capture) is not modelled.
    return ev->stream == s ? CUDA_SUCCESS : CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  if (ev->stream == nullptr) return CUDA_SUCCESS;  // never recorded: nothing to wait for
  if (s->capture_graph() != nullptr) return CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
  Op* op = s->Begin();
  op->kind = OpKind::kNop;
  op->dep = {ev->stream, ev->seq};
  s->Commit();
  return CUDA_SUCCESS;
}

CUresult Record(CUevent e, CUstream h, bool ptds) {
  auto* ev = reinterpret_cast<Event*>(e);
  if (!IsLiveEvent(ev)) return CUDA_ERROR_INVALID_HANDLE;
  Stream* s = nullptr;
  if (CUresult r = ResolveStream(h, ptds, &s); r != CUDA_SUCCESS) return r;
  std::lock_guard<std::mutex> lock(ev->mu);
  uint64_t gen = NextRecordGen(ev);
  Op* op = s->Begin();
  op->kind = OpKind::kEventRecord;
  op->event = ev;
  op->event_gen = gen;
  uint64_t seq = s->Commit();
  ev->stream = s;
  ev->seq = seq;
  ev->captured = seq == 0;
  return CUDA_SUCCESS;
}

CUresult HostFunc(CUstream h, CUhostFn fn, void* user, bool ptds) {
  if (fn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Stream* s = nullptr;
  if (CUresult r = ResolveStream(h, ptds, &s); r != CUDA_SUCCESS) return r;
  Op* op = s->Begin();
  op->kind = OpKind::kHostFn;
  op->host_fn = fn;
  op->user = user;
  s->Commit();
  return CUDA_SUCCESS;
}

CUresult Callback(CUstream h, CUstreamCallback cb, void* user, unsigned flags, bool ptds) {
  if (cb == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  Stream* s = nullptr;
  if (CUresult r = ResolveStream(h, ptds, &s); r != CUDA_SUCCESS) return r;
  if (s->capture_graph() != nullptr) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  Op* op = s->Begin();
  op->kind = OpKind::kCallback;
  op->callback = cb;
  op->user = user;
  s->Commit();
  return CUDA_SUCCESS;
}

template <typename F>
CUresult WithStream(CUstream h, bool ptds, F f) {
  Stream* s = nullptr;
  if (CUresult r = ResolveStream(h, ptds, &s); r != CUDA_SUCCESS) return r;
  f(s);
  return CUDA_SUCCESS;
}

CUresult ElapsedTime(float* ms, CUevent a, CUevent b) {
  auto* start = reinterpret_cast<Event*>(a);
  auto* end = reinterpret_cast<Event*>(b);
  if (ms == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!IsLiveEvent(start) || !IsLiveEvent(end)) return CUDA_ERROR_INVALID_HANDLE;
  if (((start->flags | end->flags) & CU_EVENT_DISABLE_TIMING) != 0) return CUDA_ERROR_INVALID_HANDLE;
  uint64_t t[2];
  Event* evs[2] = {start, end};
  for (int i = 0; i < 2; ++i) {
    std::lock_guard<std::mutex> lock(evs[i]->mu);
    if (evs[i]->stream == nullptr || evs[i]->captured) return CUDA_ERROR_INVALID_HANDLE;
    if (evs[i]->stream->completed() < evs[i]->seq ||
        evs[i]->time_gen.load(std::memory_order_acquire) != evs[i]->gen) {
      return CUDA_ERROR_NOT_READY;
    }
    t[i] = evs[i]->time_ns.load();
  }
  *ms = static_cast<float>((static_cast<double>(t[1]) - static_cast<double>(t[0])) / 1e6);
  return CUDA_SUCCESS;
}

}  // namespace

SIM_EXPORT CUresult CUDAAPI cuStreamCreate(CUstream* phStream, unsigned int Flags) {
  SIM_ENTER("cuStreamCreate");
  return CreateStream(phStream, Flags, kLeastPriority);
}

SIM_EXPORT CUresult CUDAAPI cuStreamCreateWithPriority(CUstream* phStream, unsigned int flags, int priority) {
  SIM_ENTER("cuStreamCreateWithPriority");
  return CreateStream(phStream, flags, priority);
}

SIM_EXPORT CUresult CUDAAPI cuStreamDestroy_v2(CUstream hStream) {
  SIM_ENTER("cuStreamDestroy_v2");
  auto* s = reinterpret_cast<Stream*>(hStream);
  if (hStream == nullptr || hStream == CU_STREAM_LEGACY || hStream == CU_STREAM_PER_THREAD ||
      !IsLiveStream(s) || s->legacy() || s->per_thread()) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  UnregisterStream(s);
  // Queued work still completes, as the driver documents; the worker leaves
  // the context's stream list when it has drained, so cuCtxSynchronize and
  // cuMemFree still wait for that work.
  s->Retire();
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuStreamQuery(CUstream hStream) { SIM_ENTER("cuStreamQuery"); return Query(hStream, false); }
SIM_EXPORT CUresult CUDAAPI cuStreamQuery_ptsz(CUstream hStream) { SIM_ENTER("cuStreamQuery_ptsz"); return Query(hStream, true); }
SIM_EXPORT CUresult CUDAAPI cuStreamSynchronize(CUstream hStream) { SIM_ENTER("cuStreamSynchronize"); return Sync(hStream, false); }
SIM_EXPORT CUresult CUDAAPI cuStreamSynchronize_ptsz(CUstream hStream) { SIM_ENTER("cuStreamSynchronize_ptsz"); return Sync(hStream, true); }

SIM_EXPORT CUresult CUDAAPI cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags) {
  SIM_ENTER("cuStreamWaitEvent");
  return WaitEvent(hStream, hEvent, Flags, false);
}
SIM_EXPORT CUresult CUDAAPI cuStreamWaitEvent_ptsz(CUstream hStream, CUevent hEvent, unsigned int Flags) {
  SIM_ENTER("cuStreamWaitEvent_ptsz");
  return WaitEvent(hStream, hEvent, Flags, true);
}

SIM_EXPORT CUresult CUDAAPI cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void* userData) {
  SIM_ENTER("cuLaunchHostFunc");
  return HostFunc(hStream, fn, userData, false);
}
SIM_EXPORT CUresult CUDAAPI cuLaunchHostFunc_ptsz(CUstream hStream, CUhostFn fn, void* userData) {
  SIM_ENTER("cuLaunchHostFunc_ptsz");
  return HostFunc(hStream, fn, userData, true);
}

SIM_EXPORT CUresult CUDAAPI cuStreamAddCallback(CUstream hStream, CUstreamCallback callback, void* userData, unsigned int flags) {
  SIM_ENTER("cuStreamAddCallback");
  return Callback(hStream, callback, userData, flags, false);
}
SIM_EXPORT CUresult CUDAAPI cuStreamAddCallback_ptsz(CUstream hStream, CUstreamCallback callback, void* userData, unsigned int flags) {
  SIM_ENTER("cuStreamAddCallback_ptsz");
  return Callback(hStream, callback, userData, flags, true);
}

SIM_EXPORT CUresult CUDAAPI cuStreamGetPriority(CUstream hStream, int* priority) {
  SIM_ENTER("cuStreamGetPriority");
  if (priority == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return WithStream(hStream, false, [&](Stream* s) { *priority = s->priority(); });
}
SIM_EXPORT CUresult CUDAAPI cuStreamGetPriority_ptsz(CUstream hStream, int* priority) {
  SIM_ENTER("cuStreamGetPriority_ptsz");
  if (priority == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return WithStream(hStream, true, [&](Stream* s) { *priority = s->priority(); });
}

SIM_EXPORT CUresult CUDAAPI cuStreamGetFlags(CUstream hStream, unsigned int* flags) {
  SIM_ENTER("cuStreamGetFlags");
  if (flags == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return WithStream(hStream, false, [&](Stream* s) { *flags = s->flags(); });
}
SIM_EXPORT CUresult CUDAAPI cuStreamGetFlags_ptsz(CUstream hStream, unsigned int* flags) {
  SIM_ENTER("cuStreamGetFlags_ptsz");
  if (flags == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return WithStream(hStream, true, [&](Stream* s) { *flags = s->flags(); });
}

SIM_EXPORT CUresult CUDAAPI cuStreamGetCtx(CUstream hStream, CUcontext* pctx) {
  SIM_ENTER("cuStreamGetCtx");
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return WithStream(hStream, false, [&](Stream* s) { *pctx = AsHandle(s->ctx()); });
}
SIM_EXPORT CUresult CUDAAPI cuStreamGetCtx_ptsz(CUstream hStream, CUcontext* pctx) {
  SIM_ENTER("cuStreamGetCtx_ptsz");
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return WithStream(hStream, true, [&](Stream* s) { *pctx = AsHandle(s->ctx()); });
}

// CUDA 12.5's form: the stream's context, and its green context (the sim has
// none, so NULL, as for a stream of a regular context).
SIM_EXPORT CUresult CUDAAPI cuStreamGetCtx_v2(CUstream hStream, CUcontext* pCtx, CUgreenCtx* pGreenCtx) {
  SIM_ENTER("cuStreamGetCtx_v2");
  if (pCtx == nullptr || pGreenCtx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return WithStream(hStream, false, [&](Stream* s) { BothContexts(s, pCtx, pGreenCtx); });
}
SIM_EXPORT CUresult CUDAAPI cuStreamGetCtx_v2_ptsz(CUstream hStream, CUcontext* pCtx,
                                                   CUgreenCtx* pGreenCtx) {
  SIM_ENTER("cuStreamGetCtx_v2_ptsz");
  if (pCtx == nullptr || pGreenCtx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return WithStream(hStream, true, [&](Stream* s) { BothContexts(s, pCtx, pGreenCtx); });
}

SIM_EXPORT CUresult CUDAAPI cuStreamGetId(CUstream hStream, unsigned long long* streamId) {
  SIM_ENTER("cuStreamGetId");
  if (streamId == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return WithStream(hStream, false, [&](Stream* s) { *streamId = s->id(); });
}
SIM_EXPORT CUresult CUDAAPI cuStreamGetId_ptsz(CUstream hStream, unsigned long long* streamId) {
  SIM_ENTER("cuStreamGetId_ptsz");
  if (streamId == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return WithStream(hStream, true, [&](Stream* s) { *streamId = s->id(); });
}

SIM_EXPORT CUresult CUDAAPI cuEventCreate(CUevent* phEvent, unsigned int Flags) {
  SIM_ENTER("cuEventCreate");
  if (phEvent == nullptr || (Flags & ~0xfu) != 0) return CUDA_ERROR_INVALID_VALUE;
  Context* ctx = CurrentContextOrNull();
  if (ctx == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  auto* e = new Event();
  e->ctx = ctx;
  e->flags = Flags;
  if ((Flags & kIpcEventFlags) == kIpcEventFlags) {
    e->ipc = NewIpcEventSlot();
    if (e->ipc == nullptr) {
      delete e;
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
  }
  RegisterEvent(e);
  *phEvent = reinterpret_cast<CUevent>(e);
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuEventRecord(CUevent hEvent, CUstream hStream) {
  SIM_ENTER("cuEventRecord");
  return Record(hEvent, hStream, false);
}
SIM_EXPORT CUresult CUDAAPI cuEventRecord_ptsz(CUevent hEvent, CUstream hStream) {
  SIM_ENTER("cuEventRecord_ptsz");
  return Record(hEvent, hStream, true);
}
SIM_EXPORT CUresult CUDAAPI cuEventRecordWithFlags(CUevent hEvent, CUstream hStream, unsigned int flags) {
  SIM_ENTER("cuEventRecordWithFlags");
  return Record(hEvent, hStream, false);
}
SIM_EXPORT CUresult CUDAAPI cuEventRecordWithFlags_ptsz(CUevent hEvent, CUstream hStream, unsigned int flags) {
  SIM_ENTER("cuEventRecordWithFlags_ptsz");
  return Record(hEvent, hStream, true);
}

SIM_EXPORT CUresult CUDAAPI cuEventQuery(CUevent hEvent) {
  SIM_ENTER("cuEventQuery");
  auto* e = reinterpret_cast<Event*>(hEvent);
  if (!IsLiveEvent(e)) return CUDA_ERROR_INVALID_HANDLE;
  if (e->ipc != nullptr) return IpcEventDone(e) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
  std::lock_guard<std::mutex> lock(e->mu);
  if (e->stream == nullptr || e->captured) return CUDA_SUCCESS;
  return e->stream->completed() >= e->seq ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

SIM_EXPORT CUresult CUDAAPI cuEventSynchronize(CUevent hEvent) {
  SIM_ENTER("cuEventSynchronize");
  auto* e = reinterpret_cast<Event*>(hEvent);
  if (!IsLiveEvent(e)) return CUDA_ERROR_INVALID_HANDLE;
  if (e->ipc != nullptr) {
    IpcEventWaitHost(e);
    return CUDA_SUCCESS;
  }
  Stream* s = nullptr;
  uint64_t seq = 0;
  {
    std::lock_guard<std::mutex> lock(e->mu);
    if (e->captured) return CUDA_SUCCESS;
    s = e->stream;
    seq = e->seq;
  }
  if (s != nullptr) s->WaitFor(seq);
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuEventDestroy_v2(CUevent hEvent) {
  SIM_ENTER("cuEventDestroy_v2");
  auto* e = reinterpret_cast<Event*>(hEvent);
  if (!IsLiveEvent(e)) return CUDA_ERROR_INVALID_HANDLE;
  // The object stays allocated: a record still queued may reach it later.
  UnregisterEvent(e);
  if (e->ipc != nullptr) FreeIpcEventSlot(e->ipc);  // ignores another process's slot
  return CUDA_SUCCESS;
}

#undef cuEventElapsedTime
extern "C" CUresult CUDAAPI cuEventElapsedTime(float* pMilliseconds, CUevent hStart, CUevent hEnd);
SIM_EXPORT CUresult CUDAAPI cuEventElapsedTime(float* pMilliseconds, CUevent hStart, CUevent hEnd) {
  SIM_ENTER("cuEventElapsedTime");
  return ElapsedTime(pMilliseconds, hStart, hEnd);
}
SIM_EXPORT CUresult CUDAAPI cuEventElapsedTime_v2(float* pMilliseconds, CUevent hStart, CUevent hEnd) {
  SIM_ENTER("cuEventElapsedTime_v2");
  return ElapsedTime(pMilliseconds, hStart, hEnd);
}
