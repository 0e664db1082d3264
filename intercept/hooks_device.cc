// Device virtualization: the process sees devices 0..n-1 in the configured
// order. Virtual ordinals are translated to physical ones on the way in and
// back on the way out; a hidden device cannot be named by any path.
#include <cstring>
#include <vector>

#include "driver/real_driver.h"
#include "intercept/current_context.h"
#include "intercept/hook_body.h"
#include "intercept/hooks.h"
#include "intercept/ipc_handles.h"
#include "intercept/runtime.h"
#include "residency/engine.h"
#include "vmm/vmm.h"

namespace vgpu {
namespace {

const DeviceMap& Map() { return Runtime::Get().devices(); }

// A CUdevice from the application is a visible index, one from the driver a
// driver ordinal (device_index.h); -1 for an out-of-range or hidden one.
int OrdinalOf(CUdevice v) { return Map().ToOrdinal(VisibleIndex(v)).value(); }
int VisibleOf(CUdevice p) { return Map().ToVisible(DriverOrdinal(p)).value(); }

// The driver ordinal of an application's CUdevice; false for an out-of-range or hidden one.
bool MapToOrdinal(CUdevice v, CUdevice* p) {
  *p = OrdinalOf(v);
  return *p >= 0;
}

CUmemLocation ToOrdinalLocation(CUmemLocation loc, bool* ok) {
  if (loc.type == CU_MEM_LOCATION_TYPE_DEVICE) {
    int p = OrdinalOf(loc.id);
    *ok = *ok && p >= 0;
    loc.id = p;
  }
  return loc;
}

void ToVisibleLocation(CUmemLocation* loc) {
  if (loc->type == CU_MEM_LOCATION_TYPE_DEVICE) loc->id = VisibleOf(loc->id);
}

// What a VMM-backed pointer answers instead of the reservation it lives in:
// exactly what the driver answers for a cuMemAlloc pointer. False if the
// attribute is not one that differs.
bool VmmAttribute(CUpointer_attribute a, const vmm::AllocationInfo& info, void* data) {
  auto put = [&](auto v) { std::memcpy(data, &v, sizeof v); };
  switch (a) {
    case CU_POINTER_ATTRIBUTE_CONTEXT: put(info.ctx); return true;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: put(info.va); return true;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE: put(info.size); return true;
    case CU_POINTER_ATTRIBUTE_MAPPING_SIZE: put(info.size); return true;
    case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR: put(reinterpret_cast<void*>(info.va)); return true;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
    case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID: put(static_cast<unsigned long long>(info.buffer_id)); return true;
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
      put(static_cast<unsigned long long>(CU_MEM_HANDLE_TYPE_NONE));
      return true;
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE: put(info.pool); return true;
    // Exported through libvgpu (hooks_ipc.cc), as cuMemAlloc memory is by the driver.
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
      put(static_cast<int>(info.pool == nullptr));
      return true;
    default: return false;
  }
}

// A created context is drained by suspend even if it allocates nothing: its
// kernels may work on memory another context allocated.
CUresult NoteCreated(CUcontext* pctx, CUresult r) {
  ForgetCurrentContext();  // a created context is pushed onto this thread's stack
  if (r == CUDA_SUCCESS && pctx != nullptr) Runtime::Get().residency().NoteContext(*pctx);
  return r;
}

// A context is gone: suspend no longer drains it, and the non-migratable
// memory noted with it went with it.
void ForgetContext(CUcontext ctx) {
  Runtime& rt = Runtime::Get();
  CloseIpcImportsOf(ctx);
  rt.non_migratable().ForgetContext(ctx);
  rt.residency().ForgetContext(ctx);
}

void ReleaseContextCharges(CUcontext ctx) {
  Runtime::Get().vmm().FreeContext(ctx);
  ForgetContext(ctx);
  Runtime::Get().accounting().ReleaseOwner(ctx);
}

}  // namespace
}  // namespace vgpu

using vgpu::MapToOrdinal;

