// The simulated libnvidia-ml.so.1 (sim/nvml) against a simulated node that
// this test drives directly through NodeRegion, as libcuda processes would.
// The library is loaded by path with dlopen, as monitoring tools load it.
#include <cuda.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "driver/nvml_abi.h"
#include "sim/node/node_region.h"
#include "sim/node/sim_config.h"

namespace vgpu::sim {
namespace {

constexpr uint64_t kGiB = 1ull << 30;
constexpr uint64_t kMiB = 1ull << 20;

// The entry points, resolved from the library by name.
struct Nvml {
  void* lib = nullptr;
  template <typename F>
  F Get(const char* name) {
    void* p = dlsym(lib, name);
    EXPECT_NE(p, nullptr) << name;
    return reinterpret_cast<F>(p);
  }
#define NVML_FN(name) decltype(&::name) name = Get<decltype(&::name)>(#name)
  NVML_FN(nvmlInit_v2);
  NVML_FN(nvmlInit);
  NVML_FN(nvmlInitWithFlags);
  NVML_FN(nvmlShutdown);
  NVML_FN(nvmlErrorString);
  NVML_FN(nvmlSystemGetDriverVersion);
  NVML_FN(nvmlSystemGetNVMLVersion);
  NVML_FN(nvmlSystemGetCudaDriverVersion_v2);
  NVML_FN(nvmlSystemGetProcessName);
  NVML_FN(nvmlDeviceGetCount_v2);
  NVML_FN(nvmlDeviceGetHandleByIndex_v2);
  NVML_FN(nvmlDeviceGetHandleByUUID);
  NVML_FN(nvmlDeviceGetHandleByPciBusId_v2);
  NVML_FN(nvmlDeviceGetName);
  NVML_FN(nvmlDeviceGetUUID);
  NVML_FN(nvmlDeviceGetIndex);
  NVML_FN(nvmlDeviceGetMinorNumber);
  NVML_FN(nvmlDeviceGetPciInfo_v3);
  NVML_FN(nvmlDeviceGetPciInfo);
  NVML_FN(nvmlDeviceGetCudaComputeCapability);
  NVML_FN(nvmlDeviceGetBrand);
  NVML_FN(nvmlDeviceGetComputeMode);
  NVML_FN(nvmlDeviceGetMultiGpuBoard);
  NVML_FN(nvmlDeviceGetMemoryInfo);
  NVML_FN(nvmlDeviceGetMemoryInfo_v2);
  NVML_FN(nvmlDeviceGetUtilizationRates);
  NVML_FN(nvmlDeviceGetComputeRunningProcesses);
  NVML_FN(nvmlDeviceGetComputeRunningProcesses_v3);
  NVML_FN(nvmlDeviceGetGraphicsRunningProcesses_v3);
  NVML_FN(nvmlDeviceGetProcessUtilization);
#undef NVML_FN
};

void* LoadLibrary() {
  static void* lib = dlopen(VGPU_SIM_NVML_PATH, RTLD_NOW | RTLD_LOCAL);
  return lib;
}

// Each test gets its own node, named after it, created by nvmlInit.
class SimNvml : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(LoadLibrary(), nullptr) << dlerror();
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    node_ = std::string("nvmltest-") + std::to_string(getpid()) + "-" + info->name();
    setenv("VGPU_SIM_NODE", node_.c_str(), 1);
    setenv("VGPU_SIM_DEVICES", "2x8GiB", 1);
    shm_unlink(NodeRegion::ShmName(node_).c_str());
  }
  void TearDown() override {
    while (nvml_.nvmlShutdown != nullptr && nvml_.nvmlShutdown() == NVML_SUCCESS) {
    }
    if (cuda_ != nullptr) {
      cuda_->Unregister();
      munmap(cuda_->header(), sizeof(NodeHeader));
      delete cuda_;
    }
    shm_unlink(NodeRegion::ShmName(node_).c_str());
  }
  // The test process as a libcuda process of the node would register.
  NodeRegion* OpenAsCuda() {
    SimConfig config;
    std::string error;
    EXPECT_TRUE(LoadSimConfig(&config, &error)) << error;
    cuda_ = NodeRegion::Open(config, &error);
    EXPECT_NE(cuda_, nullptr) << error;
    return cuda_;
  }
  nvmlDevice_t Handle(unsigned int i) {
    nvmlDevice_t h = nullptr;
    EXPECT_EQ(nvml_.nvmlDeviceGetHandleByIndex_v2(i, &h), NVML_SUCCESS);
    return h;
  }

