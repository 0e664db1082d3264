// Process-wide state of the simulated NVML: the reference-counted
// initialization, the simulated node it reads, and the device handles.
#pragma once

#include "driver/nvml_abi.h"
#include "sim/node/node_region.h"

// What an nvmlDevice_t points to: an entry of a static per-process table, so
// that handles stay valid across nvmlShutdown/nvmlInit and can be validated.
struct nvmlDevice_st {
  int index;
};

namespace vgpu::sim::nvml {

// nvmlInitWithFlags' work: the first call attaches to the node (creating it
// from VGPU_SIM_* if no libcuda process has yet, without registering as a
// compute process); later calls only count.
nvmlReturn_t Init(unsigned int flags);
nvmlReturn_t Shutdown();

// The attached node and its devices; valid while initialized. Node() is null
// when nvmlInitWithFlags(NVML_INIT_FLAG_NO_GPUS) found no node.
NodeRegion* Node();
unsigned int DeviceCount();
nvmlDevice_t Handle(unsigned int index);

// Whether devices a and b have a peer path (P2P; NVLink where the board has
// it): the pairs of VGPU_SIM_P2P as this process read it at nvmlInit, the same
// variable the simulated libcuda answers cuDeviceCanAccessPeer from.
bool PeerLinked(int a, int b);
// Whether device d has any peer.
bool HasPeer(int d);

// NVML_SUCCESS with the device index of `device`; NVML_ERROR_UNINITIALIZED
// before nvmlInit; NVML_ERROR_INVALID_ARGUMENT for anything but a handle this
// library gave out for a device of the node.
nvmlReturn_t Resolve(nvmlDevice_t device, int* index);
// NVML_SUCCESS while initialized, else NVML_ERROR_UNINITIALIZED.
nvmlReturn_t CheckInit();

// Copies a NUL-terminated string the NVML way: NVML_ERROR_INVALID_ARGUMENT
// for a null buffer, NVML_ERROR_INSUFFICIENT_SIZE if it does not fit.
nvmlReturn_t CopyOut(const char* text, char* buf, unsigned int length);

// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" from the 16 UUID bytes, the
// same bytes cuDeviceGetUuid returns. `out` holds at least 41 bytes.
void FormatUuid(const uint8_t (&uuid)[16], char* out);

}  // namespace vgpu::sim::nvml
