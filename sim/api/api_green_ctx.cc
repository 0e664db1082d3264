// Green contexts and device resources (CUDA 12.4+): cuDeviceGetDevResource,
// cuDevSmResourceSplitByCount, cuDevResourceGenerateDesc, cuGreenCtx*.
//
// A green context is a context of its own (streams, events, a legacy stream)
// that carries an SM count; the context it converts to (cuCtxFromGreenCtx)
// is that context. The SM count is answered by the resource queries; the
// simulated engine runs one kernel at a time on the whole device anyway, so
// nothing is restricted (docs/sim.md, "Green contexts").
#include <algorithm>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "sim/api/api_common.h"
#include "sim/engine/context.h"
#include "sim/engine/ctx_events.h"
#include "sim/engine/event.h"
#include "sim/engine/green_ctx.h"
#include "sim/engine/sim_state.h"
#include "sim/engine/stream.h"

using namespace vgpu::sim;  // NOLINT: entry points below are the C ABI

namespace {

// What the sim keeps in CUdevResource::_internal_padding: which device the
// resource describes and which split produced it (0: a whole device or
// context), so that cuDevResourceGenerateDesc can apply cuda.h's rules.
struct ResourceTag {
  uint32_t magic;
  int32_t device;
  uint64_t split_id;
};
static_assert(sizeof(ResourceTag) <= sizeof(CUdevResource::_internal_padding));
constexpr uint32_t kTagMagic = 0x76475243;  // "vGRC"

struct Desc {
  int device;
  unsigned sm_count;
};

struct Green {
  Context* ctx;
  unsigned sm_count;
};

std::mutex g_mu;
auto* g_descs = new std::unordered_set<Desc*>();
auto* g_greens = new std::unordered_set<Green*>();
auto* g_by_ctx = new std::unordered_map<const Context*, Green*>();
auto* g_retired = new std::vector<Green*>();  // destroyed, kept (see DestroyGreen)
uint64_t g_next_split = 1;  // guarded by g_mu

Green* AsGreen(CUgreenCtx h) { return reinterpret_cast<Green*>(h); }

// cuda.h's guideline per architecture: minimum partition and granularity.
void SmRules(int device, bool ignore_cosched, unsigned* min, unsigned* align) {
  const int major = Node().device(device).cc_major;
  *min = major >= 9 ? 8 : major == 8 ? 4 : 2;
  *align = major >= 9 ? 8 : 2;
  if (ignore_cosched) *min = *align = 2;  // each SM on its own, in pairs (TPCs)
}

void FillSm(CUdevResource* r, int device, unsigned sms, uint64_t split_id) {
  std::memset(r, 0, sizeof *r);
  r->type = CU_DEV_RESOURCE_TYPE_SM;
  r->sm.smCount = sms;
  SmRules(device, false, &r->sm.minSmPartitionSize, &r->sm.smCoscheduledAlignment);
  const ResourceTag tag{kTagMagic, device, split_id};
  std::memcpy(r->_internal_padding, &tag, sizeof tag);
}

bool ReadTag(const CUdevResource* r, ResourceTag* tag) {
  std::memcpy(tag, r->_internal_padding, sizeof *tag);
  return tag->magic == kTagMagic && ValidDevice(tag->device);
}

CUresult ResourceOf(int device, unsigned sms, CUdevResource* out, CUdevResourceType type) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (RawEnum(type) != CU_DEV_RESOURCE_TYPE_SM) return CUDA_ERROR_INVALID_RESOURCE_TYPE;
  FillSm(out, device, sms, 0);
  return CUDA_SUCCESS;
}

Green* LiveGreen(CUgreenCtx h) {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_greens->count(AsGreen(h)) != 0 ? AsGreen(h) : nullptr;
}

// The SM count a context runs on: its green partition, or the whole device.
unsigned ContextSms(const Context* ctx) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_by_ctx->find(ctx);
  return it != g_by_ctx->end() ? it->second->sm_count : Node().device(ctx->device).sm_count;
}