VGPU_HOOK(cuDeviceGetCount) CUresult CUDAAPI vgpu_hook_cuDeviceGetCount(int* count) {
  return vgpu::WhenReady([&]() -> CUresult {
    if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *count = vgpu::Map().count();
    return CUDA_SUCCESS;
  });
}

VGPU_HOOK(cuDeviceGet) CUresult CUDAAPI vgpu_hook_cuDeviceGet(CUdevice* device, int ordinal) {
  return vgpu::WhenReady([&]() -> CUresult {
    if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
    CUdevice p = 0;
    if (!MapToOrdinal(ordinal, &p)) return CUDA_ERROR_INVALID_DEVICE;
    *device = ordinal;
    return CUDA_SUCCESS;
  });
}

VGPU_HOOK(cuDeviceTotalMem_v2) CUresult CUDAAPI vgpu_hook_cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  return vgpu::WhenReady([&]() -> CUresult {
    CUdevice p = 0;
    if (!MapToOrdinal(dev, &p)) return CUDA_ERROR_INVALID_DEVICE;
    CUresult r = REAL_CALL(cuDeviceTotalMem_v2, bytes, p);
    // The quota is the device's size as far as the process can tell: the
    // group's, which a stricter member or the daemon may have set below
    // this process's own configuration (cuMemGetInfo says the same).
    const vgpu::DeviceLedger* ledger = vgpu::Runtime::Get().ledger();
    uint64_t limit =
        ledger != nullptr ? ledger->Limit(p) : vgpu::Runtime::Get().config().LimitFor(dev);
    if (r == CUDA_SUCCESS && limit < *bytes) *bytes = limit;
    return r;
  });
}

VGPU_HOOK(cuDeviceGetByPCIBusId) CUresult CUDAAPI vgpu_hook_cuDeviceGetByPCIBusId(CUdevice* dev, const char* pciBusId) {
  return vgpu::WhenReady([&]() -> CUresult {
    if (dev == nullptr) return CUDA_ERROR_INVALID_VALUE;
    CUdevice p = 0;
    CUresult r = REAL_CALL(cuDeviceGetByPCIBusId, &p, pciBusId);
    if (r != CUDA_SUCCESS) return r;
    int v = vgpu::VisibleOf(p);
    if (v < 0) return CUDA_ERROR_INVALID_DEVICE;  // hidden: as if it did not exist
    *dev = v;
    return CUDA_SUCCESS;
  });
}

VGPU_HOOK(cuDevicePrimaryCtxRetain) CUresult CUDAAPI vgpu_hook_cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  return vgpu::WhenReady([&]() -> CUresult {
    CUdevice p = 0;
    if (!MapToOrdinal(dev, &p)) return CUDA_ERROR_INVALID_DEVICE;
    CUresult r = REAL_CALL(cuDevicePrimaryCtxRetain, pctx, p);
    if (r == CUDA_SUCCESS && p < vgpu::Runtime::kPrimaryContexts) {
      vgpu::Runtime::Get().primary_context(p).store(*pctx);
    }
    return r;
  });
}

VGPU_HOOK(cuDevicePrimaryCtxRelease_v2) CUresult CUDAAPI vgpu_hook_cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  return vgpu::WhenReady([&]() -> CUresult {
    vgpu::residency::GateGuard gate;
    CUdevice p = 0;
    if (!MapToOrdinal(dev, &p)) return CUDA_ERROR_INVALID_DEVICE;
    CUresult r = REAL_CALL(cuDevicePrimaryCtxRelease_v2, p);
    vgpu::ForgetAllCurrentContexts();  // the last release destroys it, wherever it is current
    unsigned flags = 0;
    int active = 1;
    // The last release destroys the context and, with it, its memory.
    if (r == CUDA_SUCCESS && p < vgpu::Runtime::kPrimaryContexts &&
        REAL_CALL(cuDevicePrimaryCtxGetState, p, &flags, &active) == CUDA_SUCCESS && !active) {
      vgpu::ReleaseContextCharges(vgpu::Runtime::Get().primary_context(p).load());
    }
    return r;
  });
}

