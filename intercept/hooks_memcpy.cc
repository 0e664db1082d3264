// Copies and memsets: pass-through bodies inside the quiesce gate, so that no
// copy touches device memory while the process is suspended (docs/vmm.md).
// Generated from cuda.h's declarations (every form and its per-thread twin).
#include "driver/real_driver.h"
#include "intercept/hooks.h"
#include "intercept/residency.h"

VGPU_HOOK(cuMemcpy) CUresult CUDAAPI vgpu_hook_cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount) {
  vgpu::residency::GateGuard gate;
  return REAL_CALL(cuMemcpy, dst, src, ByteCount);
}

VGPU_HOOK(cuMemcpy_ptds) CUresult CUDAAPI vgpu_hook_cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount) {
  vgpu::residency::GateGuard gate;
  return REAL_CALL(cuMemcpy_ptds, dst, src, ByteCount);
}

VGPU_HOOK(cuMemcpyAsync) CUresult CUDAAPI vgpu_hook_cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream) {
  vgpu::residency::GateGuard gate;
  return REAL_CALL(cuMemcpyAsync, dst, src, ByteCount, hStream);
}

VGPU_HOOK(cuMemcpyAsync_ptsz) CUresult CUDAAPI vgpu_hook_cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream) {
  vgpu::residency::GateGuard gate;
  return REAL_CALL(cuMemcpyAsync_ptsz, dst, src, ByteCount, hStream);
}

VGPU_HOOK(cuMemcpyPeer) CUresult CUDAAPI vgpu_hook_cuMemcpyPeer(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice, CUcontext srcContext, size_t ByteCount) {
  vgpu::residency::GateGuard gate;
  return REAL_CALL(cuMemcpyPeer, dstDevice, dstContext, srcDevice, srcContext, ByteCount);
}

VGPU_HOOK(cuMemcpyPeer_ptds) CUresult CUDAAPI vgpu_hook_cuMemcpyPeer_ptds(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice, CUcontext srcContext, size_t ByteCount) {
  vgpu::residency::GateGuard gate;
  return REAL_CALL(cuMemcpyPeer_ptds, dstDevice, dstContext, srcDevice, srcContext, ByteCount);
}

VGPU_HOOK(cuMemcpyPeerAsync) CUresult CUDAAPI vgpu_hook_cuMemcpyPeerAsync(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice, CUcontext srcContext, size_t ByteCount, CUstream hStream) {
  vgpu::residency::GateGuard gate;
  return REAL_CALL(cuMemcpyPeerAsync, dstDevice, dstContext, srcDevice, srcContext, ByteCount, hStream);
}

VGPU_HOOK(cuMemcpyPeerAsync_ptsz) CUresult CUDAAPI vgpu_hook_cuMemcpyPeerAsync_ptsz(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice, CUcontext srcContext, size_t ByteCount, CUstream hStream) {
  vgpu::residency::GateGuard gate;
  return REAL_CALL(cuMemcpyPeerAsync_ptsz, dstDevice, dstContext, srcDevice, srcContext, ByteCount, hStream);
}

VGPU_HOOK(cuMemcpyHtoD_v2) CUresult CUDAAPI vgpu_hook_cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount) {
  vgpu::residency::GateGuard gate;
  return REAL_CALL(cuMemcpyHtoD_v2, dstDevice, srcHost, ByteCount);
}

VGPU_HOOK(cuMemcpyHtoD_v2_ptds) CUresult CUDAAPI vgpu_hook_cuMemcpyHtoD_v2_ptds(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount) {
  vgpu::residency::GateGuard gate;
  return REAL_CALL(cuMemcpyHtoD_v2_ptds, dstDevice, srcHost, ByteCount);
}

VGPU_HOOK(cuMemcpyDtoH_v2) CUresult CUDAAPI vgpu_hook_cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount) {
  vgpu::residency::GateGuard gate;
  return REAL_CALL(cuMemcpyDtoH_v2, dstHost, srcDevice, ByteCount);
}

VGPU_HOOK(cuMemcpyDtoH_v2_ptds) CUresult CUDAAPI vgpu_hook_cuMemcpyDtoH_v2_ptds(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount) {
  vgpu::residency::GateGuard gate;
  return REAL_CALL(cuMemcpyDtoH_v2_ptds, dstHost, srcDevice, ByteCount);
}

