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
  // Device <-> host memory (what a checkpoint or restore moves over): a PCIe
  // Gen4 x16 link's sustained rate; Gen5 boards reach about twice that.
  uint64_t host_link_bytes_per_s = 25'000'000'000ull;
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
