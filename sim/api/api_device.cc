// Device enumeration and attributes.
#include <cstdio>
#include <cstring>
#include <strings.h>

#include "sim/api/api_common.h"
#include "sim/engine/copy_engine.h"
#include "sim/engine/graph_memory.h"
#include "sim/engine/sim_state.h"
#include "sim/engine/texture.h"

namespace vgpu::sim {
namespace {

// An H100's texture and surface limits (cudaDeviceProp's maxTexture*,
// maxSurface*); texture objects and references validate against the linear ones.
int TextureAttribute(CUdevice_attribute a) {
  switch (a) {
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_WIDTH: return 131072;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_WIDTH: return 131072;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_HEIGHT: return 65536;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_WIDTH: return 16384;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_HEIGHT: return 16384;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_DEPTH: return 16384;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LINEAR_WIDTH: return kMaxTexture1DLinear;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_WIDTH: return kMaxTexture2DLinearWidth;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_HEIGHT: return kMaxTexture2DLinearHeight;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_PITCH: return kMaxTexture2DLinearPitch;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LAYERED_WIDTH: return 32768;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LAYERED_LAYERS: return 2048;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_WIDTH: return 32768;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_HEIGHT: return 32768;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_LAYERS: return 2048;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_WIDTH: return 32768;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_WIDTH: return 32768;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_WIDTH: return 131072;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_HEIGHT: return 65536;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_WIDTH: return 16384;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_HEIGHT: return 16384;
    case CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_DEPTH: return 16384;
    default: return 0;
  }
}

// H100 SXM-like values; the rest of the attributes read as 0.
int Attribute(const DeviceState& dev, CUdevice_attribute a) {
  switch (a) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: return 64;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: return 2147483647;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: return 49152;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: return 232448;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: return 233472;
    case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY: return 65536;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: return 32;
    case CU_DEVICE_ATTRIBUTE_MAX_PITCH: return 2147483647;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: return 65536;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR: return 65536;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: return 1980000;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: return 2619000;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: return 5120;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: return 52428800;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT: return kTextureAlignment;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT: return kTexturePitchAlignment;
    case CU_DEVICE_ATTRIBUTE_SURFACE_ALIGNMENT: return kTextureAlignment;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: return dev.sm_count;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: return 2048;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR: return 32;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: return dev.cc_major;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: return dev.cc_minor;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: return dev.pci_bus;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID: return 0;
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID: return 0;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: return 3;
    case CU_DEVICE_ATTRIBUTE_GPU_OVERLAP: return 1;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS: return 1;
    case CU_DEVICE_ATTRIBUTE_ECC_ENABLED: return 1;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: return 1;
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY: return 1;
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY: return 1;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS: return 1;
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH: return 1;
    case CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM: return 1;
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED:
      return 1;  // sim/api/api_ipc.cc
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: return 1;
    // IPC-capable pools are not modelled (VMM allocations do export as fds).
    case CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES: return CU_MEM_HANDLE_TYPE_NONE;
    case CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS: return 0;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_MODE: return CU_COMPUTEMODE_DEFAULT;
    // Stream memory operations (sim/api/api_streamops.cc), v1 and v2 APIs.
    case CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1: return 1;
    case CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS_V1: return 1;
    case CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR_V1: return 1;
    case CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS: return 1;
    case CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR: return 1;
    case CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE: return 134213632;
    case CU_DEVICE_ATTRIBUTE_MEM_SYNC_DOMAIN_COUNT: return 4;
    case CU_DEVICE_ATTRIBUTE_TENSOR_MAP_ACCESS_SUPPORTED: return dev.cc_major >= 9;
    default: return TextureAttribute(a);
  }
}

}  // namespace
}  // namespace vgpu::sim

using namespace vgpu::sim;  // NOLINT: entry points below are the C ABI

