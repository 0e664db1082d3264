// The simulated NVML's board model (sim/nvml/nvml_board.h) on boards other
// than the default H100 SXM, with the engine driven directly through
// NodeRegion with explicit timestamps so that no reading depends on how fast
// the machine runs the test: profiles by compute capability and SM count,
// clocks from the configured bandwidth, power linear in the busy fraction,
// energy as its integral, and topology from VGPU_SIM_P2P on boards with and
// without NVLink.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <string>
#include <thread>

#include "driver/nvml_abi.h"
#include "sim/node/node_region.h"
#include "sim/nvml/nvml_abi_ext.h"
#include "sim/node/sim_config.h"

namespace vgpu::sim {
namespace {

void* Library() {
  static void* lib = dlopen(VGPU_SIM_NVML_PATH, RTLD_NOW | RTLD_LOCAL);
  return lib;
}

template <typename F>
F Fn(const char* name) {
  void* p = dlsym(Library(), name);
  EXPECT_NE(p, nullptr) << name;
  return reinterpret_cast<F>(p);
}

using UintQuery = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*);
using UintArgQuery = nvmlReturn_t (*)(nvmlDevice_t, unsigned int, unsigned int*);

// Device 0: an A100 (cc 8.0, 1,555 GB/s); device 1: a PCIe H100 (114 SMs);
// device 2: the default H100 SXM. VGPU_SIM_P2P links 0-1 and nothing else.
class SimNvmlBoard : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(Library(), nullptr) << dlerror();
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    node_ = std::string("nvmlboard-") + std::to_string(getpid()) + "-" + info->name();
    setenv("VGPU_SIM_NODE", node_.c_str(), 1);
    setenv("VGPU_SIM_DEVICES", "1x8GiB:cc=8.0:bw=1555,1x8GiB:sm=114,1x8GiB", 1);
    setenv("VGPU_SIM_P2P", "0-1", 1);
    shm_unlink(NodeRegion::ShmName(node_).c_str());
    ASSERT_EQ(Fn<nvmlReturn_t (*)()>("nvmlInit_v2")(), NVML_SUCCESS);
    for (unsigned int i = 0; i < 3; ++i) {
      ASSERT_EQ(
          Fn<nvmlReturn_t (*)(unsigned, nvmlDevice_t*)>("nvmlDeviceGetHandleByIndex_v2")(i, &h_[i]),
          NVML_SUCCESS);
    }
  }
  void TearDown() override {
    Fn<nvmlReturn_t (*)()>("nvmlShutdown")();
    if (cuda_ != nullptr) {
      cuda_->Unregister();
      munmap(cuda_->header(), sizeof(NodeHeader));
      delete cuda_;
    }
    shm_unlink(NodeRegion::ShmName(node_).c_str());
    unsetenv("VGPU_SIM_P2P");
  }
  NodeRegion* OpenAsCuda() {
    SimConfig config;
    std::string error;
    EXPECT_TRUE(LoadSimConfig(&config, &error)) << error;
    cuda_ = NodeRegion::Open(config, &error);
    EXPECT_NE(cuda_, nullptr) << error;
    return cuda_;
  }
  unsigned int Uint(const char* fn, int d) {
    unsigned int v = 0;
    EXPECT_EQ(Fn<UintQuery>(fn)(h_[d], &v), NVML_SUCCESS) << fn << " device " << d;
    return v;
  }
  unsigned int UintArg(const char* fn, int d, unsigned int arg) {
    unsigned int v = 0;
    EXPECT_EQ(Fn<UintArgQuery>(fn)(h_[d], arg, &v), NVML_SUCCESS) << fn << " device " << d;
    return v;
  }
  unsigned long long Energy(int d) {
    unsigned long long e = 0;
    EXPECT_EQ(Fn<nvmlReturn_t (*)(nvmlDevice_t, unsigned long long*)>(
                  "nvmlDeviceGetTotalEnergyConsumption")(h_[d], &e),
              NVML_SUCCESS);
    return e;
  }

  std::string node_;
  NodeRegion* cuda_ = nullptr;
  nvmlDevice_t h_[3] = {};
};

