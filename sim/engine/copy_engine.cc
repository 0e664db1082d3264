#include "sim/engine/copy_engine.h"

#include "sim/engine/address_space.h"
#include "sim/engine/context.h"

namespace vgpu::sim {
namespace {

CUresult ResolveArrayEndpoint(CUarray a, size_t x, size_t y, size_t z, size_t height,
                              Endpoint* out, size_t* pitch) {
  auto* arr = reinterpret_cast<ArrayObject*>(a);
  if (!IsLiveArray(arr)) return CUDA_ERROR_INVALID_HANDLE;
  size_t h = arr->desc.Height == 0 ? 1 : arr->desc.Height;
  CUdeviceptr p = arr->mem + (z * h + y) * arr->row_bytes + x;
  *pitch = arr->row_bytes;
  (void)height;
  return ResolveEndpoint(CU_MEMORYTYPE_DEVICE, p, 1, out);
}

// One side of a 2D/3D copy, as an address of its first byte and a pitch.
struct Side {
  CUmemorytype type;
  const void* host;
  CUdeviceptr device;
  CUarray array;
  size_t pitch, x, y, z, height;
};

CUresult ResolveSide(const Side& s, size_t width, size_t rows, Endpoint* out, size_t* pitch) {
  if (s.type == CU_MEMORYTYPE_ARRAY) return ResolveArrayEndpoint(s.array, s.x, s.y, s.z, s.height, out, pitch);
  size_t pitch_or_width = s.pitch != 0 ? s.pitch : width;
  if (s.pitch != 0 && s.pitch < width) return CUDA_ERROR_INVALID_VALUE;
  size_t h = s.height == 0 ? rows : s.height;
  size_t offset = (s.z * h + s.y) * pitch_or_width + s.x;
  size_t span = rows == 0 ? 0 : (rows - 1) * pitch_or_width + width;
  CUdeviceptr base = s.type == CU_MEMORYTYPE_HOST ? reinterpret_cast<CUdeviceptr>(s.host) : s.device;
  *pitch = pitch_or_width;
  return ResolveEndpoint(s.type, base + offset, span, out);
}

}  // namespace

CUresult ResolveEndpoint(CUmemorytype kind, CUdeviceptr ptr, size_t bytes, Endpoint* out) {
  if (ptr == 0) return CUDA_ERROR_INVALID_VALUE;
  size_t n = bytes == 0 ? 1 : bytes;
  AddressSpace& as = AddressSpace::Get();
  void* host = as.Translate(ptr, n);
  if (kind == CU_MEMORYTYPE_DEVICE || as.InWindow(ptr, n)) {
    if (host == nullptr) return CUDA_ERROR_INVALID_VALUE;
    out->p = static_cast<uint8_t*>(host);
    out->pageable = false;
    return CUDA_SUCCESS;
  }
  // Host memory: pinned/registered/managed ranges translate to themselves.
  out->p = host != nullptr ? static_cast<uint8_t*>(host) : reinterpret_cast<uint8_t*>(ptr);
  out->pageable = host == nullptr;
  return CUDA_SUCCESS;
}

CUresult QueueCopy(CUstream h, bool ptds, Sync sync, const Endpoint& dst, size_t dst_pitch,
                   const Endpoint& src, size_t src_pitch, size_t width, size_t height) {
  Stream* s = nullptr;
  if (CUresult r = ResolveStream(h, ptds, &s); r != CUDA_SUCCESS) return r;
  if (CUresult r = StickyError(s->ctx()); r != CUDA_SUCCESS) return r;
  if (width == 0 || height == 0) return CUDA_SUCCESS;
  bool capturing = s->capture_graph() != nullptr;
  // Pageable host memory is staged by the real driver (a bounce-buffer copy)
  // before the call returns; pinned memory is a DMA, asynchronous.
  const bool pageable = dst.pageable || src.pageable;
  if (pageable && !capturing) sync = Sync::kHost;
  Op* op = s->Begin();
  op->kind = OpKind::kCopy;
  op->dst = dst.p;
  op->src = src.p;
  op->width = width;
  op->height = height;
  op->dst_pitch = dst_pitch;
  op->src_pitch = src_pitch;
  op->staged = pageable;
  s->Commit();
  if (sync == Sync::kHost && !capturing) return s->Synchronize();
  return CUDA_SUCCESS;
}

CUresult QueueSet(CUstream h, bool ptds, Sync sync, CUdeviceptr dst, size_t pitch, uint32_t value,
                  uint8_t elem, size_t width_elems, size_t height, bool is_async_api) {
  Stream* s = nullptr;
  if (CUresult r = ResolveStream(h, ptds, &s); r != CUDA_SUCCESS) return r;
  if (CUresult r = StickyError(s->ctx()); r != CUDA_SUCCESS) return r;
  if (width_elems == 0 || height == 0) return CUDA_SUCCESS;
  size_t width = width_elems * elem;
  if (dst % elem != 0 || (height > 1 && (pitch < width || pitch % elem != 0))) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  Endpoint e;
  size_t span = (height - 1) * pitch + width;
  if (CUresult r = ResolveEndpoint(CU_MEMORYTYPE_UNIFIED, dst, span, &e); r != CUDA_SUCCESS) return r;
  if (e.pageable) return CUDA_ERROR_INVALID_VALUE;
  // The non-async memsets are asynchronous only for device memory; a host
  // -visible destination (pinned, managed) is set when the call returns, and
  // so is a region with CU_POINTER_ATTRIBUTE_SYNC_MEMOPS set.
  AllocInfo target;
  if (sync == Sync::kAsync && !is_async_api && LookupAllocation(dst, &target) &&
      (target.kind == AllocKind::kHostPinned || target.kind == AllocKind::kManaged ||
       target.sync_memops)) {
    sync = Sync::kHost;
  }
  Op* op = s->Begin();
  op->kind = OpKind::kSet;
  op->dst = e.p;
  op->width = width;
  op->height = height;
  op->dst_pitch = height > 1 ? pitch : width;
  op->value = value;
  op->elem = elem;
  s->Commit();
  if (sync == Sync::kHost && s->capture_graph() == nullptr) return s->Synchronize();
  return CUDA_SUCCESS;
}

CUresult Copy2D(const CUDA_MEMCPY2D* c, CUstream h, bool ptds, Sync sync) {
  if (c == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Side src{c->srcMemoryType, c->srcHost, c->srcDevice, c->srcArray, c->srcPitch, c->srcXInBytes, c->srcY, 0, 0};
  Side dst{c->dstMemoryType, c->dstHost, c->dstDevice, c->dstArray, c->dstPitch, c->dstXInBytes, c->dstY, 0, 0};
  Endpoint se, de;
  size_t sp = 0, dp = 0;
  if (CUresult r = ResolveSide(src, c->WidthInBytes, c->Height, &se, &sp); r != CUDA_SUCCESS) return r;
  if (CUresult r = ResolveSide(dst, c->WidthInBytes, c->Height, &de, &dp); r != CUDA_SUCCESS) return r;
  return QueueCopy(h, ptds, sync, de, dp, se, sp, c->WidthInBytes, c->Height);
}

CUresult Copy3D(const CUDA_MEMCPY3D* c, CUstream h, bool ptds, Sync sync) {
  if (c == nullptr) return CUDA_ERROR_INVALID_VALUE;
  size_t depth = c->Depth == 0 ? 1 : c->Depth;
  for (size_t z = 0; z < depth; ++z) {
    Side src{c->srcMemoryType, c->srcHost, c->srcDevice, c->srcArray, c->srcPitch,
             c->srcXInBytes, c->srcY, c->srcZ + z, c->srcHeight};
    Side dst{c->dstMemoryType, c->dstHost, c->dstDevice, c->dstArray, c->dstPitch,
             c->dstXInBytes, c->dstY, c->dstZ + z, c->dstHeight};
    Endpoint se, de;
    size_t sp = 0, dp = 0;
    if (CUresult r = ResolveSide(src, c->WidthInBytes, c->Height, &se, &sp); r != CUDA_SUCCESS) return r;
    if (CUresult r = ResolveSide(dst, c->WidthInBytes, c->Height, &de, &dp); r != CUDA_SUCCESS) return r;
    Sync s = z + 1 == depth ? sync : Sync::kAsync;
    if (CUresult r = QueueCopy(h, ptds, s, de, dp, se, sp, c->WidthInBytes, c->Height); r != CUDA_SUCCESS) {
      return r;
    }
  }
  return CUDA_SUCCESS;
}

}  // namespace vgpu::sim