VGPU_HOOK(cuDevicePrimaryCtxReset_v2) CUresult CUDAAPI vgpu_hook_cuDevicePrimaryCtxReset_v2(CUdevice dev) {
  return vgpu::WhenReady([&]() -> CUresult {
    vgpu::residency::GateGuard gate;
    CUdevice p = 0;
    if (!MapToOrdinal(dev, &p)) return CUDA_ERROR_INVALID_DEVICE;
    CUresult r = REAL_CALL(cuDevicePrimaryCtxReset_v2, p);
    vgpu::ForgetAllCurrentContexts();  // destroyed, wherever it is current
    if (r == CUDA_SUCCESS && p < 64)
      vgpu::ReleaseContextCharges(vgpu::Runtime::Get().primary_context(p).load());
    return r;
  });
}

VGPU_HOOK(cuCtxCreate_v2) CUresult CUDAAPI vgpu_hook_cuCtxCreate_v2(CUcontext* pctx, unsigned int flags, CUdevice dev) {
  return vgpu::WhenReady([&]() -> CUresult {
    CUdevice p = 0;
    if (!MapToOrdinal(dev, &p)) return CUDA_ERROR_INVALID_DEVICE;
    return vgpu::NoteCreated(pctx, REAL_CALL(cuCtxCreate_v2, pctx, flags, p));
  });
}

VGPU_HOOK(cuCtxCreate_v3) CUresult CUDAAPI vgpu_hook_cuCtxCreate_v3(CUcontext* pctx, CUexecAffinityParam* paramsArray, int numParams, unsigned int flags, CUdevice dev) {
  return vgpu::WhenReady([&]() -> CUresult {
    CUdevice p = 0;
    if (!MapToOrdinal(dev, &p)) return CUDA_ERROR_INVALID_DEVICE;
    return vgpu::NoteCreated(pctx,
                             REAL_CALL(cuCtxCreate_v3, pctx, paramsArray, numParams, flags, p));
  });
}

VGPU_HOOK(cuCtxCreate_v4) CUresult CUDAAPI vgpu_hook_cuCtxCreate_v4(CUcontext* pctx, CUctxCreateParams* params, unsigned int flags, CUdevice dev) {
  return vgpu::WhenReady([&]() -> CUresult {
    CUdevice p = 0;
    if (!MapToOrdinal(dev, &p)) return CUDA_ERROR_INVALID_DEVICE;
    return vgpu::NoteCreated(pctx, REAL_CALL(cuCtxCreate_v4, pctx, params, flags, p));
  });
}

// A green context's streams run work that suspend must drain like any
// context's: it is noted by the context cuCtxFromGreenCtx gives for it.
VGPU_HOOK(cuGreenCtxCreate) CUresult CUDAAPI vgpu_hook_cuGreenCtxCreate(CUgreenCtx* phCtx, CUdevResourceDesc desc, CUdevice dev, unsigned int flags) {
  return vgpu::WhenReady([&]() -> CUresult {
    CUdevice p = 0;
    if (!MapToOrdinal(dev, &p)) return CUDA_ERROR_INVALID_DEVICE;
    CUresult r = REAL_CALL(cuGreenCtxCreate, phCtx, desc, p, flags);
    CUcontext ctx = nullptr;
    if (r == CUDA_SUCCESS && REAL_CALL(cuCtxFromGreenCtx, &ctx, *phCtx) == CUDA_SUCCESS) {
      vgpu::Runtime::Get().residency().NoteContext(ctx);
    }
    return r;
  });
}

// Inside the gate: a suspend may be draining the context.
VGPU_HOOK(cuGreenCtxDestroy) CUresult CUDAAPI vgpu_hook_cuGreenCtxDestroy(CUgreenCtx hCtx) {
  return vgpu::WhenReady([&]() -> CUresult {
    vgpu::residency::GateGuard gate;
    CUcontext ctx = nullptr;
    if (REAL_CALL(cuCtxFromGreenCtx, &ctx, hCtx) != CUDA_SUCCESS) ctx = nullptr;
    CUresult r = REAL_CALL(cuGreenCtxDestroy, hCtx);
    vgpu::ForgetAllCurrentContexts();  // a dead handle may be current somewhere
    if (r == CUDA_SUCCESS && ctx != nullptr) vgpu::ForgetContext(ctx);
    return r;
  });
}

