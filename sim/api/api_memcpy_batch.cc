// Batched copies (CUDA 12.8+): cuMemcpyBatchAsync and cuMemcpy3DBatchAsync,
// the CUDA 12.8 forms (with failIdx) and the CUDA 13 _v2 forms, each with its
// _ptsz variant. A batch is validated whole, then its copies are queued on the
// stream in list order through the ordinary copy paths (sim/engine/copy_engine.h):
// cuda.h promises no order within a batch, so list order is one valid order.
#include <cstdint>

#include "sim/api/api_common.h"
#include "sim/engine/copy_engine.h"

using namespace vgpu::sim;  // NOLINT: entry points below are the C ABI

#undef cuMemcpyBatchAsync  // cuda.h maps the names to the CUDA 13 _v2 forms
#undef cuMemcpy3DBatchAsync

namespace {

constexpr size_t kNoIndex = SIZE_MAX;  // failIdx for an error of the whole batch

// cuda.h: the batch's stream must not be the legacy NULL stream (for the
// _ptsz forms NULL is the per-thread stream, which is allowed).
bool AllowedStream(CUstream h, bool ptsz) {
  return h != CU_STREAM_LEGACY && (ptsz || h != nullptr);
}

bool ValidOrder(CUmemcpySrcAccessOrder o) {
  const int v = RawEnum(o);
  return v >= CU_MEMCPY_SRC_ACCESS_ORDER_STREAM && v <= CU_MEMCPY_SRC_ACCESS_ORDER_ANY;
}

bool ValidAttrs(const CUmemcpyAttributes* attrs, const size_t* idxs, size_t n, size_t count) {
  if (attrs == nullptr || idxs == nullptr || n == 0 || n > count || idxs[0] != 0) return false;
  for (size_t k = 0; k < n; ++k) {
    if (k > 0 && idxs[k] <= idxs[k - 1]) return false;
    if (idxs[k] >= count || !ValidOrder(attrs[k].srcAccessOrder)) return false;
    if ((attrs[k].flags & ~unsigned{CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE}) != 0) return false;
  }
  return true;
}

// DURING_API_CALL: the source may be gone once the call returns, so that copy
// is finished before it does.
Sync SyncFor(CUmemcpySrcAccessOrder o) {
  return RawEnum(o) == CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL ? Sync::kHost : Sync::kAsync;
}

CUresult Batch1D(const CUdeviceptr* dsts, const CUdeviceptr* srcs, const size_t* sizes,
                 size_t count, const CUmemcpyAttributes* attrs, const size_t* idxs, size_t n_attrs,
                 size_t* fail, CUstream h, bool ptsz) {
  if (fail != nullptr) *fail = kNoIndex;
  if (dsts == nullptr || srcs == nullptr || sizes == nullptr || count == 0)
    return CUDA_ERROR_INVALID_VALUE;
  if (!AllowedStream(h, ptsz) || !ValidAttrs(attrs, idxs, n_attrs, count))
    return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < count; ++i) {  // every operand first: all or nothing
    if (sizes[i] == 0) continue;        // nothing to copy, as for cuMemcpyAsync
    Endpoint d, s;
    CUresult r = ResolveEndpoint(CU_MEMORYTYPE_UNIFIED, dsts[i], sizes[i], &d);
    if (r == CUDA_SUCCESS) r = ResolveEndpoint(CU_MEMORYTYPE_UNIFIED, srcs[i], sizes[i], &s);
    if (r != CUDA_SUCCESS) {
      if (fail != nullptr) *fail = i;
      return r;
    }
  }
  size_t k = 0;
  for (size_t i = 0; i < count; ++i) {
    while (k + 1 < n_attrs && idxs[k + 1] <= i) ++k;
    if (sizes[i] == 0) continue;
    Endpoint d, s;
    ResolveEndpoint(CU_MEMORYTYPE_UNIFIED, dsts[i], sizes[i], &d);
    ResolveEndpoint(CU_MEMORYTYPE_UNIFIED, srcs[i], sizes[i], &s);
    const Sync sync = SyncFor(attrs[k].srcAccessOrder);
    if (CUresult r = QueueCopy(h, ptsz, sync, d, sizes[i], s, sizes[i], sizes[i], 1);
        r != CUDA_SUCCESS) {
      if (fail != nullptr) *fail = i;
      return r;
    }
  }
  return CUDA_SUCCESS;
}

