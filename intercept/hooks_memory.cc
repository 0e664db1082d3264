// The device-memory quota. Reserve first in the group's ledger, then ask the
// driver, and give the reservation back if the driver refuses: the quota can
// never be exceeded, whatever runs concurrently. Freed memory returns to the
// quota after the driver freed it (for stream-ordered frees, when the stream
// reaches the free).
#include <algorithm>
#include <bit>
#include <cstdio>
#include <functional>
#include <mutex>

#include "common/byte_size.h"
#include "common/counters.h"
#include "common/log.h"
#include "driver/real_driver.h"
#include "intercept/coordination.h"
#include "intercept/hook_body.h"
#include "intercept/hooks.h"
#include "intercept/runtime.h"
#include "residency/engine.h"
#include "vmm/vmm.h"

namespace vgpu {
namespace {

struct Where {
  int device = 0;  // physical
  CUcontext ctx = nullptr;
};

CUresult CurrentWhere(Where* w) {
  CUdevice d = 0;
  if (CUresult r = REAL_CALL(cuCtxGetDevice, &d); r != CUDA_SUCCESS) return r;
  w->device = d;
  return REAL_CALL(cuCtxGetCurrent, &w->ctx);
}

AllocationAccounting& Accounting() { return Runtime::Get().accounting(); }

// Keys of the non-migratable table: the handle tagged by its kind.
uint64_t NmKey(ChargeKind kind, uint64_t key) { return TaggedKey(kind, key); }
// A released handle's memory still mapped, by its MappedHandles key (bit 60:
// apart from every handle value, which are addresses or small integers).
uint64_t HeldNmKey(uint64_t key) {
  return NmKey(ChargeKind::kVmmHandle, (uint64_t{1} << 60) | key);
}

// Reserve, allocate, record; or roll back (quota/allocation_accounting.h).
template <typename Alloc>
CUresult Charged(ChargeKind kind, const Where& w, uint64_t bytes, Alloc&& alloc) {
  AllocationAccounting& a = Accounting();
  if (!a.Reserve(w.device, bytes)) return CUDA_ERROR_OUT_OF_MEMORY;
  uint64_t key = 0;
  CUresult r = alloc(&key);
  if (r != CUDA_SUCCESS) {
    a.Release(w.device, bytes);
    return r;
  }
  a.Commit(kind, key, w.device, w.ctx, bytes);
  return r;
}

// Frees through the driver and returns the charge.
template <typename Free>
CUresult FreeCharged(ChargeKind kind, uint64_t key, Free&& free_fn) {
  AllocationAccounting& a = Accounting();
  const AllocationAccounting::FreeTicket ticket = a.BeginFree(kind, key);
  CUresult r = free_fn();
  a.EndFree(kind, key, ticket, r == CUDA_SUCCESS);
  if (r == CUDA_SUCCESS) Runtime::Get().non_migratable().Forget(NmKey(kind, key));
  return r;
}

uint64_t Key(const void* p) { return reinterpret_cast<uint64_t>(p); }

bool VmmOn() { return Runtime::Get().config().vmm; }

constexpr size_t kPitchAlignment = 512;  // what cuMemAllocPitch pads rows to

// Under VMM the ledger is charged with physical memory, by vmm::Manager: a
// chunk's whole size (device granularity) when it is created, returned when
// it is destroyed. A 256-byte cuMemAlloc thus shows a 2 MiB chunk as used,
// as on a real GPU, and the quota bounds what the device really holds. The
// manager retries a refusal after emptying its cache of freed chunks, so only
// the final refusal is logged (one log line per CUDA_ERROR_OUT_OF_MEMORY).
void InstallVmmAccounting() {
  vmm::Accounting a;
  a.reserve = [](int device, uint64_t bytes) { return Accounting().TryReserve(device, bytes); };
  a.release = [](int device, uint64_t bytes) { Accounting().Release(device, bytes); };
  a.refused = [](int device, uint64_t bytes) { Accounting().ReportRefusal(device, bytes); };
  a.limit = [](int device) { return Accounting().Limit(device); };
  a.available = [](int device) { return Accounting().Available(device); };
  Runtime::Get().vmm().SetAccounting(a);
}

// A VMM-backed allocation of `bytes` on the current context; vmm::Manager
// charges the chunks it creates.
CUresult VmmAlloc(CUdeviceptr* dptr, size_t bytes, CUmemoryPool pool) {
  static const bool kAccounting = (InstallVmmAccounting(), true);
  (void)kAccounting;
  Where w;
  if (CUresult r = CurrentWhere(&w); r != CUDA_SUCCESS) return r;
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = Runtime::Get().vmm().Alloc(w.device, w.ctx, bytes, pool, dptr);
  // Out of device memory, not of quota: vgpud (if it runs) makes room by
  // suspending other jobs. A few retries: another job may take the room first.
  // A retry after which this job was itself suspended (its turn ended while it
  // waited) is not counted: under rotation it may wait through many turns.
  constexpr int kMaxRoomRetries = 8;
  for (int i = 0; r == CUDA_ERROR_OUT_OF_MEMORY && i < kMaxRoomRetries &&
                  Accounting().Available(w.device) >= bytes;) {
    const uint64_t parked = counters::Get(counters::Id::kSuspends) + counters::Get(counters::Id::kCheckpoints);
    if (!Runtime::Get().coordination().AskForRoom(w.device, bytes)) break;
    r = Runtime::Get().vmm().Alloc(w.device, w.ctx, bytes, pool, dptr);
    const uint64_t now_parked = counters::Get(counters::Id::kSuspends) + counters::Get(counters::Id::kCheckpoints);
    if (now_parked == parked) ++i;
  }
  if (r == CUDA_SUCCESS) Accounting().TraceAlloc(ChargeKind::kPointer, *dptr, bytes);
  return r;
}

// Frees a VMM allocation; vmm::Manager returns the charge of a chunk it
// destroys.
CUresult VmmFreeNow(CUdeviceptr dptr) {
  // Memory another process still maps stays allocated, and charged, until
  // it closes it (residency/ipc_sharing.h).
  vmm::AllocationInfo info;
  if (Runtime::Get().ipc_sharing().Exporting() && Runtime::Get().vmm().Find(dptr, &info) &&
      info.va == dptr && Runtime::Get().ipc_sharing().DeferFree(info.buffer_id, dptr)) {
    return CUDA_SUCCESS;
  }
  CUresult r = Runtime::Get().vmm().Free(dptr, nullptr);
  if (r == CUDA_SUCCESS) Accounting().TraceFree(ChargeKind::kPointer, dptr);
  return r;
}

// Frees a VMM-backed allocation after the work queued before it (like
// cuMemFree, which synchronizes). False if dptr is not one of ours.
bool VmmFree(CUdeviceptr dptr, CUresult* result) {
  vmm::AllocationInfo info;
  if (!Runtime::Get().vmm().Find(dptr, &info)) return false;
  if (info.va != dptr) {
    *result = CUDA_ERROR_INVALID_VALUE;
    return true;
  }
  Runtime::Get().vmm().WithContext(info.ctx, [] { return REAL_CALL(cuCtxSynchronize); });
  *result = VmmFreeNow(dptr);
  return true;
}

// Records driver-path memory that suspend cannot move.
template <typename F>
CUresult NonMigratable(ChargeKind kind, uint64_t bytes, bool with_ctx, F&& f) {
  uint64_t key = 0;
  CUresult r = f(&key);
  if (r == CUDA_SUCCESS) {
    CUcontext ctx = nullptr;
    if (with_ctx) REAL_CALL(cuCtxGetCurrent, &ctx);
    Runtime::Get().non_migratable().Note(NmKey(kind, key), bytes, ctx);
  }
  return r;
}

CUresult AllocOnCurrent(ChargeKind kind, uint64_t bytes, const std::function<CUresult(uint64_t*)>& f) {
  Where w;
  if (CUresult r = CurrentWhere(&w); r != CUDA_SUCCESS) return r;
  return Charged(kind, w, bytes, f);
}

size_t ArrayFormatBytes(CUarray_format f) {
  switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8: case CU_AD_FORMAT_SIGNED_INT8: return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16: case CU_AD_FORMAT_SIGNED_INT16: case CU_AD_FORMAT_HALF: return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32: case CU_AD_FORMAT_SIGNED_INT32: case CU_AD_FORMAT_FLOAT: return 4;
    default: return 16;  // wider or packed formats: charge generously, never too little
  }
}

uint64_t ArrayBytes(size_t w, size_t h, size_t d, CUarray_format f, unsigned channels) {
  return static_cast<uint64_t>(w) * (h == 0 ? 1 : h) * (d == 0 ? 1 : d) * ArrayFormatBytes(f) *
         (channels == 0 ? 1 : channels);
}

struct PendingRelease {
  int device;
  uint64_t bytes;
};

// Runs on the stream when it reaches a cuMemFreeAsync: touches only the ledger.
void CUDA_CB ReleaseWhenReached(void* p) {
  auto* pr = static_cast<PendingRelease*>(p);
  Accounting().Release(pr->device, pr->bytes);
  delete pr;
}

bool Capturing(CUstream h) {
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  REAL_CALL(cuStreamIsCapturing, h, &st);
  return st != CU_STREAM_CAPTURE_STATUS_NONE;
}

CUresult FreeAsync(CUdeviceptr dptr, CUstream h, bool ptsz) {
  if (VmmOn() && !Capturing(h)) {
    vmm::AllocationInfo info;
    if (Runtime::Get().vmm().Find(dptr, &info)) {
      if (info.va != dptr) return CUDA_ERROR_INVALID_VALUE;
      // Stream order: the memory is reused only after the work queued before
      // the free has run.
      CUresult s = ptsz ? REAL_CALL(cuStreamSynchronize_ptsz, h) : REAL_CALL(cuStreamSynchronize, h);
      if (s != CUDA_SUCCESS) return s;
      return VmmFreeNow(dptr);
    }
  }
  Runtime::Get().non_migratable().Forget(NmKey(ChargeKind::kPointer, dptr));
  CUresult r = ptsz ? REAL_CALL(cuMemFreeAsync_ptsz, dptr, h) : REAL_CALL(cuMemFreeAsync, dptr, h);
  if (r != CUDA_SUCCESS) return r;
  Charge c;
  if (!Accounting().TakeCharge(ChargeKind::kPointer, dptr, &c)) return r;
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  REAL_CALL(cuStreamIsCapturing, h, &st);
  auto* pr = new PendingRelease{c.device, c.bytes};
  CUresult q = st != CU_STREAM_CAPTURE_STATUS_NONE
                   ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
                   : ptsz ? REAL_CALL(cuLaunchHostFunc_ptsz, h, ReleaseWhenReached, pr)
                          : REAL_CALL(cuLaunchHostFunc, h, ReleaseWhenReached, pr);
  if (q != CUDA_SUCCESS) ReleaseWhenReached(pr);  // cannot defer: release now
  return r;
}

CUresult AllocAsync(CUdeviceptr* dptr, size_t bytes, CUstream h, CUmemoryPool pool, bool ptsz) {
  if (dptr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (Capturing(h)) {
    // Captured, it is a graph allocation node: an address now, memory when a
    // launch takes it, charged then (intercept/graph_memory.h).
    return pool == nullptr
               ? (ptsz ? REAL_CALL(cuMemAllocAsync_ptsz, dptr, bytes, h) : REAL_CALL(cuMemAllocAsync, dptr, bytes, h))
               : (ptsz ? REAL_CALL(cuMemAllocFromPoolAsync_ptsz, dptr, bytes, pool, h)
                       : REAL_CALL(cuMemAllocFromPoolAsync, dptr, bytes, pool, h));
  }
  if (VmmOn()) {
    Where w;
    if (CUresult r = CurrentWhere(&w); r != CUDA_SUCCESS) return r;
    CUmemoryPool p = pool;
    if (p == nullptr) REAL_CALL(cuDeviceGetMemPool, &p, w.device);
    return VmmAlloc(dptr, bytes, p);
  }
  return AllocOnCurrent(ChargeKind::kPointer, bytes, [&](uint64_t* key) {
    CUresult r = pool == nullptr
                     ? (ptsz ? REAL_CALL(cuMemAllocAsync_ptsz, dptr, bytes, h) : REAL_CALL(cuMemAllocAsync, dptr, bytes, h))
                     : (ptsz ? REAL_CALL(cuMemAllocFromPoolAsync_ptsz, dptr, bytes, pool, h)
                             : REAL_CALL(cuMemAllocFromPoolAsync, dptr, bytes, pool, h));
    *key = *dptr;
    if (r == CUDA_SUCCESS) {
      CUcontext ctx = nullptr;
      REAL_CALL(cuCtxGetCurrent, &ctx);
      Runtime::Get().non_migratable().Note(NmKey(ChargeKind::kPointer, *dptr), bytes, ctx);
    }
    return r;
  });
}

}  // namespace

}  // namespace vgpu