// The context-stack calls exist twice: the _v2 entry points and the CUDA 3.x
// ones (cuCtxDestroy, cuCtxPushCurrent, cuCtxPopCurrent) that old binaries and
// old-version cuGetProcAddress lookups reach. Each pair shares one body and
// calls its own real entry point, so the launch path's cache
// (intercept/current_context.h) and the context's charges stay right whichever
// a client uses.
namespace {

using RealCtxFn = CUresult(CUDAAPI*)(CUcontext);
using RealPopFn = CUresult(CUDAAPI*)(CUcontext*);

CUresult DestroyContext(RealCtxFn real, CUcontext ctx) {
  return vgpu::WhenReady([&]() -> CUresult {
    vgpu::residency::GateGuard gate;
    CUresult r = real != nullptr ? real(ctx) : CUDA_ERROR_NOT_SUPPORTED;
    vgpu::ForgetAllCurrentContexts();  // popped here; a dead handle elsewhere
    if (r == CUDA_SUCCESS) vgpu::ReleaseContextCharges(ctx);
    return r;
  });
}

// The calling thread's current context changes: the cache is forgotten after
// the real call, whatever its result (a failed pop may still have changed
// nothing, or something).
CUresult ChangeCurrent(RealCtxFn real, CUcontext ctx) {
  CUresult r = real != nullptr ? real(ctx) : CUDA_ERROR_NOT_SUPPORTED;
  vgpu::ForgetCurrentContext();
  return r;
}

CUresult PopContext(RealPopFn real, CUcontext* pctx) {
  CUresult r = real != nullptr ? real(pctx) : CUDA_ERROR_NOT_SUPPORTED;
  vgpu::ForgetCurrentContext();
  return r;
}

}  // namespace

// REAL(sym) pastes the name, so cuda.h's #define cuCtxDestroy cuCtxDestroy_v2
// does not turn the 3.x hooks into calls of the _v2 entry points.
VGPU_HOOK(cuCtxDestroy_v2) CUresult CUDAAPI vgpu_hook_cuCtxDestroy_v2(CUcontext ctx) {
  return DestroyContext(REAL(cuCtxDestroy_v2), ctx);
}

VGPU_HOOK(cuCtxDestroy) CUresult CUDAAPI vgpu_hook_cuCtxDestroy(CUcontext ctx) {
  return DestroyContext(REAL(cuCtxDestroy), ctx);
}

VGPU_HOOK(cuCtxSetCurrent) CUresult CUDAAPI vgpu_hook_cuCtxSetCurrent(CUcontext ctx) {
  return ChangeCurrent(REAL(cuCtxSetCurrent), ctx);
}

VGPU_HOOK(cuCtxPushCurrent_v2) CUresult CUDAAPI vgpu_hook_cuCtxPushCurrent_v2(CUcontext ctx) {
  return ChangeCurrent(REAL(cuCtxPushCurrent_v2), ctx);
}

VGPU_HOOK(cuCtxPushCurrent) CUresult CUDAAPI vgpu_hook_cuCtxPushCurrent(CUcontext ctx) {
  return ChangeCurrent(REAL(cuCtxPushCurrent), ctx);
}

VGPU_HOOK(cuCtxPopCurrent_v2) CUresult CUDAAPI vgpu_hook_cuCtxPopCurrent_v2(CUcontext* pctx) {
  return PopContext(REAL(cuCtxPopCurrent_v2), pctx);
}

VGPU_HOOK(cuCtxPopCurrent) CUresult CUDAAPI vgpu_hook_cuCtxPopCurrent(CUcontext* pctx) {
  return PopContext(REAL(cuCtxPopCurrent), pctx);
}

