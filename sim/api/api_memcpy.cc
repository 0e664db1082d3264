// memcpy and memset entry points, every legacy and per-thread variant.
// Each is written out in full so the cuGetProcAddress generator sees it.
#include "sim/api/api_common.h"
#include "sim/engine/copy_engine.h"

using namespace vgpu::sim;  // NOLINT: entry points below are the C ABI

namespace {

constexpr CUmemorytype kU = CU_MEMORYTYPE_UNIFIED;
constexpr CUmemorytype kD = CU_MEMORYTYPE_DEVICE;
constexpr CUmemorytype kH = CU_MEMORYTYPE_HOST;

CUresult Copy1D(CUmemorytype dk, CUdeviceptr dst, CUmemorytype sk, CUdeviceptr src, size_t n,
                CUstream h, bool ptds, Sync sync) {
  if (n == 0) return CUDA_SUCCESS;
  Endpoint d, s;
  if (CUresult r = ResolveEndpoint(dk, dst, n, &d); r != CUDA_SUCCESS) return r;
  if (CUresult r = ResolveEndpoint(sk, src, n, &s); r != CUDA_SUCCESS) return r;
  return QueueCopy(h, ptds, sync, d, n, s, n, n, 1);
}

CUdeviceptr P(const void* p) { return reinterpret_cast<CUdeviceptr>(p); }

}  // namespace

SIM_EXPORT CUresult CUDAAPI cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  SIM_ENTER("cuMemcpy");
  return Copy1D(kU, dst, kU, src, n, nullptr, kLegacy, Sync::kHost);
}

SIM_EXPORT CUresult CUDAAPI cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  SIM_ENTER("cuMemcpy_ptds");
  return Copy1D(kU, dst, kU, src, n, nullptr, kPerThread, Sync::kHost);
}

SIM_EXPORT CUresult CUDAAPI cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t n) {
  SIM_ENTER("cuMemcpyHtoD_v2");
  return Copy1D(kD, dst, kH, P(src), n, nullptr, kLegacy, Sync::kHost);
}

SIM_EXPORT CUresult CUDAAPI cuMemcpyHtoD_v2_ptds(CUdeviceptr dst, const void* src, size_t n) {
  SIM_ENTER("cuMemcpyHtoD_v2_ptds");
  return Copy1D(kD, dst, kH, P(src), n, nullptr, kPerThread, Sync::kHost);
}

SIM_EXPORT CUresult CUDAAPI cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t n) {
  SIM_ENTER("cuMemcpyDtoH_v2");
  return Copy1D(kH, P(dst), kD, src, n, nullptr, kLegacy, Sync::kHost);
}

SIM_EXPORT CUresult CUDAAPI cuMemcpyDtoH_v2_ptds(void* dst, CUdeviceptr src, size_t n) {
  SIM_ENTER("cuMemcpyDtoH_v2_ptds");
  return Copy1D(kH, P(dst), kD, src, n, nullptr, kPerThread, Sync::kHost);
}

SIM_EXPORT CUresult CUDAAPI cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  SIM_ENTER("cuMemcpyDtoD_v2");
  return Copy1D(kD, dst, kD, src, n, nullptr, kLegacy, Sync::kHost);
}

SIM_EXPORT CUresult CUDAAPI cuMemcpyDtoD_v2_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  SIM_ENTER("cuMemcpyDtoD_v2_ptds");
  return Copy1D(kD, dst, kD, src, n, nullptr, kPerThread, Sync::kHost);
}

SIM_EXPORT CUresult CUDAAPI cuMemcpyPeer(CUdeviceptr dst, CUcontext dc, CUdeviceptr src, CUcontext sc, size_t n) {
  SIM_ENTER("cuMemcpyPeer");
  return Copy1D(kD, dst, kD, src, n, nullptr, kLegacy, Sync::kHost);
}

SIM_EXPORT CUresult CUDAAPI cuMemcpyPeer_ptds(CUdeviceptr dst, CUcontext dc, CUdeviceptr src, CUcontext sc, size_t n) {
  SIM_ENTER("cuMemcpyPeer_ptds");
  return Copy1D(kD, dst, kD, src, n, nullptr, kPerThread, Sync::kHost);
}

SIM_EXPORT CUresult CUDAAPI cuMemcpy2D_v2(const CUDA_MEMCPY2D* c) {
  SIM_ENTER("cuMemcpy2D_v2");
  return Copy2D(c, nullptr, kLegacy, Sync::kHost);
}