TEST_F(SimNvmlBoard, ProfilesFollowComputeCapabilitySmCountAndBandwidth) {
  struct Row {
    int device;
    unsigned int arch, max_sm_mhz, mem_mhz, tdp_mw, idle_mw, pcie_gen;
    bool mig;
  };
  const Row rows[] = {
      // 1555 GB/s over 5120 bits, double data rate: 1215 MHz.
      {0, NVML_DEVICE_ARCH_AMPERE, 1410, 1215, 400'000, 55'000, 4, true},
      {1, NVML_DEVICE_ARCH_HOPPER, 1755, 2617, 350'000, 50'000, 5, true},
      {2, NVML_DEVICE_ARCH_HOPPER, 1980, 2617, 700'000, 70'000, 5, true},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE("device " + std::to_string(r.device));
    EXPECT_EQ(Uint("nvmlDeviceGetArchitecture", r.device), r.arch);
    EXPECT_EQ(UintArg("nvmlDeviceGetMaxClockInfo", r.device, NVML_CLOCK_SM), r.max_sm_mhz);
    EXPECT_EQ(UintArg("nvmlDeviceGetMaxClockInfo", r.device, NVML_CLOCK_GRAPHICS), r.max_sm_mhz);
    EXPECT_EQ(UintArg("nvmlDeviceGetClockInfo", r.device, NVML_CLOCK_MEM), r.mem_mhz);
    EXPECT_EQ(Uint("nvmlDeviceGetPowerManagementLimit", r.device), r.tdp_mw);
    EXPECT_EQ(Uint("nvmlDeviceGetPowerUsage", r.device), r.idle_mw);
    EXPECT_EQ(UintArg("nvmlDeviceGetTemperature", r.device, NVML_TEMPERATURE_GPU), 30u);
    EXPECT_EQ(Uint("nvmlDeviceGetCurrPcieLinkGeneration", r.device), r.pcie_gen);
    unsigned int min = 0, max = 0;
    ASSERT_EQ(Fn<nvmlReturn_t (*)(nvmlDevice_t, unsigned*, unsigned*)>(
                  "nvmlDeviceGetPowerManagementLimitConstraints")(h_[r.device], &min, &max),
              NVML_SUCCESS);
    EXPECT_LT(min, max);
    EXPECT_EQ(max, r.tdp_mw);
  }
  unsigned int v = 0;
  EXPECT_EQ(Fn<UintArgQuery>("nvmlDeviceGetClockInfo")(h_[0], NVML_CLOCK_COUNT, &v),
            NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(Fn<UintArgQuery>("nvmlDeviceGetTemperature")(h_[0], 1, &v),
            NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(Fn<UintQuery>("nvmlDeviceGetPowerUsage")(nullptr, &v), NVML_ERROR_INVALID_ARGUMENT);
}

// The sensor model, for readings whose instant the test cannot pin down:
// what the library reads at NowNs() == now_ns for a device that has been
// busy busy_ns of the node's life so far.
struct SensorModel {
  uint64_t created_ns;
  unsigned int idle_mw, tdp_mw;
  // Power is linear in the busy fraction; while the node is younger than the
  // one-second window, the window is the node's life.
  unsigned int PowerMw(uint64_t now_ns, uint64_t busy_ns) const {
    double busy = std::min(1.0, static_cast<double>(busy_ns) / (now_ns - created_ns));
    return idle_mw + static_cast<unsigned int>(std::lround((tdp_mw - idle_mw) * busy));
  }
  // Energy is its integral: idle power over the node's life plus
  // (TDP - idle) per busy second, in whole mJ (mW * ns / 1e9).
  unsigned long long EnergyMj(uint64_t now_ns, uint64_t busy_ns) const {
    unsigned __int128 pj = static_cast<unsigned __int128>(idle_mw) * (now_ns - created_ns) +
                           static_cast<unsigned __int128>(tdp_mw - idle_mw) * busy_ns;
    return static_cast<unsigned long long>(pj / 1'000'000'000u);
  }
};

// A kernel that has held the engine since the node was created: the busy
// fraction is exactly 1 whenever the readings happen, so power, temperature
// and clock are exact; the energy, read at an instant between two clock
// readings, lies between the model's values at those two instants.
TEST_F(SimNvmlBoard, PowerTemperatureAndEnergyOfABusyEngine) {
  NodeRegion* node = OpenAsCuda();
  ASSERT_NE(node, nullptr);
  const SensorModel h100{node->header()->created_ns, 70'000, 700'000};
  // Queued at the node's creation on an idle engine, it starts then.
  const uint64_t started = node->EngineAcquire(2, h100.created_ns);
  ASSERT_EQ(started, h100.created_ns);
  // Long enough for busy energy to dwarf idle energy; the length is not asserted.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(Uint("nvmlDeviceGetPowerUsage", 2), 700'000u);
  EXPECT_EQ(UintArg("nvmlDeviceGetTemperature", 2, NVML_TEMPERATURE_GPU), 70u);
  EXPECT_EQ(UintArg("nvmlDeviceGetClockInfo", 2, NVML_CLOCK_SM), 1980u);
  EXPECT_EQ(Uint("nvmlDeviceGetPowerUsage", 0), 55'000u) << "other devices stay idle";
  uint64_t before = NowNs();
  const unsigned long long e0 = Energy(2);
  uint64_t after = NowNs();
  EXPECT_GE(e0, h100.EnergyMj(before, before - started)) << "at TDP since creation";
  EXPECT_LE(e0, h100.EnergyMj(after, after - started));

  const uint64_t end = NowNs();
  node->EngineRelease(2, started, end);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // idle time adds idle power
  before = NowNs();
  const unsigned long long e1 = Energy(2);
  after = NowNs();
  EXPECT_GE(e1, h100.EnergyMj(before, end - started)) << "idle power after the kernel";
  EXPECT_LE(e1, h100.EnergyMj(after, end - started));
  EXPECT_GE(Energy(2), e1) << "energy never decreases";
  // Field values agree with the individual queries.
  nvmlFieldValue_t f[3] = {};
  f[0].fieldId = NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION;
  f[1].fieldId = NVML_FI_DEV_POWER_CURRENT_LIMIT;
  f[2].fieldId = NVML_FI_DEV_POWER_INSTANT;
  f[2].scopeId = 1;  // the module (Grace + GPU): no such thing here
  before = NowNs();
  ASSERT_EQ(Fn<nvmlReturn_t (*)(nvmlDevice_t, int, nvmlFieldValue_t*)>("nvmlDeviceGetFieldValues")(
                h_[2], 3, f),
            NVML_SUCCESS);
  after = NowNs();
  EXPECT_EQ(f[0].valueType, NVML_VALUE_TYPE_UNSIGNED_LONG_LONG);
  EXPECT_GE(f[0].value.ullVal, std::max(e1, h100.EnergyMj(before, end - started)));
  EXPECT_LE(f[0].value.ullVal, h100.EnergyMj(after, end - started));
  EXPECT_EQ(f[1].value.uiVal, 700'000u);
  EXPECT_EQ(f[2].nvmlReturn, NVML_ERROR_NOT_SUPPORTED);
}

// A kernel that ran through the first 100 ms of a node at least 200 ms old:
// about half busy. Power falls as the window grows, so a reading lies
// between the model's values at the clock readings after and before it;
// energy grows, so it lies between them the other way round.
TEST_F(SimNvmlBoard, PowerAndEnergyOfAPartlyBusyEngine) {
  NodeRegion* node = OpenAsCuda();
  ASSERT_NE(node, nullptr);
  const SensorModel pcie{node->header()->created_ns, 50'000, 350'000};
  constexpr uint64_t kBusyNs = 100'000'000;
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  // Explicit timestamps in the past: the engine records the modelled span,
  // not when this thread got to run.
  const uint64_t started = node->EngineAcquire(1, pcie.created_ns);
  ASSERT_EQ(started, pcie.created_ns);
  ASSERT_EQ(node->EngineRelease(1, started, started + kBusyNs), started + kBusyNs);
  uint64_t before = NowNs();
  const unsigned int power = Uint("nvmlDeviceGetPowerUsage", 1);
  const unsigned long long energy = Energy(1);
  uint64_t after = NowNs();
  EXPECT_LE(power, pcie.PowerMw(before, kBusyNs));
  // Past the window, the kernel is history (a slow machine's only effect).
  constexpr uint64_t kWindowNs = 1'000'000'000;
  EXPECT_GE(power, after - pcie.created_ns <= kWindowNs ? pcie.PowerMw(after, kBusyNs) : 50'000u);
  EXPECT_LE(power, 200'000u) << "at most half busy: halfway between idle and TDP";
  EXPECT_GE(energy, pcie.EnergyMj(before, kBusyNs));
  EXPECT_LE(energy, pcie.EnergyMj(after, kBusyNs));
  EXPECT_GE(energy, 30'000u) << "(TDP - idle) for 100 ms at least";
}

// 0-1 are peers: the A100 has NVLink, the PCIe H100 none, so the pair talks
// over PCIe (READ OK, NVLINK not supported); the SXM H100 (2) has no peer.
TEST_F(SimNvmlBoard, TopologyOnBoardsWithAndWithoutNvlink) {
  auto p2p =
      Fn<nvmlReturn_t (*)(nvmlDevice_t, nvmlDevice_t, nvmlGpuP2PCapsIndex_t, nvmlGpuP2PStatus_t*)>(
          "nvmlDeviceGetP2PStatus");
  auto ancestor = Fn<nvmlReturn_t (*)(nvmlDevice_t, nvmlDevice_t, nvmlGpuTopologyLevel_t*)>(
      "nvmlDeviceGetTopologyCommonAncestor");
  auto link =
      Fn<nvmlReturn_t (*)(nvmlDevice_t, unsigned, nvmlEnableState_t*)>("nvmlDeviceGetNvLinkState");
  auto nearest =
      Fn<nvmlReturn_t (*)(nvmlDevice_t, nvmlGpuTopologyLevel_t, unsigned*, nvmlDevice_t*)>(
          "nvmlDeviceGetTopologyNearestGpus");
  nvmlGpuP2PStatus_t s{};
  ASSERT_EQ(p2p(h_[0], h_[1], NVML_P2P_CAPS_INDEX_READ, &s), NVML_SUCCESS);
  EXPECT_EQ(s, NVML_P2P_STATUS_OK);
  ASSERT_EQ(p2p(h_[0], h_[1], NVML_P2P_CAPS_INDEX_NVLINK, &s), NVML_SUCCESS);
  EXPECT_EQ(s, NVML_P2P_STATUS_NOT_SUPPORTED) << "the PCIe H100 has no NVLink";
  ASSERT_EQ(p2p(h_[0], h_[2], NVML_P2P_CAPS_INDEX_WRITE, &s), NVML_SUCCESS);
  EXPECT_EQ(s, NVML_P2P_STATUS_CHIPSET_NOT_SUPPORTED);
  EXPECT_EQ(p2p(h_[0], h_[0], NVML_P2P_CAPS_INDEX_READ, &s), NVML_ERROR_INVALID_ARGUMENT);
  nvmlGpuTopologyLevel_t level{};
  ASSERT_EQ(ancestor(h_[1], h_[0], &level), NVML_SUCCESS);
  EXPECT_EQ(level, NVML_TOPOLOGY_SINGLE);
  ASSERT_EQ(ancestor(h_[1], h_[2], &level), NVML_SUCCESS);
  EXPECT_EQ(level, NVML_TOPOLOGY_SYSTEM);

  nvmlEnableState_t active{};
  EXPECT_EQ(link(h_[0], 11, &active), NVML_SUCCESS) << "an A100 has 12 links";
  EXPECT_EQ(active, NVML_FEATURE_ENABLED);
  EXPECT_EQ(link(h_[0], 12, &active), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(link(h_[1], 0, &active), NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(link(h_[2], 0, &active), NVML_ERROR_NOT_SUPPORTED) << "no peer, no NVLink";

  unsigned int count = 0;
  ASSERT_EQ(nearest(h_[0], NVML_TOPOLOGY_SINGLE, &count, nullptr), NVML_SUCCESS);
  EXPECT_EQ(count, 1u);
  nvmlDevice_t found[4] = {};
  count = 4;
  ASSERT_EQ(nearest(h_[0], NVML_TOPOLOGY_SYSTEM, &count, found), NVML_SUCCESS);
  EXPECT_EQ(count, 2u);
  EXPECT_EQ(found[0], h_[1]);
  EXPECT_EQ(found[1], h_[2]);
}

TEST_F(SimNvmlBoard, EventsNeverArrive) {
  nvmlEventSet_t set = nullptr;
  ASSERT_EQ(Fn<nvmlReturn_t (*)(nvmlEventSet_t*)>("nvmlEventSetCreate")(&set), NVML_SUCCESS);
  auto reg = Fn<nvmlReturn_t (*)(nvmlDevice_t, unsigned long long, nvmlEventSet_t)>(
      "nvmlDeviceRegisterEvents");
  EXPECT_EQ(reg(h_[0], nvmlEventTypeXidCriticalError | nvmlEventTypeDoubleBitEccError, set),
            NVML_SUCCESS);
  EXPECT_EQ(reg(h_[0], nvmlEventTypePowerSourceChange, set), NVML_ERROR_NOT_SUPPORTED);
  auto wait =
      Fn<nvmlReturn_t (*)(nvmlEventSet_t, nvmlEventData_t*, unsigned)>("nvmlEventSetWait_v2");
  nvmlEventData_t data{};
  EXPECT_EQ(wait(set, &data, 20), NVML_ERROR_TIMEOUT);
  EXPECT_EQ(wait(set, nullptr, 20), NVML_ERROR_INVALID_ARGUMENT);
  auto free_set = Fn<nvmlReturn_t (*)(nvmlEventSet_t)>("nvmlEventSetFree");
  EXPECT_EQ(free_set(set), NVML_SUCCESS);
  EXPECT_EQ(free_set(set), NVML_ERROR_INVALID_ARGUMENT) << "freed twice";
  EXPECT_EQ(wait(set, &data, 0), NVML_ERROR_INVALID_ARGUMENT) << "a freed set";
}

}  // namespace
}  // namespace vgpu::sim
