// NVML against the driver API. NVML is loaded with dlopen and declared here
// from its stable C ABI (the toolkit ships no nvml.h), so the same test runs
// against the real libnvidia-ml.so.1.
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "test_util.h"

namespace vgpu::conformance {
namespace {

using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
constexpr nvmlReturn_t NVML_SUCCESS = 0;
constexpr nvmlReturn_t NVML_ERROR_UNINITIALIZED = 1;
constexpr nvmlReturn_t NVML_ERROR_INVALID_ARGUMENT = 2;
constexpr nvmlReturn_t NVML_ERROR_NOT_FOUND = 6;
constexpr nvmlReturn_t NVML_ERROR_INSUFFICIENT_SIZE = 7;

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

}  // namespace
}  // namespace vgpu::conformance
