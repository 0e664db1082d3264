// Contexts of the simulated driver: primary and created, a per-thread stack.
#pragma once

#include <cuda.h>

#include <atomic>
#include <mutex>
#include <vector>

namespace vgpu::sim {

class Stream;

struct Context {
  int device = 0;
  unsigned flags = 0;
  bool primary = false;
  std::atomic<int> primary_refs{0};   // primary contexts: retain count
  std::atomic<bool> active{true};     // false: primary context released to 0 / destroyed
  std::atomic<int> sticky_error{CUDA_SUCCESS};
  std::mutex mu;                      // guards streams
  std::vector<Stream*> streams;       // every live stream incl. per-thread ones
  Stream* legacy = nullptr;
  unsigned long long id = 0;
  size_t limits[16] = {};
  // cuCtxRecordEvent's own non-blocking stream (guarded by mu; created on
  // first use, replaced once a teardown has retired it).
  Stream* record_stream = nullptr;
};

// The calling thread's current context; CUDA_ERROR_INVALID_CONTEXT if none.
CUresult CurrentContext(CUcontext* out);
Context* CurrentContextOrNull();
// Device ordinal of a valid context, -1 for an invalid handle.
int ContextDevice(CUcontext ctx);
bool IsValidContext(CUcontext ctx);
inline Context* AsContext(CUcontext c) { return reinterpret_cast<Context*>(c); }
inline CUcontext AsHandle(Context* c) { return reinterpret_cast<CUcontext>(c); }

// Creates the context's legacy stream and registers it.
Context* NewContext(int device, unsigned flags, bool primary);
// Drains and retires the streams, frees the context's memory and modules.
void TeardownContext(Context* ctx);
Context* PrimaryContext(int device);  // creates the object if needed (inactive)

// The per-thread default stream of ctx for the calling thread.
Stream* PerThreadStream(Context* ctx);

// Sticky error of a context after a kernel fault, CUDA_SUCCESS otherwise.
inline CUresult StickyError(Context* ctx) {
  return static_cast<CUresult>(ctx->sticky_error.load(std::memory_order_relaxed));
}

// Ordinals with an active context (a primary context retained, or a created
// one): what a checkpoint counts as the GPUs the process uses.
uint32_t ActiveContextDevices();

// True when no stream of any context has unfinished work.
bool AllStreamsIdle();

// Waits for every stream of ctx.
CUresult SynchronizeContext(Context* ctx);

// Thread-local context stack.
void SetCurrent(Context* ctx);  // replaces the top (pushes if empty); nullptr pops? no: clears top
void PushCurrent(Context* ctx);
Context* PopCurrent();

}  // namespace vgpu::sim