// Bytes per element of an array operand, 0 for a dead array.
size_t ElementBytes(CUarray a) {
  auto* arr = reinterpret_cast<ArrayObject*>(a);
  if (!IsLiveArray(arr)) return 0;
  return FormatBytes(arr->desc.Format) * arr->desc.NumChannels;
}

bool ValidOperandType(const CUmemcpy3DOperand& o) {
  const int t = RawEnum(o.type);
  return t == CU_MEMCPY_OPERAND_TYPE_POINTER || t == CU_MEMCPY_OPERAND_TYPE_ARRAY;
}

// The element size of a copy: 1 between pointers, else the array's (both
// arrays' must match). 0: invalid.
size_t CopyElementBytes(const CUDA_MEMCPY3D_BATCH_OP& op) {
  const bool sa = RawEnum(op.src.type) == CU_MEMCPY_OPERAND_TYPE_ARRAY;
  const bool da = RawEnum(op.dst.type) == CU_MEMCPY_OPERAND_TYPE_ARRAY;
  const size_t se = sa ? ElementBytes(op.src.op.array.array) : 1;
  const size_t de = da ? ElementBytes(op.dst.op.array.array) : 1;
  if (se == 0 || de == 0 || (sa && da && se != de)) return 0;
  return sa ? se : de;
}

// One side of a CUDA_MEMCPY3D from a batch operand.
void FillSide(const CUmemcpy3DOperand& o, const CUextent3D& e, size_t elem, bool src,
              CUDA_MEMCPY3D* c) {
  const bool array = RawEnum(o.type) == CU_MEMCPY_OPERAND_TYPE_ARRAY;
  CUmemorytype type = array ? CU_MEMORYTYPE_ARRAY : CU_MEMORYTYPE_UNIFIED;
  size_t x = 0, y = 0, z = 0, pitch = 0, height = 0;
  CUdeviceptr ptr = 0;
  CUarray arr = nullptr;
  if (array) {
    arr = o.op.array.array;
    x = o.op.array.offset.x * elem;
    y = o.op.array.offset.y;
    z = o.op.array.offset.z;
  } else {
    ptr = o.op.ptr.ptr;
    pitch = (o.op.ptr.rowLength != 0 ? o.op.ptr.rowLength : e.width) * elem;
    height = o.op.ptr.layerHeight != 0 ? o.op.ptr.layerHeight : e.height;
  }
  if (src) {
    c->srcMemoryType = type, c->srcDevice = ptr, c->srcArray = arr, c->srcXInBytes = x;
    c->srcY = y, c->srcZ = z, c->srcPitch = pitch, c->srcHeight = height;
  } else {
    c->dstMemoryType = type, c->dstDevice = ptr, c->dstArray = arr, c->dstXInBytes = x;
    c->dstY = y, c->dstZ = z, c->dstPitch = pitch, c->dstHeight = height;
  }
}

bool ValidPointerOperand(const CUmemcpy3DOperand& o, const CUextent3D& e) {
  if (RawEnum(o.type) != CU_MEMCPY_OPERAND_TYPE_POINTER) return true;
  return (o.op.ptr.rowLength == 0 || o.op.ptr.rowLength >= e.width) &&
         (o.op.ptr.layerHeight == 0 || o.op.ptr.layerHeight >= e.height);
}

