// The unversioned (CUDA 2.x/3.0) names of entry points that later got a _v2:
// 32-bit device pointers and sizes (CUdeviceptr_v1 is unsigned int), declared
// by cuda.h only for the driver's own build. Each forwards to the _v2
// implementation; 32-bit arguments widen losslessly, so an address the v1 ABI
// can name is checked by the _v2 code like any other. Results that must fit
// 32 bits: sizes are clamped to 4 GiB - 1 (a 16 GiB device's total reads
// 4095 MiB, as drivers reported to CUDA 3.0 binaries); device addresses, which
// all lie above 4 GiB here, cannot be returned: CUDA_ERROR_NOT_SUPPORTED, as
// cuMemAlloc and cuModuleGetGlobal of that ABI already answer.
// Forwarding calls the exported _v2 entry point, so fault injection
// (VGPU_SIM_FAULTS) counts that call too.
#include <climits>
#include <map>
#include <mutex>

#include "sim/api/api_common.h"
#include "sim/engine/context.h"

using namespace vgpu::sim;  // NOLINT: entry points below are the C ABI

#undef cuMemcpyHtoD
#undef cuMemcpyDtoH
#undef cuMemcpyDtoD
#undef cuMemcpyDtoA
#undef cuMemcpyAtoD
#undef cuMemcpyHtoA
#undef cuMemcpyAtoH
#undef cuMemcpyAtoA
#undef cuMemcpyHtoAAsync
#undef cuMemcpyAtoHAsync
#undef cuMemcpyHtoDAsync
#undef cuMemcpyDtoHAsync
#undef cuMemcpyDtoDAsync
#undef cuMemsetD8
#undef cuMemsetD16
#undef cuMemsetD32
#undef cuMemsetD2D8
#undef cuMemsetD2D16
#undef cuMemsetD2D32
#undef cuMemFree
#undef cuMemAllocHost
#undef cuMemHostRegister
#undef cuCtxCreate
#undef cuDevicePrimaryCtxRelease
#undef cuDevicePrimaryCtxReset
#undef cuDevicePrimaryCtxSetFlags
#undef cuEventDestroy
#undef cuStreamDestroy
#undef cuMemcpy2D
#undef cuMemcpy2DUnaligned
#undef cuMemcpy2DAsync
#undef cuMemcpy3D
#undef cuMemcpy3DAsync
#undef cuMemGetInfo
#undef cuDeviceTotalMem
#undef cuMemAllocPitch
#undef cuMemGetAddressRange
#undef cuMemHostGetDevicePointer