SIM_EXPORT CUresult CUDAAPI cuDeviceGetCount(int* count) {
  SIM_ENTER("cuDeviceGetCount");
  if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *count = Node().device_count();
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuDeviceGet(CUdevice* device, int ordinal) {
  SIM_ENTER("cuDeviceGet");
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!ValidDevice(ordinal)) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuDeviceGetName(char* name, int len, CUdevice dev) {
  SIM_ENTER("cuDeviceGetName");
  if (name == nullptr || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (!ValidDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  std::snprintf(name, static_cast<size_t>(len), "%s", Node().device(dev).name);
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice dev) {
  SIM_ENTER("cuDeviceGetUuid_v2");
  if (uuid == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!ValidDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  std::memcpy(uuid->bytes, Node().device(dev).uuid, 16);
  return CUDA_SUCCESS;
}

// cuda.h maps cuDeviceGetUuid to _v2; the v1 symbol still exists for old binaries.
#undef cuDeviceGetUuid
extern "C" CUresult CUDAAPI cuDeviceGetUuid(CUuuid* uuid, CUdevice dev);
SIM_EXPORT CUresult CUDAAPI cuDeviceGetUuid(CUuuid* uuid, CUdevice dev) {
  SIM_ENTER("cuDeviceGetUuid");
  return cuDeviceGetUuid_v2(uuid, dev);
}

SIM_EXPORT CUresult CUDAAPI cuDeviceGetLuid(char* luid, unsigned int* mask, CUdevice dev) {
  SIM_ENTER("cuDeviceGetLuid");
  return CUDA_ERROR_NOT_SUPPORTED;  // Windows only
}

SIM_EXPORT CUresult CUDAAPI cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  SIM_ENTER("cuDeviceTotalMem_v2");
  if (bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!ValidDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = Node().device(dev).total_bytes;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuDeviceGetAttribute(int* pi, CUdevice_attribute attrib, CUdevice dev) {
  SIM_ENTER("cuDeviceGetAttribute");
  if (pi == nullptr || attrib <= 0 || attrib >= CU_DEVICE_ATTRIBUTE_MAX) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (!ValidDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  *pi = Attribute(Node().device(dev), attrib);
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuDeviceComputeCapability(int* major, int* minor, CUdevice dev) {
  SIM_ENTER("cuDeviceComputeCapability");
  if (major == nullptr || minor == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!ValidDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  *major = Node().device(dev).cc_major;
  *minor = Node().device(dev).cc_minor;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuDeviceGetPCIBusId(char* pciBusId, int len, CUdevice dev) {
  SIM_ENTER("cuDeviceGetPCIBusId");
  if (pciBusId == nullptr || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (!ValidDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  std::snprintf(pciBusId, static_cast<size_t>(len), "0000:%02X:00.0", Node().device(dev).pci_bus);
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuDeviceGetByPCIBusId(CUdevice* dev, const char* pciBusId) {
  SIM_ENTER("cuDeviceGetByPCIBusId");
  if (dev == nullptr || pciBusId == nullptr) return CUDA_ERROR_INVALID_VALUE;
  // Accepts "domain:bus:device.function" with 4 or 8 domain digits, any case.
  unsigned domain = 0, bus = 0, device = 0, function = 0;
  if (std::sscanf(pciBusId, "%x:%x:%x.%x", &domain, &bus, &device, &function) != 4) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  for (int d = 0; d < Node().device_count(); ++d) {
    if (domain == 0 && device == 0 && function == 0 &&
        bus == static_cast<unsigned>(Node().device(d).pci_bus)) {
      *dev = d;
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_INVALID_DEVICE;
}

SIM_EXPORT CUresult CUDAAPI cuDeviceGetProperties(CUdevprop* prop, CUdevice dev) {
  SIM_ENTER("cuDeviceGetProperties");
  if (prop == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!ValidDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  const DeviceState& d = Node().device(dev);
  *prop = CUdevprop{};
  prop->maxThreadsPerBlock = 1024;
  prop->maxThreadsDim[0] = prop->maxThreadsDim[1] = 1024;
  prop->maxThreadsDim[2] = 64;
  prop->maxGridSize[0] = 2147483647;
  prop->maxGridSize[1] = prop->maxGridSize[2] = 65535;
  prop->sharedMemPerBlock = 49152;
  prop->totalConstantMemory = 65536;
  prop->SIMDWidth = 32;
  prop->memPitch = 2147483647;
  prop->regsPerBlock = 65536;
  prop->clockRate = Attribute(d, CU_DEVICE_ATTRIBUTE_CLOCK_RATE);
  prop->textureAlign = 512;
  return CUDA_SUCCESS;
}

// ---- Device queries that answer from the modelled H100 ----

// Contexts limited to some SMs (CU_EXEC_AFFINITY_TYPE_SM_COUNT) need MPS on a
// GPU; the sim does not model them.
SIM_EXPORT CUresult CUDAAPI cuDeviceGetExecAffinitySupport(int* pi, CUexecAffinityType type, CUdevice dev) {
  SIM_ENTER("cuDeviceGetExecAffinitySupport");
  if (pi == nullptr || type < 0 || type >= CU_EXEC_AFFINITY_TYPE_MAX) return CUDA_ERROR_INVALID_VALUE;
  if (!ValidDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  *pi = 0;
  return CUDA_SUCCESS;
}

// 2^28 elements, the 1D linear texture limit of compute capability 9.0, for
// every valid element format of 1, 2 or 4 channels.
SIM_EXPORT CUresult CUDAAPI cuDeviceGetTexture1DLinearMaxWidth(size_t* maxWidthInElements, CUarray_format format, unsigned numChannels, CUdevice dev) {
  SIM_ENTER("cuDeviceGetTexture1DLinearMaxWidth");
  if (maxWidthInElements == nullptr || FormatBytes(format) == 0 ||
      (numChannels != 1 && numChannels != 2 && numChannels != 4)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (!ValidDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  *maxWidthInElements = kMaxTexture1DLinear;
  return CUDA_SUCCESS;
}

// The host link is PCIe without native atomics
// (CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED is 0): no capability.
SIM_EXPORT CUresult CUDAAPI cuDeviceGetHostAtomicCapabilities(unsigned int* capabilities, const CUatomicOperation* operations, unsigned int count, CUdevice dev) {
  SIM_ENTER("cuDeviceGetHostAtomicCapabilities");
  if (!ValidDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  if (capabilities == nullptr || operations == nullptr || count == 0) return CUDA_ERROR_INVALID_VALUE;
  for (unsigned i = 0; i < count; ++i) {
    if (operations[i] < 0 || operations[i] >= CU_ATOMIC_OPERATION_MAX) return CUDA_ERROR_INVALID_VALUE;
  }
  for (unsigned i = 0; i < count; ++i) capabilities[i] = 0;
  return CUDA_SUCCESS;
}

// The device's graph pool (graph_memory.h): used, reserved and their high watermarks.
SIM_EXPORT CUresult CUDAAPI cuDeviceGetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr, void* value) {
  SIM_ENTER("cuDeviceGetGraphMemAttribute");
  if (!ValidDevice(device)) return CUDA_ERROR_INVALID_DEVICE;
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return GraphMemGetAttribute(device, attr, value);
}

SIM_EXPORT CUresult CUDAAPI cuDeviceSetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr, void* value) {
  SIM_ENTER("cuDeviceSetGraphMemAttribute");
  if (!ValidDevice(device)) return CUDA_ERROR_INVALID_DEVICE;
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return GraphMemSetAttribute(device, attr, value);
}