SIM_EXPORT CUresult CUDAAPI cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D* c) {
  SIM_ENTER("cuMemcpy2D_v2_ptds");
  return Copy2D(c, nullptr, kPerThread, Sync::kHost);
}

SIM_EXPORT CUresult CUDAAPI cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D* c) {
  SIM_ENTER("cuMemcpy2DUnaligned_v2");
  return Copy2D(c, nullptr, kLegacy, Sync::kHost);
}

SIM_EXPORT CUresult CUDAAPI cuMemcpy2DUnaligned_v2_ptds(const CUDA_MEMCPY2D* c) {
  SIM_ENTER("cuMemcpy2DUnaligned_v2_ptds");
  return Copy2D(c, nullptr, kPerThread, Sync::kHost);
}

SIM_EXPORT CUresult CUDAAPI cuMemcpy3D_v2(const CUDA_MEMCPY3D* c) {
  SIM_ENTER("cuMemcpy3D_v2");
  return Copy3D(c, nullptr, kLegacy, Sync::kHost);
}

SIM_EXPORT CUresult CUDAAPI cuMemcpy3D_v2_ptds(const CUDA_MEMCPY3D* c) {
  SIM_ENTER("cuMemcpy3D_v2_ptds");
  return Copy3D(c, nullptr, kPerThread, Sync::kHost);
}

SIM_EXPORT CUresult CUDAAPI cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h) {
  SIM_ENTER("cuMemcpyAsync");
  return Copy1D(kU, dst, kU, src, n, h, kLegacy, Sync::kAsync);
}

SIM_EXPORT CUresult CUDAAPI cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h) {
  SIM_ENTER("cuMemcpyAsync_ptsz");
  return Copy1D(kU, dst, kU, src, n, h, kPerThread, Sync::kAsync);
}

SIM_EXPORT CUresult CUDAAPI cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t n, CUstream h) {
  SIM_ENTER("cuMemcpyHtoDAsync_v2");
  return Copy1D(kD, dst, kH, P(src), n, h, kLegacy, Sync::kAsync);
}

SIM_EXPORT CUresult CUDAAPI cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dst, const void* src, size_t n, CUstream h) {
  SIM_ENTER("cuMemcpyHtoDAsync_v2_ptsz");
  return Copy1D(kD, dst, kH, P(src), n, h, kPerThread, Sync::kAsync);
}

SIM_EXPORT CUresult CUDAAPI cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t n, CUstream h) {
  SIM_ENTER("cuMemcpyDtoHAsync_v2");
  return Copy1D(kH, P(dst), kD, src, n, h, kLegacy, Sync::kAsync);
}

SIM_EXPORT CUresult CUDAAPI cuMemcpyDtoHAsync_v2_ptsz(void* dst, CUdeviceptr src, size_t n, CUstream h) {
  SIM_ENTER("cuMemcpyDtoHAsync_v2_ptsz");
  return Copy1D(kH, P(dst), kD, src, n, h, kPerThread, Sync::kAsync);
}

SIM_EXPORT CUresult CUDAAPI cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h) {
  SIM_ENTER("cuMemcpyDtoDAsync_v2");
  return Copy1D(kD, dst, kD, src, n, h, kLegacy, Sync::kAsync);
}

SIM_EXPORT CUresult CUDAAPI cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h) {
  SIM_ENTER("cuMemcpyDtoDAsync_v2_ptsz");
  return Copy1D(kD, dst, kD, src, n, h, kPerThread, Sync::kAsync);
}

SIM_EXPORT CUresult CUDAAPI cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext dc, CUdeviceptr src, CUcontext sc, size_t n, CUstream h) {
  SIM_ENTER("cuMemcpyPeerAsync");
  return Copy1D(kD, dst, kD, src, n, h, kLegacy, Sync::kAsync);
}

SIM_EXPORT CUresult CUDAAPI cuMemcpyPeerAsync_ptsz(CUdeviceptr dst, CUcontext dc, CUdeviceptr src, CUcontext sc, size_t n, CUstream h) {
  SIM_ENTER("cuMemcpyPeerAsync_ptsz");
  return Copy1D(kD, dst, kD, src, n, h, kPerThread, Sync::kAsync);
}

