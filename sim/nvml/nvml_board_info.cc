// Board information of the simulated libnvidia-ml.so.1: serial number, part
// number, VBIOS and infoROM versions, persistence/ECC/MIG/display modes,
// BAR1, architecture and the PCIe link. Constant per device (see
// docs/sim.md, "NVML: what is modelled and what is constant").
#include <cstdio>

#include "driver/nvml_abi.h"
#include "sim/nvml/nvml_abi_ext.h"
#include "sim/nvml/nvml_board.h"
#include "sim/nvml/nvml_state.h"

#define NVML_EXPORT extern "C" __attribute__((visibility("default")))

namespace vgpu::sim::nvml {
namespace {

template <typename T>
nvmlReturn_t Begin(nvmlDevice_t device, T* out, int* index) {
  if (nvmlReturn_t r = Resolve(device, index); r != NVML_SUCCESS) return r;
  return out == nullptr ? NVML_ERROR_INVALID_ARGUMENT : NVML_SUCCESS;
}

const DeviceState& Dev(int d) { return Node()->device(d); }

// BAR1 maps device memory for the host (GPUDirect, cuMemHostRegister of
// device memory); boards size it to the next power of two above their
// memory (128 GiB on an 80 GB H100). The sim maps nothing through it but the
// driver's own few MiB.
constexpr unsigned long long kBar1UsedBytes = 2ull << 20;

unsigned long long Bar1Total(const DeviceState& d) {
  unsigned long long total = 1ull << 26;
  while (total < d.total_bytes) total <<= 1;
  return total;
}

}  // namespace
}  // namespace vgpu::sim::nvml

namespace nv = vgpu::sim::nvml;