VGPU_HOOK(cuMemcpyDtoD_v2) CUresult CUDAAPI vgpu_hook_cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount) {
  vgpu::residency::GateGuard gate;
  return REAL_CALL(cuMemcpyDtoD_v2, dstDevice, srcDevice, ByteCount);
}

VGPU_HOOK(cuMemcpyDtoD_v2_ptds) CUresult CUDAAPI vgpu_hook_cuMemcpyDtoD_v2_ptds(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount) {
  vgpu::residency::GateGuard gate;
  return REAL_CALL(cuMemcpyDtoD_v2_ptds, dstDevice, srcDevice, ByteCount);
}

VGPU_HOOK(cuMemcpyDtoHAsync_v2) CUresult CUDAAPI vgpu_hook_cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream) {
  vgpu::residency::GateGuard gate;
  return REAL_CALL(cuMemcpyDtoHAsync_v2, dstHost, srcDevice, ByteCount, hStream);
}

VGPU_HOOK(cuMemcpyDtoHAsync_v2_ptsz) CUresult CUDAAPI vgpu_hook_cuMemcpyDtoHAsync_v2_ptsz(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream) {
  vgpu::residency::GateGuard gate;
  return REAL_CALL(cuMemcpyDtoHAsync_v2_ptsz, dstHost, srcDevice, ByteCount, hStream);
}

VGPU_HOOK(cuMemcpyDtoDAsync_v2) CUresult CUDAAPI vgpu_hook_cuMemcpyDtoDAsync_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream) {
  vgpu::residency::GateGuard gate;
  return REAL_CALL(cuMemcpyDtoDAsync_v2, dstDevice, srcDevice, ByteCount, hStream);
}

VGPU_HOOK(cuMemcpyDtoDAsync_v2_ptsz) CUresult CUDAAPI vgpu_hook_cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream) {
  vgpu::residency::GateGuard gate;
  return REAL_CALL(cuMemcpyDtoDAsync_v2_ptsz, dstDevice, srcDevice, ByteCount, hStream);
}

VGPU_HOOK(cuMemcpy2D_v2) CUresult CUDAAPI vgpu_hook_cuMemcpy2D_v2(const CUDA_MEMCPY2D *pCopy) {
  vgpu::residency::GateGuard gate;
  return REAL_CALL(cuMemcpy2D_v2, pCopy);
}

VGPU_HOOK(cuMemcpy2D_v2_ptds) CUresult CUDAAPI vgpu_hook_cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D *pCopy) {
  vgpu::residency::GateGuard gate;
  return REAL_CALL(cuMemcpy2D_v2_ptds, pCopy);
}

VGPU_HOOK(cuMemcpy2DUnaligned_v2) CUresult CUDAAPI vgpu_hook_cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D *pCopy) {
  vgpu::residency::GateGuard gate;
  return REAL_CALL(cuMemcpy2DUnaligned_v2, pCopy);
}

VGPU_HOOK(cuMemcpy2DUnaligned_v2_ptds) CUresult CUDAAPI vgpu_hook_cuMemcpy2DUnaligned_v2_ptds(const CUDA_MEMCPY2D *pCopy) {
  vgpu::residency::GateGuard gate;
  return REAL_CALL(cuMemcpy2DUnaligned_v2_ptds, pCopy);
}

VGPU_HOOK(cuMemcpy2DAsync_v2) CUresult CUDAAPI vgpu_hook_cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *pCopy, CUstream hStream) {
  vgpu::residency::GateGuard gate;
  return REAL_CALL(cuMemcpy2DAsync_v2, pCopy, hStream);
}

VGPU_HOOK(cuMemcpy2DAsync_v2_ptsz) CUresult CUDAAPI vgpu_hook_cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D *pCopy, CUstream hStream) {
  vgpu::residency::GateGuard gate;
  return REAL_CALL(cuMemcpy2DAsync_v2_ptsz, pCopy, hStream);
}

VGPU_HOOK(cuMemcpy3D_v2) CUresult CUDAAPI vgpu_hook_cuMemcpy3D_v2(const CUDA_MEMCPY3D *pCopy) {
  vgpu::residency::GateGuard gate;
  return REAL_CALL(cuMemcpy3D_v2, pCopy);
}

VGPU_HOOK(cuMemcpy3D_v2_ptds) CUresult CUDAAPI vgpu_hook_cuMemcpy3D_v2_ptds(const CUDA_MEMCPY3D *pCopy) {
  vgpu::residency::GateGuard gate;
  return REAL_CALL(cuMemcpy3D_v2_ptds, pCopy);
}

