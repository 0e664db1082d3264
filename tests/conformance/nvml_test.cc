// NVML against the driver API. NVML is loaded with dlopen and declared here
// from its stable C ABI (the toolkit ships no nvml.h), so the same test runs
// against the real libnvidia-ml.so.1.
#include <dlfcn.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <thread>

#include "test_util.h"

namespace vgpu::conformance {
namespace {

using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
constexpr nvmlReturn_t NVML_SUCCESS = 0;
constexpr nvmlReturn_t NVML_ERROR_UNINITIALIZED = 1;
constexpr nvmlReturn_t NVML_ERROR_INVALID_ARGUMENT = 2;
constexpr nvmlReturn_t NVML_ERROR_NOT_FOUND = 6;
constexpr nvmlReturn_t NVML_ERROR_NOT_SUPPORTED = 3;
constexpr nvmlReturn_t NVML_ERROR_INSUFFICIENT_SIZE = 7;
constexpr nvmlReturn_t NVML_ERROR_TIMEOUT = 10;

struct nvmlMemory_t {
  unsigned long long total, free, used;
};
struct nvmlMemory_v2_t {
  unsigned int version;
  unsigned long long total, reserved, free, used;
};
constexpr unsigned kNvmlMemoryV2 = sizeof(nvmlMemory_v2_t) | (2u << 24);
struct nvmlProcessInfo_t {  // v2/v3 layout
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId, computeInstanceId;
};
struct nvmlUtilization_t {
  unsigned int gpu, memory;
};
struct nvmlPciInfo_t {
  char busIdLegacy[16];
  unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};

struct Nvml {
  void* lib = nullptr;
  nvmlReturn_t (*Init)();
  nvmlReturn_t (*Shutdown)();
  const char* (*ErrorString)(nvmlReturn_t);
  nvmlReturn_t (*GetCount)(unsigned*);
  nvmlReturn_t (*ByIndex)(unsigned, nvmlDevice_t*);
  nvmlReturn_t (*ByUuid)(const char*, nvmlDevice_t*);
  nvmlReturn_t (*ByPci)(const char*, nvmlDevice_t*);
  nvmlReturn_t (*Name)(nvmlDevice_t, char*, unsigned);
  nvmlReturn_t (*Uuid)(nvmlDevice_t, char*, unsigned);
  nvmlReturn_t (*Index)(nvmlDevice_t, unsigned*);
  nvmlReturn_t (*Pci)(nvmlDevice_t, nvmlPciInfo_t*);
  nvmlReturn_t (*Memory)(nvmlDevice_t, nvmlMemory_t*);
  nvmlReturn_t (*MemoryV2)(nvmlDevice_t, nvmlMemory_v2_t*);
  nvmlReturn_t (*Processes)(nvmlDevice_t, unsigned*, nvmlProcessInfo_t*);
  nvmlReturn_t (*Utilization)(nvmlDevice_t, nvmlUtilization_t*);
  nvmlReturn_t (*DriverVersion)(char*, unsigned);
  nvmlReturn_t (*CudaDriverVersion)(int*);
  std::string missing;

  // Any other entry point by name (null, and noted as missing, if absent).
  template <typename F>
  F Fn(const char* name) {
    F f = nullptr;
    Load(&f, name);
    return f;
  }

  template <typename F>
  void Load(F* f, const char* name) {
    *f = reinterpret_cast<F>(dlsym(lib, name));
    if (*f == nullptr) missing += std::string(" ") + name;
  }
  bool Open() {
#ifdef CONF_SIM_NVML_PATH
    if (!GpuTarget() && DriverLibraryIsSim()) lib = dlopen(CONF_SIM_NVML_PATH, RTLD_NOW);
#endif
    if (lib == nullptr) lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    if (lib == nullptr) return false;
    Load(&Init, "nvmlInit_v2");
    Load(&Shutdown, "nvmlShutdown");
    Load(&ErrorString, "nvmlErrorString");
    Load(&GetCount, "nvmlDeviceGetCount_v2");
    Load(&ByIndex, "nvmlDeviceGetHandleByIndex_v2");
    Load(&ByUuid, "nvmlDeviceGetHandleByUUID");
    Load(&ByPci, "nvmlDeviceGetHandleByPciBusId_v2");
    Load(&Name, "nvmlDeviceGetName");
    Load(&Uuid, "nvmlDeviceGetUUID");
    Load(&Index, "nvmlDeviceGetIndex");
    Load(&Pci, "nvmlDeviceGetPciInfo_v3");
    Load(&Memory, "nvmlDeviceGetMemoryInfo");
    Load(&MemoryV2, "nvmlDeviceGetMemoryInfo_v2");
    Load(&Processes, "nvmlDeviceGetComputeRunningProcesses_v3");
    Load(&Utilization, "nvmlDeviceGetUtilizationRates");
    Load(&DriverVersion, "nvmlSystemGetDriverVersion");
    Load(&CudaDriverVersion, "nvmlSystemGetCudaDriverVersion_v2");
    return missing.empty();
  }
};

// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" from cuDeviceGetUuid's bytes.
std::string NvmlUuidString(const CUuuid& u) {
  std::string s = "GPU-";
  char hex[3];
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) s += '-';
    snprintf(hex, sizeof hex, "%02x", static_cast<unsigned char>(u.bytes[i]));
    s += hex;
  }
  return s;
}