using vgpu::ChargeKind;

VGPU_HOOK(cuMemAlloc_v2) CUresult CUDAAPI vgpu_hook_cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize) {
  return vgpu::WhenReadyGated([&]() -> CUresult {
    if (dptr == nullptr) return REAL_CALL(cuMemAlloc_v2, dptr, bytesize);
    if (vgpu::VmmOn()) return vgpu::VmmAlloc(dptr, bytesize, nullptr);
    return vgpu::AllocOnCurrent(ChargeKind::kPointer, bytesize, [&](uint64_t* key) {
      return vgpu::NonMigratable(ChargeKind::kPointer, bytesize, true, [&](uint64_t* k) {
        CUresult r = REAL_CALL(cuMemAlloc_v2, dptr, bytesize);
        *key = *k = *dptr;
        return r;
      });
    });
  });
}

VGPU_HOOK(cuMemAllocPitch_v2) CUresult CUDAAPI vgpu_hook_cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pPitch, size_t WidthInBytes, size_t Height, unsigned int ElementSizeBytes) {
  return vgpu::WhenReadyGated([&]() -> CUresult {
    if (dptr == nullptr || pPitch == nullptr)
      return REAL_CALL(cuMemAllocPitch_v2, dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
    if (vgpu::VmmOn()) {
      if (WidthInBytes == 0 || Height == 0) return CUDA_ERROR_INVALID_VALUE;
      if (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16)
        return CUDA_ERROR_INVALID_VALUE;
      size_t pitch = (WidthInBytes + vgpu::kPitchAlignment - 1) / vgpu::kPitchAlignment *
                     vgpu::kPitchAlignment;
      if (Height > SIZE_MAX / pitch) return CUDA_ERROR_OUT_OF_MEMORY;
      CUresult r = vgpu::VmmAlloc(dptr, pitch * Height, nullptr);
      if (r == CUDA_SUCCESS) *pPitch = pitch;
      return r;
    }
    // The pitch is known only afterwards: charge the widest plausible
    // padding (512 B rows) first, then settle on the real size.
    uint64_t guess = ((WidthInBytes + 511) / 512) * 512 * static_cast<uint64_t>(Height);
    vgpu::Where w;
    if (CUresult r = vgpu::CurrentWhere(&w); r != CUDA_SUCCESS) return r;
    CUresult r = vgpu::Charged(ChargeKind::kPointer, w, guess, [&](uint64_t* key) {
      CUresult rr =
          REAL_CALL(cuMemAllocPitch_v2, dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
      *key = *dptr;
      return rr;
    });
    if (r != CUDA_SUCCESS) return r;
    const uint64_t real = static_cast<uint64_t>(*pPitch) * Height;
    if (!vgpu::Accounting().Resize(ChargeKind::kPointer, *dptr, real)) {
      vgpu::FreeCharged(ChargeKind::kPointer, *dptr,
                        [&] { return REAL_CALL(cuMemFree_v2, *dptr); });
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    // Driver memory, like cuMemAlloc's off VMM: suspend cannot move it, so
    // suspend and checkpoint must refuse rather than leave it behind.
    vgpu::Runtime::Get().non_migratable().Note(vgpu::NmKey(ChargeKind::kPointer, *dptr), real, w.ctx);
    return r;
  });
}

VGPU_HOOK(cuMemFree_v2) CUresult CUDAAPI vgpu_hook_cuMemFree_v2(CUdeviceptr dptr) {
  return vgpu::WhenReadyGated([&]() -> CUresult {
    CUresult vr = CUDA_SUCCESS;
    if (dptr != 0 && vgpu::VmmFree(dptr, &vr)) return vr;
    return vgpu::FreeCharged(ChargeKind::kPointer, dptr,
                             [&] { return REAL_CALL(cuMemFree_v2, dptr); });
  });
}

VGPU_HOOK(cuMemAllocManaged) CUresult CUDAAPI vgpu_hook_cuMemAllocManaged(CUdeviceptr* dptr, size_t bytesize, unsigned int flags) {
  return vgpu::WhenReadyGated([&]() -> CUresult {
    if (dptr == nullptr) return REAL_CALL(cuMemAllocManaged, dptr, bytesize, flags);
    // Managed memory can migrate to the device: it counts in full.
    return vgpu::AllocOnCurrent(ChargeKind::kPointer, bytesize, [&](uint64_t* key) {
      return vgpu::NonMigratable(ChargeKind::kPointer, bytesize, true, [&](uint64_t* k) {
        CUresult r = REAL_CALL(cuMemAllocManaged, dptr, bytesize, flags);
        *key = *k = *dptr;
        return r;
      });
    });
  });
}

VGPU_HOOK(cuMemAllocAsync) CUresult CUDAAPI vgpu_hook_cuMemAllocAsync(CUdeviceptr* dptr, size_t bytesize, CUstream hStream) {
  return vgpu::WhenReadyGated(
      [&]() -> CUresult { return vgpu::AllocAsync(dptr, bytesize, hStream, nullptr, false); });
}
VGPU_HOOK(cuMemAllocAsync_ptsz) CUresult CUDAAPI vgpu_hook_cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUstream hStream) {
  return vgpu::WhenReadyGated(
      [&]() -> CUresult { return vgpu::AllocAsync(dptr, bytesize, hStream, nullptr, true); });
}
VGPU_HOOK(cuMemAllocFromPoolAsync) CUresult CUDAAPI vgpu_hook_cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream) {
  return vgpu::WhenReadyGated([&]() -> CUresult {
    if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
    return vgpu::AllocAsync(dptr, bytesize, hStream, pool, false);
  });
}
VGPU_HOOK(cuMemAllocFromPoolAsync_ptsz) CUresult CUDAAPI vgpu_hook_cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream) {
  return vgpu::WhenReadyGated([&]() -> CUresult {
    if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
    return vgpu::AllocAsync(dptr, bytesize, hStream, pool, true);
  });
}
VGPU_HOOK(cuMemFreeAsync) CUresult CUDAAPI vgpu_hook_cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) {
  return vgpu::WhenReadyGated([&]() -> CUresult { return vgpu::FreeAsync(dptr, hStream, false); });
}
VGPU_HOOK(cuMemFreeAsync_ptsz) CUresult CUDAAPI vgpu_hook_cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) {
  return vgpu::WhenReadyGated([&]() -> CUresult { return vgpu::FreeAsync(dptr, hStream, true); });
}