VGPU_HOOK(cuMemcpy3DAsync_v2) CUresult CUDAAPI vgpu_hook_cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D *pCopy, CUstream hStream) {
  vgpu::residency::GateGuard gate;
  return REAL_CALL(cuMemcpy3DAsync_v2, pCopy, hStream);
}

VGPU_HOOK(cuMemcpy3DAsync_v2_ptsz) CUresult CUDAAPI vgpu_hook_cuMemcpy3DAsync_v2_ptsz(const CUDA_MEMCPY3D *pCopy, CUstream hStream) {
  vgpu::residency::GateGuard gate;
  return REAL_CALL(cuMemcpy3DAsync_v2_ptsz, pCopy, hStream);
}

VGPU_HOOK(cuMemcpy3DPeer) CUresult CUDAAPI vgpu_hook_cuMemcpy3DPeer(const CUDA_MEMCPY3D_PEER *pCopy) {
  vgpu::residency::GateGuard gate;
  return REAL_CALL(cuMemcpy3DPeer, pCopy);
}

VGPU_HOOK(cuMemcpy3DPeer_ptds) CUresult CUDAAPI vgpu_hook_cuMemcpy3DPeer_ptds(const CUDA_MEMCPY3D_PEER *pCopy) {
  vgpu::residency::GateGuard gate;
  return REAL_CALL(cuMemcpy3DPeer_ptds, pCopy);
}

VGPU_HOOK(cuMemcpy3DPeerAsync) CUresult CUDAAPI vgpu_hook_cuMemcpy3DPeerAsync(const CUDA_MEMCPY3D_PEER *pCopy, CUstream hStream) {
  vgpu::residency::GateGuard gate;
  return REAL_CALL(cuMemcpy3DPeerAsync, pCopy, hStream);
}

VGPU_HOOK(cuMemcpy3DPeerAsync_ptsz) CUresult CUDAAPI vgpu_hook_cuMemcpy3DPeerAsync_ptsz(const CUDA_MEMCPY3D_PEER *pCopy, CUstream hStream) {
  vgpu::residency::GateGuard gate;
  return REAL_CALL(cuMemcpy3DPeerAsync_ptsz, pCopy, hStream);
}

VGPU_HOOK(cuMemcpyDtoA_v2) CUresult CUDAAPI vgpu_hook_cuMemcpyDtoA_v2(CUarray dstArray, size_t dstOffset, CUdeviceptr srcDevice, size_t ByteCount) {
  vgpu::residency::GateGuard gate;
  return REAL_CALL(cuMemcpyDtoA_v2, dstArray, dstOffset, srcDevice, ByteCount);
}

VGPU_HOOK(cuMemcpyDtoA_v2_ptds) CUresult CUDAAPI vgpu_hook_cuMemcpyDtoA_v2_ptds(CUarray dstArray, size_t dstOffset, CUdeviceptr srcDevice, size_t ByteCount) {
  vgpu::residency::GateGuard gate;
  return REAL_CALL(cuMemcpyDtoA_v2_ptds, dstArray, dstOffset, srcDevice, ByteCount);
}

VGPU_HOOK(cuMemcpyAtoD_v2) CUresult CUDAAPI vgpu_hook_cuMemcpyAtoD_v2(CUdeviceptr dstDevice, CUarray srcArray, size_t srcOffset, size_t ByteCount) {
  vgpu::residency::GateGuard gate;
  return REAL_CALL(cuMemcpyAtoD_v2, dstDevice, srcArray, srcOffset, ByteCount);
}

VGPU_HOOK(cuMemcpyAtoD_v2_ptds) CUresult CUDAAPI vgpu_hook_cuMemcpyAtoD_v2_ptds(CUdeviceptr dstDevice, CUarray srcArray, size_t srcOffset, size_t ByteCount) {
  vgpu::residency::GateGuard gate;
  return REAL_CALL(cuMemcpyAtoD_v2_ptds, dstDevice, srcArray, srcOffset, ByteCount);
}

VGPU_HOOK(cuMemsetD8_v2) CUresult CUDAAPI vgpu_hook_cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc, size_t N) {
  vgpu::residency::GateGuard gate;
  return REAL_CALL(cuMemsetD8_v2, dstDevice, uc, N);
}