class NvmlTest : public ContextTest {
 protected:
  void SetUp() override {
    ContextTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    ASSERT_TRUE(nvml_.Open()) << "cannot load libnvidia-ml.so.1: " << dlerror() << nvml_.missing;
    ASSERT_EQ(nvml_.Init(), NVML_SUCCESS);
    initialized_ = true;
    CUuuid u;
    ASSERT_CU_OK(cuDeviceGetUuid(&u, dev_));
    uuid_ = NvmlUuidString(u);
    ASSERT_EQ(nvml_.ByUuid(uuid_.c_str(), &handle_), NVML_SUCCESS) << uuid_;
  }
  void TearDown() override {
    if (initialized_) {
      EXPECT_EQ(nvml_.Shutdown(), NVML_SUCCESS);
    }
    ContextTest::TearDown();
  }
  Nvml nvml_;
  bool initialized_ = false;
  std::string uuid_;
  nvmlDevice_t handle_ = nullptr;
};

TEST_F(NvmlTest, CountIndexAndHandles) {
  unsigned n = 0;
  ASSERT_EQ(nvml_.GetCount(&n), NVML_SUCCESS);
  int cuda_n = 0;
  ASSERT_CU_OK(cuDeviceGetCount(&cuda_n));
  EXPECT_GE(n, static_cast<unsigned>(cuda_n));
  if (IsSim()) {
    EXPECT_EQ(n, static_cast<unsigned>(cuda_n));
  }
  for (unsigned i = 0; i < n; ++i) {
    nvmlDevice_t h = nullptr;
    ASSERT_EQ(nvml_.ByIndex(i, &h), NVML_SUCCESS);
    unsigned idx = 99;
    ASSERT_EQ(nvml_.Index(h, &idx), NVML_SUCCESS);
    EXPECT_EQ(idx, i);
    nvmlPciInfo_t pci{};
    ASSERT_EQ(nvml_.Pci(h, &pci), NVML_SUCCESS);
    nvmlDevice_t by_pci = nullptr;
    ASSERT_EQ(nvml_.ByPci(pci.busId, &by_pci), NVML_SUCCESS) << pci.busId;
    EXPECT_EQ(by_pci, h);
  }
  nvmlDevice_t h;
  EXPECT_EQ(nvml_.ByIndex(n, &h), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(nvml_.ByUuid("GPU-00000000-0000-0000-0000-000000000000", &h), NVML_SUCCESS);
}

TEST_F(NvmlTest, NameUuidAndPciMatchCuda) {
  char name[96] = {};
  ASSERT_EQ(nvml_.Name(handle_, name, sizeof name), NVML_SUCCESS);
  char cu_name[256] = {};
  ASSERT_CU_OK(cuDeviceGetName(cu_name, sizeof cu_name, dev_));
  EXPECT_STREQ(name, cu_name);
  char uuid[96] = {};
  ASSERT_EQ(nvml_.Uuid(handle_, uuid, sizeof uuid), NVML_SUCCESS);
  EXPECT_EQ(std::string(uuid), uuid_);
  char tiny[8];
  EXPECT_EQ(nvml_.Uuid(handle_, tiny, sizeof tiny), NVML_ERROR_INSUFFICIENT_SIZE);

  nvmlPciInfo_t pci{};
  ASSERT_EQ(nvml_.Pci(handle_, &pci), NVML_SUCCESS);
  char cu_bus[64] = {};
  ASSERT_CU_OK(cuDeviceGetPCIBusId(cu_bus, sizeof cu_bus, dev_));
  unsigned dom, bus, device, fn;
  ASSERT_EQ(4, sscanf(cu_bus, "%x:%x:%x.%x", &dom, &bus, &device, &fn));
  EXPECT_EQ(pci.domain, dom);
  EXPECT_EQ(pci.bus, bus);
  EXPECT_EQ(pci.device, device);
  nvmlDevice_t by_cuda_bus = nullptr;
  ASSERT_EQ(nvml_.ByPci(cu_bus, &by_cuda_bus), NVML_SUCCESS) << cu_bus;
  EXPECT_EQ(by_cuda_bus, handle_);
}

TEST_F(NvmlTest, MemoryInfoReflectsCuMemAlloc) {
  nvmlMemory_t m0{};
  ASSERT_EQ(nvml_.Memory(handle_, &m0), NVML_SUCCESS);
  size_t total = 0;
  ASSERT_CU_OK(cuDeviceTotalMem(&total, dev_));
  // NVML counts the memory the driver reserves for itself, cuDeviceTotalMem
  // does not (H200, driver 580: 150754820096 vs 150109880320 bytes).
  EXPECT_GE(m0.total, total);
  EXPECT_LE(m0.total - total, m0.total / 100);
  EXPECT_EQ(m0.free + m0.used, m0.total);
  const size_t kBytes = size_t{1} << 30;
  CUdeviceptr p;
  ASSERT_CU_OK(cuMemAlloc(&p, kBytes));
  nvmlMemory_t m1{};
  ASSERT_EQ(nvml_.Memory(handle_, &m1), NVML_SUCCESS);
  EXPECT_GE(m1.used, m0.used + kBytes);
  EXPECT_LE(m1.free + kBytes, m0.free);
  nvmlMemory_v2_t v2{};
  v2.version = kNvmlMemoryV2;
  ASSERT_EQ(nvml_.MemoryV2(handle_, &v2), NVML_SUCCESS);
  EXPECT_EQ(v2.total, m0.total);
  std::printf("nvml total %llu reserved %llu, cuDeviceTotalMem %zu\n",
              static_cast<unsigned long long>(v2.total),
              static_cast<unsigned long long>(v2.reserved), total);
  EXPECT_GE(v2.used, m0.used + kBytes - v2.reserved);
  EXPECT_EQ(v2.free + v2.used + v2.reserved, v2.total);
  v2.version = 1;  // wrong version
  EXPECT_NE(nvml_.MemoryV2(handle_, &v2), NVML_SUCCESS);
  ASSERT_CU_OK(cuMemFree(p));
  nvmlMemory_t m2{};
  ASSERT_EQ(nvml_.Memory(handle_, &m2), NVML_SUCCESS);
  EXPECT_LE(m2.used + kBytes / 2, m1.used);
}

TEST_F(NvmlTest, RunningProcessesListThisProcess) {
  const size_t kBytes = size_t{768} << 20;
  CUdeviceptr p;
  ASSERT_CU_OK(cuMemAlloc(&p, kBytes));
  unsigned count = 0;
  nvmlReturn_t r = nvml_.Processes(handle_, &count, nullptr);
  EXPECT_TRUE(r == NVML_SUCCESS || r == NVML_ERROR_INSUFFICIENT_SIZE) << r;
  ASSERT_GE(count, 1u);
  std::vector<nvmlProcessInfo_t> infos(count + 4);
  count = static_cast<unsigned>(infos.size());
  ASSERT_EQ(nvml_.Processes(handle_, &count, infos.data()), NVML_SUCCESS);
  bool found = false;
  for (unsigned i = 0; i < count; ++i) {
    if (infos[i].pid != static_cast<unsigned>(getpid())) continue;
    found = true;
    EXPECT_GE(infos[i].usedGpuMemory, kBytes);
  }
  EXPECT_TRUE(found) << "pid " << getpid() << " not among " << count << " processes";
  ASSERT_CU_OK(cuMemFree(p));
}

TEST_F(NvmlTest, UtilizationIsHighWhileKernelsRun) {
  CUmodule m;
  ASSERT_CU_OK(cuModuleLoad(&m, CONF_CUBIN_PATH));
  CUfunction sleep;
  ASSERT_CU_OK(cuModuleGetFunction(&sleep, m, "conf_sleep_ns"));
  nvmlUtilization_t idle{};
  ASSERT_EQ(nvml_.Utilization(handle_, &idle), NVML_SUCCESS);
  EXPECT_LE(idle.gpu, 100u);
  for (int i = 0; i < 4; ++i) ASSERT_CU_OK(LaunchSleepKernel(sleep, nullptr, 150 * kMs));
  usleep(450 * 1000);
  nvmlUtilization_t busy{};
  ASSERT_EQ(nvml_.Utilization(handle_, &busy), NVML_SUCCESS);
  EXPECT_GE(busy.gpu, 50u) << "utilization while the device is busy";
  EXPECT_LE(busy.gpu, 100u);
  ASSERT_CU_OK(cuCtxSynchronize());
  ASSERT_CU_OK(cuModuleUnload(m));
}

TEST_F(NvmlTest, VersionsAndErrorStrings) {
  char v[96] = {};
  ASSERT_EQ(nvml_.DriverVersion(v, sizeof v), NVML_SUCCESS);
  EXPECT_GT(strlen(v), 0u);
  int cuda = 0;
  ASSERT_EQ(nvml_.CudaDriverVersion(&cuda), NVML_SUCCESS);
  int cu_version = 0;
  ASSERT_CU_OK(cuDriverGetVersion(&cu_version));
  EXPECT_EQ(cuda, cu_version);
  for (nvmlReturn_t r : {NVML_SUCCESS, NVML_ERROR_UNINITIALIZED, NVML_ERROR_INVALID_ARGUMENT,
                         NVML_ERROR_NOT_FOUND}) {
    const char* s = nvml_.ErrorString(r);
    ASSERT_NE(s, nullptr);
    EXPECT_GT(strlen(s), 0u);
  }
  EXPECT_STRNE(nvml_.ErrorString(NVML_SUCCESS), nvml_.ErrorString(NVML_ERROR_NOT_FOUND));
  EXPECT_EQ(nvml_.GetCount(nullptr), NVML_ERROR_INVALID_ARGUMENT);
}

TEST_F(NvmlTest, CallsAfterShutdownAreUninitialized) {
  ASSERT_EQ(nvml_.Shutdown(), NVML_SUCCESS);
  initialized_ = false;
  unsigned n;
  EXPECT_EQ(nvml_.GetCount(&n), NVML_ERROR_UNINITIALIZED);
  // Init is reference counted.
  ASSERT_EQ(nvml_.Init(), NVML_SUCCESS);
  ASSERT_EQ(nvml_.Init(), NVML_SUCCESS);
  ASSERT_EQ(nvml_.Shutdown(), NVML_SUCCESS);
  EXPECT_EQ(nvml_.GetCount(&n), NVML_SUCCESS);
  ASSERT_EQ(nvml_.Shutdown(), NVML_SUCCESS);
  EXPECT_EQ(nvml_.GetCount(&n), NVML_ERROR_UNINITIALIZED);
}

// Sensors, clocks, board information, topology, field values and events
// (issue 16): what nvidia-smi's default view, DCGM and pynvml monitors read.
// The portable tests assert only what a real data-center GPU also satisfies;
// the Sim* suites below assert the simulated node's model.

using UintQuery = nvmlReturn_t (*)(nvmlDevice_t, unsigned*);
using UintArgQuery = nvmlReturn_t (*)(nvmlDevice_t, unsigned, unsigned*);
using StringQuery = nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned);
constexpr unsigned kTempGpu = 0;                  // NVML_TEMPERATURE_GPU
constexpr unsigned kClockSm = 1, kClockMem = 2;   // nvmlClockType_t
constexpr unsigned kP2pRead = 0, kP2pNvlink = 2;  // nvmlGpuP2PCapsIndex_t
constexpr unsigned kP2pOk = 0, kP2pChipsetNotSupported = 1, kP2pNotSupported = 5;
constexpr unsigned kTopologyInternal = 0, kTopologySingle = 10, kTopologySystem = 50;
constexpr unsigned kFieldEccCurrent = 1, kFieldMemoryTemp = 82, kFieldTotalEnergy = 83;
constexpr unsigned kFieldNvlinkCount = 91, kFieldPowerInstant = 186;
constexpr unsigned long long kEventPState = 0x4, kEventXid = 0x8;

