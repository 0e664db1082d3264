#include "sim/engine/context.h"

#include <shared_mutex>
#include <unordered_map>
#include <unordered_set>

#include "sim/engine/address_space.h"
#include "sim/engine/ipc.h"
#include "sim/engine/module.h"
#include "sim/engine/sim_state.h"
#include "sim/engine/stream.h"

namespace vgpu::sim {
namespace {

std::shared_mutex g_ctx_mu;
auto* g_contexts = new std::unordered_set<Context*>();
Context* g_primary[kMaxDevices] = {};
std::atomic<unsigned long long> g_next_ctx_id{1};

thread_local std::vector<Context*> t_stack;
// Per-thread default streams, by context id (contexts are never freed, so a
// stale entry never aliases a new context).
thread_local std::unordered_map<Context*, Stream*> t_per_thread;

void SetContextBit(int device, bool on) {
  if (ProcessSlot* self = Node().self(); self != nullptr) {
    if (on) self->context_mask.fetch_or(1u << Node().Phys(device));
  }
}

}  // namespace

Context* NewContext(int device, unsigned flags, bool primary) {
  auto* ctx = new Context();
  ctx->device = device;
  ctx->flags = flags;
  ctx->primary = primary;
  ctx->id = g_next_ctx_id.fetch_add(1);
  ctx->legacy = new Stream(ctx, 0, 0, false);
  ctx->legacy->set_legacy();
  RegisterStream(ctx->legacy);
  ctx->streams.push_back(ctx->legacy);
  {
    std::unique_lock lock(g_ctx_mu);
    g_contexts->insert(ctx);
  }
  SetContextBit(device, true);
  return ctx;
}

Context* PrimaryContext(int device) {
  std::unique_lock lock(g_ctx_mu);
  Context*& p = g_primary[device];
  if (p == nullptr) {
    lock.unlock();
    Context* ctx = NewContext(device, 0, true);
    ctx->active.store(false);
    lock.lock();
    if (p == nullptr) p = ctx;  // a racing creator's extra object stays unused
  }
  return p;
}

void TeardownContext(Context* ctx) {
  SynchronizeContext(ctx);
  std::vector<Stream*> streams;
  {
    std::lock_guard<std::mutex> lock(ctx->mu);
    streams.swap(ctx->streams);
  }
  for (Stream* s : streams) {
    UnregisterStream(s);
    s->Retire();
  }
  // Modules first: their variables live in the context's device memory.
  DestroyModulesOfContext(AsHandle(ctx));
  for (const AllocInfo& a : AddressSpace::Get().AllocationsOf(AsHandle(ctx))) {
    if (a.kind == AllocKind::kDevice) FreeDeviceMemory(a.base);
    if (a.kind == AllocKind::kExternal) FreeExternalBuffer(a.base);
  }
  CloseIpcMemoryOfContext(AsHandle(ctx));
  ctx->sticky_error.store(CUDA_SUCCESS);
  if (ctx->primary) {
    // A primary context comes back to life on the next retain, with a new legacy stream.
    ctx->legacy = new Stream(ctx, 0, 0, false);
    ctx->legacy->set_legacy();
    RegisterStream(ctx->legacy);
    std::lock_guard<std::mutex> lock(ctx->mu);
    ctx->streams.push_back(ctx->legacy);
  } else {
    std::unique_lock lock(g_ctx_mu);
    g_contexts->erase(ctx);
  }
}

CUresult SynchronizeContext(Context* ctx) {
  std::vector<std::pair<Stream*, uint64_t>> targets;
  {
    std::lock_guard<std::mutex> lock(ctx->mu);
    for (Stream* s : ctx->streams) targets.emplace_back(s, s->submitted());
  }
  for (auto& [s, seq] : targets) s->WaitFor(seq);
  return StickyError(ctx);
}

Stream* PerThreadStream(Context* ctx) {
  auto it = t_per_thread.find(ctx);
  if (it != t_per_thread.end() && IsLiveStream(it->second)) return it->second;
  auto* s = new Stream(ctx, 0, 0, true);
  RegisterStream(s);
  {
    std::lock_guard<std::mutex> lock(ctx->mu);
    ctx->streams.push_back(s);
  }
  t_per_thread[ctx] = s;
  return s;
}

Context* CurrentContextOrNull() {
  if (t_stack.empty()) return nullptr;
  Context* c = t_stack.back();
  return c != nullptr && c->active.load(std::memory_order_relaxed) ? c : nullptr;
}

CUresult CurrentContext(CUcontext* out) {
  Context* c = CurrentContextOrNull();
  if (c == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  *out = AsHandle(c);
  return CUDA_SUCCESS;
}

bool IsValidContext(CUcontext ctx) {
  std::shared_lock lock(g_ctx_mu);
  auto* c = AsContext(ctx);
  return g_contexts->count(c) != 0 && c->active.load();
}

uint32_t ActiveContextDevices() {
  std::shared_lock lock(g_ctx_mu);
  uint32_t mask = 0;
  for (Context* c : *g_contexts) {
    if (c->active.load()) mask |= 1u << c->device;
  }
  return mask;
}

bool AllStreamsIdle() {
  std::shared_lock lock(g_ctx_mu);
  for (Context* c : *g_contexts) {
    std::lock_guard<std::mutex> streams(c->mu);
    for (Stream* s : c->streams) {
      if (!s->Idle()) return false;
    }
  }
  return true;
}

int ContextDevice(CUcontext ctx) { return IsValidContext(ctx) ? AsContext(ctx)->device : -1; }

void SetCurrent(Context* ctx) {
  if (t_stack.empty()) {
    if (ctx != nullptr) t_stack.push_back(ctx);
  } else if (ctx == nullptr) {
    t_stack.pop_back();
  } else {
    t_stack.back() = ctx;
  }
}

void PushCurrent(Context* ctx) { t_stack.push_back(ctx); }

Context* PopCurrent() {
  if (t_stack.empty()) return nullptr;
  Context* c = t_stack.back();
  t_stack.pop_back();
  return c;
}

}  // namespace vgpu::sim
