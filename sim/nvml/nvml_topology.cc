// Topology of the simulated libnvidia-ml.so.1: NVLink, P2P status, common
// PCIe ancestors and CPU/memory affinity, from VGPU_SIM_P2P so that NVML and
// the simulated libcuda (cuDeviceCanAccessPeer) agree.
//
// The model: a configured pair shares a PCIe switch (NVML_TOPOLOGY_SINGLE,
// where P2P works) and, on boards with NVLink (SXM), is also NVLink-connected
// (all of the board's links active, as through an HGX baseboard's
// NVSwitches); any other pair meets only at the system level
// (NVML_TOPOLOGY_SYSTEM), where the chipset does not route P2P. A device with
// no peer has no NVLink at all, like a PCIe board without a bridge.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "driver/nvml_abi.h"
#include "sim/nvml/nvml_abi_ext.h"
#include "sim/nvml/nvml_board.h"
#include "sim/nvml/nvml_state.h"

#define NVML_EXPORT extern "C" __attribute__((visibility("default")))

namespace vgpu::sim::nvml {
namespace {

constexpr unsigned int kBitsPerWord = 8 * sizeof(unsigned long);

nvmlGpuTopologyLevel_t Ancestor(int a, int b) {
  if (a == b) return NVML_TOPOLOGY_INTERNAL;
  return PeerLinked(a, b) ? NVML_TOPOLOGY_SINGLE : NVML_TOPOLOGY_SYSTEM;
}

// The host's online CPUs ("0-3,8-11"): the sim places its devices on no
// NUMA node in particular, so every CPU is as close as any other.
void OnlineCpus(unsigned long* set, unsigned int words) {
  std::memset(set, 0, sizeof(unsigned long) * words);
  std::string text;
  if (FILE* f = std::fopen("/sys/devices/system/cpu/online", "re")) {
    char buf[4096];
    size_t n = std::fread(buf, 1, sizeof buf - 1, f);
    std::fclose(f);
    text.assign(buf, n);
  }
  if (text.empty()) {
    long n = sysconf(_SC_NPROCESSORS_CONF);
    text = "0-" + std::to_string(n > 0 ? n - 1 : 0);
  }
  const char* p = text.c_str();
  while (*p != '\0') {
    char* end = nullptr;
    unsigned long first = std::strtoul(p, &end, 10);
    if (end == p) break;
    unsigned long last = first;
    p = end;
    if (*p == '-') {
      last = std::strtoul(p + 1, &end, 10);
      p = end;
    }
    for (unsigned long c = first; c <= last && c < words * kBitsPerWord; ++c) {
      set[c / kBitsPerWord] |= 1ul << (c % kBitsPerWord);
    }
    if (*p == ',')
      ++p;
    else
      break;
  }
}

}  // namespace
}  // namespace vgpu::sim::nvml

namespace nv = vgpu::sim::nvml;