struct nvmlBAR1Memory_t {
  unsigned long long bar1Total, bar1Free, bar1Used;
};
union nvmlValue_t {
  double dVal;
  unsigned uiVal;
  unsigned long ulVal;
  unsigned long long ullVal;
  long long sllVal;
};
struct nvmlFieldValue_t {
  unsigned fieldId, scopeId;
  long long timestamp, latencyUsec;
  unsigned valueType;
  nvmlReturn_t nvmlReturn;
  nvmlValue_t value;
};
static_assert(sizeof(nvmlFieldValue_t) == 40);
struct nvmlEventData_t {
  nvmlDevice_t device;
  unsigned long long eventType, eventData;
  unsigned gpuInstanceId, computeInstanceId;
};
using nvmlEventSet_t = struct nvmlEventSet_st*;

// One unsigned reading with its plausible range on any data-center GPU;
// `may_be_unsupported`: NVML_ERROR_NOT_SUPPORTED is a documented answer for
// some boards (fans on SXM modules, MIG on non-MIG boards).
struct UintCase {
  const char* name;
  std::function<nvmlReturn_t(nvmlDevice_t, unsigned*)> query;
  unsigned min, max;
  bool may_be_unsupported;
};

TEST_F(NvmlTest, SensorAndBoardReadingsArePlausible) {
  auto with = [&](const char* fn, unsigned arg) {
    auto f = nvml_.Fn<UintArgQuery>(fn);
    return [f, arg](nvmlDevice_t d, unsigned* v) { return f(d, arg, v); };
  };
  auto plain = [&](const char* fn) { return nvml_.Fn<UintQuery>(fn); };
  auto pair_first = [&](const char* fn) {
    auto f = nvml_.Fn<nvmlReturn_t (*)(nvmlDevice_t, unsigned*, unsigned*)>(fn);
    return [f](nvmlDevice_t d, unsigned* v) {
      unsigned other = 0;
      return f(d, v, &other);
    };
  };
  const UintCase cases[] = {
      {"temperature C", with("nvmlDeviceGetTemperature", kTempGpu), 1, 120, false},
      {"power mW", plain("nvmlDeviceGetPowerUsage"), 1, 2'000'000, false},
      {"power limit mW", plain("nvmlDeviceGetPowerManagementLimit"), 1, 2'000'000, false},
      {"enforced power limit mW", plain("nvmlDeviceGetEnforcedPowerLimit"), 1, 2'000'000, false},
      {"SM clock MHz", with("nvmlDeviceGetClockInfo", kClockSm), 1, 5000, false},
      {"memory clock MHz", with("nvmlDeviceGetClockInfo", kClockMem), 1, 30000, false},
      {"max SM clock MHz", with("nvmlDeviceGetMaxClockInfo", kClockSm), 1, 5000, false},
      {"max memory clock MHz", with("nvmlDeviceGetMaxClockInfo", kClockMem), 1, 30000, false},
      {"application SM clock MHz", with("nvmlDeviceGetApplicationsClock", kClockSm), 1, 5000, true},
      {"performance state", plain("nvmlDeviceGetPerformanceState"), 0, 32, false},
      {"persistence mode", plain("nvmlDeviceGetPersistenceMode"), 0, 1, false},
      {"ECC mode", pair_first("nvmlDeviceGetEccMode"), 0, 1, true},
      {"MIG mode", pair_first("nvmlDeviceGetMigMode"), 0, 1, true},
      {"fan speed %", plain("nvmlDeviceGetFanSpeed"), 0, 100, true},
      {"compute mode", plain("nvmlDeviceGetComputeMode"), 0, 3, false},
      {"display mode", plain("nvmlDeviceGetDisplayMode"), 0, 1, true},
      {"display active", plain("nvmlDeviceGetDisplayActive"), 0, 1, true},
      {"architecture", plain("nvmlDeviceGetArchitecture"), 2, 0xffffffffu, false},
      {"PCIe generation", plain("nvmlDeviceGetCurrPcieLinkGeneration"), 1, 6, false},
      {"PCIe width", plain("nvmlDeviceGetCurrPcieLinkWidth"), 1, 32, false},
      {"PCIe TX KB/s", with("nvmlDeviceGetPcieThroughput", 0), 0, 128u << 20, false},
      {"minor number", plain("nvmlDeviceGetMinorNumber"), 0, 255, false},
  };
  ASSERT_TRUE(nvml_.missing.empty()) << "missing:" << nvml_.missing;
  for (const UintCase& c : cases) {
    unsigned v = 0xdeadbeef;
    nvmlReturn_t r = c.query(handle_, &v);
    if (c.may_be_unsupported && r == NVML_ERROR_NOT_SUPPORTED) {
      std::printf("%-26s not supported\n", c.name);
      continue;
    }
    ASSERT_EQ(r, NVML_SUCCESS) << c.name;
    std::printf("%-26s %u\n", c.name, v);
    EXPECT_GE(v, c.min) << c.name;
    EXPECT_LE(v, c.max) << c.name;
  }
  unsigned cur = 0, max = 0, limit = 0, power = 0;
  for (unsigned type : {kClockSm, kClockMem}) {
    ASSERT_EQ(nvml_.Fn<UintArgQuery>("nvmlDeviceGetClockInfo")(handle_, type, &cur), NVML_SUCCESS);
    ASSERT_EQ(nvml_.Fn<UintArgQuery>("nvmlDeviceGetMaxClockInfo")(handle_, type, &max),
              NVML_SUCCESS);
    EXPECT_LE(cur, max) << "clock type " << type;
  }
  ASSERT_EQ(plain("nvmlDeviceGetEnforcedPowerLimit")(handle_, &limit), NVML_SUCCESS);
  ASSERT_EQ(plain("nvmlDeviceGetPowerUsage")(handle_, &power), NVML_SUCCESS);
  EXPECT_LE(power, limit + limit / 5) << "power well above the enforced limit";
  // Architecture against the compute capability (Volta 5 ... Blackwell 10).
  int major = 0, minor = 0;
  ASSERT_CU_OK(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev_));
  ASSERT_CU_OK(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev_));
  unsigned arch = 0;
  ASSERT_EQ(plain("nvmlDeviceGetArchitecture")(handle_, &arch), NVML_SUCCESS);
  if (major == 9) {
    EXPECT_EQ(arch, 9u) << "Hopper";
  }
  if (major == 8 && minor == 0) {
    EXPECT_EQ(arch, 7u) << "Ampere";
  }
  EXPECT_EQ(plain("nvmlDeviceGetPowerUsage")(handle_, nullptr), NVML_ERROR_INVALID_ARGUMENT);
}

