#include "sim/nvml/nvml_board.h"

#include <algorithm>
#include <atomic>
#include <cmath>

#include "sim/nvml/nvml_abi_ext.h"
#include "sim/nvml/nvml_state.h"

namespace vgpu::sim::nvml {
namespace {

constexpr uint64_t kUtilizationWindowNs = 1'000'000'000;

// Power figures: TDP and the lowest settable limit from the data sheets;
// idle power as such boards read in nvidia-smi with nothing running (an
// H100 SXM ~70 W). Clocks: max SM clock and default application clock from
// the data sheets, idle clock as nvidia-smi shows it. Part numbers, VBIOS
// and infoROM image versions are made up in the real formats: tools print
// them, none should trust them.
constexpr BoardProfile kH100Sxm = {
    .product = "H100 SXM5",
    .part_number = "692-2G520-0200-000",
    .vbios = "96.00.99.00.01",
    .inforom_image = "G520.0200.00.05",
    .idle_mw = 70'000,
    .tdp_mw = 700'000,
    .min_limit_mw = 200'000,
    .idle_sm_mhz = 345,
    .max_sm_mhz = 1980,
    .app_sm_mhz = 1755,
    .memory_bus_bits = 5120,
    .pcie_generation = 5,
    .pcie_width = 16,
    .nvlink_version = 4,
    .mig_capable = true,
};

constexpr BoardProfile kH100Pcie = {
    .product = "H100 PCIe",
    .part_number = "900-21010-0000-000",
    .vbios = "96.00.99.00.02",
    .inforom_image = "G520.0201.00.01",
    .idle_mw = 50'000,
    .tdp_mw = 350'000,
    .min_limit_mw = 200'000,
    .idle_sm_mhz = 345,
    .max_sm_mhz = 1755,
    .app_sm_mhz = 1620,
    .memory_bus_bits = 5120,
    .pcie_generation = 5,
    .pcie_width = 16,
    .nvlink_version = 0,
    .mig_capable = true,
};

constexpr BoardProfile kB200 = {
    .product = "B200",
    .part_number = "692-2G525-0200-000",
    .vbios = "97.00.99.00.01",
    .inforom_image = "G525.0200.00.01",
    .idle_mw = 140'000,
    .tdp_mw = 1'000'000,
    .min_limit_mw = 200'000,
    .idle_sm_mhz = 345,
    .max_sm_mhz = 1965,
    .app_sm_mhz = 1965,
    .memory_bus_bits = 8192,
    .pcie_generation = 5,
    .pcie_width = 16,
    .nvlink_version = 5,
    .mig_capable = true,
};

constexpr BoardProfile kA100Sxm = {
    .product = "A100 SXM4",
    .part_number = "692-2G506-0210-002",
    .vbios = "92.00.99.00.01",
    .inforom_image = "G506.0210.00.04",
    .idle_mw = 55'000,
    .tdp_mw = 400'000,
    .min_limit_mw = 100'000,
    .idle_sm_mhz = 210,
    .max_sm_mhz = 1410,
    .app_sm_mhz = 1410,
    .memory_bus_bits = 5120,
    .pcie_generation = 4,
    .pcie_width = 16,
    .nvlink_version = 3,
    .mig_capable = true,
};

constexpr BoardProfile kA10 = {
    .product = "A10",
    .part_number = "900-2G133-0000-000",
    .vbios = "94.02.99.00.01",
    .inforom_image = "G133.0500.00.01",
    .idle_mw = 20'000,
    .tdp_mw = 150'000,
    .min_limit_mw = 100'000,
    .idle_sm_mhz = 210,
    .max_sm_mhz = 1695,
    .app_sm_mhz = 1695,
    .memory_bus_bits = 384,
    .pcie_generation = 4,
    .pcie_width = 16,
    .nvlink_version = 0,
    .mig_capable = false,
};

constexpr BoardProfile kL40s = {
    .product = "L40S",
    .part_number = "900-2G133-0080-000",
    .vbios = "95.02.99.00.01",
    .inforom_image = "G133.0580.00.01",
    .idle_mw = 35'000,
    .tdp_mw = 350'000,
    .min_limit_mw = 100'000,
    .idle_sm_mhz = 210,
    .max_sm_mhz = 2520,
    .app_sm_mhz = 2520,
    .memory_bus_bits = 384,
    .pcie_generation = 4,
    .pcie_width = 16,
    .nvlink_version = 0,
    .mig_capable = false,
};

constexpr BoardProfile kV100Sxm = {
    .product = "V100 SXM2",
    .part_number = "900-2G503-0000-000",
    .vbios = "88.00.99.00.01",
    .inforom_image = "G503.0201.00.03",
    .idle_mw = 40'000,
    .tdp_mw = 300'000,
    .min_limit_mw = 150'000,
    .idle_sm_mhz = 135,
    .max_sm_mhz = 1530,
    .app_sm_mhz = 1312,
    .memory_bus_bits = 4096,
    .pcie_generation = 3,
    .pcie_width = 16,
    .nvlink_version = 2,
    .mig_capable = false,
};

// Per-process high-water mark of each device's energy reading: the engine's
// counters are read without a lock, and a kernel ending between the reads
// could make one reading a hair lower than the one before.
std::atomic<unsigned long long> g_energy_seen[kMaxDevices];

}  // namespace

const BoardProfile& Profile(const DeviceState& d) {
  switch (d.cc_major * 10 + d.cc_minor) {
    case 70:
      return kV100Sxm;
    case 80:
      return kA100Sxm;
    case 86:
      return kA10;
    case 89:
      return kL40s;
    case 100:
      return kB200;
    case 90:
      // The PCIe H100 has 114 SMs, the SXM5 board 132.
      return d.sm_count <= 114 ? kH100Pcie : kH100Sxm;
    default:
      return kH100Sxm;
  }
}

double Busy(int d) { return Node()->Utilization(d, kUtilizationWindowNs); }

unsigned int TemperatureC(int d) {
  return kIdleTempC + static_cast<unsigned int>(std::lround((kBusyTempC - kIdleTempC) * Busy(d)));
}

// HBM sits beside the die and reads a few degrees warmer.
unsigned int MemoryTemperatureC(int d) { return TemperatureC(d) + 3; }

unsigned int PowerMw(int d) {
  const BoardProfile& p = Profile(Node()->device(d));
  return p.idle_mw + static_cast<unsigned int>(std::lround((p.tdp_mw - p.idle_mw) * Busy(d)));
}

unsigned long long EnergyMj(int d) {
  NodeRegion* node = Node();
  const DeviceState& dev = node->device(d);
  const BoardProfile& p = Profile(dev);
  uint64_t now = NowNs();
  uint64_t busy = dev.busy_ns.load();
  uint64_t running = dev.running_since_ns.load();
  if (running != 0 && running < now) busy += now - running;
  uint64_t lifetime = now - std::min(now, node->header()->created_ns);
  busy = std::min(busy, lifetime);
  // mW * ns = 1e-12 J = 1e-9 mJ; 128-bit so a node can run for years.
  unsigned __int128 picojoules = static_cast<unsigned __int128>(p.idle_mw) * lifetime +
                                 static_cast<unsigned __int128>(p.tdp_mw - p.idle_mw) * busy;
  auto mj = static_cast<unsigned long long>(picojoules / 1'000'000'000u);
  std::atomic<unsigned long long>& seen = g_energy_seen[node->Phys(d)];
  unsigned long long prev = seen.load(std::memory_order_relaxed);
  while (mj > prev && !seen.compare_exchange_weak(prev, mj, std::memory_order_relaxed)) {
  }
  return std::max(mj, prev);
}

unsigned int SmClockMhz(int d) {
  const BoardProfile& p = Profile(Node()->device(d));
  return Busy(d) > 0.0 ? p.max_sm_mhz : p.idle_sm_mhz;
}

unsigned int NvlinkCount(int d) {
  if (!HasPeer(d)) return 0;
  switch (Profile(Node()->device(d)).nvlink_version) {
    case 0:
      return 0;
    case 2:
      return 6;
    case 3:
      return 12;
    default:
      return NVML_NVLINK_MAX_LINKS;
  }
}

unsigned int MemClockMhz(const DeviceState& d) {
  const BoardProfile& p = Profile(d);
  double mhz =
      static_cast<double>(d.mem_bandwidth_bytes_per_s) * 8.0 / (2.0 * p.memory_bus_bits) / 1e6;
  return static_cast<unsigned int>(std::lround(mhz));
}

}  // namespace vgpu::sim::nvml