  Nvml nvml_{LoadLibrary()};
  std::string node_;
  NodeRegion* cuda_ = nullptr;
};

TEST_F(SimNvml, UninitializedUntilInitAndReferenceCounted) {
  unsigned int count = 0;
  EXPECT_EQ(nvml_.nvmlDeviceGetCount_v2(&count), NVML_ERROR_UNINITIALIZED);
  EXPECT_EQ(nvml_.nvmlShutdown(), NVML_ERROR_UNINITIALIZED);
  EXPECT_STREQ(nvml_.nvmlErrorString(NVML_ERROR_UNINITIALIZED), "Uninitialized");
  EXPECT_STREQ(nvml_.nvmlErrorString(static_cast<nvmlReturn_t>(12345)), "Unknown Error");
  ASSERT_EQ(nvml_.nvmlInit_v2(), NVML_SUCCESS);
  ASSERT_EQ(nvml_.nvmlInit(), NVML_SUCCESS);
  EXPECT_EQ(nvml_.nvmlShutdown(), NVML_SUCCESS);
  EXPECT_EQ(nvml_.nvmlDeviceGetCount_v2(&count), NVML_SUCCESS);
  EXPECT_EQ(count, 2u);
  EXPECT_EQ(nvml_.nvmlDeviceGetCount_v2(nullptr), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(nvml_.nvmlShutdown(), NVML_SUCCESS);
  EXPECT_EQ(nvml_.nvmlDeviceGetCount_v2(&count), NVML_ERROR_UNINITIALIZED);
  EXPECT_EQ(nvml_.nvmlShutdown(), NVML_ERROR_UNINITIALIZED);
}

TEST_F(SimNvml, CreatesTheNodeWithoutBecomingAComputeProcess) {
  ASSERT_EQ(nvml_.nvmlInit_v2(), NVML_SUCCESS);
  std::string error;
  NodeRegion* node = NodeRegion::Attach(node_, &error);
  ASSERT_NE(node, nullptr) << error;
  EXPECT_EQ(node->device_count(), 2);
  for (const ProcessSlot& slot : node->header()->processes) {
    EXPECT_NE(slot.pid.load(), getpid());
  }
  munmap(node->header(), sizeof(NodeHeader));
  delete node;
}

TEST_F(SimNvml, InitFlagsAndConfigurationErrors) {
  EXPECT_EQ(nvml_.nvmlInitWithFlags(0x100), NVML_ERROR_INVALID_ARGUMENT);
  setenv("VGPU_SIM_DEVICES", "lots of GPUs", 1);
  EXPECT_EQ(nvml_.nvmlInit_v2(), NVML_ERROR_UNKNOWN);
  ASSERT_EQ(nvml_.nvmlInitWithFlags(NVML_INIT_FLAG_NO_GPUS), NVML_SUCCESS);
  unsigned int count = 7;
  EXPECT_EQ(nvml_.nvmlDeviceGetCount_v2(&count), NVML_SUCCESS);
  EXPECT_EQ(count, 0u);
  nvmlDevice_t h = nullptr;
  EXPECT_EQ(nvml_.nvmlDeviceGetHandleByIndex_v2(0, &h), NVML_ERROR_INVALID_ARGUMENT);
}

TEST_F(SimNvml, SystemQueries) {
  char buf[NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE];
  EXPECT_EQ(nvml_.nvmlSystemGetNVMLVersion(buf, sizeof buf), NVML_SUCCESS);  // before init
  EXPECT_EQ(std::strncmp(buf, "13.580", 6), 0) << buf;
  EXPECT_EQ(nvml_.nvmlSystemGetDriverVersion(buf, sizeof buf), NVML_ERROR_UNINITIALIZED);
  ASSERT_EQ(nvml_.nvmlInit_v2(), NVML_SUCCESS);
  EXPECT_EQ(nvml_.nvmlSystemGetDriverVersion(buf, sizeof buf), NVML_SUCCESS);
  EXPECT_STREQ(buf, "580.00-sim");
  EXPECT_EQ(nvml_.nvmlSystemGetDriverVersion(buf, 5), NVML_ERROR_INSUFFICIENT_SIZE);
  EXPECT_EQ(nvml_.nvmlSystemGetDriverVersion(nullptr, 80), NVML_ERROR_INVALID_ARGUMENT);
  int cuda = 0;
  EXPECT_EQ(nvml_.nvmlSystemGetCudaDriverVersion_v2(&cuda), NVML_SUCCESS);
  EXPECT_EQ(cuda, CUDA_VERSION);
  char name[256];
  EXPECT_EQ(nvml_.nvmlSystemGetProcessName(getpid(), name, sizeof name), NVML_SUCCESS);
  EXPECT_NE(std::strstr(name, "sim_nvml_test"), nullptr) << name;
}

TEST_F(SimNvml, IdentityMatchesTheNode) {
  ASSERT_EQ(nvml_.nvmlInit_v2(), NVML_SUCCESS);
  NodeRegion* node = OpenAsCuda();
  ASSERT_NE(node, nullptr);
  for (unsigned int i = 0; i < 2; ++i) {
    const DeviceState& d = node->device(static_cast<int>(i));
    nvmlDevice_t h = Handle(i);
    char text[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    ASSERT_EQ(nvml_.nvmlDeviceGetName(h, text, sizeof text), NVML_SUCCESS);
    EXPECT_STREQ(text, d.name);
    ASSERT_EQ(nvml_.nvmlDeviceGetUUID(h, text, sizeof text), NVML_SUCCESS);
    char want[64];
    std::snprintf(want, sizeof want,
                  "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                  d.uuid[0], d.uuid[1], d.uuid[2], d.uuid[3], d.uuid[4], d.uuid[5], d.uuid[6],
                  d.uuid[7], d.uuid[8], d.uuid[9], d.uuid[10], d.uuid[11], d.uuid[12], d.uuid[13],
                  d.uuid[14], d.uuid[15]);
    EXPECT_STREQ(text, want);
    nvmlDevice_t by_uuid = nullptr;
    EXPECT_EQ(nvml_.nvmlDeviceGetHandleByUUID(want, &by_uuid), NVML_SUCCESS);
    EXPECT_EQ(by_uuid, h);
    unsigned int index = 9, minor = 9;
    EXPECT_EQ(nvml_.nvmlDeviceGetIndex(h, &index), NVML_SUCCESS);
    EXPECT_EQ(index, i);
    EXPECT_EQ(nvml_.nvmlDeviceGetMinorNumber(h, &minor), NVML_SUCCESS);
    EXPECT_EQ(minor, i);
    int major = 0, minor_cc = 0;
    EXPECT_EQ(nvml_.nvmlDeviceGetCudaComputeCapability(h, &major, &minor_cc), NVML_SUCCESS);
    EXPECT_EQ(major, d.cc_major);
    EXPECT_EQ(minor_cc, d.cc_minor);
  }
  nvmlDevice_t h = Handle(0);
  nvmlBrandType_t brand = NVML_BRAND_UNKNOWN;
  EXPECT_EQ(nvml_.nvmlDeviceGetBrand(h, &brand), NVML_SUCCESS);
  nvmlComputeMode_t mode = NVML_COMPUTEMODE_PROHIBITED;
  EXPECT_EQ(nvml_.nvmlDeviceGetComputeMode(h, &mode), NVML_SUCCESS);
  EXPECT_EQ(mode, NVML_COMPUTEMODE_DEFAULT);
  unsigned int multi = 7;
  EXPECT_EQ(nvml_.nvmlDeviceGetMultiGpuBoard(h, &multi), NVML_SUCCESS);
  EXPECT_EQ(multi, 0u);
  nvmlDevice_t other = nullptr;
  EXPECT_EQ(nvml_.nvmlDeviceGetHandleByUUID("GPU-00000000-0000-0000-0000-000000000000", &other),
            NVML_ERROR_NOT_FOUND);
}

TEST_F(SimNvml, PciBusIds) {
  ASSERT_EQ(nvml_.nvmlInit_v2(), NVML_SUCCESS);
  nvmlDevice_t h = Handle(1);
  nvmlPciInfo_t pci{};
  ASSERT_EQ(nvml_.nvmlDeviceGetPciInfo_v3(h, &pci), NVML_SUCCESS);
  char want[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
  std::snprintf(want, sizeof want, "00000000:%02X:00.0", pci.bus);
  EXPECT_STREQ(pci.busId, want);
  EXPECT_EQ(pci.pciDeviceId & 0xffff, 0x10deu);
  nvmlPciInfoLegacy_t legacy{};
  ASSERT_EQ(nvml_.nvmlDeviceGetPciInfo(h, &legacy), NVML_SUCCESS);
  EXPECT_STREQ(legacy.busId, pci.busIdLegacy);
  EXPECT_EQ(legacy.bus, pci.bus);
  char short_form[16];
  std::snprintf(short_form, sizeof short_form, "%02x:00.0", pci.bus);
  const char* forms[] = {pci.busId, pci.busIdLegacy, short_form};
  for (const char* id : forms) {
    nvmlDevice_t found = nullptr;
    EXPECT_EQ(nvml_.nvmlDeviceGetHandleByPciBusId_v2(id, &found), NVML_SUCCESS) << id;
    EXPECT_EQ(found, h) << id;
  }
  nvmlDevice_t found = nullptr;
  EXPECT_EQ(nvml_.nvmlDeviceGetHandleByPciBusId_v2("0000:FE:00.0", &found), NVML_ERROR_NOT_FOUND);
  EXPECT_EQ(nvml_.nvmlDeviceGetHandleByPciBusId_v2("not a bus id", &found),
            NVML_ERROR_INVALID_ARGUMENT);
}

TEST_F(SimNvml, RejectsBadHandlesAndSmallBuffers) {
  ASSERT_EQ(nvml_.nvmlInit_v2(), NVML_SUCCESS);
  nvmlDevice_t h0 = Handle(0), h1 = Handle(1);
  auto step = reinterpret_cast<uintptr_t>(h1) - reinterpret_cast<uintptr_t>(h0);
  unsigned int index = 0;
  for (uintptr_t bad :
       {uintptr_t{0}, uintptr_t{0x1234}, reinterpret_cast<uintptr_t>(h0) + 1,
        reinterpret_cast<uintptr_t>(h0) + 2 * step, reinterpret_cast<uintptr_t>(&index)}) {
    EXPECT_EQ(nvml_.nvmlDeviceGetIndex(reinterpret_cast<nvmlDevice_t>(bad), &index),
              NVML_ERROR_INVALID_ARGUMENT);
  }
  nvmlDevice_t h = nullptr;
  EXPECT_EQ(nvml_.nvmlDeviceGetHandleByIndex_v2(2, &h), NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(nvml_.nvmlDeviceGetHandleByIndex_v2(0, nullptr), NVML_ERROR_INVALID_ARGUMENT);
  char text[NVML_DEVICE_UUID_BUFFER_SIZE];
  EXPECT_EQ(nvml_.nvmlDeviceGetUUID(h0, text, 40), NVML_ERROR_INSUFFICIENT_SIZE);
  EXPECT_EQ(nvml_.nvmlDeviceGetUUID(h0, text, 41), NVML_SUCCESS);
  EXPECT_EQ(nvml_.nvmlDeviceGetName(h0, text, 1), NVML_ERROR_INSUFFICIENT_SIZE);
  EXPECT_EQ(nvml_.nvmlDeviceGetName(h0, nullptr, 64), NVML_ERROR_INVALID_ARGUMENT);
  ASSERT_EQ(nvml_.nvmlShutdown(), NVML_SUCCESS);
  EXPECT_EQ(nvml_.nvmlDeviceGetIndex(h0, &index), NVML_ERROR_UNINITIALIZED);
}

TEST_F(SimNvml, MemoryFollowsTheNode) {
  ASSERT_EQ(nvml_.nvmlInit_v2(), NVML_SUCCESS);
  NodeRegion* node = OpenAsCuda();
  ASSERT_NE(node, nullptr);
  ASSERT_TRUE(node->Reserve(0, 3 * kGiB));
  // As a real driver's, NVML's total counts what the driver sets aside
  // (cuDeviceTotalMem does not): 1/232 of the device, in whole MiB.
  const uint64_t reserved = 36 * kMiB;  // 8 GiB / 232 = 35.3 MiB
  nvmlMemory_t m{};
  ASSERT_EQ(nvml_.nvmlDeviceGetMemoryInfo(Handle(0), &m), NVML_SUCCESS);
  EXPECT_EQ(m.total, 8 * kGiB + reserved);
  EXPECT_EQ(m.used, 3 * kGiB + reserved) << "version 1 counts the reserved memory as used";
  EXPECT_EQ(m.free, 5 * kGiB);
  nvmlMemory_v2_t m2{};
  EXPECT_EQ(nvml_.nvmlDeviceGetMemoryInfo_v2(Handle(0), &m2), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
  m2.version = nvmlMemory_v2;
  ASSERT_EQ(nvml_.nvmlDeviceGetMemoryInfo_v2(Handle(0), &m2), NVML_SUCCESS);
  EXPECT_EQ(m2.total, 8 * kGiB + reserved);
  EXPECT_EQ(m2.used, 3 * kGiB);
  EXPECT_EQ(m2.free, 5 * kGiB);
  EXPECT_EQ(m2.reserved, reserved);
  ASSERT_EQ(nvml_.nvmlDeviceGetMemoryInfo(Handle(1), &m), NVML_SUCCESS);
  EXPECT_EQ(m.used, reserved);
  node->Unreserve(0, 3 * kGiB);
  ASSERT_EQ(nvml_.nvmlDeviceGetMemoryInfo(Handle(0), &m), NVML_SUCCESS);
  EXPECT_EQ(m.used, reserved);
  EXPECT_EQ(m.free, 8 * kGiB);
}

// A process frees memory from another thread after its slot was returned at
// exit: the device gets nothing back twice. (The counter used to wrap, NVML
// then showed the device full for ever, and vgpud waited on it.)
TEST_F(SimNvml, AFreeAfterUnregisterIsNotReturnedTwice) {
  ASSERT_EQ(nvml_.nvmlInit_v2(), NVML_SUCCESS);
  NodeRegion* node = OpenAsCuda();
  ASSERT_NE(node, nullptr);
  ASSERT_TRUE(node->Reserve(0, 2 * kGiB));
  node->Unreserve(0, 3 * kGiB);  // more than it holds: only what it holds comes back
  EXPECT_EQ(node->device(0).used_bytes.load(), 0u);
  ASSERT_TRUE(node->Reserve(0, kGiB));
  node->Unregister();        // at exit: its gigabyte comes back
  node->Unreserve(0, kGiB);  // a late free of the same gigabyte
  EXPECT_EQ(node->device(0).used_bytes.load(), 0u);
  nvmlMemory_v2_t m{};
  m.version = nvmlMemory_v2;
  ASSERT_EQ(nvml_.nvmlDeviceGetMemoryInfo_v2(Handle(0), &m), NVML_SUCCESS);
  EXPECT_EQ(m.used, 0u);
  EXPECT_EQ(m.free, 8 * kGiB);
}

TEST_F(SimNvml, ComputeProcessesAndTheInfoCountProtocol) {
  ASSERT_EQ(nvml_.nvmlInit_v2(), NVML_SUCCESS);
  unsigned int count = 5;
  EXPECT_EQ(nvml_.nvmlDeviceGetComputeRunningProcesses_v3(Handle(0), &count, nullptr),
            NVML_SUCCESS);
  EXPECT_EQ(count, 0u);
  NodeRegion* node = OpenAsCuda();
  ASSERT_NE(node, nullptr);
  ASSERT_TRUE(node->Reserve(0, kGiB));
  node->self()->context_mask.fetch_or(1u << 1);  // a context on device 1, no memory
  count = 0;
  EXPECT_EQ(nvml_.nvmlDeviceGetComputeRunningProcesses_v3(Handle(0), &count, nullptr),
            NVML_ERROR_INSUFFICIENT_SIZE);
  EXPECT_EQ(count, 1u);
  nvmlProcessInfo_t infos[4]{};
  count = 4;
  ASSERT_EQ(nvml_.nvmlDeviceGetComputeRunningProcesses_v3(Handle(0), &count, infos), NVML_SUCCESS);
  ASSERT_EQ(count, 1u);
  EXPECT_EQ(infos[0].pid, static_cast<unsigned int>(getpid()));
  EXPECT_EQ(infos[0].usedGpuMemory, kGiB);
  EXPECT_EQ(infos[0].gpuInstanceId, 0xFFFFFFFFu);
  EXPECT_EQ(infos[0].computeInstanceId, 0xFFFFFFFFu);
  nvmlProcessInfo_v1_t v1[2]{};
  count = 2;
  ASSERT_EQ(nvml_.nvmlDeviceGetComputeRunningProcesses(Handle(1), &count, v1), NVML_SUCCESS);
  ASSERT_EQ(count, 1u);
  EXPECT_EQ(v1[0].pid, static_cast<unsigned int>(getpid()));
  EXPECT_EQ(v1[0].usedGpuMemory, 0u);
  count = 4;
  EXPECT_EQ(nvml_.nvmlDeviceGetGraphicsRunningProcesses_v3(Handle(0), &count, infos), NVML_SUCCESS);
  EXPECT_EQ(count, 0u);
  EXPECT_EQ(nvml_.nvmlDeviceGetComputeRunningProcesses_v3(Handle(0), nullptr, infos),
            NVML_ERROR_INVALID_ARGUMENT);
  node->Unreserve(0, kGiB);
}

// A process killed without cleaning up: NVML stops listing it and its memory
// is free again, as with the real driver.
TEST_F(SimNvml, ForgetsProcessesThatDied) {
  ASSERT_EQ(nvml_.nvmlInit_v2(), NVML_SUCCESS);
  int to_child[2], to_parent[2];
  ASSERT_EQ(pipe(to_child), 0);
  ASSERT_EQ(pipe(to_parent), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    SimConfig config;
    std::string error;
    NodeRegion* node = LoadSimConfig(&config, &error) ? NodeRegion::Open(config, &error) : nullptr;
    char ok = node != nullptr && node->Reserve(0, 2 * kGiB) ? 1 : 0;
    if (node != nullptr) node->self()->context_mask.fetch_or(1u);
    (void)!write(to_parent[1], &ok, 1);
    (void)!read(to_child[0], &ok, 1);
    _exit(0);  // no Unregister: the slot and its 2 GiB stay behind
  }
  char ok = 0;
  ASSERT_EQ(read(to_parent[0], &ok, 1), 1);
  ASSERT_EQ(ok, 1);
  nvmlProcessInfo_t infos[4]{};
  unsigned int count = 4;
  ASSERT_EQ(nvml_.nvmlDeviceGetComputeRunningProcesses_v3(Handle(0), &count, infos), NVML_SUCCESS);
  ASSERT_EQ(count, 1u);
  EXPECT_EQ(infos[0].pid, static_cast<unsigned int>(child));
  EXPECT_EQ(infos[0].usedGpuMemory, 2 * kGiB);
  ASSERT_EQ(write(to_child[1], &ok, 1), 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  count = 4;
  ASSERT_EQ(nvml_.nvmlDeviceGetComputeRunningProcesses_v3(Handle(0), &count, infos), NVML_SUCCESS);
  EXPECT_EQ(count, 0u);
  nvmlMemory_v2_t m{};
  m.version = nvmlMemory_v2;
  ASSERT_EQ(nvml_.nvmlDeviceGetMemoryInfo_v2(Handle(0), &m), NVML_SUCCESS);
  EXPECT_EQ(m.used, 0u);
  for (int fd : {to_child[0], to_child[1], to_parent[0], to_parent[1]}) close(fd);
}

// Queued work starts the moment the engine frees up (a GPU does not wait for
// a host thread), but never before it was queued: host wake-ups between
// kernels are not device idle time, real gaps in the work still are.
TEST_F(SimNvml, EngineStartsQueuedWorkWhenReleased) {
  NodeRegion* node = OpenAsCuda();
  ASSERT_NE(node, nullptr);
  uint64_t s1 = node->EngineAcquire(0, NowNs());
  uint64_t released = node->EngineRelease(0, s1, NowNs());
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  EXPECT_EQ(node->EngineAcquire(0, released - 1'000'000), released);  // queued earlier
  uint64_t after = node->EngineRelease(0, released, NowNs());
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  uint64_t ready = after + 1'000'000;  // queued 1 ms after the engine went idle
  EXPECT_EQ(node->EngineAcquire(0, ready), ready);
  node->EngineRelease(0, ready, NowNs());
  uint64_t before = NowNs();
  uint64_t start = node->EngineAcquire(0, NowNs() + 1'000'000'000);  // never in the future
  EXPECT_GE(start, before);
  EXPECT_LE(start, NowNs());
  node->EngineRelease(0, start, NowNs());
}

// Readings happen whenever this thread gets to run, so the kernels carry
// explicit timestamps: one from the node's creation is busy the whole window
// at any instant; once it ended halfway through the node's life so far, a
// reading lies between the model's values at clock readings taken before
// and after it (the fraction only falls as the window grows).
TEST_F(SimNvml, UtilizationIsEngineBusyTime) {
  ASSERT_EQ(nvml_.nvmlInit_v2(), NVML_SUCCESS);
  NodeRegion* node = OpenAsCuda();
  ASSERT_NE(node, nullptr);
  nvmlUtilization_t u{};
  ASSERT_EQ(nvml_.nvmlDeviceGetUtilizationRates(Handle(0), &u), NVML_SUCCESS);
  EXPECT_EQ(u.gpu, 0u);
  // Queued at the node's creation on an idle engine, it started then.
  const uint64_t created = node->header()->created_ns;
  const uint64_t started = node->EngineAcquire(0, created);
  ASSERT_EQ(started, created);
  ASSERT_EQ(nvml_.nvmlDeviceGetUtilizationRates(Handle(0), &u), NVML_SUCCESS);
  EXPECT_EQ(u.gpu, 100u) << "still running: busy since the node exists";
  ASSERT_EQ(nvml_.nvmlDeviceGetUtilizationRates(Handle(1), &u), NVML_SUCCESS);
  EXPECT_EQ(u.gpu, 0u);
  const uint64_t end = created + (NowNs() - created) / 2;
  node->EngineRelease(0, started, end);
  // While the node is younger than the one-second window, the window is its life.
  auto percent = [&](uint64_t now) {
    return static_cast<unsigned int>(
        std::lround(static_cast<double>(end - created) / (now - created) * 100.0));
  };
  const uint64_t before = NowNs();
  ASSERT_EQ(nvml_.nvmlDeviceGetUtilizationRates(Handle(0), &u), NVML_SUCCESS);
  const uint64_t after = NowNs();
  EXPECT_LE(u.gpu, percent(before));
  EXPECT_LE(u.gpu, 50u) << "busy for half the node's life at most";
  // Past the window the kernel is history: the only effect of a slow machine.
  EXPECT_GE(u.gpu, after - created <= 1'000'000'000 ? percent(after) : 0u);
  EXPECT_EQ(u.memory, 0u);
}

// NVML's sample time base: wall-clock microseconds.
unsigned long long RealtimeUs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<unsigned long long>(ts.tv_sec) * 1'000'000ull +
         static_cast<unsigned long long>(ts.tv_nsec) / 1000;
}

// Runs kernels of `each_ns` back to back on device d for about `for_ns`, as a
// saturating process's stream worker would; returns the last modelled end.
uint64_t Saturate(NodeRegion* node, int d, uint64_t each_ns, uint64_t for_ns) {
  uint64_t end = NowNs(), until = end + for_ns;
  while (end < until) {
    uint64_t start = node->EngineAcquire(d, end);
    while (NowNs() < start + each_ns) std::this_thread::sleep_for(std::chrono::microseconds(200));
    end = node->EngineRelease(d, start, start + each_ns);
  }
  return end;
}

TEST_F(SimNvml, ProcessUtilizationOfASaturatingAndAnIdleProcess) {
  ASSERT_EQ(nvml_.nvmlInit_v2(), NVML_SUCCESS);
  NodeRegion* node = OpenAsCuda();
  ASSERT_NE(node, nullptr);
  auto get = nvml_.nvmlDeviceGetProcessUtilization;
  nvmlProcessUtilizationSample_t s[4]{};
  unsigned int count = 4;
  EXPECT_EQ(get(Handle(0), s, &count, 0), NVML_ERROR_NOT_FOUND);  // nothing ran yet
  EXPECT_EQ(count, 0u);
  // An idle process of the node: a context on device 0, no kernels.
  int to_child[2], to_parent[2];
  ASSERT_EQ(pipe(to_child), 0);
  ASSERT_EQ(pipe(to_parent), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    SimConfig config;
    std::string error;
    NodeRegion* idle = LoadSimConfig(&config, &error) ? NodeRegion::Open(config, &error) : nullptr;
    char ok = idle != nullptr ? 1 : 0;
    if (idle != nullptr) idle->self()->context_mask.fetch_or(1u);
    (void)!write(to_parent[1], &ok, 1);
    (void)!read(to_child[0], &ok, 1);
    _exit(0);
  }
  char ok = 0;
  ASSERT_EQ(read(to_parent[0], &ok, 1), 1);
  ASSERT_EQ(ok, 1);

  // 400 ms of back-to-back 5 ms kernels, then one still running when NVML
  // reads: busy without a gap up to the reading, however late it comes.
  const uint64_t end = Saturate(node, 0, 5'000'000, 400'000'000);
  const uint64_t running = node->EngineAcquire(0, end);
  ASSERT_EQ(running, end) << "queued work starts when the engine frees up";
  unsigned long long since = RealtimeUs() - 300'000;
  count = 0;
  EXPECT_EQ(get(Handle(0), nullptr, &count, since), NVML_ERROR_INSUFFICIENT_SIZE);
  EXPECT_EQ(count, 1u) << "the idle process has no sample";
  count = 0;
  EXPECT_EQ(get(Handle(0), s, &count, since), NVML_ERROR_INSUFFICIENT_SIZE);
  EXPECT_EQ(count, 1u);
  count = 4;
  ASSERT_EQ(get(Handle(0), s, &count, since), NVML_SUCCESS);
  ASSERT_EQ(count, 1u);
  EXPECT_EQ(s[0].pid, static_cast<unsigned int>(getpid()));
  EXPECT_EQ(s[0].smUtil, 100u) << "busy the whole window";
  EXPECT_EQ(s[0].memUtil + s[0].encUtil + s[0].decUtil, 0u);
  EXPECT_GT(s[0].timeStamp, since);
  EXPECT_LE(s[0].timeStamp, RealtimeUs());
  node->EngineRelease(0, running, NowNs());
  // Samples are only those newer than lastSeenTimeStamp: the end of the
  // process's last kernel.
  count = 4;
  ASSERT_EQ(get(Handle(0), s, &count, since), NVML_SUCCESS);
  ASSERT_EQ(count, 1u);
  count = 4;
  EXPECT_EQ(get(Handle(0), s, &count, s[0].timeStamp), NVML_ERROR_NOT_FOUND);
  EXPECT_EQ(count, 0u);
  count = 4;
  EXPECT_EQ(get(Handle(1), s, &count, 0), NVML_ERROR_NOT_FOUND);  // device 1 stayed idle
  EXPECT_EQ(get(Handle(0), s, nullptr, since), NVML_ERROR_INVALID_ARGUMENT);
  ASSERT_EQ(write(to_child[1], &ok, 1), 1);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);
  for (int fd : {to_child[0], to_child[1], to_parent[0], to_parent[1]}) close(fd);
}

// Half of a window busy reads about half; a window after the process went
// idle has no sample for it. The window runs from lastSeenTimeStamp to the
// reading, so the reading lies between the engine time over the window at
// clock readings taken before and after it; lastSeenTimeStamp is wall-clock
// time, converted to the engine's clock with an allowance of 5 ms.
TEST_F(SimNvml, ProcessUtilizationOverPartOfTheWindow) {
  ASSERT_EQ(nvml_.nvmlInit_v2(), NVML_SUCCESS);
  NodeRegion* node = OpenAsCuda();
  ASSERT_NE(node, nullptr);
  auto get = nvml_.nvmlDeviceGetProcessUtilization;
  const unsigned long long since = RealtimeUs();
  const uint64_t since_ns = NowNs();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  Saturate(node, 1, 5'000'000, 200'000'000);
  const uint64_t busy = node->self()->busy_ns[1].load();
  ASSERT_GE(busy, 200'000'000u);
  constexpr uint64_t kClockSlackNs = 5'000'000;
  auto percent = [&](uint64_t window_ns) {
    return static_cast<unsigned int>(100.0 * static_cast<double>(busy) / window_ns + 0.5);
  };
  nvmlProcessUtilizationSample_t s[2]{};
  unsigned int count = 2;
  const uint64_t before = NowNs();
  ASSERT_EQ(get(Handle(1), s, &count, since), NVML_SUCCESS);
  const uint64_t after = NowNs();
  ASSERT_EQ(count, 1u);
  EXPECT_LE(s[0].smUtil, percent(before - since_ns - kClockSlackNs));
  EXPECT_GE(s[0].smUtil, percent(after - since_ns + kClockSlackNs));
  EXPECT_LE(s[0].smUtil, 51u) << "idle for 200 ms, then busy for about as long";
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  count = 2;
  EXPECT_EQ(get(Handle(1), s, &count, RealtimeUs() - 20'000), NVML_ERROR_NOT_FOUND);
}

}  // namespace
}  // namespace vgpu::sim