SIM_EXPORT CUresult CUDAAPI cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D* c, CUstream h) {
  SIM_ENTER("cuMemcpy2DAsync_v2");
  return Copy2D(c, h, kLegacy, Sync::kAsync);
}

SIM_EXPORT CUresult CUDAAPI cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D* c, CUstream h) {
  SIM_ENTER("cuMemcpy2DAsync_v2_ptsz");
  return Copy2D(c, h, kPerThread, Sync::kAsync);
}

SIM_EXPORT CUresult CUDAAPI cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D* c, CUstream h) {
  SIM_ENTER("cuMemcpy3DAsync_v2");
  return Copy3D(c, h, kLegacy, Sync::kAsync);
}

SIM_EXPORT CUresult CUDAAPI cuMemcpy3DAsync_v2_ptsz(const CUDA_MEMCPY3D* c, CUstream h) {
  SIM_ENTER("cuMemcpy3DAsync_v2_ptsz");
  return Copy3D(c, h, kPerThread, Sync::kAsync);
}

SIM_EXPORT CUresult CUDAAPI cuMemsetD8_v2(CUdeviceptr d, unsigned char v, size_t n) {
  SIM_ENTER("cuMemsetD8_v2");
  return QueueSet(nullptr, kLegacy, Sync::kAsync, d, 0, v, 1, n, 1, false);
}

SIM_EXPORT CUresult CUDAAPI cuMemsetD8_v2_ptds(CUdeviceptr d, unsigned char v, size_t n) {
  SIM_ENTER("cuMemsetD8_v2_ptds");
  return QueueSet(nullptr, kPerThread, Sync::kAsync, d, 0, v, 1, n, 1, false);
}

SIM_EXPORT CUresult CUDAAPI cuMemsetD16_v2(CUdeviceptr d, unsigned short v, size_t n) {
  SIM_ENTER("cuMemsetD16_v2");
  return QueueSet(nullptr, kLegacy, Sync::kAsync, d, 0, v, 2, n, 1, false);
}

SIM_EXPORT CUresult CUDAAPI cuMemsetD16_v2_ptds(CUdeviceptr d, unsigned short v, size_t n) {
  SIM_ENTER("cuMemsetD16_v2_ptds");
  return QueueSet(nullptr, kPerThread, Sync::kAsync, d, 0, v, 2, n, 1, false);
}

SIM_EXPORT CUresult CUDAAPI cuMemsetD32_v2(CUdeviceptr d, unsigned int v, size_t n) {
  SIM_ENTER("cuMemsetD32_v2");
  return QueueSet(nullptr, kLegacy, Sync::kAsync, d, 0, v, 4, n, 1, false);
}

SIM_EXPORT CUresult CUDAAPI cuMemsetD32_v2_ptds(CUdeviceptr d, unsigned int v, size_t n) {
  SIM_ENTER("cuMemsetD32_v2_ptds");
  return QueueSet(nullptr, kPerThread, Sync::kAsync, d, 0, v, 4, n, 1, false);
}

SIM_EXPORT CUresult CUDAAPI cuMemsetD2D8_v2(CUdeviceptr d, size_t pitch, unsigned char v, size_t w, size_t hh) {
  SIM_ENTER("cuMemsetD2D8_v2");
  return QueueSet(nullptr, kLegacy, Sync::kAsync, d, pitch, v, 1, w, hh, false);
}

SIM_EXPORT CUresult CUDAAPI cuMemsetD2D8_v2_ptds(CUdeviceptr d, size_t pitch, unsigned char v, size_t w, size_t hh) {
  SIM_ENTER("cuMemsetD2D8_v2_ptds");
  return QueueSet(nullptr, kPerThread, Sync::kAsync, d, pitch, v, 1, w, hh, false);
}

SIM_EXPORT CUresult CUDAAPI cuMemsetD2D16_v2(CUdeviceptr d, size_t pitch, unsigned short v, size_t w, size_t hh) {
  SIM_ENTER("cuMemsetD2D16_v2");
  return QueueSet(nullptr, kLegacy, Sync::kAsync, d, pitch, v, 2, w, hh, false);
}

SIM_EXPORT CUresult CUDAAPI cuMemsetD2D16_v2_ptds(CUdeviceptr d, size_t pitch, unsigned short v, size_t w, size_t hh) {
  SIM_ENTER("cuMemsetD2D16_v2_ptds");
  return QueueSet(nullptr, kPerThread, Sync::kAsync, d, pitch, v, 2, w, hh, false);
}

