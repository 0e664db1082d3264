// cuInit, versions, device enumeration and properties; configuration of the
// simulated node.
#include <sys/wait.h>

#include <cstring>
#include <map>
#include <sstream>

#include "test_util.h"

namespace vgpu::conformance {
namespace {

// Parses "key v1 v2..." lines of a child's output into key -> rest.
std::map<std::string, std::string> ParseLines(const std::string& out) {
  std::map<std::string, std::string> m;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    size_t sp = line.find(' ');
    if (sp == std::string::npos) continue;
    m[line.substr(0, sp)] = line.substr(sp + 1);
  }
  return m;
}

class InitDeviceTest : public DriverTest {};

TEST_F(InitDeviceTest, DriverVersionIsCuda13OrNewer) {
  int v = 0;
  ASSERT_CU_OK(cuDriverGetVersion(&v));
  EXPECT_GE(v, 13000);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuDriverGetVersion(nullptr));
}

TEST_F(InitDeviceTest, CallsBeforeCuInitFailWithNotInitialized) {
  // A fresh process: this one has already called cuInit.
  int status = 0;
  std::string out = RunChild({"noinit"}, {}, &status);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;
  auto m = ParseLines(out);
  const std::string kNotInit = std::to_string(CUDA_ERROR_NOT_INITIALIZED);
  EXPECT_EQ(m["count"], kNotInit) << out;
  EXPECT_EQ(m["get"], kNotInit) << out;
  EXPECT_EQ(m["alloc"], kNotInit) << out;
  EXPECT_EQ(m["ctxget"], kNotInit) << out;
  // cuDriverGetVersion works before cuInit.
  EXPECT_EQ(m["version"].substr(0, 2), "0 ") << out;
  EXPECT_EQ(m["init"], "0") << out;
  EXPECT_EQ(m["count2"], "0") << out;
}

TEST_F(InitDeviceTest, InitFlagsMustBeZero) {
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuInit(1));
  EXPECT_CU_OK(cuInit(0));  // repeated cuInit is fine
}

TEST_F(InitDeviceTest, DeviceCountAndOrdinals) {
  int n = 0;
  ASSERT_CU_OK(cuDeviceGetCount(&n));
  ASSERT_GE(n, 1);
  for (int i = 0; i < n; ++i) {
    CUdevice d = -1;
    ASSERT_CU_OK(cuDeviceGet(&d, i));
  }
  CUdevice d;
  EXPECT_CU(CUDA_ERROR_INVALID_DEVICE, cuDeviceGet(&d, n));
  EXPECT_CU(CUDA_ERROR_INVALID_DEVICE, cuDeviceGet(&d, -1));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuDeviceGetCount(nullptr));
}

TEST_F(InitDeviceTest, NameIsNulTerminatedAndTruncated) {
  char name[256];
  memset(name, 'x', sizeof name);
  ASSERT_CU_OK(cuDeviceGetName(name, sizeof name, dev_));
  size_t len = strnlen(name, sizeof name);
  ASSERT_LT(len, sizeof name);
  EXPECT_GT(len, 0u);
  char small[5];
  memset(small, 'x', sizeof small);
  ASSERT_CU_OK(cuDeviceGetName(small, sizeof small, dev_));
  EXPECT_EQ(small[4], '\0');
  EXPECT_EQ(std::string(small), std::string(name, std::min<size_t>(len, 4)));
  EXPECT_CU(CUDA_ERROR_INVALID_DEVICE, cuDeviceGetName(name, sizeof name, 9999));
}

TEST_F(InitDeviceTest, UuidsAreStableAndDistinct) {
  int n = 0;
  ASSERT_CU_OK(cuDeviceGetCount(&n));
  std::vector<std::string> seen;
  for (int i = 0; i < n; ++i) {
    CUdevice d;
    ASSERT_CU_OK(cuDeviceGet(&d, i));
    CUuuid a, b;
    ASSERT_CU_OK(cuDeviceGetUuid(&a, d));
    ASSERT_CU_OK(cuDeviceGetUuid(&b, d));
    EXPECT_EQ(0, memcmp(a.bytes, b.bytes, sizeof a.bytes));
    std::string s(a.bytes, sizeof a.bytes);
    EXPECT_NE(s, std::string(16, '\0'));
    for (const auto& other : seen) EXPECT_NE(other, s) << "device " << i;
    seen.push_back(s);
  }
}