VGPU_HOOK(cuCtxGetDevice) CUresult CUDAAPI vgpu_hook_cuCtxGetDevice(CUdevice* device) {
  return vgpu::WhenReady([&]() -> CUresult {
    if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
    CUdevice p = 0;
    CUresult r = REAL_CALL(cuCtxGetDevice, &p);
    if (r == CUDA_SUCCESS) *device = vgpu::VisibleOf(p);
    return r;
  });
}

VGPU_HOOK(cuMemGetAllocationGranularity) CUresult CUDAAPI vgpu_hook_cuMemGetAllocationGranularity(size_t* granularity, const CUmemAllocationProp* prop, CUmemAllocationGranularity_flags option) {
  return vgpu::WhenReady([&]() -> CUresult {
    if (prop == nullptr) return CUDA_ERROR_INVALID_VALUE;
    CUmemAllocationProp copy = *prop;
    bool ok = true;
    copy.location = vgpu::ToOrdinalLocation(copy.location, &ok);
    if (!ok) return CUDA_ERROR_INVALID_DEVICE;
    return REAL_CALL(cuMemGetAllocationGranularity, granularity, &copy, option);
  });
}

VGPU_HOOK(cuMemPoolCreate) CUresult CUDAAPI vgpu_hook_cuMemPoolCreate(CUmemoryPool* pool, const CUmemPoolProps* poolProps) {
  return vgpu::WhenReady([&]() -> CUresult {
    if (poolProps == nullptr) return CUDA_ERROR_INVALID_VALUE;
    CUmemPoolProps copy = *poolProps;
    bool ok = true;
    copy.location = vgpu::ToOrdinalLocation(copy.location, &ok);
    if (!ok) return CUDA_ERROR_INVALID_DEVICE;
    return REAL_CALL(cuMemPoolCreate, pool, &copy);
  });
}

VGPU_HOOK(cuMemSetAccess) CUresult CUDAAPI vgpu_hook_cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc, size_t count) {
  return vgpu::WhenReady([&]() -> CUresult {
    if (desc == nullptr || count == 0 || count > 64)
      return REAL_CALL(cuMemSetAccess, ptr, size, desc, count);
    std::vector<CUmemAccessDesc> copy(desc, desc + count);
    bool ok = true;
    for (auto& d : copy) d.location = vgpu::ToOrdinalLocation(d.location, &ok);
    if (!ok) return CUDA_ERROR_INVALID_DEVICE;
    return REAL_CALL(cuMemSetAccess, ptr, size, copy.data(), count);
  });
}

VGPU_HOOK(cuMemGetAccess) CUresult CUDAAPI vgpu_hook_cuMemGetAccess(unsigned long long* flags, const CUmemLocation* location, CUdeviceptr ptr) {
  return vgpu::WhenReady([&]() -> CUresult {
    if (location == nullptr) return REAL_CALL(cuMemGetAccess, flags, location, ptr);
    bool ok = true;
    CUmemLocation copy = vgpu::ToOrdinalLocation(*location, &ok);
    if (!ok) return CUDA_ERROR_INVALID_DEVICE;
    return REAL_CALL(cuMemGetAccess, flags, &copy, ptr);
  });
}

VGPU_HOOK(cuMemGetAllocationPropertiesFromHandle) CUresult CUDAAPI vgpu_hook_cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp* prop, CUmemGenericAllocationHandle handle) {
  return vgpu::WhenReady([&]() -> CUresult {
    CUresult r = REAL_CALL(cuMemGetAllocationPropertiesFromHandle, prop, handle);
    if (r == CUDA_SUCCESS) vgpu::ToVisibleLocation(&prop->location);
    return r;
  });
}

VGPU_HOOK(cuPointerGetAttribute) CUresult CUDAAPI vgpu_hook_cuPointerGetAttribute(void* data, CUpointer_attribute attribute, CUdeviceptr ptr) {
  return vgpu::WhenReady([&]() -> CUresult {
    vgpu::residency::GateGuard gate;
    CUresult r = REAL_CALL(cuPointerGetAttribute, data, attribute, ptr);
    vgpu::vmm::AllocationInfo info;
    if (r == CUDA_SUCCESS && vgpu::Runtime::Get().vmm().Find(ptr, &info))
      vgpu::VmmAttribute(attribute, info, data);
    if (r == CUDA_SUCCESS && attribute == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL) {
      *static_cast<int*>(data) = vgpu::VisibleOf(*static_cast<int*>(data));
    }
    return r;
  });
}

