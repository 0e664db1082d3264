#include "sim/engine/stream.h"

#include <time.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <shared_mutex>
#include <unordered_set>

#include "sim/engine/address_space.h"
#include "sim/engine/context.h"
#include "sim/engine/event.h"
#include "sim/engine/external.h"
#include "sim/engine/futex.h"
#include "sim/engine/graph.h"
#include "sim/engine/handle_registry.h"
#include "sim/engine/ipc.h"
#include "sim/engine/mem_pool.h"
#include "sim/engine/sim_state.h"
#include "sim/node/node_region.h"

namespace vgpu::sim {
namespace {

auto* g_streams = new HandleRegistry<Stream>();  // never destroyed: workers may outlive exit
std::atomic<uint64_t> g_next_stream_id{1};

inline void CpuRelax() { __builtin_ia32_pause(); }

// Sleeps until the absolute monotonic time `deadline`; the tail is spun so
// kernel durations are accurate to a few microseconds.
void SleepUntil(uint64_t deadline) {
  constexpr uint64_t kSpinNs = 60'000;
  uint64_t now = NowNs();
  if (deadline > now + kSpinNs) {
    uint64_t wake = deadline - kSpinNs;
    timespec ts{static_cast<time_t>(wake / 1'000'000'000ull),
                static_cast<long>(wake % 1'000'000'000ull)};
    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr);
  }
  while (NowNs() < deadline) CpuRelax();
}

void CopyRows(const Op& op) {
  for (size_t r = 0; r < op.height; ++r) {
    std::memmove(op.dst + r * op.dst_pitch, op.src + r * op.src_pitch, op.width);
  }
}

// Pageable host memory cannot be the target of a DMA: the driver copies it
// through pinned staging buffers, a second pass over every byte, which is why
// pageable copies run well below pinned ones on a GPU. Overlapping ranges
// (a host-to-host copy within one buffer) keep memmove's semantics.
void CopyRowsStaged(const Op& op) {
  constexpr size_t kStage = 1u << 20;
  thread_local std::unique_ptr<uint8_t[]> stage;  // one per stream worker, kept
  size_t span = (op.height - 1) * std::max(op.dst_pitch, op.src_pitch) + op.width;
  bool overlap = op.dst < op.src + span && op.src < op.dst + span;
  if (stage == nullptr && !overlap) stage.reset(new (std::nothrow) uint8_t[kStage]);
  if (stage == nullptr || overlap) return CopyRows(op);
  for (size_t r = 0; r < op.height; ++r) {
    uint8_t* dst = op.dst + r * op.dst_pitch;
    const uint8_t* src = op.src + r * op.src_pitch;
    for (size_t o = 0; o < op.width; o += kStage) {
      size_t n = std::min(kStage, op.width - o);
      std::memcpy(stage.get(), src + o, n);
      std::memcpy(dst + o, stage.get(), n);
    }
  }
}

void SetRows(const Op& op) {
  for (size_t r = 0; r < op.height; ++r) {
    uint8_t* row = op.dst + r * op.dst_pitch;
    size_t n = op.width / op.elem;
    if (op.elem == 1) {
      std::memset(row, static_cast<int>(op.value & 0xff), n);
    } else if (op.elem == 2) {
      auto v = static_cast<uint16_t>(op.value);
      for (size_t i = 0; i < n; ++i) std::memcpy(row + 2 * i, &v, 2);
    } else {
      for (size_t i = 0; i < n; ++i) std::memcpy(row + 4 * i, &op.value, 4);
    }
  }
}

// A stream memory operation's condition (cuStreamWaitValue32/64 flags).
bool WaitValueHolds(const Op& op) {
  uint64_t v = 0;
  if (op.elem == 8) {
    v = __atomic_load_n(reinterpret_cast<const uint64_t*>(op.dst), __ATOMIC_ACQUIRE);
  } else {
    v = __atomic_load_n(reinterpret_cast<const uint32_t*>(op.dst), __ATOMIC_ACQUIRE);
  }
  const uint64_t want = op.value64;
  switch (op.mem_flags & 0x3u) {
    case CU_STREAM_WAIT_VALUE_GEQ:  // cyclic: the difference as a signed number
      return op.elem == 8 ? static_cast<int64_t>(v - want) >= 0
                          : static_cast<int32_t>(static_cast<uint32_t>(v) - static_cast<uint32_t>(want)) >= 0;
    case CU_STREAM_WAIT_VALUE_EQ:
      return v == want;
    case CU_STREAM_WAIT_VALUE_AND:
      return (v & want) != 0;
    default:  // CU_STREAM_WAIT_VALUE_NOR
      return op.elem == 8 ? ~(v | want) != 0 : static_cast<uint32_t>(~(v | want)) != 0;
  }
}

// Polls like a GPU's front end spinning on a semaphore: a short spin, then
// sleeps growing to 50 us, so a wait that lasts costs little host CPU.
void WaitValue(const Op& op) {
  for (int i = 0; i < 2000; ++i) {
    if (WaitValueHolds(op)) return;
    CpuRelax();
  }
  long sleep_ns = 1000;
  while (!WaitValueHolds(op)) {
    timespec ts{0, sleep_ns};
    nanosleep(&ts, nullptr);
    sleep_ns = std::min(sleep_ns * 2, 50'000L);
  }
}

void WriteValue(const Op& op) {
  if (op.elem == 8) {
    __atomic_store_n(reinterpret_cast<uint64_t*>(op.dst), op.value64, __ATOMIC_SEQ_CST);
  } else {
    __atomic_store_n(reinterpret_cast<uint32_t*>(op.dst), static_cast<uint32_t>(op.value64),
                     __ATOMIC_SEQ_CST);
  }
}

}  // namespace

void CopyOp(const Op& from, Op* to) {
  to->kind = from.kind;
  to->dep = from.dep;
  to->extra_deps = from.extra_deps;
  to->fn = from.fn;
  to->dims = from.dims;
  std::memcpy(to->params.Resize(from.params.size()), from.params.data(), from.params.size());
  to->dst = from.dst;
  to->src = from.src;
  to->width = from.width;
  to->height = from.height;
  to->dst_pitch = from.dst_pitch;
  to->src_pitch = from.src_pitch;
  to->value = from.value;
  to->elem = from.elem;
  to->staged = from.staged;
  to->host_fn = from.host_fn;
  to->callback = from.callback;
  to->user = from.user;
  to->event = from.event;
  to->event_gen = from.event_gen;
  to->free_ptr = from.free_ptr;
  to->value64 = from.value64;
  to->mem_flags = from.mem_flags;
  to->ext_semas = from.ext_semas;
}

Stream::Stream(Context* ctx, unsigned flags, int priority, bool per_thread)
    : ctx_(ctx),
      flags_(flags),
      priority_(priority),
      per_thread_(per_thread),
      id_(g_next_stream_id.fetch_add(1)),
      ring_(kRingSize) {
  worker_ = std::thread([this] { Run(); });
  worker_.detach();
}

Op* Stream::Begin() {
  producer_mu_.lock();
  if (capture_graph() != nullptr) {
    scratch_.kind = OpKind::kNop;
    scratch_.dep = {nullptr, 0};
    scratch_.extra_deps.clear();
    scratch_.ext_semas.reset();
    return &scratch_;
  }
  uint64_t n = submitted_.load(std::memory_order_relaxed);
  if (n - completed_.load(std::memory_order_acquire) >= kRingSize) WaitFor(n - kRingSize + 1);
  Op* op = &ring_[n % kRingSize];
  op->kind = OpKind::kNop;
  op->dep = {nullptr, 0};
  op->extra_deps.clear();
  op->ext_semas.reset();  // a reused slot must not keep a semaphore mapped
  return op;
}

void Stream::AddImplicitDeps(Op* op) {
  if (!blocking()) return;
  if (!legacy_) {
    Stream* l = ctx_->legacy;
    uint64_t s = l->submitted();
    if (l == this || l->completed() >= s) return;
    if (op->dep.stream == nullptr) {
      op->dep = {l, s};
    } else {
      op->extra_deps.push_back({l, s});
    }
    return;
  }
  std::lock_guard<std::mutex> lock(ctx_->mu);
  for (Stream* s : ctx_->streams) {
    if (s == this || !s->blocking()) continue;
    uint64_t seq = s->submitted();
    if (s->completed() < seq) op->extra_deps.push_back({s, seq});
  }
}

uint64_t Stream::Commit() {
  Graph* g = capture_graph();
  if (g != nullptr) {
    GraphAppendCaptured(g, scratch_);
    producer_mu_.unlock();
    return 0;
  }
  uint64_t n = submitted_.load(std::memory_order_relaxed);
  AddImplicitDeps(&ring_[n % kRingSize]);
  ring_[n % kRingSize].enqueued_ns = NowNs();
  submitted_.store(n + 1, std::memory_order_seq_cst);
  producer_mu_.unlock();
  if (worker_sleeping_.load(std::memory_order_seq_cst)) {
    work_signal_.fetch_add(1, std::memory_order_seq_cst);
    FutexWakeAll(&work_signal_);
  }
  return n + 1;
}

void Stream::WaitFor(uint64_t seq) {
  if (completed() >= seq) return;
  for (int i = 0; i < 200 && completed() < seq; ++i) CpuRelax();
  while (completed() < seq) {
    uint32_t signal = done_signal_.load(std::memory_order_seq_cst);
    waiters_.fetch_add(1, std::memory_order_seq_cst);
    if (completed_.load(std::memory_order_seq_cst) < seq) FutexWait(&done_signal_, signal);
    waiters_.fetch_sub(1, std::memory_order_seq_cst);
  }
}

CUresult Stream::Synchronize() {
  WaitFor(submitted());
  return StickyError(ctx_);
}

void Stream::Retire() {
  retired_.store(true, std::memory_order_seq_cst);
  work_signal_.fetch_add(1, std::memory_order_seq_cst);
  FutexWakeAll(&work_signal_);
}

void Stream::set_capture(Graph* g, CUstreamCaptureMode mode, uint64_t id) {
  capture_mode_ = mode;
  capture_id_ = id;
  capture_graph_.store(g, std::memory_order_release);
}

bool Stream::WaitDep(const StreamDep& d) {
  if (d.stream == nullptr || d.stream == this || d.stream->completed() >= d.seq) return false;
  d.stream->WaitFor(d.seq);
  return true;
}

void Stream::Run() {
  for (;;) {
    uint64_t done = completed_.load(std::memory_order_relaxed);
    uint64_t n = submitted_.load(std::memory_order_acquire);
    for (int spin = 0; n == done && spin < 2000; ++spin) {
      CpuRelax();
      n = submitted_.load(std::memory_order_acquire);
    }
    if (n == done) {
      if (retired_.load()) break;
      uint32_t signal = work_signal_.load(std::memory_order_seq_cst);
      worker_sleeping_.store(true, std::memory_order_seq_cst);
      if (submitted_.load(std::memory_order_seq_cst) == done && !retired_.load()) {
        FutexWait(&work_signal_, signal);
      }
      worker_sleeping_.store(false, std::memory_order_relaxed);
      continue;
    }
    Op& op = ring_[done % kRingSize];
    bool waited = WaitDep(op.dep);
    for (const auto& d : op.extra_deps) waited = WaitDep(d) || waited;
    // A GPU starts queued work the moment it can: the worker thread's own
    // wake-up and bookkeeping between ops is not device time.
    ready_ns_ = waited ? NowNs() : std::max(op.enqueued_ns, last_end_ns_);
    Execute(op);
    completed_.store(done + 1, std::memory_order_seq_cst);
    if (waiters_.load(std::memory_order_seq_cst) > 0) {
      done_signal_.fetch_add(1, std::memory_order_seq_cst);
      FutexWakeAll(&done_signal_);
    }
  }
  {
    std::lock_guard<std::mutex> lock(ctx_->mu);
    auto& v = ctx_->streams;
    v.erase(std::remove(v.begin(), v.end(), this), v.end());
  }
  ring_.clear();
  ring_.shrink_to_fit();
}

void Stream::ExecuteKernel(Op& op) {
  if (StickyError(ctx_) != CUDA_SUCCESS) {  // a faulted context runs nothing more
    last_end_ns_ = ready_ns_;
    return;
  }
  NodeRegion& node = Node();
  uint64_t start = node.EngineAcquire(ctx_->device, ready_ns_);
  uint64_t host_start = NowNs();
  uint64_t device_ns = 0;
  CUresult r = vgpu::sim::ExecuteKernel(op.fn, reinterpret_cast<CUcontext>(ctx_), op.dims,
                                        op.params, &device_ns);
  // The kernel ends at its modelled time, or after the host time its
  // implementation took when it models none. This thread's own lateness in
  // waking up is not device time: the engine records the modelled end and the
  // next kernel starts there, back to back as on a GPU. The thread still
  // waits for that end, so completion is never reported before it.
  if (device_ns == 0) device_ns = NowNs() - host_start;
  uint64_t end = start + device_ns;
  SleepUntil(end);
  last_end_ns_ = node.EngineRelease(ctx_->device, start, end);
  // Only a fault poisons the context, as on a GPU; a launch whose module was
  // unloaded meanwhile just does nothing.
  if (r == CUDA_ERROR_ILLEGAL_ADDRESS || r == CUDA_ERROR_LAUNCH_FAILED) {
    int ok = CUDA_SUCCESS;
    ctx_->sticky_error.compare_exchange_strong(ok, r);
  }
}

void Stream::Execute(Op& op) {
  switch (op.kind) {
    case OpKind::kNop:
      last_end_ns_ = ready_ns_;  // takes no device time
      return;
    case OpKind::kKernel:
      ExecuteKernel(op);
      return;  // sets last_end_ns_
    case OpKind::kCopy:
      if (op.staged) {
        CopyRowsStaged(op);
      } else {
        CopyRows(op);
      }
      break;
    case OpKind::kSet:
      SetRows(op);
      break;
    case OpKind::kHostFn:
      op.host_fn(op.user);
      break;
    case OpKind::kCallback:
      op.callback(reinterpret_cast<CUstream>(this), StickyError(ctx_), op.user);
      break;
    case OpKind::kEventRecord:
      EventReached(op.event, op.event_gen, ready_ns_);
      last_end_ns_ = ready_ns_;  // takes no device time
      return;
    case OpKind::kFreeAsync:
      ReleaseStreamOrdered(op.free_ptr);
      break;
    case OpKind::kWaitValue:
      WaitValue(op);
      break;
    case OpKind::kWriteValue:
      WriteValue(op);
      last_end_ns_ = ready_ns_;  // takes no modelled device time
      return;
    case OpKind::kExtSemaSignal:
    case OpKind::kExtSemaWait:
      RunExtSemaBatch(*op.ext_semas);
      break;
  }
  last_end_ns_ = NowNs();
}

void RegisterStream(Stream* s) { g_streams->Add(s); }
void UnregisterStream(Stream* s) { g_streams->Remove(s); }
bool IsLiveStream(Stream* s) { return g_streams->Contains(s); }

CUresult ResolveStream(CUstream h, bool per_thread_default, Stream** out) {
  if (h == nullptr) h = per_thread_default ? CU_STREAM_PER_THREAD : CU_STREAM_LEGACY;
  if (h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) {
    Context* ctx = CurrentContextOrNull();
    if (ctx == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
    *out = h == CU_STREAM_LEGACY ? ctx->legacy : PerThreadStream(ctx);
    return CUDA_SUCCESS;
  }
  auto* s = reinterpret_cast<Stream*>(h);
  if (!IsLiveStream(s)) return CUDA_ERROR_INVALID_HANDLE;
  *out = s;
  return CUDA_SUCCESS;
}

CUresult IpcEventWaitStream(Stream* s, const Event* e) {
  const uint64_t target = e->ipc->recorded.load(std::memory_order_acquire);
  if (e->ipc->reached.load(std::memory_order_acquire) >= target) return CUDA_SUCCESS;
  if (s->capture_graph() != nullptr) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  Op* op = s->Begin();
  op->kind = OpKind::kWaitValue;
  op->dst = reinterpret_cast<uint8_t*>(&e->ipc->reached);
  op->elem = 8;
  op->value64 = target;
  op->mem_flags = CU_STREAM_WAIT_VALUE_GEQ;
  s->Commit();
  return CUDA_SUCCESS;
}

}  // namespace vgpu::sim