TEST_F(InitDeviceTest, PciBusIdRoundTrip) {
  int n = 0;
  ASSERT_CU_OK(cuDeviceGetCount(&n));
  for (int i = 0; i < n; ++i) {
    CUdevice d;
    ASSERT_CU_OK(cuDeviceGet(&d, i));
    char bus[64] = {};
    ASSERT_CU_OK(cuDeviceGetPCIBusId(bus, sizeof bus, d));
    // [domain]:[bus]:[device].[function], hexadecimal.
    unsigned dom, b, dv, fn;
    ASSERT_EQ(4, sscanf(bus, "%x:%x:%x.%x", &dom, &b, &dv, &fn)) << bus;
    CUdevice back = -1;
    ASSERT_CU_OK(cuDeviceGetByPCIBusId(&back, bus));
    EXPECT_EQ(back, d) << bus;
    int attr_bus = -1, attr_dev = -1, attr_dom = -1;
    ASSERT_CU_OK(cuDeviceGetAttribute(&attr_bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, d));
    ASSERT_CU_OK(cuDeviceGetAttribute(&attr_dev, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, d));
    ASSERT_CU_OK(cuDeviceGetAttribute(&attr_dom, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, d));
    EXPECT_EQ(static_cast<unsigned>(attr_bus), b);
    EXPECT_EQ(static_cast<unsigned>(attr_dev), dv);
    EXPECT_EQ(static_cast<unsigned>(attr_dom), dom);
  }
  CUdevice d;
  EXPECT_NE(CUDA_SUCCESS, cuDeviceGetByPCIBusId(&d, "ffff:ff:1f.7"));
  EXPECT_NE(CUDA_SUCCESS, cuDeviceGetByPCIBusId(&d, "not a bus id"));
}

TEST_F(InitDeviceTest, HopperAttributes) {
  auto attr = [&](CUdevice_attribute a) {
    int v = -12345;
    EXPECT_CU_OK(cuDeviceGetAttribute(&v, a, dev_)) << "attribute " << a;
    return v;
  };
  EXPECT_EQ(attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR), 9);
  EXPECT_EQ(attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR), 0);
  EXPECT_EQ(attr(CU_DEVICE_ATTRIBUTE_WARP_SIZE), 32);
  EXPECT_EQ(attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK), 1024);
  EXPECT_EQ(attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X), 1024);
  EXPECT_EQ(attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y), 1024);
  EXPECT_EQ(attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z), 64);
  EXPECT_EQ(attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X), 2147483647);
  EXPECT_EQ(attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y), 65535);
  EXPECT_EQ(attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR), 2048);
  EXPECT_GT(attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT), 0);
  EXPECT_EQ(attr(CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING), 1);
  EXPECT_EQ(attr(CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY), 1);
  EXPECT_EQ(attr(CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH), 1);
  EXPECT_EQ(attr(CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED), 1);
  EXPECT_EQ(attr(CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED), 1);
  EXPECT_EQ(attr(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED), 1);
  EXPECT_EQ(attr(CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED), 1);
  EXPECT_GE(attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK), 48 * 1024);
  EXPECT_GT(attr(CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT), 0);
  int v;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE,
            cuDeviceGetAttribute(&v, static_cast<CUdevice_attribute>(100000), dev_));
  EXPECT_CU(CUDA_ERROR_INVALID_DEVICE,
            cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 9999));
}

TEST_F(InitDeviceTest, TotalMemMatchesMemGetInfo) {
  size_t total = 0;
  ASSERT_CU_OK(cuDeviceTotalMem(&total, dev_));
  EXPECT_GT(total, size_t{1} << 30);
  CUcontext ctx;
  ASSERT_CU_OK(cuDevicePrimaryCtxRetain(&ctx, dev_));
  ASSERT_CU_OK(cuCtxSetCurrent(ctx));
  size_t free_b = 0, total_b = 0;
  ASSERT_CU_OK(cuMemGetInfo(&free_b, &total_b));
  EXPECT_EQ(total_b, total);
  EXPECT_LE(free_b, total_b);
  ASSERT_CU_OK(cuCtxSetCurrent(nullptr));
  ASSERT_CU_OK(cuDevicePrimaryCtxRelease(dev_));
}

// ---- Simulator specifics -------------------------------------------------