VGPU_HOOK(cuPointerGetAttributes) CUresult CUDAAPI vgpu_hook_cuPointerGetAttributes(unsigned int numAttributes, CUpointer_attribute* attributes, void** data, CUdeviceptr ptr) {
  return vgpu::WhenReady([&]() -> CUresult {
    vgpu::residency::GateGuard gate;
    CUresult r = REAL_CALL(cuPointerGetAttributes, numAttributes, attributes, data, ptr);
    vgpu::vmm::AllocationInfo info;
    if (r == CUDA_SUCCESS && attributes != nullptr && data != nullptr &&
        vgpu::Runtime::Get().vmm().Find(ptr, &info)) {
      for (unsigned i = 0; i < numAttributes; ++i) {
        if (data[i] != nullptr) vgpu::VmmAttribute(attributes[i], info, data[i]);
      }
    }
    for (unsigned i = 0; r == CUDA_SUCCESS && i < numAttributes; ++i) {
      int* ord = static_cast<int*>(data[i]);
      if (attributes[i] == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL && *ord >= 0) {
        *ord = vgpu::VisibleOf(*ord);
      }
    }
    return r;
  });
}

VGPU_HOOK(cuCtxGetDevice_v2) CUresult CUDAAPI vgpu_hook_cuCtxGetDevice_v2(CUdevice* device, CUcontext ctx) {
  return vgpu::WhenReady([&]() -> CUresult {
    if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
    CUdevice p = 0;
    CUresult r = REAL_CALL(cuCtxGetDevice_v2, &p, ctx);
    if (r == CUDA_SUCCESS) *device = vgpu::VisibleOf(p);
    return r;
  });
}

VGPU_HOOK(cuMemGetDefaultMemPool) CUresult CUDAAPI vgpu_hook_cuMemGetDefaultMemPool(CUmemoryPool* pool_out, CUmemLocation* location, CUmemAllocationType type) {
  return vgpu::WhenReady([&]() -> CUresult {
    if (location == nullptr) return REAL_CALL(cuMemGetDefaultMemPool, pool_out, location, type);
    bool ok = true;
    CUmemLocation copy = vgpu::ToOrdinalLocation(*location, &ok);
    if (!ok) return CUDA_ERROR_INVALID_DEVICE;
    return REAL_CALL(cuMemGetDefaultMemPool, pool_out, &copy, type);
  });
}

VGPU_HOOK(cuMemGetMemPool) CUresult CUDAAPI vgpu_hook_cuMemGetMemPool(CUmemoryPool* pool, CUmemLocation* location, CUmemAllocationType type) {
  return vgpu::WhenReady([&]() -> CUresult {
    if (location == nullptr) return REAL_CALL(cuMemGetMemPool, pool, location, type);
    bool ok = true;
    CUmemLocation copy = vgpu::ToOrdinalLocation(*location, &ok);
    if (!ok) return CUDA_ERROR_INVALID_DEVICE;
    return REAL_CALL(cuMemGetMemPool, pool, &copy, type);
  });
}

VGPU_HOOK(cuMemSetMemPool) CUresult CUDAAPI vgpu_hook_cuMemSetMemPool(CUmemLocation* location, CUmemAllocationType type, CUmemoryPool pool) {
  return vgpu::WhenReady([&]() -> CUresult {
    if (location == nullptr) return REAL_CALL(cuMemSetMemPool, location, type, pool);
    bool ok = true;
    CUmemLocation copy = vgpu::ToOrdinalLocation(*location, &ok);
    if (!ok) return CUDA_ERROR_INVALID_DEVICE;
    return REAL_CALL(cuMemSetMemPool, &copy, type, pool);
  });
}