TEST_F(NvmlTest, BoardStringsBar1AndEnergy) {
  const std::pair<const char*, unsigned> strings[] = {{"nvmlDeviceGetSerial", 30},
                                                      {"nvmlDeviceGetBoardPartNumber", 80},
                                                      {"nvmlDeviceGetVbiosVersion", 32}};
  for (const auto& [fn, size] : strings) {
    char buf[96] = {};
    nvmlReturn_t r = nvml_.Fn<StringQuery>(fn)(handle_, buf, size);
    if (r == NVML_ERROR_NOT_SUPPORTED) continue;  // e.g. no serial on some boards
    ASSERT_EQ(r, NVML_SUCCESS) << fn;
    std::printf("%s: %s\n", fn, buf);
    EXPECT_GT(strlen(buf), 0u) << fn;
    EXPECT_LT(strlen(buf), size) << fn;
    char tiny[2];
    EXPECT_EQ(nvml_.Fn<StringQuery>(fn)(handle_, tiny, sizeof tiny), NVML_ERROR_INSUFFICIENT_SIZE)
        << fn;
  }
  char inforom[16] = {};
  auto infoRom = nvml_.Fn<nvmlReturn_t (*)(nvmlDevice_t, unsigned, char*, unsigned)>(
      "nvmlDeviceGetInforomVersion");
  ASSERT_EQ(infoRom(handle_, 0 /* OEM */, inforom, sizeof inforom), NVML_SUCCESS);
  EXPECT_GT(strlen(inforom), 0u);

  nvmlBAR1Memory_t bar1{};
  ASSERT_EQ(nvml_.Fn<nvmlReturn_t (*)(nvmlDevice_t, nvmlBAR1Memory_t*)>(
                "nvmlDeviceGetBAR1MemoryInfo")(handle_, &bar1),
            NVML_SUCCESS);
  EXPECT_GT(bar1.bar1Total, 0u);
  EXPECT_EQ(bar1.bar1Free + bar1.bar1Used, bar1.bar1Total);

  // Energy counts up (mJ since the driver loaded).
  auto energy = nvml_.Fn<nvmlReturn_t (*)(nvmlDevice_t, unsigned long long*)>(
      "nvmlDeviceGetTotalEnergyConsumption");
  unsigned long long e0 = 0, e1 = 0;
  ASSERT_EQ(energy(handle_, &e0), NVML_SUCCESS);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ASSERT_EQ(energy(handle_, &e1), NVML_SUCCESS);
  EXPECT_GT(e0, 0u);
  EXPECT_GE(e1, e0);
}

