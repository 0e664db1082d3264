// nvmlDevice* queries of the simulated libnvidia-ml.so.1: enumeration,
// identity, memory and utilization, read from the shared node region that the
// simulated libcuda processes update.
#include <strings.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "driver/nvml_abi.h"
#include "sim/node/node_region.h"
#include "sim/nvml/nvml_state.h"

#define NVML_EXPORT extern "C" __attribute__((visibility("default")))

namespace vgpu::sim::nvml {
namespace {

constexpr unsigned int kNvidiaVendorId = 0x10de;
constexpr uint64_t kUtilizationWindowNs = 1'000'000'000;  // "the past sample period"

// PCI device id of a board of this compute capability, so that tools that map
// ids to product families see a consistent one.
unsigned int PciDeviceId(const DeviceState& d) {
  switch (d.cc_major * 10 + d.cc_minor) {
    case 70:
      return 0x1db1;  // V100-SXM2
    case 80:
      return 0x20b2;  // A100-SXM4-80GB
    case 86:
      return 0x2236;  // A10
    case 89:
      return 0x26b9;  // L40S
    case 100:
      return 0x2901;  // B200
    default:
      return 0x2330;  // H100-SXM5-80GB
  }
}

// Domain 0, device 0, function 0 on the device's bus, as cuDeviceGetPCIBusId.
void FillPci(const DeviceState& d, nvmlPciInfo_t* pci) {
  std::memset(pci, 0, sizeof *pci);
  pci->domain = 0;
  pci->bus = static_cast<unsigned int>(d.pci_bus);
  pci->device = 0;
  pci->pciDeviceId = PciDeviceId(d) << 16 | kNvidiaVendorId;
  pci->pciSubSystemId = PciDeviceId(d) << 16 | kNvidiaVendorId;
  std::snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04X:%02X:%02X.0", pci->domain,
                pci->bus, pci->device);
  std::snprintf(pci->busId, sizeof pci->busId, "%08X:%02X:%02X.0", pci->domain, pci->bus,
                pci->device);
}

// Parses "[domain:]bus:device[.function]" in hex, as NVML accepts it.
bool ParsePciBusId(const char* text, unsigned int* domain, unsigned int* bus,
                   unsigned int* device) {
  unsigned long fields[3];
  int n = 0;
  const char* p = text;
  while (n < 3) {
    char* end = nullptr;
    if (!std::isxdigit(static_cast<unsigned char>(*p))) return false;
    fields[n++] = std::strtoul(p, &end, 16);
    p = end;
    if (*p != ':') break;
    ++p;
  }
  if (n < 2) return false;
  if (*p == '.') {  // the function: any, the sim has one per device
    if (!std::isxdigit(static_cast<unsigned char>(p[1]))) return false;
    char* end = nullptr;
    std::strtoul(p + 1, &end, 16);
    p = end;
  }
  if (*p != '\0') return false;
  *domain = n == 3 ? static_cast<unsigned int>(fields[0]) : 0;
  *bus = static_cast<unsigned int>(fields[n - 2]);
  *device = static_cast<unsigned int>(fields[n - 1]);
  return true;
}

// Resolves a handle to its device state in one step.
nvmlReturn_t Device(nvmlDevice_t handle, const DeviceState** out, int* index = nullptr) {
  int i = 0;
  if (nvmlReturn_t r = Resolve(handle, &i); r != NVML_SUCCESS) return r;
  *out = &Node()->device(i);
  if (index != nullptr) *index = i;
  return NVML_SUCCESS;
}

// Used bytes as the node counts them, after giving back the memory of
// processes that died without cleaning up: the real driver frees it at exit,
// the simulated node only when someone reaps.
void UsedAndTotal(int index, uint64_t* used, uint64_t* total) {
  Node()->ReapDead();
  const DeviceState& d = Node()->device(index);
  *total = d.total_bytes;
  *used = d.used_bytes.load(std::memory_order_relaxed);
  if (*used > *total) *used = *total;  // never report negative free memory
}

// What the driver sets aside for itself: NVML's total counts it,
// cuDeviceTotalMem does not. Driver 580 on an H200: 615 MiB of 143,161 MiB,
// 1/232; modelled as that fraction, in whole MiB.
uint64_t ReservedFor(uint64_t total) {
  constexpr uint64_t kMiB = 1ull << 20;
  return (total / 232 + kMiB - 1) / kMiB * kMiB;
}

}  // namespace
}  // namespace vgpu::sim::nvml