VGPU_HOOK(cuMemCreate) CUresult CUDAAPI vgpu_hook_cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size, const CUmemAllocationProp* prop, unsigned long long flags) {
  return vgpu::WhenReadyGated([&]() -> CUresult {
    if (handle == nullptr || prop == nullptr)
      return REAL_CALL(cuMemCreate, handle, size, prop, flags);
    CUmemAllocationProp copy = *prop;
    vgpu::Where w;
    REAL_CALL(cuCtxGetCurrent, &w.ctx);
    if (copy.location.type == CU_MEM_LOCATION_TYPE_DEVICE) {
      copy.location.id =
          vgpu::Runtime::Get().devices().ToOrdinal(vgpu::VisibleIndex(copy.location.id)).value();
      if (copy.location.id < 0) return CUDA_ERROR_INVALID_DEVICE;
      w.device = copy.location.id;
    }
    w.ctx = nullptr;  // physical memory outlives contexts until cuMemRelease
    return vgpu::Charged(ChargeKind::kVmmHandle, w, size, [&](uint64_t* key) {
      return vgpu::NonMigratable(ChargeKind::kVmmHandle, size, false, [&](uint64_t* k) {
        CUresult r = REAL_CALL(cuMemCreate, handle, size, &copy, flags);
        *key = *k = *handle;
        return r;
      });
    });
  });
}

