// Graphics interop (OpenGL, VDPAU, EGL) and multicast objects: hardware and
// software the simulated node lacks. A compute node has no graphics API
// context, so the interop calls answer as a driver does without one
// (CUDA_ERROR_INVALID_GRAPHICS_CONTEXT; EGL objects cannot be valid:
// CUDA_ERROR_INVALID_HANDLE), after the argument checks cuda.h documents.
// Multicast: CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED reads 0, so the object
// calls answer CUDA_ERROR_NOT_SUPPORTED as on a GPU without NVSwitch.
#include "sim/api/api_common.h"
#include "sim/engine/context.h"
#include "sim/engine/sim_state.h"

using namespace vgpu::sim;  // NOLINT: entry points below are the C ABI

namespace {

// A graphics interop call: needs a current CUDA context, then a graphics
// context that cannot exist here.
CUresult NoGraphicsContext() {
  return CurrentContextOrNull() != nullptr ? CUDA_ERROR_INVALID_GRAPHICS_CONTEXT : CUDA_ERROR_INVALID_CONTEXT;
}

}  // namespace

// No OpenGL context is current on a compute node: no device belongs to one.
SIM_EXPORT CUresult CUDAAPI cuGLGetDevices(unsigned int* pCudaDeviceCount, CUdevice* pCudaDevices,
                                           unsigned int cudaDeviceCount, int deviceList) {
  SIM_ENTER("cuGLGetDevices");
  if (pCudaDeviceCount == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *pCudaDeviceCount = 0;
  return CUDA_ERROR_INVALID_GRAPHICS_CONTEXT;
}

SIM_EXPORT CUresult CUDAAPI cuGLGetDevices_v2(unsigned int* pCudaDeviceCount, CUdevice* pCudaDevices,
                                              unsigned int cudaDeviceCount, int deviceList) {
  SIM_ENTER("cuGLGetDevices_v2");
  if (pCudaDeviceCount == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *pCudaDeviceCount = 0;
  return CUDA_ERROR_INVALID_GRAPHICS_CONTEXT;
}

// Deprecated and a no-op on current drivers.
SIM_EXPORT CUresult CUDAAPI cuGLInit() {
  SIM_ENTER("cuGLInit");
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuGLCtxCreate(CUcontext* pCtx, unsigned int Flags, CUdevice device) {
  SIM_ENTER("cuGLCtxCreate");
  if (pCtx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!ValidDevice(device)) return CUDA_ERROR_INVALID_DEVICE;
  return CUDA_ERROR_INVALID_GRAPHICS_CONTEXT;
}

SIM_EXPORT CUresult CUDAAPI cuGLCtxCreate_v2(CUcontext* pCtx, unsigned int Flags, CUdevice device) {
  SIM_ENTER("cuGLCtxCreate_v2");
  if (pCtx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!ValidDevice(device)) return CUDA_ERROR_INVALID_DEVICE;
  return CUDA_ERROR_INVALID_GRAPHICS_CONTEXT;
}

// The deprecated buffer-object API: buffers of the current GL context.
SIM_EXPORT CUresult CUDAAPI cuGLRegisterBufferObject(unsigned int buffer) {
  SIM_ENTER("cuGLRegisterBufferObject");
  return NoGraphicsContext();
}

SIM_EXPORT CUresult CUDAAPI cuGLMapBufferObject(unsigned int* dptr, unsigned int* size, unsigned int buffer) {
  SIM_ENTER("cuGLMapBufferObject");
  return NoGraphicsContext();
}

SIM_EXPORT CUresult CUDAAPI cuGLMapBufferObject_v2(CUdeviceptr* dptr, size_t* size, unsigned int buffer) {
  SIM_ENTER("cuGLMapBufferObject_v2");
  return NoGraphicsContext();
}

SIM_EXPORT CUresult CUDAAPI cuGLMapBufferObject_v2_ptds(CUdeviceptr* dptr, size_t* size, unsigned int buffer) {
  SIM_ENTER("cuGLMapBufferObject_v2_ptds");
  return NoGraphicsContext();
}

SIM_EXPORT CUresult CUDAAPI cuGLMapBufferObjectAsync(unsigned int* dptr, unsigned int* size, unsigned int buffer, CUstream hStream) {
  SIM_ENTER("cuGLMapBufferObjectAsync");
  return NoGraphicsContext();
}

SIM_EXPORT CUresult CUDAAPI cuGLMapBufferObjectAsync_v2(CUdeviceptr* dptr, size_t* size, unsigned int buffer, CUstream hStream) {
  SIM_ENTER("cuGLMapBufferObjectAsync_v2");
  return NoGraphicsContext();
}

SIM_EXPORT CUresult CUDAAPI cuGLMapBufferObjectAsync_v2_ptsz(CUdeviceptr* dptr, size_t* size, unsigned int buffer, CUstream hStream) {
  SIM_ENTER("cuGLMapBufferObjectAsync_v2_ptsz");
  return NoGraphicsContext();
}

SIM_EXPORT CUresult CUDAAPI cuGLUnmapBufferObject(unsigned int buffer) {
  SIM_ENTER("cuGLUnmapBufferObject");
  return NoGraphicsContext();
}

SIM_EXPORT CUresult CUDAAPI cuGLUnmapBufferObjectAsync(unsigned int buffer, CUstream hStream) {
  SIM_ENTER("cuGLUnmapBufferObjectAsync");
  return NoGraphicsContext();
}

SIM_EXPORT CUresult CUDAAPI cuGLUnregisterBufferObject(unsigned int buffer) {
  SIM_ENTER("cuGLUnregisterBufferObject");
  return NoGraphicsContext();
}

SIM_EXPORT CUresult CUDAAPI cuGLSetBufferObjectMapFlags(unsigned int buffer, unsigned int Flags) {
  SIM_ENTER("cuGLSetBufferObjectMapFlags");
  return NoGraphicsContext();
}

// VDPAU needs an X display's VdpDevice; none can belong to a simulated GPU.
SIM_EXPORT CUresult CUDAAPI cuVDPAUGetDevice(CUdevice* pDevice, uint32_t vdpDevice, void* vdpGetProcAddress) {
  SIM_ENTER("cuVDPAUGetDevice");
  if (pDevice == nullptr || vdpGetProcAddress == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_ERROR_INVALID_GRAPHICS_CONTEXT;
}

SIM_EXPORT CUresult CUDAAPI cuVDPAUCtxCreate(CUcontext* pCtx, unsigned int flags, CUdevice device, uint32_t vdpDevice,
                                             void* vdpGetProcAddress) {
  SIM_ENTER("cuVDPAUCtxCreate");
  if (pCtx == nullptr || vdpGetProcAddress == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!ValidDevice(device)) return CUDA_ERROR_INVALID_DEVICE;
  return CUDA_ERROR_INVALID_GRAPHICS_CONTEXT;
}

SIM_EXPORT CUresult CUDAAPI cuVDPAUCtxCreate_v2(CUcontext* pCtx, unsigned int flags, CUdevice device, uint32_t vdpDevice,
                                             void* vdpGetProcAddress) {
  SIM_ENTER("cuVDPAUCtxCreate_v2");
  if (pCtx == nullptr || vdpGetProcAddress == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!ValidDevice(device)) return CUDA_ERROR_INVALID_DEVICE;
  return CUDA_ERROR_INVALID_GRAPHICS_CONTEXT;
}

// EGL streams and syncs: no EGL display exists here, so no handle is valid.
SIM_EXPORT CUresult CUDAAPI cuEGLStreamConsumerConnect(void* conn, void* stream) {
  SIM_ENTER("cuEGLStreamConsumerConnect");
  if (conn == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  return CurrentContextOrNull() != nullptr ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_INVALID_CONTEXT;
}

SIM_EXPORT CUresult CUDAAPI cuEGLStreamConsumerConnectWithFlags(void* conn, void* stream, unsigned int flags) {
  SIM_ENTER("cuEGLStreamConsumerConnectWithFlags");
  if (conn == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  return CurrentContextOrNull() != nullptr ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_INVALID_CONTEXT;
}

SIM_EXPORT CUresult CUDAAPI cuEGLStreamConsumerDisconnect(void* conn) {
  SIM_ENTER("cuEGLStreamConsumerDisconnect");
  if (conn == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  return CurrentContextOrNull() != nullptr ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_INVALID_CONTEXT;
}

SIM_EXPORT CUresult CUDAAPI cuEGLStreamConsumerAcquireFrame(void* conn, void* pCudaResource, void* pStream, unsigned int timeout) {
  SIM_ENTER("cuEGLStreamConsumerAcquireFrame");
  if (conn == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  return CurrentContextOrNull() != nullptr ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_INVALID_CONTEXT;
}

SIM_EXPORT CUresult CUDAAPI cuEGLStreamConsumerReleaseFrame(void* conn, void* pCudaResource, void* pStream) {
  SIM_ENTER("cuEGLStreamConsumerReleaseFrame");
  if (conn == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  return CurrentContextOrNull() != nullptr ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_INVALID_CONTEXT;
}

SIM_EXPORT CUresult CUDAAPI cuEGLStreamProducerConnect(void* conn, void* stream, int width, int height) {
  SIM_ENTER("cuEGLStreamProducerConnect");
  if (conn == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  return CurrentContextOrNull() != nullptr ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_INVALID_CONTEXT;
}

SIM_EXPORT CUresult CUDAAPI cuEGLStreamProducerDisconnect(void* conn) {
  SIM_ENTER("cuEGLStreamProducerDisconnect");
  if (conn == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  return CurrentContextOrNull() != nullptr ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_INVALID_CONTEXT;
}

SIM_EXPORT CUresult CUDAAPI cuEGLStreamProducerPresentFrame(void* conn, void* eglframe, void* pStream) {
  SIM_ENTER("cuEGLStreamProducerPresentFrame");
  if (conn == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  return CurrentContextOrNull() != nullptr ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_INVALID_CONTEXT;
}

SIM_EXPORT CUresult CUDAAPI cuEGLStreamProducerReturnFrame(void* conn, void* eglframe, void* pStream) {
  SIM_ENTER("cuEGLStreamProducerReturnFrame");
  if (conn == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  return CurrentContextOrNull() != nullptr ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_INVALID_CONTEXT;
}

SIM_EXPORT CUresult CUDAAPI cuEventCreateFromEGLSync(CUevent* phEvent, void* eglSync, unsigned int flags) {
  SIM_ENTER("cuEventCreateFromEGLSync");
  if (phEvent == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  return CurrentContextOrNull() != nullptr ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_INVALID_CONTEXT;
}

SIM_EXPORT CUresult CUDAAPI cuMulticastGetGranularity(size_t* granularity, const CUmulticastObjectProp* prop,
                                                      CUmulticastGranularity_flags option) {
  SIM_ENTER("cuMulticastGetGranularity");
  const int o = RawEnum(option);
  if (granularity == nullptr || prop == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (o != CU_MULTICAST_GRANULARITY_MINIMUM && o != CU_MULTICAST_GRANULARITY_RECOMMENDED) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_ERROR_NOT_SUPPORTED;
}

SIM_EXPORT CUresult CUDAAPI cuMulticastCreate(CUmemGenericAllocationHandle* mcHandle,
                                              const CUmulticastObjectProp* prop) {
  SIM_ENTER("cuMulticastCreate");
  if (mcHandle == nullptr || prop == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_ERROR_NOT_SUPPORTED;
}

// No multicast object can exist, so the handle passed in is never one.
SIM_EXPORT CUresult CUDAAPI cuMulticastAddDevice(CUmemGenericAllocationHandle mcHandle, CUdevice dev) {
  SIM_ENTER("cuMulticastAddDevice");
  if (!ValidDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  return CUDA_ERROR_NOT_SUPPORTED;
}

SIM_EXPORT CUresult CUDAAPI cuMulticastBindMem(CUmemGenericAllocationHandle mcHandle, size_t mcOffset,
                                               CUmemGenericAllocationHandle memHandle, size_t memOffset,
                                               size_t size, unsigned long long flags) {
  SIM_ENTER("cuMulticastBindMem");
  return CUDA_ERROR_NOT_SUPPORTED;
}

SIM_EXPORT CUresult CUDAAPI cuMulticastBindAddr(CUmemGenericAllocationHandle mcHandle, size_t mcOffset,
                                                CUdeviceptr memptr, size_t size, unsigned long long flags) {
  SIM_ENTER("cuMulticastBindAddr");
  return CUDA_ERROR_NOT_SUPPORTED;
}

SIM_EXPORT CUresult CUDAAPI cuMulticastUnbind(CUmemGenericAllocationHandle mcHandle, CUdevice dev,
                                              size_t mcOffset, size_t size) {
  SIM_ENTER("cuMulticastUnbind");
  if (!ValidDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  return CUDA_ERROR_NOT_SUPPORTED;
}