namespace nv = vgpu::sim::nvml;
using vgpu::sim::DeviceState;

NVML_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* deviceCount) {
  if (nvmlReturn_t r = nv::CheckInit(); r != NVML_SUCCESS) return r;
  if (deviceCount == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *deviceCount = nv::DeviceCount();
  return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int* deviceCount) {
  return nvmlDeviceGetCount_v2(deviceCount);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  if (nvmlReturn_t r = nv::CheckInit(); r != NVML_SUCCESS) return r;
  if (device == nullptr || index >= nv::DeviceCount()) return NVML_ERROR_INVALID_ARGUMENT;
  *device = nv::Handle(index);
  return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t* device) {
  return nvmlDeviceGetHandleByIndex_v2(index, device);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char* uuid, nvmlDevice_t* device) {
  if (nvmlReturn_t r = nv::CheckInit(); r != NVML_SUCCESS) return r;
  if (uuid == nullptr || device == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  for (unsigned int i = 0; i < nv::DeviceCount(); ++i) {
    char text[41];
    nv::FormatUuid(nv::Node()->device(static_cast<int>(i)).uuid, text);
    if (strcasecmp(text, uuid) == 0) {
      *device = nv::Handle(i);
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_NOT_FOUND;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char* pciBusId,
                                                          nvmlDevice_t* device) {
  if (nvmlReturn_t r = nv::CheckInit(); r != NVML_SUCCESS) return r;
  unsigned int domain = 0, bus = 0, dev = 0;
  if (pciBusId == nullptr || device == nullptr ||
      !nv::ParsePciBusId(pciBusId, &domain, &bus, &dev)) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  for (unsigned int i = 0; i < nv::DeviceCount(); ++i) {
    nvmlPciInfo_t pci;
    nv::FillPci(nv::Node()->device(static_cast<int>(i)), &pci);
    if (pci.domain == domain && pci.bus == bus && pci.device == dev) {
      *device = nv::Handle(i);
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_NOT_FOUND;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char* pciBusId, nvmlDevice_t* device) {
  return nvmlDeviceGetHandleByPciBusId_v2(pciBusId, device);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length) {
  const DeviceState* d = nullptr;
  if (nvmlReturn_t r = nv::Device(device, &d); r != NVML_SUCCESS) return r;
  return nv::CopyOut(d->name, name, length);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length) {
  const DeviceState* d = nullptr;
  if (nvmlReturn_t r = nv::Device(device, &d); r != NVML_SUCCESS) return r;
  char text[41];
  nv::FormatUuid(d->uuid, text);
  return nv::CopyOut(text, uuid, length);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int* index) {
  int i = 0;
  if (nvmlReturn_t r = nv::Resolve(device, &i); r != NVML_SUCCESS) return r;
  if (index == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *index = static_cast<unsigned int>(i);
  return NVML_SUCCESS;
}

// /dev/nvidia<minor>: the sim numbers its device nodes by index.
NVML_EXPORT nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int* minorNumber) {
  return nvmlDeviceGetIndex(device, minorNumber);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  const DeviceState* d = nullptr;
  if (nvmlReturn_t r = nv::Device(device, &d); r != NVML_SUCCESS) return r;
  if (pci == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  nv::FillPci(*d, pci);
  return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  return nvmlDeviceGetPciInfo_v3(device, pci);
}

// Old binaries pass the 52-byte NVML 1.x layout: fill only that.
NVML_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t device, nvmlPciInfoLegacy_t* pci) {
  const DeviceState* d = nullptr;
  if (nvmlReturn_t r = nv::Device(device, &d); r != NVML_SUCCESS) return r;
  if (pci == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  nvmlPciInfo_t full;
  nv::FillPci(*d, &full);
  std::memset(pci, 0, sizeof *pci);
  std::memcpy(pci->busId, full.busIdLegacy, sizeof pci->busId);
  pci->domain = full.domain;
  pci->bus = full.bus;
  pci->device = full.device;
  pci->pciDeviceId = full.pciDeviceId;
  pci->pciSubSystemId = full.pciSubSystemId;
  return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int* major,
                                                            int* minor) {
  const DeviceState* d = nullptr;
  if (nvmlReturn_t r = nv::Device(device, &d); r != NVML_SUCCESS) return r;
  if (major == nullptr || minor == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *major = d->cc_major;
  *minor = d->cc_minor;
  return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetMultiGpuBoard(nvmlDevice_t device,
                                                    unsigned int* multiGpuBool) {
  const DeviceState* d = nullptr;
  if (nvmlReturn_t r = nv::Device(device, &d); r != NVML_SUCCESS) return r;
  if (multiGpuBool == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *multiGpuBool = 0;
  return NVML_SUCCESS;
}

// Data-center boards report the plain "NVIDIA" brand since the A100.
NVML_EXPORT nvmlReturn_t nvmlDeviceGetBrand(nvmlDevice_t device, nvmlBrandType_t* type) {
  const DeviceState* d = nullptr;
  if (nvmlReturn_t r = nv::Device(device, &d); r != NVML_SUCCESS) return r;
  if (type == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *type = d->cc_major >= 8 ? NVML_BRAND_NVIDIA : NVML_BRAND_TESLA;
  return NVML_SUCCESS;
}

// Contexts of several processes time-share each simulated device.
NVML_EXPORT nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t device, nvmlComputeMode_t* mode) {
  const DeviceState* d = nullptr;
  if (nvmlReturn_t r = nv::Device(device, &d); r != NVML_SUCCESS) return r;
  if (mode == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *mode = NVML_COMPUTEMODE_DEFAULT;
  return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  int i = 0;
  if (nvmlReturn_t r = nv::Resolve(device, &i); r != NVML_SUCCESS) return r;
  if (memory == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  uint64_t used = 0, total = 0;
  nv::UsedAndTotal(i, &used, &total);
  // Version 1 counts the reserved memory as used (free + used == total).
  const uint64_t reserved = nv::ReservedFor(total);
  memory->total = total + reserved;
  memory->used = used + reserved;
  memory->free = total - used;
  return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t* memory) {
  int i = 0;
  if (nvmlReturn_t r = nv::Resolve(device, &i); r != NVML_SUCCESS) return r;
  if (memory == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (memory->version != nvmlMemory_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  uint64_t used = 0, total = 0;
  nv::UsedAndTotal(i, &used, &total);
  memory->reserved = nv::ReservedFor(total);
  memory->total = total + memory->reserved;
  memory->used = used;
  memory->free = total - used;
  return NVML_SUCCESS;
}

// GPU: share of the last second the device's engine ran a kernel. Memory:
// the sim does not model DRAM traffic, so 0.
NVML_EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device,
                                                       nvmlUtilization_t* utilization) {
  int i = 0;
  if (nvmlReturn_t r = nv::Resolve(device, &i); r != NVML_SUCCESS) return r;
  if (utilization == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  double busy = nv::Node()->Utilization(i, nv::kUtilizationWindowNs);
  long percent = std::lround(busy * 100.0);
  utilization->gpu = static_cast<unsigned int>(percent < 0 ? 0 : percent > 100 ? 100 : percent);
  utilization->memory = 0;
  return NVML_SUCCESS;
}