// The size of each group of a split: minCount raised to the minimum and
// rounded up to the granularity.
unsigned GroupSize(int device, unsigned flags, unsigned min_count) {
  unsigned min = 0, align = 0;
  SmRules(device, (flags & CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING) != 0, &min, &align);
  const unsigned n = std::max(min_count, min);
  return (n + align - 1) / align * align;
}

CUresult Split(CUdevResource* result, unsigned* nb, const CUdevResource* input,
               CUdevResource* remaining, unsigned flags, unsigned min_count) {
  constexpr unsigned kKnown = CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING |
                              CU_DEV_SM_RESOURCE_SPLIT_MAX_POTENTIAL_CLUSTER_SIZE;
  if (nb == nullptr || input == nullptr || (flags & ~kKnown) != 0) return CUDA_ERROR_INVALID_VALUE;
  if (RawEnum(input->type) != CU_DEV_RESOURCE_TYPE_SM) return CUDA_ERROR_INVALID_RESOURCE_TYPE;
  ResourceTag tag{};
  if (!ReadTag(input, &tag)) return CUDA_ERROR_INVALID_VALUE;
  // A split's outputs are split again only after a green context was made of them.
  if (tag.split_id != 0) return CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION;
  const unsigned total = input->sm.smCount;
  if (min_count > total) return CUDA_ERROR_INVALID_VALUE;
  const unsigned size = GroupSize(tag.device, flags, min_count);
  const unsigned possible = size <= total ? total / size : 0;
  if (result == nullptr) {
    *nb = possible;
    return CUDA_SUCCESS;
  }
  if (*nb == 0) return CUDA_ERROR_INVALID_VALUE;
  if (possible == 0) return CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION;
  const unsigned groups = std::min(*nb, possible);
  uint64_t id = 0;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    id = g_next_split++;
  }
  for (unsigned i = 0; i < groups; ++i) FillSm(&result[i], tag.device, size, id);
  if (remaining != nullptr) FillSm(remaining, tag.device, total - groups * size, id);
  *nb = groups;
  return CUDA_SUCCESS;
}

CUresult GenerateDesc(CUdevResourceDesc* out, const CUdevResource* res, unsigned n) {
  if (out == nullptr || res == nullptr || n == 0) return CUDA_ERROR_INVALID_VALUE;
  ResourceTag first{};
  unsigned sms = 0;
  for (unsigned i = 0; i < n; ++i) {
    if (RawEnum(res[i].type) != CU_DEV_RESOURCE_TYPE_SM) return CUDA_ERROR_INVALID_RESOURCE_TYPE;
    ResourceTag tag{};
    if (!ReadTag(&res[i], &tag)) return CUDA_ERROR_INVALID_VALUE;
    if (i == 0) first = tag;
    // cuda.h: one device, and several SM resources only from one split.
    if (tag.device != first.device) return CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION;
    if (n > 1 && (tag.split_id == 0 || tag.split_id != first.split_id)) {
      return CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION;
    }
    sms += res[i].sm.smCount;
  }
  if (sms == 0) return CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION;
  auto* d = new Desc{first.device, sms};  // descriptors have no destroy call
  std::lock_guard<std::mutex> lock(g_mu);
  g_descs->insert(d);
  *out = reinterpret_cast<CUdevResourceDesc>(d);
  return CUDA_SUCCESS;
}

// Retains the device's primary context, as cuda.h says a green context does.
void RetainPrimary(int device) {
  Context* p = PrimaryContext(device);
  p->primary_refs.fetch_add(1);
  p->active.store(true);
}

void ReleasePrimary(int device) {
  Context* p = PrimaryContext(device);
  int refs = p->primary_refs.load();
  do {
    if (refs == 0) return;  // reset and released by the application meanwhile
  } while (!p->primary_refs.compare_exchange_weak(refs, refs - 1));
  if (refs == 1 && p->active.exchange(false)) TeardownContext(p);
}