namespace {

// cuda.h's CUDA_MEMCPY2D_v1 and CUDA_MEMCPY3D_v1 (driver-build only).
struct Memcpy2DV1 {
  unsigned int srcXInBytes, srcY;
  CUmemorytype srcMemoryType;
  const void* srcHost;
  unsigned int srcDevice;
  CUarray srcArray;
  unsigned int srcPitch;
  unsigned int dstXInBytes, dstY;
  CUmemorytype dstMemoryType;
  void* dstHost;
  unsigned int dstDevice;
  CUarray dstArray;
  unsigned int dstPitch;
  unsigned int WidthInBytes, Height;
};

struct Memcpy3DV1 {
  unsigned int srcXInBytes, srcY, srcZ, srcLOD;
  CUmemorytype srcMemoryType;
  const void* srcHost;
  unsigned int srcDevice;
  CUarray srcArray;
  void* reserved0;
  unsigned int srcPitch, srcHeight;
  unsigned int dstXInBytes, dstY, dstZ, dstLOD;
  CUmemorytype dstMemoryType;
  void* dstHost;
  unsigned int dstDevice;
  CUarray dstArray;
  void* reserved1;
  unsigned int dstPitch, dstHeight;
  unsigned int WidthInBytes, Height, Depth;
};

CUDA_MEMCPY2D Widen(const Memcpy2DV1& c) {
  CUDA_MEMCPY2D w{};
  w.srcXInBytes = c.srcXInBytes, w.srcY = c.srcY, w.srcMemoryType = c.srcMemoryType;
  w.srcHost = c.srcHost, w.srcDevice = c.srcDevice, w.srcArray = c.srcArray, w.srcPitch = c.srcPitch;
  w.dstXInBytes = c.dstXInBytes, w.dstY = c.dstY, w.dstMemoryType = c.dstMemoryType;
  w.dstHost = c.dstHost, w.dstDevice = c.dstDevice, w.dstArray = c.dstArray, w.dstPitch = c.dstPitch;
  w.WidthInBytes = c.WidthInBytes, w.Height = c.Height;
  return w;
}

CUDA_MEMCPY3D Widen(const Memcpy3DV1& c) {
  CUDA_MEMCPY3D w{};
  w.srcXInBytes = c.srcXInBytes, w.srcY = c.srcY, w.srcZ = c.srcZ, w.srcLOD = c.srcLOD;
  w.srcMemoryType = c.srcMemoryType, w.srcHost = c.srcHost, w.srcDevice = c.srcDevice;
  w.srcArray = c.srcArray, w.reserved0 = c.reserved0, w.srcPitch = c.srcPitch, w.srcHeight = c.srcHeight;
  w.dstXInBytes = c.dstXInBytes, w.dstY = c.dstY, w.dstZ = c.dstZ, w.dstLOD = c.dstLOD;
  w.dstMemoryType = c.dstMemoryType, w.dstHost = c.dstHost, w.dstDevice = c.dstDevice;
  w.dstArray = c.dstArray, w.reserved1 = c.reserved1, w.dstPitch = c.dstPitch, w.dstHeight = c.dstHeight;
  w.WidthInBytes = c.WidthInBytes, w.Height = c.Height, w.Depth = c.Depth;
  return w;
}

// CUDA_MEMCPY3D_PEER names the contexts too; with unified addressing the
// addresses alone locate the memory, so the copy is a 3D copy once the
// contexts are checked.
bool PeerToPlain(const CUDA_MEMCPY3D_PEER* p, CUDA_MEMCPY3D* w) {
  if (p == nullptr) return false;
  for (CUcontext c : {p->srcContext, p->dstContext}) {
    if (c != nullptr && !IsValidContext(c)) return false;
  }
  *w = CUDA_MEMCPY3D{};
  w->srcXInBytes = p->srcXInBytes, w->srcY = p->srcY, w->srcZ = p->srcZ, w->srcLOD = p->srcLOD;
  w->srcMemoryType = p->srcMemoryType, w->srcHost = p->srcHost, w->srcDevice = p->srcDevice;
  w->srcArray = p->srcArray, w->srcPitch = p->srcPitch, w->srcHeight = p->srcHeight;
  w->dstXInBytes = p->dstXInBytes, w->dstY = p->dstY, w->dstZ = p->dstZ, w->dstLOD = p->dstLOD;
  w->dstMemoryType = p->dstMemoryType, w->dstHost = p->dstHost, w->dstDevice = p->dstDevice;
  w->dstArray = p->dstArray, w->dstPitch = p->dstPitch, w->dstHeight = p->dstHeight;
  w->WidthInBytes = p->WidthInBytes, w->Height = p->Height, w->Depth = p->Depth;
  return true;
}

unsigned int Clamp32(size_t v) { return v > UINT_MAX ? UINT_MAX : static_cast<unsigned int>(v); }

// cuCtxAttach's usage counts beyond the creating reference.
std::mutex g_attach_mu;
std::map<Context*, int>* g_attached = new std::map<Context*, int>();

}  // namespace