SIM_EXPORT CUresult CUDAAPI cuMemsetD2D32_v2(CUdeviceptr d, size_t pitch, unsigned int v, size_t w, size_t hh) {
  SIM_ENTER("cuMemsetD2D32_v2");
  return QueueSet(nullptr, kLegacy, Sync::kAsync, d, pitch, v, 4, w, hh, false);
}

SIM_EXPORT CUresult CUDAAPI cuMemsetD2D32_v2_ptds(CUdeviceptr d, size_t pitch, unsigned int v, size_t w, size_t hh) {
  SIM_ENTER("cuMemsetD2D32_v2_ptds");
  return QueueSet(nullptr, kPerThread, Sync::kAsync, d, pitch, v, 4, w, hh, false);
}

SIM_EXPORT CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream h) {
  SIM_ENTER("cuMemsetD8Async");
  return QueueSet(h, kLegacy, Sync::kAsync, d, 0, v, 1, n, 1, true);
}

SIM_EXPORT CUresult CUDAAPI cuMemsetD8Async_ptsz(CUdeviceptr d, unsigned char v, size_t n, CUstream h) {
  SIM_ENTER("cuMemsetD8Async_ptsz");
  return QueueSet(h, kPerThread, Sync::kAsync, d, 0, v, 1, n, 1, true);
}

SIM_EXPORT CUresult CUDAAPI cuMemsetD16Async(CUdeviceptr d, unsigned short v, size_t n, CUstream h) {
  SIM_ENTER("cuMemsetD16Async");
  return QueueSet(h, kLegacy, Sync::kAsync, d, 0, v, 2, n, 1, true);
}

SIM_EXPORT CUresult CUDAAPI cuMemsetD16Async_ptsz(CUdeviceptr d, unsigned short v, size_t n, CUstream h) {
  SIM_ENTER("cuMemsetD16Async_ptsz");
  return QueueSet(h, kPerThread, Sync::kAsync, d, 0, v, 2, n, 1, true);
}

SIM_EXPORT CUresult CUDAAPI cuMemsetD32Async(CUdeviceptr d, unsigned int v, size_t n, CUstream h) {
  SIM_ENTER("cuMemsetD32Async");
  return QueueSet(h, kLegacy, Sync::kAsync, d, 0, v, 4, n, 1, true);
}

SIM_EXPORT CUresult CUDAAPI cuMemsetD32Async_ptsz(CUdeviceptr d, unsigned int v, size_t n, CUstream h) {
  SIM_ENTER("cuMemsetD32Async_ptsz");
  return QueueSet(h, kPerThread, Sync::kAsync, d, 0, v, 4, n, 1, true);
}

SIM_EXPORT CUresult CUDAAPI cuMemsetD2D8Async(CUdeviceptr d, size_t pitch, unsigned char v, size_t w, size_t hh, CUstream h) {
  SIM_ENTER("cuMemsetD2D8Async");
  return QueueSet(h, kLegacy, Sync::kAsync, d, pitch, v, 1, w, hh, true);
}

SIM_EXPORT CUresult CUDAAPI cuMemsetD2D8Async_ptsz(CUdeviceptr d, size_t pitch, unsigned char v, size_t w, size_t hh, CUstream h) {
  SIM_ENTER("cuMemsetD2D8Async_ptsz");
  return QueueSet(h, kPerThread, Sync::kAsync, d, pitch, v, 1, w, hh, true);
}

SIM_EXPORT CUresult CUDAAPI cuMemsetD2D16Async(CUdeviceptr d, size_t pitch, unsigned short v, size_t w, size_t hh, CUstream h) {
  SIM_ENTER("cuMemsetD2D16Async");
  return QueueSet(h, kLegacy, Sync::kAsync, d, pitch, v, 2, w, hh, true);
}

SIM_EXPORT CUresult CUDAAPI cuMemsetD2D16Async_ptsz(CUdeviceptr d, size_t pitch, unsigned short v, size_t w, size_t hh, CUstream h) {
  SIM_ENTER("cuMemsetD2D16Async_ptsz");
  return QueueSet(h, kPerThread, Sync::kAsync, d, pitch, v, 2, w, hh, true);
}