VGPU_HOOK(cuMemsetD8_v2_ptds) CUresult CUDAAPI vgpu_hook_cuMemsetD8_v2_ptds(CUdeviceptr dstDevice, unsigned char uc, size_t N) {
  vgpu::residency::GateGuard gate;
  return REAL_CALL(cuMemsetD8_v2_ptds, dstDevice, uc, N);
}

VGPU_HOOK(cuMemsetD16_v2) CUresult CUDAAPI vgpu_hook_cuMemsetD16_v2(CUdeviceptr dstDevice, unsigned short us, size_t N) {
  vgpu::residency::GateGuard gate;
  return REAL_CALL(cuMemsetD16_v2, dstDevice, us, N);
}

VGPU_HOOK(cuMemsetD16_v2_ptds) CUresult CUDAAPI vgpu_hook_cuMemsetD16_v2_ptds(CUdeviceptr dstDevice, unsigned short us, size_t N) {
  vgpu::residency::GateGuard gate;
  return REAL_CALL(cuMemsetD16_v2_ptds, dstDevice, us, N);
}

VGPU_HOOK(cuMemsetD32_v2) CUresult CUDAAPI vgpu_hook_cuMemsetD32_v2(CUdeviceptr dstDevice, unsigned int ui, size_t N) {
  vgpu::residency::GateGuard gate;
  return REAL_CALL(cuMemsetD32_v2, dstDevice, ui, N);
}

VGPU_HOOK(cuMemsetD32_v2_ptds) CUresult CUDAAPI vgpu_hook_cuMemsetD32_v2_ptds(CUdeviceptr dstDevice, unsigned int ui, size_t N) {
  vgpu::residency::GateGuard gate;
  return REAL_CALL(cuMemsetD32_v2_ptds, dstDevice, ui, N);
}

VGPU_HOOK(cuMemsetD2D8_v2) CUresult CUDAAPI vgpu_hook_cuMemsetD2D8_v2(CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc, size_t Width, size_t Height) {
  vgpu::residency::GateGuard gate;
  return REAL_CALL(cuMemsetD2D8_v2, dstDevice, dstPitch, uc, Width, Height);
}

VGPU_HOOK(cuMemsetD2D8_v2_ptds) CUresult CUDAAPI vgpu_hook_cuMemsetD2D8_v2_ptds(CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc, size_t Width, size_t Height) {
  vgpu::residency::GateGuard gate;
  return REAL_CALL(cuMemsetD2D8_v2_ptds, dstDevice, dstPitch, uc, Width, Height);
}

VGPU_HOOK(cuMemsetD2D16_v2) CUresult CUDAAPI vgpu_hook_cuMemsetD2D16_v2(CUdeviceptr dstDevice, size_t dstPitch, unsigned short us, size_t Width, size_t Height) {
  vgpu::residency::GateGuard gate;
  return REAL_CALL(cuMemsetD2D16_v2, dstDevice, dstPitch, us, Width, Height);
}

VGPU_HOOK(cuMemsetD2D16_v2_ptds) CUresult CUDAAPI vgpu_hook_cuMemsetD2D16_v2_ptds(CUdeviceptr dstDevice, size_t dstPitch, unsigned short us, size_t Width, size_t Height) {
  vgpu::residency::GateGuard gate;
  return REAL_CALL(cuMemsetD2D16_v2_ptds, dstDevice, dstPitch, us, Width, Height);
}

VGPU_HOOK(cuMemsetD2D32_v2) CUresult CUDAAPI vgpu_hook_cuMemsetD2D32_v2(CUdeviceptr dstDevice, size_t dstPitch, unsigned int ui, size_t Width, size_t Height) {
  vgpu::residency::GateGuard gate;
  return REAL_CALL(cuMemsetD2D32_v2, dstDevice, dstPitch, ui, Width, Height);
}

VGPU_HOOK(cuMemsetD2D32_v2_ptds) CUresult CUDAAPI vgpu_hook_cuMemsetD2D32_v2_ptds(CUdeviceptr dstDevice, size_t dstPitch, unsigned int ui, size_t Width, size_t Height) {
  vgpu::residency::GateGuard gate;
  return REAL_CALL(cuMemsetD2D32_v2_ptds, dstDevice, dstPitch, ui, Width, Height);
}

VGPU_HOOK(cuMemsetD8Async) CUresult CUDAAPI vgpu_hook_cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream) {
  vgpu::residency::GateGuard gate;
  return REAL_CALL(cuMemsetD8Async, dstDevice, uc, N, hStream);
}