CUresult CreateGreen(CUgreenCtx* out, CUdevResourceDesc desc, CUdevice dev, unsigned flags) {
  if (out == nullptr || flags != CU_GREEN_CTX_DEFAULT_STREAM) return CUDA_ERROR_INVALID_VALUE;
  if (!ValidDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  auto* d = reinterpret_cast<Desc*>(desc);
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (g_descs->count(d) == 0 || d->device != dev) return CUDA_ERROR_INVALID_VALUE;
  }
  RetainPrimary(dev);
  auto* g = new Green{NewContext(dev, 0, false), d->sm_count};
  std::lock_guard<std::mutex> lock(g_mu);
  g_greens->insert(g);
  (*g_by_ctx)[g->ctx] = g;
  *out = reinterpret_cast<CUgreenCtx>(g);
  return CUDA_SUCCESS;
}

CUresult DestroyGreen(CUgreenCtx h) {
  Green* g = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (g_greens->erase(AsGreen(h)) == 0) return CUDA_ERROR_INVALID_CONTEXT;
    g = AsGreen(h);
    g_by_ctx->erase(g->ctx);
  }
  if (CurrentContextOrNull() == g->ctx) PopCurrent();
  g->ctx->active.store(false);
  TeardownContext(g->ctx);
  ReleasePrimary(g->ctx->device);
  // g stays allocated, and reachable: a stale handle must not alias a new one.
  {
    std::lock_guard<std::mutex> lock(g_mu);
    g_retired->push_back(g);
  }
  return CUDA_SUCCESS;
}

// The green context's streams and the primary context's share one device;
// cuda.h: the event must come from the green context or its primary context.
CUresult GreenEvent(CUgreenCtx h, CUevent e, bool record) {
  Green* g = LiveGreen(h);
  if (g == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  auto* ev = reinterpret_cast<Event*>(e);
  if (!IsLiveEvent(ev)) return CUDA_ERROR_INVALID_HANDLE;
  if (!record) return WaitContextEvent(g->ctx, ev);
  if (ev->ctx != g->ctx && ev->ctx != PrimaryContext(g->ctx->device)) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  return RecordContextEvent(g->ctx, ev);
}

CUresult GreenStream(CUstream* out, CUgreenCtx h, unsigned flags, int priority) {
  if (out == nullptr || flags != CU_STREAM_NON_BLOCKING) return CUDA_ERROR_INVALID_VALUE;
  Green* g = LiveGreen(h);
  if (g == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  auto* s = new Stream(g->ctx, flags, std::clamp(priority, -5, 0), false);
  RegisterStream(s);
  {
    std::lock_guard<std::mutex> lock(g->ctx->mu);
    g->ctx->streams.push_back(s);
  }
  *out = reinterpret_cast<CUstream>(s);
  return CUDA_SUCCESS;
}

}  // namespace

namespace vgpu::sim {

CUgreenCtx GreenCtxOf(const Context* ctx) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_by_ctx->find(ctx);
  return it != g_by_ctx->end() ? reinterpret_cast<CUgreenCtx>(it->second) : nullptr;
}

}  // namespace vgpu::sim

SIM_EXPORT CUresult CUDAAPI cuDeviceGetDevResource(CUdevice device, CUdevResource* resource,
                                                   CUdevResourceType type) {
  SIM_ENTER("cuDeviceGetDevResource");
  if (!ValidDevice(device)) return CUDA_ERROR_INVALID_DEVICE;
  return ResourceOf(device, Node().device(device).sm_count, resource, type);
}

SIM_EXPORT CUresult CUDAAPI cuCtxGetDevResource(CUcontext hCtx, CUdevResource* resource,
                                                CUdevResourceType type) {
  SIM_ENTER("cuCtxGetDevResource");
  Context* ctx = hCtx == nullptr ? CurrentContextOrNull() : AsContext(hCtx);
  if (ctx == nullptr || !IsValidContext(AsHandle(ctx))) return CUDA_ERROR_INVALID_CONTEXT;
  return ResourceOf(ctx->device, ContextSms(ctx), resource, type);
}

