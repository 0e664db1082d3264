// The board a simulated device poses as, and the physical model behind the
// simulated NVML's sensors: temperature, power, energy and clocks follow the
// device's execution engine (its busy fraction over the last second), so a
// monitor sees a busy device warm up, draw power and boost its clocks.
#pragma once

#include <cstdint>

#include "sim/node/node_region.h"

namespace vgpu::sim::nvml {

// Static figures of the data-center board of a compute capability (and SM
// count, where one capability has several boards), from NVIDIA's data sheets.
struct BoardProfile {
  const char* product;      // for comments and the part number
  const char* part_number;  // nvmlDeviceGetBoardPartNumber
  const char* vbios;        // nvmlDeviceGetVbiosVersion
  const char* inforom_image;
  unsigned int idle_mw, tdp_mw, min_limit_mw;
  unsigned int idle_sm_mhz, max_sm_mhz, app_sm_mhz;
  unsigned int memory_bus_bits;  // with the configured bandwidth: the memory clock
  unsigned int pcie_generation, pcie_width;
  unsigned int nvlink_version;  // 0: none
  bool mig_capable;
};

const BoardProfile& Profile(const DeviceState& d);

// Engine busy fraction of device d over the last second (0..1), as
// nvmlDeviceGetUtilizationRates reports it.
double Busy(int d);

// The model: linear in the busy fraction between the idle and the full-load
// figure, with no thermal lag (the sim has no heat capacity to model).
inline constexpr unsigned int kIdleTempC = 30, kBusyTempC = 70;
unsigned int TemperatureC(int d);
unsigned int MemoryTemperatureC(int d);
unsigned int PowerMw(int d);
// Energy since the node was created, in mJ: the integral of the power model,
// idle power over the node's lifetime plus (TDP - idle) over the engine's
// busy time, so it agrees exactly with the power readings over any window.
// Never decreases within a process.
unsigned long long EnergyMj(int d);
// SM (= graphics) clock: the maximum while the engine worked in the last
// second (GPU Boost), the idle clock otherwise.
unsigned int SmClockMhz(int d);
// NVLinks of device d: all of its board's (Volta 6, Ampere 12, Hopper and
// Blackwell 18) when VGPU_SIM_P2P gives it a peer and the board has NVLink;
// else 0.
unsigned int NvlinkCount(int d);
// Memory clock from the configured bandwidth and the board's bus width
// (double data rate): 3350 GB/s on 5120 bits is 2617 MHz, an H100's 2619.
unsigned int MemClockMhz(const DeviceState& d);

}  // namespace vgpu::sim::nvml