// NVML's topology answers agree with the driver's peer-access answer.
TEST_F(NvmlTest, TopologyAgreesWithCanAccessPeer) {
  unsigned n = 0;
  ASSERT_EQ(nvml_.GetCount(&n), NVML_SUCCESS);
  unsigned long cpus[16] = {};
  ASSERT_EQ(nvml_.Fn<nvmlReturn_t (*)(nvmlDevice_t, unsigned, unsigned long*)>(
                "nvmlDeviceGetCpuAffinity")(handle_, 16, cpus),
            NVML_SUCCESS);
  bool any_cpu = false;
  for (unsigned long w : cpus) any_cpu = any_cpu || w != 0;
  EXPECT_TRUE(any_cpu) << "no CPU close to the device";
  auto link_state =
      nvml_.Fn<nvmlReturn_t (*)(nvmlDevice_t, unsigned, unsigned*)>("nvmlDeviceGetNvLinkState");
  unsigned active = 7;
  nvmlReturn_t r = link_state(handle_, 0, &active);
  EXPECT_TRUE(r == NVML_SUCCESS || r == NVML_ERROR_NOT_SUPPORTED) << r;
  if (r == NVML_SUCCESS) {
    EXPECT_LE(active, 1u);
  }

  int cuda_n = 0;
  ASSERT_CU_OK(cuDeviceGetCount(&cuda_n));
  if (cuda_n < 2) GTEST_SKIP() << "needs two devices";
  CUdevice other = 0;
  ASSERT_CU_OK(cuDeviceGet(&other, 1));
  CUuuid u;
  ASSERT_CU_OK(cuDeviceGetUuid(&u, other));
  nvmlDevice_t h1 = nullptr;
  ASSERT_EQ(nvml_.ByUuid(NvmlUuidString(u).c_str(), &h1), NVML_SUCCESS);
  int can = -1;
  ASSERT_CU_OK(cuDeviceCanAccessPeer(&can, dev_, other));
  auto p2p = nvml_.Fn<nvmlReturn_t (*)(nvmlDevice_t, nvmlDevice_t, unsigned, unsigned*)>(
      "nvmlDeviceGetP2PStatus");
  unsigned status = 99;
  ASSERT_EQ(p2p(handle_, h1, kP2pRead, &status), NVML_SUCCESS);
  EXPECT_EQ(status == kP2pOk, can == 1)
      << "P2P read status " << status << ", CanAccessPeer " << can;
  unsigned level = 99;
  ASSERT_EQ(nvml_.Fn<nvmlReturn_t (*)(nvmlDevice_t, nvmlDevice_t, unsigned*)>(
                "nvmlDeviceGetTopologyCommonAncestor")(handle_, h1, &level),
            NVML_SUCCESS);
  EXPECT_LE(level, kTopologySystem);
  EXPECT_EQ(level % 10, 0u);
}