SIM_EXPORT CUresult CUDAAPI cuMemsetD2D32Async(CUdeviceptr d, size_t pitch, unsigned int v, size_t w, size_t hh, CUstream h) {
  SIM_ENTER("cuMemsetD2D32Async");
  return QueueSet(h, kLegacy, Sync::kAsync, d, pitch, v, 4, w, hh, true);
}

SIM_EXPORT CUresult CUDAAPI cuMemsetD2D32Async_ptsz(CUdeviceptr d, size_t pitch, unsigned int v, size_t w, size_t hh, CUstream h) {
  SIM_ENTER("cuMemsetD2D32Async_ptsz");
  return QueueSet(h, kPerThread, Sync::kAsync, d, pitch, v, 4, w, hh, true);
}

// Copies to and from CUDA arrays, whose bytes are linear device memory.
namespace {

CUresult ArrayAt(CUarray a, size_t offset, size_t n, CUdeviceptr* out) {
  auto* arr = reinterpret_cast<ArrayObject*>(a);
  if (!IsLiveArray(arr)) return CUDA_ERROR_INVALID_HANDLE;
  size_t rows = (arr->desc.Height == 0 ? 1 : arr->desc.Height) * (arr->desc.Depth == 0 ? 1 : arr->desc.Depth);
  size_t total = arr->row_bytes * rows;
  if (offset > total || n > total - offset) return CUDA_ERROR_INVALID_VALUE;
  *out = arr->mem + offset;
  return CUDA_SUCCESS;
}

CUresult HtoA(CUarray a, size_t off, const void* src, size_t n, CUstream h, bool ptds, Sync sync) {
  CUdeviceptr d = 0;
  if (CUresult r = ArrayAt(a, off, n, &d); r != CUDA_SUCCESS) return r;
  return Copy1D(kD, d, kH, P(src), n, h, ptds, sync);
}

CUresult AtoH(void* dst, CUarray a, size_t off, size_t n, CUstream h, bool ptds, Sync sync) {
  CUdeviceptr s = 0;
  if (CUresult r = ArrayAt(a, off, n, &s); r != CUDA_SUCCESS) return r;
  return Copy1D(kH, P(dst), kD, s, n, h, ptds, sync);
}

CUresult DtoA(CUarray a, size_t off, CUdeviceptr src, size_t n, bool ptds) {
  CUdeviceptr d = 0;
  if (CUresult r = ArrayAt(a, off, n, &d); r != CUDA_SUCCESS) return r;
  return Copy1D(kD, d, kD, src, n, nullptr, ptds, Sync::kHost);
}

CUresult AtoD(CUdeviceptr dst, CUarray a, size_t off, size_t n, bool ptds) {
  CUdeviceptr s = 0;
  if (CUresult r = ArrayAt(a, off, n, &s); r != CUDA_SUCCESS) return r;
  return Copy1D(kD, dst, kD, s, n, nullptr, ptds, Sync::kHost);
}

CUresult AtoA(CUarray da, size_t doff, CUarray sa, size_t soff, size_t n, bool ptds) {
  CUdeviceptr d = 0, s = 0;
  if (CUresult r = ArrayAt(da, doff, n, &d); r != CUDA_SUCCESS) return r;
  if (CUresult r = ArrayAt(sa, soff, n, &s); r != CUDA_SUCCESS) return r;
  return Copy1D(kD, d, kD, s, n, nullptr, ptds, Sync::kHost);
}

}  // namespace