// A driver frees cuMemCreate memory once it is released and unmapped: the
// charge of a handle released while mapped waits for its last unmap
// (quota/mapped_handles.h), and so does its non-migratable note.
VGPU_HOOK(cuMemRelease) CUresult CUDAAPI vgpu_hook_cuMemRelease(CUmemGenericAllocationHandle handle) {
  return vgpu::WhenReadyGated([&]() -> CUresult {
    vgpu::Runtime& rt = vgpu::Runtime::Get();
    vgpu::Charge c;
    if (rt.mapped_handles().IsMapped(handle) &&
        vgpu::Accounting().TakeCharge(ChargeKind::kVmmHandle, handle, &c)) {
      CUresult r = REAL_CALL(cuMemRelease, handle);
      if (r != CUDA_SUCCESS) {
        vgpu::Accounting().Commit(ChargeKind::kVmmHandle, handle, c.device, c.owner, c.bytes);
        return r;
      }
      const uint64_t key = rt.mapped_handles().Defer(handle, c);
      rt.non_migratable().Forget(vgpu::NmKey(ChargeKind::kVmmHandle, handle));
      rt.non_migratable().Note(vgpu::HeldNmKey(key), c.bytes, nullptr);
      return r;
    }
    return vgpu::FreeCharged(ChargeKind::kVmmHandle, handle,
                             [&] { return REAL_CALL(cuMemRelease, handle); });
  });
}