TEST_F(NvmlTest, FieldValuesAnswerPerField) {
  auto get =
      nvml_.Fn<nvmlReturn_t (*)(nvmlDevice_t, int, nvmlFieldValue_t*)>("nvmlDeviceGetFieldValues");
  ASSERT_NE(get, nullptr);
  nvmlFieldValue_t v[5] = {};
  v[0].fieldId = kFieldTotalEnergy;
  v[1].fieldId = kFieldPowerInstant;
  v[2].fieldId = kFieldMemoryTemp;
  v[3].fieldId = kFieldEccCurrent;
  v[4].fieldId = 0x7fff;  // no such field
  ASSERT_EQ(get(handle_, 5, v), NVML_SUCCESS);
  for (const auto& f : v) std::printf("field %u: return %d\n", f.fieldId, f.nvmlReturn);
  EXPECT_EQ(v[0].nvmlReturn, NVML_SUCCESS);
  EXPECT_GT(v[0].value.ullVal, 0u);
  EXPECT_GT(v[0].timestamp, 1'600'000'000'000'000ll) << "microseconds since the epoch";
  if (v[1].nvmlReturn == NVML_SUCCESS) {
    EXPECT_GT(v[1].value.uiVal, 0u);
  }
  if (v[2].nvmlReturn == NVML_SUCCESS) {
    EXPECT_LE(v[2].value.uiVal, 120u);
  }
  if (v[3].nvmlReturn == NVML_SUCCESS) {
    EXPECT_LE(v[3].value.uiVal, 1u);
  }
  EXPECT_NE(v[4].nvmlReturn, NVML_SUCCESS) << "an unknown field has its own error";
  EXPECT_EQ(get(handle_, 1, nullptr), NVML_ERROR_INVALID_ARGUMENT);
}

// Nothing happens on an idle, healthy device: a wait times out.
TEST_F(NvmlTest, EventSetWaitTimesOut) {
  auto create = nvml_.Fn<nvmlReturn_t (*)(nvmlEventSet_t*)>("nvmlEventSetCreate");
  auto free_set = nvml_.Fn<nvmlReturn_t (*)(nvmlEventSet_t)>("nvmlEventSetFree");
  auto supported = nvml_.Fn<nvmlReturn_t (*)(nvmlDevice_t, unsigned long long*)>(
      "nvmlDeviceGetSupportedEventTypes");
  auto reg = nvml_.Fn<nvmlReturn_t (*)(nvmlDevice_t, unsigned long long, nvmlEventSet_t)>(
      "nvmlDeviceRegisterEvents");
  auto wait =
      nvml_.Fn<nvmlReturn_t (*)(nvmlEventSet_t, nvmlEventData_t*, unsigned)>("nvmlEventSetWait_v2");
  ASSERT_TRUE(nvml_.missing.empty()) << "missing:" << nvml_.missing;
  nvmlEventSet_t set = nullptr;
  ASSERT_EQ(create(&set), NVML_SUCCESS);
  unsigned long long types = 0;
  ASSERT_EQ(supported(handle_, &types), NVML_SUCCESS);
  // P-state changes: the device stays busy-free here, so none should come.
  unsigned long long want = types & kEventPState;
  if (want != 0) {
    ASSERT_EQ(reg(handle_, want, set), NVML_SUCCESS);
  }
  EXPECT_NE(types & kEventXid, 0u) << "Xid errors are reported on every data-center board";
  nvmlEventData_t data{};
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(wait(set, &data, 100), NVML_ERROR_TIMEOUT);
  auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(waited, std::chrono::milliseconds(90));
  EXPECT_EQ(free_set(set), NVML_SUCCESS);
}

// The simulated node's model (docs/sim.md, "NVML: what is modelled and what
// is constant").
class SimNvmlModel : public NvmlTest {
 protected:
  unsigned Uint(const char* fn) {
    unsigned v = 0;
    EXPECT_EQ(nvml_.Fn<UintQuery>(fn)(handle_, &v), NVML_SUCCESS) << fn;
    return v;
  }
  unsigned UintArg(const char* fn, unsigned arg) {
    unsigned v = 0;
    EXPECT_EQ(nvml_.Fn<UintArgQuery>(fn)(handle_, arg, &v), NVML_SUCCESS) << fn;
    return v;
  }
  unsigned long long Energy() {
    unsigned long long e = 0;
    EXPECT_EQ(nvml_.Fn<nvmlReturn_t (*)(nvmlDevice_t, unsigned long long*)>(
                  "nvmlDeviceGetTotalEnergyConsumption")(handle_, &e),
              NVML_SUCCESS);
    return e;
  }
  // Waits until the engine has been idle for a whole utilization window.
  void WaitIdle() {
    for (int i = 0; i < 40; ++i) {
      nvmlUtilization_t u{};
      ASSERT_EQ(nvml_.Utilization(handle_, &u), NVML_SUCCESS);
      if (u.gpu == 0) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    FAIL() << "device 0 did not go idle";
  }
};

TEST_F(SimNvmlModel, TemperaturePowerClocksAndEnergyFollowTheEngine) {
  SKIP_UNLESS_SIM();
  WaitIdle();
  // Idle: the default device is an H100 SXM (cc 9.0, 132 SMs).
  EXPECT_EQ(UintArg("nvmlDeviceGetTemperature", kTempGpu), 30u);
  EXPECT_EQ(Uint("nvmlDeviceGetPowerUsage"), 70'000u);
  EXPECT_EQ(UintArg("nvmlDeviceGetClockInfo", kClockSm), 345u);
  unsigned long long reasons = 0;
  ASSERT_EQ(nvml_.Fn<nvmlReturn_t (*)(nvmlDevice_t, unsigned long long*)>(
                "nvmlDeviceGetCurrentClocksEventReasons")(handle_, &reasons),
            NVML_SUCCESS);
  EXPECT_EQ(reasons, 1u) << "GpuIdle";
  const auto t0 = std::chrono::steady_clock::now();
  const unsigned long long e0 = Energy();

  CUmodule m;
  ASSERT_CU_OK(cuModuleLoad(&m, CONF_CUBIN_PATH));
  CUfunction sleep;
  ASSERT_CU_OK(cuModuleGetFunction(&sleep, m, "conf_sleep_ns"));
  for (int i = 0; i < 10; ++i) ASSERT_CU_OK(LaunchSleepKernel(sleep, nullptr, 150 * kMs));
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  // Busy for the whole last second (the kernels run until ~1.5 s).
  unsigned temp = UintArg("nvmlDeviceGetTemperature", kTempGpu);
  unsigned power = Uint("nvmlDeviceGetPowerUsage");
  std::printf("busy: %u C, %u mW\n", temp, power);
  EXPECT_GE(temp, 62u);
  EXPECT_LE(temp, 70u);
  EXPECT_GE(power, 600'000u);
  EXPECT_LE(power, 700'000u);
  EXPECT_EQ(UintArg("nvmlDeviceGetClockInfo", kClockSm), 1980u);
  ASSERT_CU_OK(cuCtxSynchronize());
  const unsigned long long e1 = Energy();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // 1.5 s of kernels at 700 W, the rest at 70 W: the integral of the power.
  const double expected_mj = 70.0 * seconds * 1000 + (700.0 - 70.0) * 1.5 * 1000;
  std::printf("energy %llu mJ over %.2f s, expected ~%.0f\n", e1 - e0, seconds, expected_mj);
  EXPECT_NEAR(static_cast<double>(e1 - e0), expected_mj, 0.05 * expected_mj);
  ASSERT_CU_OK(cuModuleUnload(m));
}

TEST_F(SimNvmlModel, ConstantsOfTheDefaultBoard) {
  SKIP_UNLESS_SIM();
  EXPECT_EQ(UintArg("nvmlDeviceGetMaxClockInfo", kClockSm), 1980u);
  // 3350 GB/s over a 5120-bit HBM3 bus, double data rate.
  EXPECT_EQ(UintArg("nvmlDeviceGetMaxClockInfo", kClockMem), 2617u);
  EXPECT_EQ(UintArg("nvmlDeviceGetClockInfo", kClockMem), 2617u);
  EXPECT_EQ(UintArg("nvmlDeviceGetApplicationsClock", kClockSm), 1755u);
  EXPECT_EQ(Uint("nvmlDeviceGetPowerManagementLimit"), 700'000u);
  EXPECT_EQ(Uint("nvmlDeviceGetEnforcedPowerLimit"), 700'000u);
  EXPECT_EQ(Uint("nvmlDeviceGetArchitecture"), 9u);
  EXPECT_EQ(Uint("nvmlDeviceGetPerformanceState"), 0u);
  EXPECT_EQ(Uint("nvmlDeviceGetPersistenceMode"), 1u);
  EXPECT_EQ(Uint("nvmlDeviceGetCurrPcieLinkGeneration"), 5u);
  EXPECT_EQ(Uint("nvmlDeviceGetCurrPcieLinkWidth"), 16u);
  unsigned speed = 0, cur = 9, pending = 9;
  EXPECT_EQ(nvml_.Fn<UintQuery>("nvmlDeviceGetFanSpeed")(handle_, &speed), NVML_ERROR_NOT_SUPPORTED)
      << "an SXM module has no fan of its own";
  auto pair =
      nvml_.Fn<nvmlReturn_t (*)(nvmlDevice_t, unsigned*, unsigned*)>("nvmlDeviceGetMigMode");
  ASSERT_EQ(pair(handle_, &cur, &pending), NVML_SUCCESS);
  EXPECT_EQ(cur, 0u);
  EXPECT_EQ(pending, 0u);
  char serial[30] = {}, again[30] = {};
  ASSERT_EQ(nvml_.Fn<StringQuery>("nvmlDeviceGetSerial")(handle_, serial, sizeof serial),
            NVML_SUCCESS);
  ASSERT_EQ(nvml_.Fn<StringQuery>("nvmlDeviceGetSerial")(handle_, again, sizeof again),
            NVML_SUCCESS);
  EXPECT_EQ(strlen(serial), 13u);
  EXPECT_STREQ(serial, again);
  nvmlBAR1Memory_t bar1{};
  ASSERT_EQ(nvml_.Fn<nvmlReturn_t (*)(nvmlDevice_t, nvmlBAR1Memory_t*)>(
                "nvmlDeviceGetBAR1MemoryInfo")(handle_, &bar1),
            NVML_SUCCESS);
  EXPECT_EQ(bar1.bar1Total, 16ull << 30) << "the next power of two above 16 GiB";
  auto infoRom = nvml_.Fn<nvmlReturn_t (*)(nvmlDevice_t, unsigned, char*, unsigned)>(
      "nvmlDeviceGetInforomVersion");
  char text[16];
  EXPECT_EQ(infoRom(handle_, 2 /* power */, text, sizeof text), NVML_ERROR_NOT_SUPPORTED);
  nvmlFieldValue_t f[2] = {};
  f[0].fieldId = 0x7fff;
  f[1].fieldId = kFieldPowerInstant;
  ASSERT_EQ(nvml_.Fn<nvmlReturn_t (*)(nvmlDevice_t, int, nvmlFieldValue_t*)>(
                "nvmlDeviceGetFieldValues")(handle_, 2, f),
            NVML_SUCCESS);
  EXPECT_EQ(f[0].nvmlReturn, NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(f[1].nvmlReturn, NVML_SUCCESS);
  EXPECT_EQ(f[1].valueType, 1u) << "unsigned int";
  // No MPS server: this process is a compute process, not an MPS client.
  unsigned count = 4;
  nvmlProcessInfo_t infos[4];
  ASSERT_EQ(nvml_.Fn<nvmlReturn_t (*)(nvmlDevice_t, unsigned*, nvmlProcessInfo_t*)>(
                "nvmlDeviceGetMPSComputeRunningProcesses_v3")(handle_, &count, infos),
            NVML_SUCCESS);
  EXPECT_EQ(count, 0u);
}

// P2P, NVLink and the common ancestor follow VGPU_SIM_P2P (read at nvmlInit,
// like libcuda reads it at cuInit): the suite runs with 0-1 linked; with
// "none" the same pair has no peer path.
TEST_F(SimNvmlModel, P2pAndTopologyFollowVgpuSimP2p) {
  SKIP_UNLESS_SIM();
  nvmlDevice_t h1 = nullptr;
  ASSERT_EQ(nvml_.ByIndex(1, &h1), NVML_SUCCESS);
  nvmlDevice_t h0 = nullptr;
  ASSERT_EQ(nvml_.ByIndex(0, &h0), NVML_SUCCESS);
  auto p2p = nvml_.Fn<nvmlReturn_t (*)(nvmlDevice_t, nvmlDevice_t, unsigned, unsigned*)>(
      "nvmlDeviceGetP2PStatus");
  auto ancestor = nvml_.Fn<nvmlReturn_t (*)(nvmlDevice_t, nvmlDevice_t, unsigned*)>(
      "nvmlDeviceGetTopologyCommonAncestor");
  auto link_state =
      nvml_.Fn<nvmlReturn_t (*)(nvmlDevice_t, unsigned, unsigned*)>("nvmlDeviceGetNvLinkState");
  auto fields =
      nvml_.Fn<nvmlReturn_t (*)(nvmlDevice_t, int, nvmlFieldValue_t*)>("nvmlDeviceGetFieldValues");
  struct Expected {
    const char* p2p_env;
    unsigned read, nvlink, level;
    nvmlReturn_t link_result;
    unsigned link_count;
  };
  const Expected table[] = {
      {"0-1", kP2pOk, kP2pOk, kTopologySingle, NVML_SUCCESS, 18},
      {"none", kP2pChipsetNotSupported, kP2pNotSupported, kTopologySystem, NVML_ERROR_NOT_SUPPORTED,
       0},
  };
  const std::string saved = getenv("VGPU_SIM_P2P") != nullptr ? getenv("VGPU_SIM_P2P") : "none";
  for (const Expected& e : table) {
    SCOPED_TRACE(std::string("VGPU_SIM_P2P=") + e.p2p_env);
    ASSERT_EQ(nvml_.Shutdown(), NVML_SUCCESS);
    setenv("VGPU_SIM_P2P", e.p2p_env, 1);
    ASSERT_EQ(nvml_.Init(), NVML_SUCCESS);
    unsigned status = 99, level = 99, active = 9;
    ASSERT_EQ(p2p(h0, h1, kP2pRead, &status), NVML_SUCCESS);
    EXPECT_EQ(status, e.read);
    ASSERT_EQ(p2p(h1, h0, kP2pNvlink, &status), NVML_SUCCESS);
    EXPECT_EQ(status, e.nvlink);
    ASSERT_EQ(ancestor(h0, h1, &level), NVML_SUCCESS);
    EXPECT_EQ(level, e.level);
    ASSERT_EQ(ancestor(h0, h0, &level), NVML_SUCCESS);
    EXPECT_EQ(level, kTopologyInternal);
    EXPECT_EQ(link_state(h0, 0, &active), e.link_result);
    nvmlFieldValue_t f{};
    f.fieldId = kFieldNvlinkCount;
    ASSERT_EQ(fields(h0, 1, &f), NVML_SUCCESS);
    EXPECT_EQ(f.value.uiVal, e.link_count);
  }
  setenv("VGPU_SIM_P2P", saved.c_str(), 1);
  ASSERT_EQ(nvml_.Shutdown(), NVML_SUCCESS);
  ASSERT_EQ(nvml_.Init(), NVML_SUCCESS);
  unsigned active = 9;
  if (saved == "0-1") {
    EXPECT_EQ(link_state(h0, 17, &active), NVML_SUCCESS) << "an H100 SXM has 18 links";
    EXPECT_EQ(link_state(h0, 18, &active), NVML_ERROR_INVALID_ARGUMENT);
  }
  EXPECT_EQ(link_state(h0, 0, nullptr), NVML_ERROR_INVALID_ARGUMENT);
}

}  // namespace
}  // namespace vgpu::conformance