SIM_EXPORT CUresult CUDAAPI cuGreenCtxGetDevResource(CUgreenCtx hCtx, CUdevResource* resource,
                                                     CUdevResourceType type) {
  SIM_ENTER("cuGreenCtxGetDevResource");
  Green* g = LiveGreen(hCtx);
  if (g == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  return ResourceOf(g->ctx->device, g->sm_count, resource, type);
}

SIM_EXPORT CUresult CUDAAPI cuDevSmResourceSplitByCount(
    CUdevResource* result, unsigned int* nbGroups, const CUdevResource* input,
    CUdevResource* remaining, unsigned int useFlags, unsigned int minCount) {
  SIM_ENTER("cuDevSmResourceSplitByCount");
  return Split(result, nbGroups, input, remaining, useFlags, minCount);
}

SIM_EXPORT CUresult CUDAAPI cuDevResourceGenerateDesc(CUdevResourceDesc* phDesc,
                                                      CUdevResource* resources,
                                                      unsigned int nbResources) {
  SIM_ENTER("cuDevResourceGenerateDesc");
  return GenerateDesc(phDesc, resources, nbResources);
}

SIM_EXPORT CUresult CUDAAPI cuGreenCtxCreate(CUgreenCtx* phCtx, CUdevResourceDesc desc,
                                             CUdevice dev, unsigned int flags) {
  SIM_ENTER("cuGreenCtxCreate");
  return CreateGreen(phCtx, desc, dev, flags);
}

SIM_EXPORT CUresult CUDAAPI cuGreenCtxDestroy(CUgreenCtx hCtx) {
  SIM_ENTER("cuGreenCtxDestroy");
  return DestroyGreen(hCtx);
}

SIM_EXPORT CUresult CUDAAPI cuCtxFromGreenCtx(CUcontext* pContext, CUgreenCtx hCtx) {
  SIM_ENTER("cuCtxFromGreenCtx");
  if (pContext == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Green* g = LiveGreen(hCtx);
  if (g == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  *pContext = AsHandle(g->ctx);
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuGreenCtxGetId(CUgreenCtx greenCtx, unsigned long long* greenCtxId) {
  SIM_ENTER("cuGreenCtxGetId");
  if (greenCtxId == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Context* cur = CurrentContextOrNull();
  CUgreenCtx h = greenCtx != nullptr ? greenCtx : cur != nullptr ? GreenCtxOf(cur) : nullptr;
  Green* g = LiveGreen(h);
  if (g == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  *greenCtxId = g->ctx->id;  // the converted context's id: unique for the process
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuGreenCtxRecordEvent(CUgreenCtx hCtx, CUevent hEvent) {
  SIM_ENTER("cuGreenCtxRecordEvent");
  return GreenEvent(hCtx, hEvent, true);
}

SIM_EXPORT CUresult CUDAAPI cuGreenCtxWaitEvent(CUgreenCtx hCtx, CUevent hEvent) {
  SIM_ENTER("cuGreenCtxWaitEvent");
  return GreenEvent(hCtx, hEvent, false);
}

SIM_EXPORT CUresult CUDAAPI cuGreenCtxStreamCreate(CUstream* phStream, CUgreenCtx greenCtx,
                                                   unsigned int flags, int priority) {
  SIM_ENTER("cuGreenCtxStreamCreate");
  return GreenStream(phStream, greenCtx, flags, priority);
}

SIM_EXPORT CUresult CUDAAPI cuStreamGetGreenCtx(CUstream hStream, CUgreenCtx* phCtx) {
  SIM_ENTER("cuStreamGetGreenCtx");
  if (phCtx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Stream* s = nullptr;
  if (CUresult r = ResolveStream(hStream, false, &s); r != CUDA_SUCCESS) return r;
  *phCtx = GreenCtxOf(s->ctx());
  return CUDA_SUCCESS;
}