VGPU_HOOK(cuMemMap)
CUresult CUDAAPI vgpu_hook_cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                                    CUmemGenericAllocationHandle handle, unsigned long long flags) {
  return vgpu::WhenReadyGated([&]() -> CUresult {
    CUresult r = REAL_CALL(cuMemMap, ptr, size, offset, handle, flags);
    if (r == CUDA_SUCCESS) vgpu::Runtime::Get().mapped_handles().Mapped(ptr, size, handle);
    return r;
  });
}

VGPU_HOOK(cuMemUnmap) CUresult CUDAAPI vgpu_hook_cuMemUnmap(CUdeviceptr ptr, size_t size) {
  return vgpu::WhenReadyGated([&]() -> CUresult {
    CUresult r = REAL_CALL(cuMemUnmap, ptr, size);
    if (r != CUDA_SUCCESS) return r;
    vgpu::Runtime& rt = vgpu::Runtime::Get();
    for (const auto& [key, c] : rt.mapped_handles().Unmapped(ptr, size)) {
      vgpu::Accounting().Release(c.device, c.bytes);
      rt.non_migratable().Forget(vgpu::HeldNmKey(key));
    }
    return r;
  });
}

VGPU_HOOK(cuArrayCreate_v2) CUresult CUDAAPI vgpu_hook_cuArrayCreate_v2(CUarray* pHandle, const CUDA_ARRAY_DESCRIPTOR* d) {
  return vgpu::WhenReadyGated([&]() -> CUresult {
    if (pHandle == nullptr || d == nullptr) return REAL_CALL(cuArrayCreate_v2, pHandle, d);
    uint64_t bytes = vgpu::ArrayBytes(d->Width, d->Height, 1, d->Format, d->NumChannels);
    return vgpu::AllocOnCurrent(ChargeKind::kArray, bytes, [&](uint64_t* key) {
      return vgpu::NonMigratable(ChargeKind::kArray, bytes, true, [&](uint64_t* k) {
        CUresult r = REAL_CALL(cuArrayCreate_v2, pHandle, d);
        *key = *k = vgpu::Key(*pHandle);
        return r;
      });
    });
  });
}

