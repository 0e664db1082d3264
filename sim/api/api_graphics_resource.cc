// Graphics resources (cuGraphics*): registering one needs a graphics API
// context (OpenGL, VDPAU, EGL) that a compute node does not have, so no
// resource can exist in the simulated node. Registration answers as a driver
// does without one (CUDA_ERROR_INVALID_GRAPHICS_CONTEXT, EGL:
// CUDA_ERROR_INVALID_HANDLE, as sim/api/api_interop.cc), and every call on a
// resource finds none: CUDA_ERROR_INVALID_HANDLE, after the argument checks
// cuda.h documents. The graphics types (GLuint, GLenum, VdpVideoSurface,
// EGLImageKHR, CUeglFrame) are passed as their C representations: the
// headers that declare them need the graphics APIs'.
#include <cstdint>

#include "sim/api/api_common.h"
#include "sim/engine/context.h"
#include "sim/engine/sim_state.h"

using namespace vgpu::sim;  // NOLINT: entry points below are the C ABI

// clang-format off: gen_proc_table.py reads an entry point's first line whole.

namespace {

CUresult Register(CUgraphicsResource* out, CUresult without_context) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CurrentContextOrNull() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  return without_context;
}

// A call naming `resource` (and writing through `out`, which may not be null).
CUresult OnResource(CUgraphicsResource resource, const void* out) {
  if (CurrentContextOrNull() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return resource == nullptr ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_INVALID_HANDLE;
}

CUresult MapOrUnmap(unsigned int count, const CUgraphicsResource* resources) {
  if (CurrentContextOrNull() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (count == 0) return CUDA_SUCCESS;
  return resources == nullptr ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_INVALID_HANDLE;
}

constexpr unsigned int kMapFlagsMax = CU_GRAPHICS_MAP_RESOURCE_FLAGS_WRITE_DISCARD;

}  // namespace

SIM_EXPORT CUresult CUDAAPI cuGraphicsGLRegisterBuffer(CUgraphicsResource* pCudaResource, unsigned int buffer, unsigned int Flags) {
  SIM_ENTER("cuGraphicsGLRegisterBuffer");
  return Register(pCudaResource, CUDA_ERROR_INVALID_GRAPHICS_CONTEXT);
}

SIM_EXPORT CUresult CUDAAPI cuGraphicsGLRegisterImage(CUgraphicsResource* pCudaResource, unsigned int image, unsigned int target, unsigned int Flags) {
  SIM_ENTER("cuGraphicsGLRegisterImage");
  return Register(pCudaResource, CUDA_ERROR_INVALID_GRAPHICS_CONTEXT);
}

SIM_EXPORT CUresult CUDAAPI cuGraphicsVDPAURegisterVideoSurface(CUgraphicsResource* pCudaResource, uint32_t vdpSurface, unsigned int flags) {
  SIM_ENTER("cuGraphicsVDPAURegisterVideoSurface");
  return Register(pCudaResource, CUDA_ERROR_INVALID_GRAPHICS_CONTEXT);
}

SIM_EXPORT CUresult CUDAAPI cuGraphicsVDPAURegisterOutputSurface(CUgraphicsResource* pCudaResource, uint32_t vdpSurface, unsigned int flags) {
  SIM_ENTER("cuGraphicsVDPAURegisterOutputSurface");
  return Register(pCudaResource, CUDA_ERROR_INVALID_GRAPHICS_CONTEXT);
}

// No EGL image can be valid without an EGL display.
SIM_EXPORT CUresult CUDAAPI cuGraphicsEGLRegisterImage(CUgraphicsResource* pCudaResource, void* image, unsigned int flags) {
  SIM_ENTER("cuGraphicsEGLRegisterImage");
  return Register(pCudaResource, CUDA_ERROR_INVALID_HANDLE);
}

SIM_EXPORT CUresult CUDAAPI cuGraphicsResourceGetMappedEglFrame(void* eglFrame, CUgraphicsResource resource, unsigned int index, unsigned int mipLevel) {
  SIM_ENTER("cuGraphicsResourceGetMappedEglFrame");
  return OnResource(resource, eglFrame);
}

SIM_EXPORT CUresult CUDAAPI cuGraphicsUnregisterResource(CUgraphicsResource resource) {
  SIM_ENTER("cuGraphicsUnregisterResource");
  return OnResource(resource, &resource);
}

SIM_EXPORT CUresult CUDAAPI cuGraphicsSubResourceGetMappedArray(CUarray* pArray, CUgraphicsResource resource, unsigned int arrayIndex, unsigned int mipLevel) {
  SIM_ENTER("cuGraphicsSubResourceGetMappedArray");
  return OnResource(resource, pArray);
}

SIM_EXPORT CUresult CUDAAPI cuGraphicsResourceGetMappedMipmappedArray(CUmipmappedArray* pMipmappedArray, CUgraphicsResource resource) {
  SIM_ENTER("cuGraphicsResourceGetMappedMipmappedArray");
  return OnResource(resource, pMipmappedArray);
}

SIM_EXPORT CUresult CUDAAPI cuGraphicsResourceGetMappedPointer_v2(CUdeviceptr* pDevPtr, size_t* pSize, CUgraphicsResource resource) {
  SIM_ENTER("cuGraphicsResourceGetMappedPointer_v2");
  return OnResource(resource, pDevPtr != nullptr && pSize != nullptr ? pDevPtr : nullptr);
}

// CUDA 3.0's form, 32-bit pointer and size.
#undef cuGraphicsResourceGetMappedPointer
SIM_EXPORT CUresult CUDAAPI cuGraphicsResourceGetMappedPointer(unsigned int* pDevPtr, unsigned int* pSize, CUgraphicsResource resource) {
  SIM_ENTER("cuGraphicsResourceGetMappedPointer");
  return OnResource(resource, pDevPtr != nullptr && pSize != nullptr ? pDevPtr : nullptr);
}

SIM_EXPORT CUresult CUDAAPI cuGraphicsResourceSetMapFlags_v2(CUgraphicsResource resource, unsigned int flags) {
  SIM_ENTER("cuGraphicsResourceSetMapFlags_v2");
  if (flags > kMapFlagsMax) return CUDA_ERROR_INVALID_VALUE;
  return OnResource(resource, &resource);
}

#undef cuGraphicsResourceSetMapFlags
SIM_EXPORT CUresult CUDAAPI cuGraphicsResourceSetMapFlags(CUgraphicsResource resource, unsigned int flags) {
  SIM_ENTER("cuGraphicsResourceSetMapFlags");
  if (flags > kMapFlagsMax) return CUDA_ERROR_INVALID_VALUE;
  return OnResource(resource, &resource);
}

SIM_EXPORT CUresult CUDAAPI cuGraphicsMapResources(unsigned int count, CUgraphicsResource* resources, CUstream hStream) {
  SIM_ENTER("cuGraphicsMapResources");
  return MapOrUnmap(count, resources);
}

SIM_EXPORT CUresult CUDAAPI cuGraphicsMapResources_ptsz(unsigned int count, CUgraphicsResource* resources, CUstream hStream) {
  SIM_ENTER("cuGraphicsMapResources_ptsz");
  return MapOrUnmap(count, resources);
}

SIM_EXPORT CUresult CUDAAPI cuGraphicsUnmapResources(unsigned int count, CUgraphicsResource* resources, CUstream hStream) {
  SIM_ENTER("cuGraphicsUnmapResources");
  return MapOrUnmap(count, resources);
}

SIM_EXPORT CUresult CUDAAPI cuGraphicsUnmapResources_ptsz(unsigned int count, CUgraphicsResource* resources, CUstream hStream) {
  SIM_ENTER("cuGraphicsUnmapResources_ptsz");
  return MapOrUnmap(count, resources);
}