NVML_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link,
                                                  nvmlEnableState_t* isActive) {
  int d = 0;
  if (nvmlReturn_t r = nv::Resolve(device, &d); r != NVML_SUCCESS) return r;
  if (isActive == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  unsigned int links = nv::NvlinkCount(d);
  if (links == 0) return NVML_ERROR_NOT_SUPPORTED;
  if (link >= links) return NVML_ERROR_INVALID_ARGUMENT;
  *isActive = NVML_FEATURE_ENABLED;
  return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkVersion(nvmlDevice_t device, unsigned int link,
                                                    unsigned int* version) {
  int d = 0;
  if (nvmlReturn_t r = nv::Resolve(device, &d); r != NVML_SUCCESS) return r;
  if (version == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  unsigned int links = nv::NvlinkCount(d);
  if (links == 0) return NVML_ERROR_NOT_SUPPORTED;
  if (link >= links) return NVML_ERROR_INVALID_ARGUMENT;
  *version = nv::Profile(nv::Node()->device(d)).nvlink_version;
  return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t device1, nvmlDevice_t device2,
                                                nvmlGpuP2PCapsIndex_t p2pIndex,
                                                nvmlGpuP2PStatus_t* p2pStatus) {
  int a = 0, b = 0;
  if (nvmlReturn_t r = nv::Resolve(device1, &a); r != NVML_SUCCESS) return r;
  if (nvmlReturn_t r = nv::Resolve(device2, &b); r != NVML_SUCCESS) return r;
  if (p2pStatus == nullptr || a == b) return NVML_ERROR_INVALID_ARGUMENT;
  const bool peers = nv::PeerLinked(a, b);
  switch (p2pIndex) {
    case NVML_P2P_CAPS_INDEX_READ:
    case NVML_P2P_CAPS_INDEX_WRITE:
    case NVML_P2P_CAPS_INDEX_ATOMICS:
    case NVML_P2P_CAPS_INDEX_PCI:
      *p2pStatus = peers ? NVML_P2P_STATUS_OK : NVML_P2P_STATUS_CHIPSET_NOT_SUPPORTED;
      return NVML_SUCCESS;
    case NVML_P2P_CAPS_INDEX_NVLINK:
      *p2pStatus = peers && nv::NvlinkCount(a) > 0 && nv::NvlinkCount(b) > 0
                       ? NVML_P2P_STATUS_OK
                       : NVML_P2P_STATUS_NOT_SUPPORTED;
      return NVML_SUCCESS;
    default:
      return NVML_ERROR_INVALID_ARGUMENT;
  }
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t device1,
                                                             nvmlDevice_t device2,
                                                             nvmlGpuTopologyLevel_t* pathInfo) {
  int a = 0, b = 0;
  if (nvmlReturn_t r = nv::Resolve(device1, &a); r != NVML_SUCCESS) return r;
  if (nvmlReturn_t r = nv::Resolve(device2, &b); r != NVML_SUCCESS) return r;
  if (pathInfo == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *pathInfo = nv::Ancestor(a, b);
  return NVML_SUCCESS;
}

// The other GPUs whose common ancestor with `device` is at `level` or
// closer. *count 0 asks for the number; else up to *count are written.
NVML_EXPORT nvmlReturn_t nvmlDeviceGetTopologyNearestGpus(nvmlDevice_t device,
                                                          nvmlGpuTopologyLevel_t level,
                                                          unsigned int* count,
                                                          nvmlDevice_t* deviceArray) {
  int d = 0;
  if (nvmlReturn_t r = nv::Resolve(device, &d); r != NVML_SUCCESS) return r;
  if (count == nullptr || (*count > 0 && deviceArray == nullptr)) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  unsigned int n = 0;
  for (unsigned int i = 0; i < nv::DeviceCount(); ++i) {
    int other = static_cast<int>(i);
    if (other == d || nv::Ancestor(d, other) > level) continue;
    if (*count > 0 && n < *count) deviceArray[n] = nv::Handle(i);
    ++n;
  }
  if (*count > 0 && n > *count) n = *count;
  *count = n;
  return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetCpuAffinity(nvmlDevice_t device, unsigned int cpuSetSize,
                                                  unsigned long* cpuSet) {
  int d = 0;
  if (nvmlReturn_t r = nv::Resolve(device, &d); r != NVML_SUCCESS) return r;
  if (cpuSet == nullptr || cpuSetSize == 0) return NVML_ERROR_INVALID_ARGUMENT;
  nv::OnlineCpus(cpuSet, cpuSetSize);
  return NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetCpuAffinityWithinScope(nvmlDevice_t device,
                                                             unsigned int cpuSetSize,
                                                             unsigned long* cpuSet,
                                                             nvmlAffinityScope_t scope) {
  if (scope != NVML_AFFINITY_SCOPE_NODE && scope != NVML_AFFINITY_SCOPE_SOCKET) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  return nvmlDeviceGetCpuAffinity(device, cpuSetSize, cpuSet);
}

// NUMA node 0 (or socket 0): one memory node, as the sim places nothing.
NVML_EXPORT nvmlReturn_t nvmlDeviceGetMemoryAffinity(nvmlDevice_t device, unsigned int nodeSetSize,
                                                     unsigned long* nodeSet,
                                                     nvmlAffinityScope_t scope) {
  int d = 0;
  if (nvmlReturn_t r = nv::Resolve(device, &d); r != NVML_SUCCESS) return r;
  if (nodeSet == nullptr || nodeSetSize == 0 ||
      (scope != NVML_AFFINITY_SCOPE_NODE && scope != NVML_AFFINITY_SCOPE_SOCKET)) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  std::memset(nodeSet, 0, sizeof(unsigned long) * nodeSetSize);
  nodeSet[0] = 1;
  return NVML_SUCCESS;
}