VGPU_HOOK(cuArray3DCreate_v2) CUresult CUDAAPI vgpu_hook_cuArray3DCreate_v2(CUarray* pHandle, const CUDA_ARRAY3D_DESCRIPTOR* d) {
  return vgpu::WhenReadyGated([&]() -> CUresult {
    if (pHandle == nullptr || d == nullptr) return REAL_CALL(cuArray3DCreate_v2, pHandle, d);
    uint64_t bytes = vgpu::ArrayBytes(d->Width, d->Height, d->Depth, d->Format, d->NumChannels);
    return vgpu::AllocOnCurrent(ChargeKind::kArray, bytes, [&](uint64_t* key) {
      return vgpu::NonMigratable(ChargeKind::kArray, bytes, true, [&](uint64_t* k) {
        CUresult r = REAL_CALL(cuArray3DCreate_v2, pHandle, d);
        *key = *k = vgpu::Key(*pHandle);
        return r;
      });
    });
  });
}

VGPU_HOOK(cuArrayDestroy) CUresult CUDAAPI vgpu_hook_cuArrayDestroy(CUarray hArray) {
  return vgpu::WhenReadyGated([&]() -> CUresult {
    return vgpu::FreeCharged(ChargeKind::kArray, vgpu::Key(hArray),
                             [&] { return REAL_CALL(cuArrayDestroy, hArray); });
  });
}

