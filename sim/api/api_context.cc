// Contexts: primary contexts, created contexts and the per-thread stack.
#include "sim/api/api_common.h"
#include "sim/engine/context.h"
#include "sim/engine/sim_state.h"

using namespace vgpu::sim;  // NOLINT: entry points below are the C ABI

namespace {

CUresult CreateContext(CUcontext* pctx, unsigned int flags, CUdevice dev) {
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!ValidDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  Context* ctx = NewContext(dev, flags, false);
  PushCurrent(ctx);
  *pctx = AsHandle(ctx);
  return CUDA_SUCCESS;
}

// The bodies of the context-stack calls, shared by the _v2 entry points and
// the CUDA 3.x ones (below) that old binaries and old-version
// cuGetProcAddress lookups reach.
CUresult DestroyContext(CUcontext ctx) {
  if (!IsValidContext(ctx) || AsContext(ctx)->primary) return CUDA_ERROR_INVALID_CONTEXT;
  Context* c = AsContext(ctx);
  if (CurrentContextOrNull() == c) PopCurrent();
  c->active.store(false);
  TeardownContext(c);
  return CUDA_SUCCESS;
}

CUresult PushContext(CUcontext ctx) {
  if (!IsValidContext(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  PushCurrent(AsContext(ctx));
  return CUDA_SUCCESS;
}

CUresult PopContext(CUcontext* pctx) {
  Context* c = PopCurrent();
  if (c == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (pctx != nullptr) *pctx = AsHandle(c);
  return CUDA_SUCCESS;
}

}  // namespace

SIM_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  SIM_ENTER("cuDevicePrimaryCtxRetain");
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!ValidDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  Context* ctx = PrimaryContext(dev);
  ctx->primary_refs.fetch_add(1);
  ctx->active.store(true);  // the first retain, or the first after a reset
  *pctx = AsHandle(ctx);
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  SIM_ENTER("cuDevicePrimaryCtxRelease_v2");
  if (!ValidDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  Context* ctx = PrimaryContext(dev);
  int refs = ctx->primary_refs.load();
  do {
    if (refs == 0) return CUDA_ERROR_INVALID_CONTEXT;
  } while (!ctx->primary_refs.compare_exchange_weak(refs, refs - 1));
  if (refs == 1 && ctx->active.exchange(false)) TeardownContext(ctx);  // not again after a reset
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxReset_v2(CUdevice dev) {
  SIM_ENTER("cuDevicePrimaryCtxReset_v2");
  if (!ValidDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  Context* ctx = PrimaryContext(dev);
  // Destroys the context's state but does not release it: callers that
  // retained it release as usual (cuda.h: "safe ... even after resetting").
  if (ctx->active.exchange(false)) TeardownContext(ctx);
  ctx->flags = 0;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int* flags,
                                                       int* active) {
  SIM_ENTER("cuDevicePrimaryCtxGetState");
  if (flags == nullptr || active == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!ValidDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  Context* ctx = PrimaryContext(dev);
  *flags = ctx->flags;
  *active = ctx->active.load() ? 1 : 0;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags) {
  SIM_ENTER("cuDevicePrimaryCtxSetFlags_v2");
  if (!ValidDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  if ((flags & ~0x1fu) != 0) return CUDA_ERROR_INVALID_VALUE;
  PrimaryContext(dev)->flags = flags;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuCtxCreate_v2(CUcontext* pctx, unsigned int flags, CUdevice dev) {
  SIM_ENTER("cuCtxCreate_v2");
  return CreateContext(pctx, flags, dev);
}

SIM_EXPORT CUresult CUDAAPI cuCtxCreate_v3(CUcontext* pctx, CUexecAffinityParam* paramsArray,
                                           int numParams, unsigned int flags, CUdevice dev) {
  SIM_ENTER("cuCtxCreate_v3");
  if (numParams < 0 || (numParams > 0 && paramsArray == nullptr)) return CUDA_ERROR_INVALID_VALUE;
  return CreateContext(pctx, flags, dev);
}

SIM_EXPORT CUresult CUDAAPI cuCtxCreate_v4(CUcontext* pctx, CUctxCreateParams* params,
                                           unsigned int flags, CUdevice dev) {
  SIM_ENTER("cuCtxCreate_v4");
  return CreateContext(pctx, flags, dev);
}

SIM_EXPORT CUresult CUDAAPI cuCtxDestroy_v2(CUcontext ctx) {
  SIM_ENTER("cuCtxDestroy_v2");
  return DestroyContext(ctx);
}

SIM_EXPORT CUresult CUDAAPI cuCtxPushCurrent_v2(CUcontext ctx) {
  SIM_ENTER("cuCtxPushCurrent_v2");
  return PushContext(ctx);
}

SIM_EXPORT CUresult CUDAAPI cuCtxPopCurrent_v2(CUcontext* pctx) {
  SIM_ENTER("cuCtxPopCurrent_v2");
  return PopContext(pctx);
}

SIM_EXPORT CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx) {
  SIM_ENTER("cuCtxSetCurrent");
  if (ctx != nullptr && !IsValidContext(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  SetCurrent(AsContext(ctx));
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuCtxGetCurrent(CUcontext* pctx) {
  SIM_ENTER("cuCtxGetCurrent");
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *pctx = AsHandle(CurrentContextOrNull());
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuCtxGetDevice(CUdevice* device) {
  SIM_ENTER("cuCtxGetDevice");
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Context* c = CurrentContextOrNull();
  if (c == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  *device = c->device;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuCtxGetFlags(unsigned int* flags) {
  SIM_ENTER("cuCtxGetFlags");
  if (flags == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Context* c = CurrentContextOrNull();
  if (c == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  *flags = c->flags;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuCtxGetId(CUcontext ctx, unsigned long long* ctxId) {
  SIM_ENTER("cuCtxGetId");
  if (ctxId == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Context* c = ctx == nullptr ? CurrentContextOrNull() : AsContext(ctx);
  if (c == nullptr || !IsValidContext(AsHandle(c))) return CUDA_ERROR_INVALID_CONTEXT;
  *ctxId = c->id;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuCtxSynchronize() {
  SIM_ENTER("cuCtxSynchronize");
  Context* c = CurrentContextOrNull();
  if (c == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  return SynchronizeContext(c);
}

SIM_EXPORT CUresult CUDAAPI cuCtxSynchronize_v2(CUcontext ctx) {
  SIM_ENTER("cuCtxSynchronize_v2");
  Context* c = ctx == nullptr ? CurrentContextOrNull() : AsContext(ctx);
  if (c == nullptr || !IsValidContext(AsHandle(c))) return CUDA_ERROR_INVALID_CONTEXT;
  return SynchronizeContext(c);
}

SIM_EXPORT CUresult CUDAAPI cuCtxGetApiVersion(CUcontext ctx, unsigned int* version) {
  SIM_ENTER("cuCtxGetApiVersion");
  if (version == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Context* c = ctx == nullptr ? CurrentContextOrNull() : AsContext(ctx);
  if (c == nullptr || !IsValidContext(AsHandle(c))) return CUDA_ERROR_INVALID_CONTEXT;
  *version = 3020;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuCtxGetStreamPriorityRange(int* leastPriority, int* greatestPriority) {
  SIM_ENTER("cuCtxGetStreamPriorityRange");
  if (leastPriority != nullptr) *leastPriority = 0;
  if (greatestPriority != nullptr) *greatestPriority = -5;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuCtxGetLimit(size_t* pvalue, CUlimit limit) {
  SIM_ENTER("cuCtxGetLimit");
  if (pvalue == nullptr || limit < 0 || limit >= CU_LIMIT_MAX) return CUDA_ERROR_INVALID_VALUE;
  Context* c = CurrentContextOrNull();
  if (c == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  static constexpr size_t kDefaults[] = {1024, 1 << 20, 8 << 20, 2, 2048, 0, 0x20};
  size_t v = c->limits[limit];
  *pvalue = v != 0 ? v : (limit < 7 ? kDefaults[limit] : 0);
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuCtxSetLimit(CUlimit limit, size_t value) {
  SIM_ENTER("cuCtxSetLimit");
  if (limit < 0 || limit >= CU_LIMIT_MAX) return CUDA_ERROR_INVALID_VALUE;
  Context* c = CurrentContextOrNull();
  if (c == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  c->limits[limit] = value;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuCtxGetCacheConfig(CUfunc_cache* config) {
  SIM_ENTER("cuCtxGetCacheConfig");
  if (config == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *config = CU_FUNC_CACHE_PREFER_NONE;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuCtxSetCacheConfig(CUfunc_cache config) {
  SIM_ENTER("cuCtxSetCacheConfig");
  return CUDA_SUCCESS;
}

// The CUDA 3.x context-stack ABI (cuda.h maps these names to the _v2 ones that
// 4.0 added, and declares the originals only for the driver's own build). The
// stack semantics are the same in the simulated driver.
#undef cuCtxDestroy
#undef cuCtxPushCurrent
#undef cuCtxPopCurrent
extern "C" CUresult CUDAAPI cuCtxDestroy(CUcontext ctx);
extern "C" CUresult CUDAAPI cuCtxPushCurrent(CUcontext ctx);
extern "C" CUresult CUDAAPI cuCtxPopCurrent(CUcontext* pctx);

SIM_EXPORT CUresult CUDAAPI cuCtxDestroy(CUcontext ctx) {
  SIM_ENTER("cuCtxDestroy");
  return DestroyContext(ctx);
}

SIM_EXPORT CUresult CUDAAPI cuCtxPushCurrent(CUcontext ctx) {
  SIM_ENTER("cuCtxPushCurrent");
  return PushContext(ctx);
}

SIM_EXPORT CUresult CUDAAPI cuCtxPopCurrent(CUcontext* pctx) {
  SIM_ENTER("cuCtxPopCurrent");
  return PopContext(pctx);
}

SIM_EXPORT CUresult CUDAAPI cuCtxGetDevice_v2(CUdevice* device, CUcontext ctx) {
  SIM_ENTER("cuCtxGetDevice_v2");
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (ctx == nullptr) {
    Context* c = CurrentContextOrNull();
    if (c == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
    *device = c->device;
    return CUDA_SUCCESS;
  }
  const int d = ContextDevice(ctx);
  if (d < 0) return CUDA_ERROR_INVALID_CONTEXT;
  *device = d;
  return CUDA_SUCCESS;
}

// Contexts are never limited to some SMs here (cuDeviceGetExecAffinitySupport
// says 0, as a GPU outside MPS does): a context's affinity is the whole device.
SIM_EXPORT CUresult CUDAAPI cuCtxGetExecAffinity(CUexecAffinityParam* pExecAffinity, CUexecAffinityType type) {
  SIM_ENTER("cuCtxGetExecAffinity");
  if (pExecAffinity == nullptr || type != CU_EXEC_AFFINITY_TYPE_SM_COUNT) return CUDA_ERROR_INVALID_VALUE;
  Context* c = CurrentContextOrNull();
  if (c == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  *pExecAffinity = CUexecAffinityParam{};
  pExecAffinity->type = CU_EXEC_AFFINITY_TYPE_SM_COUNT;
  pExecAffinity->param.smCount.val =
      static_cast<unsigned>(State()->config.devices[static_cast<size_t>(c->device)].sm_count);
  return CUDA_SUCCESS;
}

// sm_90 has one shared-memory bank width, 4 bytes (cuCtxSetSharedMemConfig
// cannot change it).
SIM_EXPORT CUresult CUDAAPI cuCtxGetSharedMemConfig(CUsharedconfig* pConfig) {
  SIM_ENTER("cuCtxGetSharedMemConfig");
  if (pConfig == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CurrentContextOrNull() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  *pConfig = CU_SHARED_MEM_CONFIG_FOUR_BYTE_BANK_SIZE;
  return CUDA_SUCCESS;
}