extern "C" CUresult CUDAAPI cuMemcpyHtoD(unsigned int dst, const void* src, unsigned int n);
extern "C" CUresult CUDAAPI cuMemcpyDtoH(void* dst, unsigned int src, unsigned int n);
extern "C" CUresult CUDAAPI cuMemcpyDtoD(unsigned int dst, unsigned int src, unsigned int n);
extern "C" CUresult CUDAAPI cuMemcpyDtoA(CUarray dst, unsigned int off, unsigned int src, unsigned int n);
extern "C" CUresult CUDAAPI cuMemcpyAtoD(unsigned int dst, CUarray src, unsigned int off, unsigned int n);
extern "C" CUresult CUDAAPI cuMemcpyHtoA(CUarray dst, unsigned int off, const void* src, unsigned int n);
extern "C" CUresult CUDAAPI cuMemcpyAtoH(void* dst, CUarray src, unsigned int off, unsigned int n);
extern "C" CUresult CUDAAPI cuMemcpyAtoA(CUarray dst, unsigned int doff, CUarray src, unsigned int soff, unsigned int n);
extern "C" CUresult CUDAAPI cuMemcpyHtoAAsync(CUarray dst, unsigned int off, const void* src, unsigned int n, CUstream h);
extern "C" CUresult CUDAAPI cuMemcpyAtoHAsync(void* dst, CUarray src, unsigned int off, unsigned int n, CUstream h);
extern "C" CUresult CUDAAPI cuMemcpyHtoDAsync(unsigned int dst, const void* src, unsigned int n, CUstream h);
extern "C" CUresult CUDAAPI cuMemcpyDtoHAsync(void* dst, unsigned int src, unsigned int n, CUstream h);
extern "C" CUresult CUDAAPI cuMemcpyDtoDAsync(unsigned int dst, unsigned int src, unsigned int n, CUstream h);
extern "C" CUresult CUDAAPI cuMemsetD8(unsigned int dst, unsigned char v, unsigned int n);
extern "C" CUresult CUDAAPI cuMemsetD16(unsigned int dst, unsigned short v, unsigned int n);
extern "C" CUresult CUDAAPI cuMemsetD32(unsigned int dst, unsigned int v, unsigned int n);
extern "C" CUresult CUDAAPI cuMemsetD2D8(unsigned int dst, unsigned int pitch, unsigned char v, unsigned int w, unsigned int h);
extern "C" CUresult CUDAAPI cuMemsetD2D16(unsigned int dst, unsigned int pitch, unsigned short v, unsigned int w, unsigned int h);
extern "C" CUresult CUDAAPI cuMemsetD2D32(unsigned int dst, unsigned int pitch, unsigned int v, unsigned int w, unsigned int h);
extern "C" CUresult CUDAAPI cuMemFree(unsigned int dptr);
extern "C" CUresult CUDAAPI cuMemAllocHost(void** pp, unsigned int bytesize);
extern "C" CUresult CUDAAPI cuMemHostRegister(void* p, size_t bytesize, unsigned int flags);
extern "C" CUresult CUDAAPI cuCtxCreate(CUcontext* pctx, unsigned int flags, CUdevice dev);
extern "C" CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice dev);
extern "C" CUresult CUDAAPI cuDevicePrimaryCtxReset(CUdevice dev);
extern "C" CUresult CUDAAPI cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags);
extern "C" CUresult CUDAAPI cuEventDestroy(CUevent e);
extern "C" CUresult CUDAAPI cuStreamDestroy(CUstream s);
extern "C" CUresult CUDAAPI cuMemcpy2D(const Memcpy2DV1* c);
extern "C" CUresult CUDAAPI cuMemcpy2DUnaligned(const Memcpy2DV1* c);
extern "C" CUresult CUDAAPI cuMemcpy2DAsync(const Memcpy2DV1* c, CUstream h);
extern "C" CUresult CUDAAPI cuMemcpy3D(const Memcpy3DV1* c);
extern "C" CUresult CUDAAPI cuMemcpy3DAsync(const Memcpy3DV1* c, CUstream h);
extern "C" CUresult CUDAAPI cuMemGetInfo(unsigned int* free, unsigned int* total);
extern "C" CUresult CUDAAPI cuDeviceTotalMem(unsigned int* bytes, CUdevice dev);
extern "C" CUresult CUDAAPI cuMemAllocPitch(unsigned int* dptr, unsigned int* pitch, unsigned int width,
                                            unsigned int height, unsigned int elem);
