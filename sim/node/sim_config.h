// Configuration of the simulated node, read once from the environment.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace vgpu::sim {

struct DeviceSpec {
  uint64_t total_bytes = 16ull << 30;
  int cc_major = 9;
  int cc_minor = 0;
  int sm_count = 132;
  uint64_t mem_bandwidth_bytes_per_s = 3'350'000'000'000ull;  // H100 SXM HBM3
  // The driver checkpoint API's copy rates (device memory to the process's
  // host memory and back), as driver 580 moved an 8 GiB job on an H100:
  // 2.30 GB/s checkpoint, 5.97 GB/s restore (2026-11-26, docs/gpu-validation.md).
  uint64_t checkpoint_bytes_per_s = 2'300'000'000ull;
  uint64_t restore_bytes_per_s = 5'970'000'000ull;
};

struct SimConfig {
  std::string node_name = "default";
  std::vector<DeviceSpec> devices;
  std::string devices_spec;  // canonical text, compared across processes of a node
  std::vector<std::string> kernel_libraries;  // VGPU_SIM_KERNELS
  std::string faults;                         // VGPU_SIM_FAULTS, parsed by FaultInjector
  // VGPU_SIM_P2P: pairs of devices with a peer path (both directions).
  std::vector<std::pair<int, int>> p2p;
  bool PeerAccess(int a, int b) const;
};

// Parses VGPU_SIM_P2P: "none" (the default), "all", or pairs "0-1,2-3".
bool ParseP2pSpec(const std::string& text, int device_count, std::vector<std::pair<int, int>>* out,
                  std::string* error);

// Parses VGPU_SIM_DEVICES, e.g. "4x16GiB", "2x80GiB,1x24GiB", "16GiB:sm=108:cc=8.0".
// Returns false and fills *error with a one-line message naming the variable.
bool ParseDevicesSpec(const std::string& text, std::vector<DeviceSpec>* out, std::string* error);

// Reads all VGPU_SIM_* variables. Returns false with a message on malformed values.
bool LoadSimConfig(SimConfig* out, std::string* error);

}  // namespace vgpu::sim