VGPU_HOOK(cuMemsetD8Async_ptsz) CUresult CUDAAPI vgpu_hook_cuMemsetD8Async_ptsz(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream) {
  vgpu::residency::GateGuard gate;
  return REAL_CALL(cuMemsetD8Async_ptsz, dstDevice, uc, N, hStream);
}

VGPU_HOOK(cuMemsetD16Async) CUresult CUDAAPI vgpu_hook_cuMemsetD16Async(CUdeviceptr dstDevice, unsigned short us, size_t N, CUstream hStream) {
  vgpu::residency::GateGuard gate;
  return REAL_CALL(cuMemsetD16Async, dstDevice, us, N, hStream);
}

VGPU_HOOK(cuMemsetD16Async_ptsz) CUresult CUDAAPI vgpu_hook_cuMemsetD16Async_ptsz(CUdeviceptr dstDevice, unsigned short us, size_t N, CUstream hStream) {
  vgpu::residency::GateGuard gate;
  return REAL_CALL(cuMemsetD16Async_ptsz, dstDevice, us, N, hStream);
}

VGPU_HOOK(cuMemsetD32Async) CUresult CUDAAPI vgpu_hook_cuMemsetD32Async(CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream hStream) {
  vgpu::residency::GateGuard gate;
  return REAL_CALL(cuMemsetD32Async, dstDevice, ui, N, hStream);
}

VGPU_HOOK(cuMemsetD32Async_ptsz) CUresult CUDAAPI vgpu_hook_cuMemsetD32Async_ptsz(CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream hStream) {
  vgpu::residency::GateGuard gate;
  return REAL_CALL(cuMemsetD32Async_ptsz, dstDevice, ui, N, hStream);
}

VGPU_HOOK(cuMemsetD2D8Async) CUresult CUDAAPI vgpu_hook_cuMemsetD2D8Async(CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc, size_t Width, size_t Height, CUstream hStream) {
  vgpu::residency::GateGuard gate;
  return REAL_CALL(cuMemsetD2D8Async, dstDevice, dstPitch, uc, Width, Height, hStream);
}

VGPU_HOOK(cuMemsetD2D8Async_ptsz) CUresult CUDAAPI vgpu_hook_cuMemsetD2D8Async_ptsz(CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc, size_t Width, size_t Height, CUstream hStream) {
  vgpu::residency::GateGuard gate;
  return REAL_CALL(cuMemsetD2D8Async_ptsz, dstDevice, dstPitch, uc, Width, Height, hStream);
}

VGPU_HOOK(cuMemsetD2D16Async) CUresult CUDAAPI vgpu_hook_cuMemsetD2D16Async(CUdeviceptr dstDevice, size_t dstPitch, unsigned short us, size_t Width, size_t Height, CUstream hStream) {
  vgpu::residency::GateGuard gate;
  return REAL_CALL(cuMemsetD2D16Async, dstDevice, dstPitch, us, Width, Height, hStream);
}

VGPU_HOOK(cuMemsetD2D16Async_ptsz) CUresult CUDAAPI vgpu_hook_cuMemsetD2D16Async_ptsz(CUdeviceptr dstDevice, size_t dstPitch, unsigned short us, size_t Width, size_t Height, CUstream hStream) {
  vgpu::residency::GateGuard gate;
  return REAL_CALL(cuMemsetD2D16Async_ptsz, dstDevice, dstPitch, us, Width, Height, hStream);
}

VGPU_HOOK(cuMemsetD2D32Async) CUresult CUDAAPI vgpu_hook_cuMemsetD2D32Async(CUdeviceptr dstDevice, size_t dstPitch, unsigned int ui, size_t Width, size_t Height, CUstream hStream) {
  vgpu::residency::GateGuard gate;
  return REAL_CALL(cuMemsetD2D32Async, dstDevice, dstPitch, ui, Width, Height, hStream);
}

VGPU_HOOK(cuMemsetD2D32Async_ptsz) CUresult CUDAAPI vgpu_hook_cuMemsetD2D32Async_ptsz(CUdeviceptr dstDevice, size_t dstPitch, unsigned int ui, size_t Width, size_t Height, CUstream hStream) {
  vgpu::residency::GateGuard gate;
  return REAL_CALL(cuMemsetD2D32Async_ptsz, dstDevice, dstPitch, ui, Width, Height, hStream);
}