CUresult ValidOp(const CUDA_MEMCPY3D_BATCH_OP& op, CUDA_MEMCPY3D* c) {
  const CUextent3D& e = op.extent;
  if (e.width == 0 || e.height == 0 || e.depth == 0 || !ValidOrder(op.srcAccessOrder)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if ((op.flags & ~unsigned{CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE}) != 0)
    return CUDA_ERROR_INVALID_VALUE;
  if (!ValidOperandType(op.src) || !ValidOperandType(op.dst)) return CUDA_ERROR_INVALID_VALUE;
  if (!ValidPointerOperand(op.src, e) || !ValidPointerOperand(op.dst, e))
    return CUDA_ERROR_INVALID_VALUE;
  const size_t elem = CopyElementBytes(op);
  if (elem == 0) return CUDA_ERROR_INVALID_VALUE;
  *c = CUDA_MEMCPY3D{};
  FillSide(op.src, e, elem, true, c);
  FillSide(op.dst, e, elem, false, c);
  c->WidthInBytes = e.width * elem;
  c->Height = e.height;
  c->Depth = e.depth;
  return CUDA_SUCCESS;
}

CUresult Batch3D(size_t n, const CUDA_MEMCPY3D_BATCH_OP* ops, size_t* fail,
                 unsigned long long flags, CUstream h, bool ptsz) {
  if (fail != nullptr) *fail = kNoIndex;
  if (ops == nullptr || n == 0 || flags != 0 || !AllowedStream(h, ptsz))
    return CUDA_ERROR_INVALID_VALUE;
  CUDA_MEMCPY3D c{};
  for (size_t i = 0; i < n; ++i) {
    if (CUresult r = ValidOp(ops[i], &c); r != CUDA_SUCCESS) {
      if (fail != nullptr) *fail = i;
      return r;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    ValidOp(ops[i], &c);
    if (CUresult r = Copy3D(&c, h, ptsz, SyncFor(ops[i].srcAccessOrder)); r != CUDA_SUCCESS) {
      if (fail != nullptr) *fail = i;
      return r;
    }
  }
  return CUDA_SUCCESS;
}

}  // namespace

SIM_EXPORT CUresult CUDAAPI cuMemcpyBatchAsync_v2(CUdeviceptr* dsts, CUdeviceptr* srcs,
                                                  size_t* sizes, size_t count,
                                                  CUmemcpyAttributes* attrs, size_t* attrsIdxs,
                                                  size_t numAttrs, CUstream hStream) {
  SIM_ENTER("cuMemcpyBatchAsync_v2");
  return Batch1D(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, nullptr, hStream, false);
}

SIM_EXPORT CUresult CUDAAPI cuMemcpyBatchAsync_v2_ptsz(CUdeviceptr* dsts, CUdeviceptr* srcs,
                                                       size_t* sizes, size_t count,
                                                       CUmemcpyAttributes* attrs, size_t* attrsIdxs,
                                                       size_t numAttrs, CUstream hStream) {
  SIM_ENTER("cuMemcpyBatchAsync_v2_ptsz");
  return Batch1D(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, nullptr, hStream, true);
}

SIM_EXPORT CUresult CUDAAPI cuMemcpyBatchAsync(CUdeviceptr* dsts, CUdeviceptr* srcs, size_t* sizes,
                                               size_t count, CUmemcpyAttributes* attrs,
                                               size_t* attrsIdxs, size_t numAttrs, size_t* failIdx,
                                               CUstream hStream) {
  SIM_ENTER("cuMemcpyBatchAsync");
  return Batch1D(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, failIdx, hStream, false);
}

SIM_EXPORT CUresult CUDAAPI cuMemcpyBatchAsync_ptsz(CUdeviceptr* dsts, CUdeviceptr* srcs,
                                                    size_t* sizes, size_t count,
                                                    CUmemcpyAttributes* attrs, size_t* attrsIdxs,
                                                    size_t numAttrs, size_t* failIdx,
                                                    CUstream hStream) {
  SIM_ENTER("cuMemcpyBatchAsync_ptsz");
  return Batch1D(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, failIdx, hStream, true);
}

SIM_EXPORT CUresult CUDAAPI cuMemcpy3DBatchAsync_v2(size_t numOps, CUDA_MEMCPY3D_BATCH_OP* opList,
                                                    unsigned long long flags, CUstream hStream) {
  SIM_ENTER("cuMemcpy3DBatchAsync_v2");
  return Batch3D(numOps, opList, nullptr, flags, hStream, false);
}

SIM_EXPORT CUresult CUDAAPI cuMemcpy3DBatchAsync_v2_ptsz(size_t numOps,
                                                         CUDA_MEMCPY3D_BATCH_OP* opList,
                                                         unsigned long long flags,
                                                         CUstream hStream) {
  SIM_ENTER("cuMemcpy3DBatchAsync_v2_ptsz");
  return Batch3D(numOps, opList, nullptr, flags, hStream, true);
}

SIM_EXPORT CUresult CUDAAPI cuMemcpy3DBatchAsync(size_t numOps, CUDA_MEMCPY3D_BATCH_OP* opList,
                                                 size_t* failIdx, unsigned long long flags,
                                                 CUstream hStream) {
  SIM_ENTER("cuMemcpy3DBatchAsync");
  return Batch3D(numOps, opList, failIdx, flags, hStream, false);
}

SIM_EXPORT CUresult CUDAAPI cuMemcpy3DBatchAsync_ptsz(size_t numOps, CUDA_MEMCPY3D_BATCH_OP* opList,
                                                      size_t* failIdx, unsigned long long flags,
                                                      CUstream hStream) {
  SIM_ENTER("cuMemcpy3DBatchAsync_ptsz");
  return Batch3D(numOps, opList, failIdx, flags, hStream, true);
}