extern "C" CUresult CUDAAPI cuMemGetAddressRange(unsigned int* pbase, unsigned int* psize, unsigned int dptr);
extern "C" CUresult CUDAAPI cuMemHostGetDevicePointer(unsigned int* pdptr, void* p, unsigned int flags);
// Per-thread and internal names cuda.h does not declare in a client build.
extern "C" CUresult CUDAAPI cuMemcpy3D_v2_ptds(const CUDA_MEMCPY3D* c);
extern "C" CUresult CUDAAPI cuMemcpy3DAsync_v2_ptsz(const CUDA_MEMCPY3D* c, CUstream h);
extern "C" CUresult CUDAAPI cuCtxCreate_v2(CUcontext* pctx, unsigned int flags, CUdevice dev);
extern "C" CUresult CUDAAPI cuCtxAttach(CUcontext* pctx, unsigned int flags);
extern "C" CUresult CUDAAPI cuCtxDetach(CUcontext ctx);

SIM_EXPORT CUresult CUDAAPI cuMemcpy2D(const Memcpy2DV1* c) {
  SIM_ENTER("cuMemcpy2D");
  if (c == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const CUDA_MEMCPY2D w = Widen(*c);
  return cuMemcpy2D_v2(&w);
}

SIM_EXPORT CUresult CUDAAPI cuMemcpy2DUnaligned(const Memcpy2DV1* c) {
  SIM_ENTER("cuMemcpy2DUnaligned");
  if (c == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const CUDA_MEMCPY2D w = Widen(*c);
  return cuMemcpy2DUnaligned_v2(&w);
}

SIM_EXPORT CUresult CUDAAPI cuMemcpy2DAsync(const Memcpy2DV1* c, CUstream h) {
  SIM_ENTER("cuMemcpy2DAsync");
  if (c == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const CUDA_MEMCPY2D w = Widen(*c);
  return cuMemcpy2DAsync_v2(&w, h);
}

SIM_EXPORT CUresult CUDAAPI cuMemcpy3D(const Memcpy3DV1* c) {
  SIM_ENTER("cuMemcpy3D");
  if (c == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const CUDA_MEMCPY3D w = Widen(*c);
  return cuMemcpy3D_v2(&w);
}

SIM_EXPORT CUresult CUDAAPI cuMemcpy3DAsync(const Memcpy3DV1* c, CUstream h) {
  SIM_ENTER("cuMemcpy3DAsync");
  if (c == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const CUDA_MEMCPY3D w = Widen(*c);
  return cuMemcpy3DAsync_v2(&w, h);
}

SIM_EXPORT CUresult CUDAAPI cuMemcpy3DPeer(const CUDA_MEMCPY3D_PEER* p) {
  SIM_ENTER("cuMemcpy3DPeer");
  CUDA_MEMCPY3D w;
  return PeerToPlain(p, &w) ? cuMemcpy3D_v2(&w) : CUDA_ERROR_INVALID_VALUE;
}

SIM_EXPORT CUresult CUDAAPI cuMemcpy3DPeer_ptds(const CUDA_MEMCPY3D_PEER* p) {
  SIM_ENTER("cuMemcpy3DPeer_ptds");
  CUDA_MEMCPY3D w;
  return PeerToPlain(p, &w) ? cuMemcpy3D_v2_ptds(&w) : CUDA_ERROR_INVALID_VALUE;
}

SIM_EXPORT CUresult CUDAAPI cuMemcpy3DPeerAsync(const CUDA_MEMCPY3D_PEER* p, CUstream h) {
  SIM_ENTER("cuMemcpy3DPeerAsync");
  CUDA_MEMCPY3D w;
  return PeerToPlain(p, &w) ? cuMemcpy3DAsync_v2(&w, h) : CUDA_ERROR_INVALID_VALUE;
}

SIM_EXPORT CUresult CUDAAPI cuMemcpy3DPeerAsync_ptsz(const CUDA_MEMCPY3D_PEER* p, CUstream h) {
  SIM_ENTER("cuMemcpy3DPeerAsync_ptsz");
  CUDA_MEMCPY3D w;
  return PeerToPlain(p, &w) ? cuMemcpy3DAsync_v2_ptsz(&w, h) : CUDA_ERROR_INVALID_VALUE;
}

SIM_EXPORT CUresult CUDAAPI cuMemGetInfo(unsigned int* free, unsigned int* total) {
  SIM_ENTER("cuMemGetInfo");
  size_t f = 0, t = 0;
  if (CUresult r = cuMemGetInfo_v2(free != nullptr ? &f : nullptr, total != nullptr ? &t : nullptr);
      r != CUDA_SUCCESS) {
    return r;
  }
  if (free != nullptr) *free = Clamp32(f);
  if (total != nullptr) *total = Clamp32(t);
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuDeviceTotalMem(unsigned int* bytes, CUdevice dev) {
  SIM_ENTER("cuDeviceTotalMem");
  if (bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  size_t t = 0;
  if (CUresult r = cuDeviceTotalMem_v2(&t, dev); r != CUDA_SUCCESS) return r;
  *bytes = Clamp32(t);
  return CUDA_SUCCESS;
}

// Like cuMemAlloc of this ABI: the arguments are checked, but no device
// address fits the 32-bit result.
SIM_EXPORT CUresult CUDAAPI cuMemAllocPitch(unsigned int* dptr, unsigned int* pitch, unsigned int width,
                                            unsigned int height, unsigned int elem) {
  SIM_ENTER("cuMemAllocPitch");
  if (dptr == nullptr || pitch == nullptr || width == 0 || height == 0) return CUDA_ERROR_INVALID_VALUE;
  if (elem != 4 && elem != 8 && elem != 16) return CUDA_ERROR_INVALID_VALUE;
  return CurrentContextOrNull() != nullptr ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_INVALID_CONTEXT;
}

SIM_EXPORT CUresult CUDAAPI cuMemGetAddressRange(unsigned int* pbase, unsigned int* psize, unsigned int dptr) {
  SIM_ENTER("cuMemGetAddressRange");
  CUdeviceptr base = 0;
  size_t size = 0;
  if (CUresult r = cuMemGetAddressRange_v2(&base, &size, dptr); r != CUDA_SUCCESS) return r;
  if (base > UINT_MAX || size > UINT_MAX) return CUDA_ERROR_NOT_SUPPORTED;
  if (pbase != nullptr) *pbase = static_cast<unsigned int>(base);
  if (psize != nullptr) *psize = static_cast<unsigned int>(size);
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuMemHostGetDevicePointer(unsigned int* pdptr, void* p, unsigned int flags) {
  SIM_ENTER("cuMemHostGetDevicePointer");
  if (pdptr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUdeviceptr d = 0;
  if (CUresult r = cuMemHostGetDevicePointer_v2(&d, p, flags); r != CUDA_SUCCESS) return r;
  if (d > UINT_MAX) return CUDA_ERROR_NOT_SUPPORTED;
  *pdptr = static_cast<unsigned int>(d);
  return CUDA_SUCCESS;
}

// CUDA 1.x usage counting: attach takes another reference to the current
// context, detach drops one and destroys the context with the last.
SIM_EXPORT CUresult CUDAAPI cuCtxAttach(CUcontext* pctx, unsigned int flags) {
  SIM_ENTER("cuCtxAttach");
  if (pctx == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  Context* c = CurrentContextOrNull();
  if (c == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  std::lock_guard<std::mutex> lock(g_attach_mu);
  ++(*g_attached)[c];
  *pctx = AsHandle(c);
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuCtxDetach(CUcontext ctx) {
  SIM_ENTER("cuCtxDetach");
  if (!IsValidContext(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  {
    std::lock_guard<std::mutex> lock(g_attach_mu);
    auto it = g_attached->find(AsContext(ctx));
    if (it != g_attached->end()) {
      if (--it->second == 0) g_attached->erase(it);
      return CUDA_SUCCESS;
    }
  }
  return cuCtxDestroy_v2(ctx);
}

SIM_EXPORT CUresult CUDAAPI cuMemcpyHtoD(unsigned int dst, const void* src, unsigned int n) {
  SIM_ENTER("cuMemcpyHtoD");
  return cuMemcpyHtoD_v2(dst, src, n);
}

SIM_EXPORT CUresult CUDAAPI cuMemcpyDtoH(void* dst, unsigned int src, unsigned int n) {
  SIM_ENTER("cuMemcpyDtoH");
  return cuMemcpyDtoH_v2(dst, src, n);
}

SIM_EXPORT CUresult CUDAAPI cuMemcpyDtoD(unsigned int dst, unsigned int src, unsigned int n) {
  SIM_ENTER("cuMemcpyDtoD");
  return cuMemcpyDtoD_v2(dst, src, n);
}

SIM_EXPORT CUresult CUDAAPI cuMemcpyDtoA(CUarray dst, unsigned int off, unsigned int src, unsigned int n) {
  SIM_ENTER("cuMemcpyDtoA");
  return cuMemcpyDtoA_v2(dst, off, src, n);
}

SIM_EXPORT CUresult CUDAAPI cuMemcpyAtoD(unsigned int dst, CUarray src, unsigned int off, unsigned int n) {
  SIM_ENTER("cuMemcpyAtoD");
  return cuMemcpyAtoD_v2(dst, src, off, n);
}

SIM_EXPORT CUresult CUDAAPI cuMemcpyHtoA(CUarray dst, unsigned int off, const void* src, unsigned int n) {
  SIM_ENTER("cuMemcpyHtoA");
  return cuMemcpyHtoA_v2(dst, off, src, n);
}

SIM_EXPORT CUresult CUDAAPI cuMemcpyAtoH(void* dst, CUarray src, unsigned int off, unsigned int n) {
  SIM_ENTER("cuMemcpyAtoH");
  return cuMemcpyAtoH_v2(dst, src, off, n);
}

SIM_EXPORT CUresult CUDAAPI cuMemcpyAtoA(CUarray dst, unsigned int doff, CUarray src, unsigned int soff, unsigned int n) {
  SIM_ENTER("cuMemcpyAtoA");
  return cuMemcpyAtoA_v2(dst, doff, src, soff, n);
}

SIM_EXPORT CUresult CUDAAPI cuMemcpyHtoAAsync(CUarray dst, unsigned int off, const void* src, unsigned int n, CUstream h) {
  SIM_ENTER("cuMemcpyHtoAAsync");
  return cuMemcpyHtoAAsync_v2(dst, off, src, n, h);
}

SIM_EXPORT CUresult CUDAAPI cuMemcpyAtoHAsync(void* dst, CUarray src, unsigned int off, unsigned int n, CUstream h) {
  SIM_ENTER("cuMemcpyAtoHAsync");
  return cuMemcpyAtoHAsync_v2(dst, src, off, n, h);
}

SIM_EXPORT CUresult CUDAAPI cuMemcpyHtoDAsync(unsigned int dst, const void* src, unsigned int n, CUstream h) {
  SIM_ENTER("cuMemcpyHtoDAsync");
  return cuMemcpyHtoDAsync_v2(dst, src, n, h);
}

SIM_EXPORT CUresult CUDAAPI cuMemcpyDtoHAsync(void* dst, unsigned int src, unsigned int n, CUstream h) {
  SIM_ENTER("cuMemcpyDtoHAsync");
  return cuMemcpyDtoHAsync_v2(dst, src, n, h);
}

SIM_EXPORT CUresult CUDAAPI cuMemcpyDtoDAsync(unsigned int dst, unsigned int src, unsigned int n, CUstream h) {
  SIM_ENTER("cuMemcpyDtoDAsync");
  return cuMemcpyDtoDAsync_v2(dst, src, n, h);
}

SIM_EXPORT CUresult CUDAAPI cuMemsetD8(unsigned int dst, unsigned char v, unsigned int n) {
  SIM_ENTER("cuMemsetD8");
  return cuMemsetD8_v2(dst, v, n);
}

SIM_EXPORT CUresult CUDAAPI cuMemsetD16(unsigned int dst, unsigned short v, unsigned int n) {
  SIM_ENTER("cuMemsetD16");
  return cuMemsetD16_v2(dst, v, n);
}

SIM_EXPORT CUresult CUDAAPI cuMemsetD32(unsigned int dst, unsigned int v, unsigned int n) {
  SIM_ENTER("cuMemsetD32");
  return cuMemsetD32_v2(dst, v, n);
}

SIM_EXPORT CUresult CUDAAPI cuMemsetD2D8(unsigned int dst, unsigned int pitch, unsigned char v, unsigned int w, unsigned int h) {
  SIM_ENTER("cuMemsetD2D8");
  return cuMemsetD2D8_v2(dst, pitch, v, w, h);
}

SIM_EXPORT CUresult CUDAAPI cuMemsetD2D16(unsigned int dst, unsigned int pitch, unsigned short v, unsigned int w, unsigned int h) {
  SIM_ENTER("cuMemsetD2D16");
  return cuMemsetD2D16_v2(dst, pitch, v, w, h);
}

SIM_EXPORT CUresult CUDAAPI cuMemsetD2D32(unsigned int dst, unsigned int pitch, unsigned int v, unsigned int w, unsigned int h) {
  SIM_ENTER("cuMemsetD2D32");
  return cuMemsetD2D32_v2(dst, pitch, v, w, h);
}

SIM_EXPORT CUresult CUDAAPI cuMemFree(unsigned int dptr) {
  SIM_ENTER("cuMemFree");
  return cuMemFree_v2(dptr);
}

SIM_EXPORT CUresult CUDAAPI cuMemAllocHost(void** pp, unsigned int bytesize) {
  SIM_ENTER("cuMemAllocHost");
  return cuMemAllocHost_v2(pp, bytesize);
}

SIM_EXPORT CUresult CUDAAPI cuMemHostRegister(void* p, size_t bytesize, unsigned int flags) {
  SIM_ENTER("cuMemHostRegister");
  return cuMemHostRegister_v2(p, bytesize, flags);
}

SIM_EXPORT CUresult CUDAAPI cuCtxCreate(CUcontext* pctx, unsigned int flags, CUdevice dev) {
  SIM_ENTER("cuCtxCreate");
  return cuCtxCreate_v2(pctx, flags, dev);
}

SIM_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice dev) {
  SIM_ENTER("cuDevicePrimaryCtxRelease");
  return cuDevicePrimaryCtxRelease_v2(dev);
}

SIM_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxReset(CUdevice dev) {
  SIM_ENTER("cuDevicePrimaryCtxReset");
  return cuDevicePrimaryCtxReset_v2(dev);
}

SIM_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags) {
  SIM_ENTER("cuDevicePrimaryCtxSetFlags");
  return cuDevicePrimaryCtxSetFlags_v2(dev, flags);
}

SIM_EXPORT CUresult CUDAAPI cuEventDestroy(CUevent e) {
  SIM_ENTER("cuEventDestroy");
  return cuEventDestroy_v2(e);
}

SIM_EXPORT CUresult CUDAAPI cuStreamDestroy(CUstream s) {
  SIM_ENTER("cuStreamDestroy");
  return cuStreamDestroy_v2(s);
}