VGPU_HOOK(cuMipmappedArrayCreate) CUresult CUDAAPI vgpu_hook_cuMipmappedArrayCreate(CUmipmappedArray* pHandle, const CUDA_ARRAY3D_DESCRIPTOR* d, unsigned int numMipmapLevels) {
  return vgpu::WhenReadyGated([&]() -> CUresult {
    if (pHandle == nullptr || d == nullptr)
      return REAL_CALL(cuMipmappedArrayCreate, pHandle, d, numMipmapLevels);
    uint64_t bytes = 0;
    size_t w = d->Width, h = d->Height, z = d->Depth;
    // Charge what the driver makes: one level when asked for none, the full
    // chain when asked for more (driver 580; docs/gpu-validation.md).
    const auto chain = static_cast<unsigned>(std::bit_width(std::max({w, h, z, size_t{1}})));
    const unsigned levels = std::clamp(numMipmapLevels, 1u, chain);
    for (unsigned l = 0; l < levels; ++l) {
      bytes += vgpu::ArrayBytes(w, h, z, d->Format, d->NumChannels);
      w = w > 1 ? w / 2 : 1;
      h = h > 1 ? h / 2 : h;
      z = z > 1 ? z / 2 : z;
    }
    return vgpu::AllocOnCurrent(ChargeKind::kMipmappedArray, bytes, [&](uint64_t* key) {
      return vgpu::NonMigratable(ChargeKind::kMipmappedArray, bytes, true, [&](uint64_t* k) {
        CUresult r = REAL_CALL(cuMipmappedArrayCreate, pHandle, d, numMipmapLevels);
        *key = *k = vgpu::Key(*pHandle);
        return r;
      });
    });
  });
}

VGPU_HOOK(cuMipmappedArrayDestroy) CUresult CUDAAPI vgpu_hook_cuMipmappedArrayDestroy(CUmipmappedArray h) {
  return vgpu::WhenReadyGated([&]() -> CUresult {
    return vgpu::FreeCharged(ChargeKind::kMipmappedArray, vgpu::Key(h),
                             [&] { return REAL_CALL(cuMipmappedArrayDestroy, h); });
  });
}

VGPU_HOOK(cuMemGetInfo_v2) CUresult CUDAAPI vgpu_hook_cuMemGetInfo_v2(size_t* free, size_t* total) {
  return vgpu::WhenReadyGated([&]() -> CUresult {
    CUdevice d = 0;
    const bool have_device = REAL_CALL(cuCtxGetDevice, &d) == CUDA_SUCCESS;
    // Freed chunks kept for reuse are given back first: the answer is then
    // what the driver would say after the program's frees, and it is what
    // the ledger holds.
    if (vgpu::VmmOn() && have_device) vgpu::Runtime::Get().vmm().TrimCache(d);
    CUresult r = REAL_CALL(cuMemGetInfo_v2, free, total);
    vgpu::DeviceLedger* ledger = vgpu::Runtime::Get().ledger();
    if (r != CUDA_SUCCESS || ledger == nullptr || !have_device) return r;
    uint64_t limit = ledger->Limit(d);
    if (limit == vgpu::kUnlimited) return r;
    vgpu::MemoryView view = vgpu::QuotaMemoryView(limit, ledger->Used(d), *total, *free);
    *total = view.total;
    *free = view.free;
    return r;
  });
}

VGPU_HOOK(cuMemGetAddressRange_v2) CUresult CUDAAPI vgpu_hook_cuMemGetAddressRange_v2(CUdeviceptr* pbase, size_t* psize, CUdeviceptr dptr) {
  return vgpu::NoThrow(CUDA_ERROR_UNKNOWN, [&] {
    vgpu::vmm::AllocationInfo info;
    if (vgpu::Runtime::Get().ready() && vgpu::Runtime::Get().vmm().Find(dptr, &info)) {
      if (pbase != nullptr) *pbase = info.va;
      if (psize != nullptr) *psize = info.size;
      return CUDA_SUCCESS;
    }
    return REAL_CALL(cuMemGetAddressRange_v2, pbase, psize, dptr);
  });
}