SIM_EXPORT CUresult CUDAAPI cuMemcpyHtoA_v2(CUarray dstArray, size_t dstOffset, const void* srcHost, size_t ByteCount) {
  SIM_ENTER("cuMemcpyHtoA_v2");
  return HtoA(dstArray, dstOffset, srcHost, ByteCount, nullptr, kLegacy, Sync::kHost);
}
SIM_EXPORT CUresult CUDAAPI cuMemcpyHtoA_v2_ptds(CUarray dstArray, size_t dstOffset, const void* srcHost, size_t ByteCount) {
  SIM_ENTER("cuMemcpyHtoA_v2_ptds");
  return HtoA(dstArray, dstOffset, srcHost, ByteCount, nullptr, kPerThread, Sync::kHost);
}
SIM_EXPORT CUresult CUDAAPI cuMemcpyAtoH_v2(void* dstHost, CUarray srcArray, size_t srcOffset, size_t ByteCount) {
  SIM_ENTER("cuMemcpyAtoH_v2");
  return AtoH(dstHost, srcArray, srcOffset, ByteCount, nullptr, kLegacy, Sync::kHost);
}
SIM_EXPORT CUresult CUDAAPI cuMemcpyAtoH_v2_ptds(void* dstHost, CUarray srcArray, size_t srcOffset, size_t ByteCount) {
  SIM_ENTER("cuMemcpyAtoH_v2_ptds");
  return AtoH(dstHost, srcArray, srcOffset, ByteCount, nullptr, kPerThread, Sync::kHost);
}
SIM_EXPORT CUresult CUDAAPI cuMemcpyHtoAAsync_v2(CUarray dstArray, size_t dstOffset, const void* srcHost, size_t ByteCount, CUstream hStream) {
  SIM_ENTER("cuMemcpyHtoAAsync_v2");
  return HtoA(dstArray, dstOffset, srcHost, ByteCount, hStream, kLegacy, Sync::kAsync);
}
SIM_EXPORT CUresult CUDAAPI cuMemcpyHtoAAsync_v2_ptsz(CUarray dstArray, size_t dstOffset, const void* srcHost, size_t ByteCount, CUstream hStream) {
  SIM_ENTER("cuMemcpyHtoAAsync_v2_ptsz");
  return HtoA(dstArray, dstOffset, srcHost, ByteCount, hStream, kPerThread, Sync::kAsync);
}
SIM_EXPORT CUresult CUDAAPI cuMemcpyAtoHAsync_v2(void* dstHost, CUarray srcArray, size_t srcOffset, size_t ByteCount, CUstream hStream) {
  SIM_ENTER("cuMemcpyAtoHAsync_v2");
  return AtoH(dstHost, srcArray, srcOffset, ByteCount, hStream, kLegacy, Sync::kAsync);
}
SIM_EXPORT CUresult CUDAAPI cuMemcpyAtoHAsync_v2_ptsz(void* dstHost, CUarray srcArray, size_t srcOffset, size_t ByteCount, CUstream hStream) {
  SIM_ENTER("cuMemcpyAtoHAsync_v2_ptsz");
  return AtoH(dstHost, srcArray, srcOffset, ByteCount, hStream, kPerThread, Sync::kAsync);
}
SIM_EXPORT CUresult CUDAAPI cuMemcpyDtoA_v2(CUarray dstArray, size_t dstOffset, CUdeviceptr srcDevice, size_t ByteCount) {
  SIM_ENTER("cuMemcpyDtoA_v2");
  return DtoA(dstArray, dstOffset, srcDevice, ByteCount, kLegacy);
}
SIM_EXPORT CUresult CUDAAPI cuMemcpyDtoA_v2_ptds(CUarray dstArray, size_t dstOffset, CUdeviceptr srcDevice, size_t ByteCount) {
  SIM_ENTER("cuMemcpyDtoA_v2_ptds");
  return DtoA(dstArray, dstOffset, srcDevice, ByteCount, kPerThread);
}
SIM_EXPORT CUresult CUDAAPI cuMemcpyAtoD_v2(CUdeviceptr dstDevice, CUarray srcArray, size_t srcOffset, size_t ByteCount) {
  SIM_ENTER("cuMemcpyAtoD_v2");
  return AtoD(dstDevice, srcArray, srcOffset, ByteCount, kLegacy);
}
SIM_EXPORT CUresult CUDAAPI cuMemcpyAtoD_v2_ptds(CUdeviceptr dstDevice, CUarray srcArray, size_t srcOffset, size_t ByteCount) {
  SIM_ENTER("cuMemcpyAtoD_v2_ptds");
  return AtoD(dstDevice, srcArray, srcOffset, ByteCount, kPerThread);
}
SIM_EXPORT CUresult CUDAAPI cuMemcpyAtoA_v2(CUarray dstArray, size_t dstOffset, CUarray srcArray, size_t srcOffset, size_t ByteCount) {
  SIM_ENTER("cuMemcpyAtoA_v2");
  return AtoA(dstArray, dstOffset, srcArray, srcOffset, ByteCount, kLegacy);
}
SIM_EXPORT CUresult CUDAAPI cuMemcpyAtoA_v2_ptds(CUarray dstArray, size_t dstOffset, CUarray srcArray, size_t srcOffset, size_t ByteCount) {
  SIM_ENTER("cuMemcpyAtoA_v2_ptds");
  return AtoA(dstArray, dstOffset, srcArray, srcOffset, ByteCount, kPerThread);
}
