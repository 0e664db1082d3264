// Streams of the simulated driver: each stream is a worker thread that runs
// its operations in order; the host returns as soon as an operation is queued.
// Implicit synchronization of the legacy default stream is expressed as
// per-operation dependencies (stream, sequence number) computed at enqueue.
#pragma once

#include <cuda.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "sim/engine/module.h"

namespace vgpu::sim {

struct Context;
struct Event;
struct Graph;
struct ExtSemaBatch;
class Stream;

enum class OpKind : uint8_t {
  kNop,
  kKernel,
  kCopy,       // 1D or 2D copy between translated host addresses
  kSet,        // memset of 1, 2 or 4-byte elements, 1D or 2D
  kHostFn,     // cuLaunchHostFunc
  kCallback,   // cuStreamAddCallback
  kEventRecord,
  kFreeAsync,  // cuMemFreeAsync: frees when reached in stream order
  kWaitValue,  // cuStreamWaitValue32/64: blocks the stream until the condition on *dst holds
  kWriteValue, // cuStreamWriteValue32/64: stores value64 (elem bytes) at dst
  kExtSemaSignal,  // cuSignalExternalSemaphoresAsync: ext_semas
  kExtSemaWait,    // cuWaitExternalSemaphoresAsync: blocks the stream until ext_semas hold
};

struct StreamDep {
  Stream* stream;
  uint64_t seq;  // wait until stream->completed() >= seq
};

struct Op {
  OpKind kind = OpKind::kNop;
  StreamDep dep{nullptr, 0};
  std::vector<StreamDep> extra_deps;  // legacy-stream barriers only
  // kKernel
  CUfunction fn = nullptr;
  LaunchDims dims{};
  ParamBuffer params;
  // kCopy / kSet: rows of `width` bytes; height 1 for 1D.
  uint8_t* dst = nullptr;
  const uint8_t* src = nullptr;
  size_t width = 0, height = 1, dst_pitch = 0, src_pitch = 0;
  uint32_t value = 0;
  uint8_t elem = 1;
  bool staged = false;  // kCopy: pageable host memory, copied through a bounce buffer
  // kHostFn / kCallback
  CUhostFn host_fn = nullptr;
  CUstreamCallback callback = nullptr;
  void* user = nullptr;
  // kEventRecord
  Event* event = nullptr;
  uint64_t event_gen = 0;
  // kFreeAsync
  CUdeviceptr free_ptr = 0;
  // kWaitValue / kWriteValue: dst, elem (4 or 8), value64 and the API flags.
  uint64_t value64 = 0;
  unsigned mem_flags = 0;
  uint64_t enqueued_ns = 0;  // when the host committed it
  // kExtSemaSignal / kExtSemaWait (shared: graph nodes replay it).
  std::shared_ptr<const ExtSemaBatch> ext_semas;
};

// cuStreamSetAttribute's per-stream values (recorded; the sim has no L2
// cache, memory-synchronization domains or host-wait policies to apply them to).
struct StreamAttributes {
  CUaccessPolicyWindow window{};
  CUsynchronizationPolicy sync_policy = CU_SYNC_POLICY_AUTO;
  CUlaunchMemSyncDomainMap domain_map{0, 1};
  CUlaunchMemSyncDomain domain = CU_LAUNCH_MEM_SYNC_DOMAIN_DEFAULT;
  unsigned nvlink_centric = 0;
};

// Deep copy (graph nodes are replayed from copies).
void CopyOp(const Op& from, Op* to);

class Stream {
 public:
  static constexpr uint64_t kRingSize = 512;

  Stream(Context* ctx, unsigned flags, int priority, bool per_thread);
  ~Stream() = delete;  // streams are retired, never freed (events may still name them)

  // Reserves the next slot (blocks while the ring is full) and returns it for
  // the caller to fill; Commit publishes it. While capturing, the slot is a
  // scratch op that Commit appends to the capture graph instead.
  Op* Begin();
  // Returns the op's sequence number (done when completed() >= it), 0 if captured.
  uint64_t Commit();

  uint64_t submitted() const { return submitted_.load(std::memory_order_acquire); }
  uint64_t completed() const { return completed_.load(std::memory_order_acquire); }
  bool Idle() const { return completed() == submitted(); }
  void WaitFor(uint64_t seq);  // host wait until completed() >= seq
  CUresult Synchronize();      // waits for everything queued so far

  // Retires the stream: pending work still runs, then the worker exits.
  void Retire();

  Context* ctx() const { return ctx_; }
  unsigned flags() const { return flags_; }
  int priority() const { return priority_.load(std::memory_order_relaxed); }
  void set_priority(int p) { priority_.store(p, std::memory_order_relaxed); }
  // cuStreamGetAttribute/SetAttribute values, guarded by attr_mu.
  std::mutex attr_mu;
  StreamAttributes attrs;
  bool per_thread() const { return per_thread_; }
  bool legacy() const { return legacy_; }
  void set_legacy() { legacy_ = true; }
  bool blocking() const { return (flags_ & CU_STREAM_NON_BLOCKING) == 0; }
  uint64_t id() const { return id_; }

  // Stream capture (owned by the graph module).
  Graph* capture_graph() const { return capture_graph_.load(std::memory_order_acquire); }
  void set_capture(Graph* g, CUstreamCaptureMode mode, uint64_t id);
  CUstreamCaptureMode capture_mode() const { return capture_mode_; }
  uint64_t capture_id() const { return capture_id_; }

 private:
  void Run();
  void Execute(Op& op);
  void ExecuteKernel(Op& op);
  bool WaitDep(const StreamDep& d);  // true if it had to wait
  void AddImplicitDeps(Op* op);

  Context* ctx_;
  unsigned flags_;
  std::atomic<int> priority_;
  bool per_thread_;
  bool legacy_ = false;
  uint64_t id_;
  std::mutex producer_mu_;
  std::vector<Op> ring_;
  Op scratch_;  // capture target
  alignas(64) std::atomic<uint64_t> submitted_{0};
  alignas(64) std::atomic<uint64_t> completed_{0};
  std::atomic<uint32_t> waiters_{0};
  std::atomic<uint32_t> done_signal_{0};  // futex word: bumped when waiters may proceed
  std::atomic<uint32_t> work_signal_{0};  // futex word: bumped to wake the worker
  std::atomic<bool> worker_sleeping_{false};
  std::atomic<bool> retired_{false};
  std::atomic<Graph*> capture_graph_{nullptr};
  // Worker only: when the current op could have started on a GPU (queued and
  // its dependencies done), and when the previous op ended.
  uint64_t ready_ns_ = 0;
  uint64_t last_end_ns_ = 0;
  CUstreamCaptureMode capture_mode_ = CU_STREAM_CAPTURE_MODE_GLOBAL;
  uint64_t capture_id_ = 0;
  std::thread worker_;
};

// Resolves a stream argument: 0 means the legacy stream, or the per-thread
// stream for the _ptsz/_ptds entry points; CU_STREAM_LEGACY and
// CU_STREAM_PER_THREAD are accepted everywhere. Requires a current context for
// the default streams. CUDA_ERROR_INVALID_HANDLE for a destroyed or bogus one.
CUresult ResolveStream(CUstream h, bool per_thread_default, Stream** out);
bool IsLiveStream(Stream* s);
void UnregisterStream(Stream* s);
void RegisterStream(Stream* s);

// Interprocess events (event.h, ipc.h): makes `s` wait on the device for the
// event's newest record, in whichever process it was recorded.
CUresult IpcEventWaitStream(Stream* s, const Event* e);

}  // namespace vgpu::sim