// 13 digits like a board serial, derived from the device's UUID so that it
// is stable across processes and runs of the node.
NVML_EXPORT nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t device, char* serial,
                                             unsigned int length) {
  int d = 0;
  if (nvmlReturn_t r = nv::Resolve(device, &d); r != NVML_SUCCESS) return r;
  unsigned long long h = 0;
  for (uint8_t b : nv::Dev(d).uuid) h = h * 131 + b;
  char text[NVML_DEVICE_SERIAL_BUFFER_SIZE];
  std::snprintf(text, sizeof text, "16%011llu", h % 100000000000ull);
  return nv::CopyOut(text, serial, length);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetBoardPartNumber(nvmlDevice_t device, char* partNumber,
                                                      unsigned int length) {
  int d = 0;
  if (nvmlReturn_t r = nv::Resolve(device, &d); r != NVML_SUCCESS) return r;
  return nv::CopyOut(nv::Profile(nv::Dev(d)).part_number, partNumber, length);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetVbiosVersion(nvmlDevice_t device, char* version,
                                                   unsigned int length) {
  int d = 0;
  if (nvmlReturn_t r = nv::Resolve(device, &d); r != NVML_SUCCESS) return r;
  return nv::CopyOut(nv::Profile(nv::Dev(d)).vbios, version, length);
}

// The OEM and ECC objects exist on every data-center board; an H100 has no
// power-management object (nvidia-smi -q: "N/A").
NVML_EXPORT nvmlReturn_t nvmlDeviceGetInforomVersion(nvmlDevice_t device,
                                                     nvmlInforomObject_t object, char* version,
                                                     unsigned int length) {
  int d = 0;
  if (nvmlReturn_t r = nv::Resolve(device, &d); r != NVML_SUCCESS) return r;
  switch (object) {
    case NVML_INFOROM_OEM:
      return nv::CopyOut("2.1", version, length);
    case NVML_INFOROM_ECC:
      return nv::CopyOut("7.16", version, length);
    case NVML_INFOROM_POWER:
      return NVML_ERROR_NOT_SUPPORTED;
    default:
      return NVML_ERROR_INVALID_ARGUMENT;
  }
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetInforomImageVersion(nvmlDevice_t device, char* version,
                                                          unsigned int length) {
  int d = 0;
  if (nvmlReturn_t r = nv::Resolve(device, &d); r != NVML_SUCCESS) return r;
  return nv::CopyOut(nv::Profile(nv::Dev(d)).inforom_image, version, length);
}

// As on a node that runs nvidia-persistenced (the usual data-center setup):
// the simulated node keeps its state between processes anyway.
NVML_EXPORT nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t device,
                                                      nvmlEnableState_t* mode) {
  int d = 0;
  if (nvmlReturn_t r = nv::Begin(device, mode, &d); r != NVML_SUCCESS) return r;
  *mode = NVML_FEATURE_ENABLED;
  return NVML_SUCCESS;
}

// ECC is on, as data-center boards ship, and never counts an error (the
// sim's memory is host memory).
NVML_EXPORT nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t device, nvmlEnableState_t* current,
                                              nvmlEnableState_t* pending) {
  int d = 0;
  if (nvmlReturn_t r = nv::Begin(device, current, &d); r != NVML_SUCCESS) return r;
  if (pending == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *current = NVML_FEATURE_ENABLED;
  *pending = NVML_FEATURE_ENABLED;
  return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device,
                                                     nvmlMemoryErrorType_t errorType,
                                                     nvmlEccCounterType_t counterType,
                                                     unsigned long long* eccCounts) {
  int d = 0;
  if (nvmlReturn_t r = nv::Begin(device, eccCounts, &d); r != NVML_SUCCESS) return r;
  if (errorType >= NVML_MEMORY_ERROR_TYPE_COUNT || counterType >= NVML_ECC_COUNTER_TYPE_COUNT) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  *eccCounts = 0;
  return NVML_SUCCESS;
}

// Row remapping (Ampere and later): nothing remapped, nothing pending.
NVML_EXPORT nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned int* corrRows,
                                                   unsigned int* uncRows, unsigned int* isPending,
                                                   unsigned int* failureOccurred) {
  int d = 0;
  if (nvmlReturn_t r = nv::Begin(device, corrRows, &d); r != NVML_SUCCESS) return r;
  if (uncRows == nullptr || isPending == nullptr || failureOccurred == nullptr) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  if (nv::Dev(d).cc_major < 8) return NVML_ERROR_NOT_SUPPORTED;
  *corrRows = *uncRows = *isPending = *failureOccurred = 0;
  return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetBAR1MemoryInfo(nvmlDevice_t device,
                                                     nvmlBAR1Memory_t* bar1Memory) {
  int d = 0;
  if (nvmlReturn_t r = nv::Begin(device, bar1Memory, &d); r != NVML_SUCCESS) return r;
  bar1Memory->bar1Total = nv::Bar1Total(nv::Dev(d));
  bar1Memory->bar1Used = nv::kBar1UsedBytes;
  bar1Memory->bar1Free = bar1Memory->bar1Total - nv::kBar1UsedBytes;
  return NVML_SUCCESS;
}

// MIG-capable boards (A100, H100, B200) report it disabled: the sim has no
// GPU instances. Others do not support the query, as on a real A10 or L40S.
NVML_EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int* currentMode,
                                              unsigned int* pendingMode) {
  int d = 0;
  if (nvmlReturn_t r = nv::Begin(device, currentMode, &d); r != NVML_SUCCESS) return r;
  if (pendingMode == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (!nv::Profile(nv::Dev(d)).mig_capable) return NVML_ERROR_NOT_SUPPORTED;
  *currentMode = NVML_DEVICE_MIG_DISABLE;
  *pendingMode = NVML_DEVICE_MIG_DISABLE;
  return NVML_SUCCESS;
}

// Every handle this library gives out is a whole GPU.
NVML_EXPORT nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device,
                                                     unsigned int* isMigDevice) {
  int d = 0;
  if (nvmlReturn_t r = nv::Begin(device, isMigDevice, &d); r != NVML_SUCCESS) return r;
  *isMigDevice = 0;
  return NVML_SUCCESS;
}

// Compute boards drive no display.
NVML_EXPORT nvmlReturn_t nvmlDeviceGetDisplayMode(nvmlDevice_t device, nvmlEnableState_t* display) {
  int d = 0;
  if (nvmlReturn_t r = nv::Begin(device, display, &d); r != NVML_SUCCESS) return r;
  *display = NVML_FEATURE_DISABLED;
  return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetDisplayActive(nvmlDevice_t device,
                                                    nvmlEnableState_t* isActive) {
  return nvmlDeviceGetDisplayMode(device, isActive);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t device,
                                                   nvmlDeviceArchitecture_t* arch) {
  int d = 0;
  if (nvmlReturn_t r = nv::Begin(device, arch, &d); r != NVML_SUCCESS) return r;
  const auto& dev = nv::Dev(d);
  switch (dev.cc_major) {
    case 7:
      *arch = dev.cc_minor >= 5 ? NVML_DEVICE_ARCH_TURING : NVML_DEVICE_ARCH_VOLTA;
      break;
    case 8:
      *arch = dev.cc_minor == 9 ? NVML_DEVICE_ARCH_ADA : NVML_DEVICE_ARCH_AMPERE;
      break;
    case 9:
      *arch = NVML_DEVICE_ARCH_HOPPER;
      break;
    case 10:
    case 12:
      *arch = NVML_DEVICE_ARCH_BLACKWELL;
      break;
    default:
      *arch = NVML_DEVICE_ARCH_UNKNOWN;
  }
  return NVML_SUCCESS;
}

// The PCIe link runs at the board's generation and width; the sim does not
// drop it at idle, as real boards may.
NVML_EXPORT nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t device,
                                                             unsigned int* currLinkGen) {
  int d = 0;
  if (nvmlReturn_t r = nv::Begin(device, currLinkGen, &d); r != NVML_SUCCESS) return r;
  *currLinkGen = nv::Profile(nv::Dev(d)).pcie_generation;
  return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t device,
                                                            unsigned int* maxLinkGen) {
  return nvmlDeviceGetCurrPcieLinkGeneration(device, maxLinkGen);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetGpuMaxPcieLinkGeneration(nvmlDevice_t device,
                                                               unsigned int* maxLinkGenDevice) {
  return nvmlDeviceGetCurrPcieLinkGeneration(device, maxLinkGenDevice);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t device,
                                                        unsigned int* currLinkWidth) {
  int d = 0;
  if (nvmlReturn_t r = nv::Begin(device, currLinkWidth, &d); r != NVML_SUCCESS) return r;
  *currLinkWidth = nv::Profile(nv::Dev(d)).pcie_width;
  return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t device,
                                                       unsigned int* maxLinkWidth) {
  return nvmlDeviceGetCurrPcieLinkWidth(device, maxLinkWidth);
}

// KB/s over the last 20 ms. The sim does not account host-device traffic
// (copies are host memcpys on the stream workers), so it reads 0.
NVML_EXPORT nvmlReturn_t nvmlDeviceGetPcieThroughput(nvmlDevice_t device,
                                                     nvmlPcieUtilCounter_t counter,
                                                     unsigned int* value) {
  int d = 0;
  if (nvmlReturn_t r = nv::Begin(device, value, &d); r != NVML_SUCCESS) return r;
  if (counter >= NVML_PCIE_UTIL_COUNT) return NVML_ERROR_INVALID_ARGUMENT;
  *value = 0;
  return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetPcieReplayCounter(nvmlDevice_t device, unsigned int* value) {
  int d = 0;
  if (nvmlReturn_t r = nv::Begin(device, value, &d); r != NVML_SUCCESS) return r;
  *value = 0;
  return NVML_SUCCESS;
}