class SimInitDeviceTest : public DriverTest {
 protected:
  void SetUp() override {
    DriverTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    SKIP_UNLESS_SIM();
  }
  // A child on a node of its own, so that its configuration may differ.
  std::string RunOnOwnNode(const std::string& devices, int* status) {
    std::string node = std::string("conf-cfg-") + std::to_string(getpid()) + "-" +
                       ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::string out =
        RunChild({"init"}, {"VGPU_SIM_NODE=" + node, "VGPU_SIM_DEVICES=" + devices}, status);
    UnlinkNodeShm(node);
    return out;
  }
};

TEST_F(SimInitDeviceTest, DefaultNodeHasTwo16GiBDevicesWith132Sms) {
  int n = 0;
  ASSERT_CU_OK(cuDeviceGetCount(&n));
  EXPECT_EQ(n, 2);
  size_t total = 0;
  ASSERT_CU_OK(cuDeviceTotalMem(&total, dev_));
  EXPECT_EQ(total, size_t{16} << 30);
  int sms = 0;
  ASSERT_CU_OK(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev_));
  EXPECT_EQ(sms, 132);
  char name[128];
  ASSERT_CU_OK(cuDeviceGetName(name, sizeof name, dev_));
  EXPECT_EQ(0, strncmp(name, "vgpu-sim", 8)) << name;
}

TEST_F(SimInitDeviceTest, DevicesFromEnvironment) {
  int status = 0;
  std::string out = RunOnOwnNode("3x8GiB", &status);
  ASSERT_TRUE(WIFEXITED(status)) << out;
  auto m = ParseLines(out);
  EXPECT_EQ(m["init"], "0") << out;
  EXPECT_EQ(m["count"], "0 3") << out;
  EXPECT_NE(out.find("mem 2 " + std::to_string(size_t{8} << 30)), std::string::npos) << out;
}

TEST_F(SimInitDeviceTest, CheckpointCopyRatesAreDeviceOptions) {
  int status = 0;
  std::string out = RunOnOwnNode("2x8GiB:ckpt=1000:restore=4000:sm=132", &status);
  ASSERT_TRUE(WIFEXITED(status)) << out;
  auto m = ParseLines(out);
  EXPECT_EQ(m["init"], "0") << out;
  EXPECT_EQ(m["count"], "0 2") << out;
}

TEST_F(SimInitDeviceTest, InvalidDevicesSpecFailsCuInitWithoutCrashing) {
  for (const char* spec : {"banana", "4xGiB", "2x16XiB", "-1x16GiB", "0x16GiB", "1x16GiB:ckpt=0",
                           "1x16GiB:restore=fast", "1x16GiB:ckpt=99999999"}) {
    SCOPED_TRACE(spec);
    int status = 0;
    std::string out = RunOnOwnNode(spec, &status);
    ASSERT_TRUE(WIFEXITED(status)) << "child crashed: " << out;
    EXPECT_EQ(WEXITSTATUS(status), 0) << out;
    auto m = ParseLines(out);
    ASSERT_FALSE(m["init"].empty()) << out;
    EXPECT_NE(m["init"], "0") << out;
    // Later calls report the failure too, not success.
    EXPECT_NE(m["count"].substr(0, 2), "0 ") << out;
  }
}

TEST_F(SimInitDeviceTest, FaultInjectionFailsTheNthCall) {
  int status = 0;
  std::string out =
      RunChild({"allocs", "4096", "3"}, {"VGPU_SIM_FAULTS=cuMemAlloc_v2:2:2"}, &status);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;
  EXPECT_NE(out.find("setup 0\n"), std::string::npos) << out;
  EXPECT_NE(out.find("alloc 1 0\n"), std::string::npos) << out;
  EXPECT_NE(out.find("alloc 2 2\n"), std::string::npos) << out;
  EXPECT_NE(out.find("alloc 3 0\n"), std::string::npos) << out;
}

TEST_F(SimInitDeviceTest, InvalidFaultSpecFailsCuInit) {
  int status = 0;
  std::string out = RunChild({"init"}, {"VGPU_SIM_FAULTS=cuMemAlloc_v2:two:2"}, &status);
  ASSERT_TRUE(WIFEXITED(status)) << out;
  auto m = ParseLines(out);
  ASSERT_FALSE(m["init"].empty()) << out;
  EXPECT_NE(m["init"], "0") << out;
}

TEST_F(SimInitDeviceTest, NodeSharedMemoryIsNamedAfterTheNode) {
  const char* node = getenv("VGPU_SIM_NODE");
  ASSERT_NE(node, nullptr);
  EXPECT_TRUE(NodeShmExists(node)) << NodeShmName(node);
}

}  // namespace
}  // namespace vgpu::conformance
