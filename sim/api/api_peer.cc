// Peer access between devices. The simulated node has a peer path only
// between the pairs VGPU_SIM_P2P names (none by default), so that both what a
// node without NVLink/P2P answers and what one with it answers can be tested.
// Enabling peer access changes nothing else: copies between devices work
// either way, as cuMemcpyPeer does on a real driver.
#include <mutex>
#include <set>
#include <utility>

#include "sim/api/api_common.h"
#include "sim/engine/context.h"
#include "sim/engine/sim_state.h"

using namespace vgpu::sim;  // NOLINT: entry points below are the C ABI

namespace {

bool Peers(int a, int b) { return a != b && State()->config.PeerAccess(a, b); }

std::mutex g_mu;
// (context id, peer context id) pairs with peer access enabled.
auto* g_enabled = new std::set<std::pair<unsigned long long, unsigned long long>>();

}  // namespace

SIM_EXPORT CUresult CUDAAPI cuDeviceCanAccessPeer(int* canAccessPeer, CUdevice dev, CUdevice peerDev) {
  SIM_ENTER("cuDeviceCanAccessPeer");
  if (canAccessPeer == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!ValidDevice(dev) || !ValidDevice(peerDev)) return CUDA_ERROR_INVALID_DEVICE;
  *canAccessPeer = Peers(dev, peerDev) ? 1 : 0;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuDeviceGetP2PAttribute(int* value, CUdevice_P2PAttribute attrib, CUdevice srcDevice,
                                                    CUdevice dstDevice) {
  SIM_ENTER("cuDeviceGetP2PAttribute");
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!ValidDevice(srcDevice) || !ValidDevice(dstDevice) || srcDevice == dstDevice) {
    return CUDA_ERROR_INVALID_DEVICE;
  }
  const int linked = Peers(srcDevice, dstDevice) ? 1 : 0;
  switch (attrib) {
    case CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK:
      *value = 0;  // one kind of link: all rank the same
      return CUDA_SUCCESS;
    case CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED:
    case CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED:
    case CU_DEVICE_P2P_ATTRIBUTE_CUDA_ARRAY_ACCESS_SUPPORTED:
      *value = linked;
      return CUDA_SUCCESS;
    case CU_DEVICE_P2P_ATTRIBUTE_ONLY_PARTIAL_NATIVE_ATOMIC_SUPPORTED:
      *value = 0;  // all atomics, or none
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

SIM_EXPORT CUresult CUDAAPI cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int Flags) {
  SIM_ENTER("cuCtxEnablePeerAccess");
  Context* ctx = CurrentContextOrNull();
  if (ctx == nullptr || !IsValidContext(peerContext) || AsHandle(ctx) == peerContext) {
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  if (Flags != 0) return CUDA_ERROR_INVALID_VALUE;
  Context* peer = AsContext(peerContext);
  if (!Peers(ctx->device, peer->device)) return CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_enabled->emplace(ctx->id, peer->id).second) return CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuCtxDisablePeerAccess(CUcontext peerContext) {
  SIM_ENTER("cuCtxDisablePeerAccess");
  Context* ctx = CurrentContextOrNull();
  if (ctx == nullptr || !IsValidContext(peerContext)) return CUDA_ERROR_INVALID_CONTEXT;
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_enabled->erase({ctx->id, AsContext(peerContext)->id}) == 0) {
    return CUDA_ERROR_PEER_ACCESS_NOT_ENABLED;
  }
  return CUDA_SUCCESS;
}

// Atomics over a peer link (VGPU_SIM_P2P): those of an sm_90 device on its own
// memory, all natively (CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED 1,
// ONLY_PARTIAL 0); none between devices without a link.
SIM_EXPORT CUresult CUDAAPI cuDeviceGetP2PAtomicCapabilities(unsigned int* capabilities, const CUatomicOperation* operations, unsigned int count, CUdevice srcDevice, CUdevice dstDevice) {
  SIM_ENTER("cuDeviceGetP2PAtomicCapabilities");
  if (!ValidDevice(srcDevice) || !ValidDevice(dstDevice) || srcDevice == dstDevice) {
    return CUDA_ERROR_INVALID_DEVICE;
  }
  if (capabilities == nullptr || operations == nullptr || count == 0) return CUDA_ERROR_INVALID_VALUE;
  for (unsigned i = 0; i < count; ++i) {
    if (operations[i] < 0 || operations[i] >= CU_ATOMIC_OPERATION_MAX) return CUDA_ERROR_INVALID_VALUE;
  }
  const bool linked = Peers(srcDevice, dstDevice);
  constexpr unsigned kInt = CU_ATOMIC_CAPABILITY_SIGNED | CU_ATOMIC_CAPABILITY_UNSIGNED |
                            CU_ATOMIC_CAPABILITY_SCALAR_32 | CU_ATOMIC_CAPABILITY_SCALAR_64;
  for (unsigned i = 0; i < count; ++i) {
    unsigned caps = 0;
    switch (operations[i]) {
      case CU_ATOMIC_OPERATION_INTEGER_ADD:
      case CU_ATOMIC_OPERATION_INTEGER_MIN:
      case CU_ATOMIC_OPERATION_INTEGER_MAX:
      case CU_ATOMIC_OPERATION_AND:
      case CU_ATOMIC_OPERATION_OR:
      case CU_ATOMIC_OPERATION_XOR:
        caps = kInt | CU_ATOMIC_CAPABILITY_REDUCTION;
        break;
      case CU_ATOMIC_OPERATION_INTEGER_INCREMENT:
      case CU_ATOMIC_OPERATION_INTEGER_DECREMENT:
        caps = CU_ATOMIC_CAPABILITY_UNSIGNED | CU_ATOMIC_CAPABILITY_SCALAR_32;
        break;
      case CU_ATOMIC_OPERATION_EXCHANGE:
      case CU_ATOMIC_OPERATION_CAS:
        caps = kInt | CU_ATOMIC_CAPABILITY_SCALAR_128;
        break;
      case CU_ATOMIC_OPERATION_FLOAT_ADD:
        caps = CU_ATOMIC_CAPABILITY_SIGNED | CU_ATOMIC_CAPABILITY_SCALAR_32 | CU_ATOMIC_CAPABILITY_SCALAR_64 |
               CU_ATOMIC_CAPABILITY_REDUCTION | CU_ATOMIC_CAPABILITY_VECTOR_32x4;
        break;
      default:  // float min/max: no sm_90 instruction
        caps = 0;
        break;
    }
    capabilities[i] = linked ? caps : 0;
  }
  return CUDA_SUCCESS;
}
