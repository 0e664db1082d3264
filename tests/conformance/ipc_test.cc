// CUDA IPC between processes (issue 29): memory handles of cuMemAlloc
// allocations, interprocess events, and POSIX-fd shareable handles of
// cuMemCreate allocations, exercised by a second process (conformance_child
// ipcopen / ipcevent / ipcrank). Portable: the `gpu` copy runs them on a real
// driver; SimIpcTest holds the simulator's own answers.
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <sstream>

#include "test_util.h"

namespace vgpu::conformance {
namespace {

std::string ToHex(const void* p, size_t n) {
  std::string out;
  char buf[3];
  for (size_t i = 0; i < n; ++i) {
    std::snprintf(buf, sizeof(buf), "%02x", static_cast<const unsigned char*>(p)[i]);
    out += buf;
  }
  return out;
}

// Reads lines until one starts with `tag`; returns the rest of it.
std::string Field(Child* c, const std::string& tag) {
  std::string line;
  while (ReadLine(c, &line, 30000)) {
    if (line.rfind(tag + " ", 0) == 0) return line.substr(tag.size() + 1);
  }
  return "<none>";
}

// Shared memory this process has resident (memfd pages), from /proc/self/status.
long RssShmemKiB() {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return -1;
  char line[256];
  long kib = -1;
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    if (std::sscanf(line, "RssShmem: %ld kB", &kib) == 1) break;
  }
  std::fclose(f);
  return kib;
}

std::string Str(CUresult r) { return std::to_string(static_cast<int>(r)); }

class IpcTest : public KernelTest {
 protected:
  void SetUp() override {
    KernelTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    int ipc = 0;
    ASSERT_CU_OK(cuDeviceGetAttribute(&ipc, CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED, dev_));
    if (ipc == 0) GTEST_SKIP() << "the device has no CUDA IPC";
  }

  // Runs two ranks of the ring all-reduce; returns their "result" fields.
  void RunRing(const std::string& mode, uint32_t steps, uint64_t count, std::string out[2]) {
    int sv[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    Child ranks[2];
    for (int r = 0; r < 2; ++r) {
      ASSERT_TRUE(SpawnChild(CONF_CHILD_PATH,
                             {"ipcrank", std::to_string(r), mode, std::to_string(steps),
                              std::to_string(count), CONF_CUBIN_PATH},
                             {}, &ranks[r], sv[r]));
      close(sv[r]);
    }
    for (int r = 0; r < 2; ++r) {
      out[r] = Field(&ranks[r], "result");
      int status = WaitChild(&ranks[r]);
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "rank " << r << ": " << out[r];
    }
  }
};

TEST_F(IpcTest, MemoryOpenedInAnotherProcessIsTheSameMemory) {
  constexpr size_t kBytes = 1 << 20;
  CUdeviceptr p = 0;
  ASSERT_CU_OK(cuMemAlloc(&p, kBytes));
  // Written before the export: the contents travel with it.
  ASSERT_CU_OK(cuMemsetD32(p, 0x1234, kBytes / 4));
  ASSERT_CU_OK(cuCtxSynchronize());
  CUipcMemHandle h;
  ASSERT_CU_OK(cuIpcGetMemHandle(&h, p));
  int status = 0;
  std::string out =
      RunChild({"ipcopen", ToHex(&h, sizeof(h)), std::to_string(kBytes)}, {}, &status);
  EXPECT_NE(out.find("open 0\n"), std::string::npos) << out;
  EXPECT_NE(out.find("value 4660 0\n"), std::string::npos) << out;
  EXPECT_NE(out.find("write 0\n"), std::string::npos) << out;
  // cuda.h: opened again by the same context, the same pointer, counted.
  EXPECT_NE(out.find("again 0 1\n"), std::string::npos) << out;
  // Two closes for two opens; a third finds nothing open.
  EXPECT_NE(out.find("close 0 0 " + Str(CUDA_ERROR_INVALID_VALUE) + "\n"), std::string::npos)
      << out;
  // What the other process wrote is here.
  std::vector<uint32_t> v = ReadU32(p, kBytes / 4);
  size_t wrong = 0;
  for (uint32_t x : v) wrong += x != 0x1235;
  EXPECT_EQ(wrong, 0u);
  // A handle can be taken again, and the memory stays this process's to free.
  CUipcMemHandle again;
  EXPECT_CU_OK(cuIpcGetMemHandle(&again, p));
  EXPECT_CU_OK(cuMemFree(p));
}

TEST_F(IpcTest, OnlyTheBaseOfACuMemAllocAllocationExports) {
  CUdeviceptr p = 0;
  ASSERT_CU_OK(cuMemAlloc(&p, 1 << 20));
  CUipcMemHandle h;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuIpcGetMemHandle(&h, p + 4096));
  int capable = -1;
  ASSERT_CU_OK(cuPointerGetAttribute(&capable, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, p));
  EXPECT_EQ(capable, 1);
  // VMM memory shares through shareable handles, not legacy IPC.
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev_;
  size_t gran = 0;
  ASSERT_CU_OK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  CUmemGenericAllocationHandle mh = 0;
  CUdeviceptr va = 0;
  ASSERT_CU_OK(cuMemCreate(&mh, gran, &prop, 0));
  ASSERT_CU_OK(cuMemAddressReserve(&va, gran, 0, 0, 0));
  ASSERT_CU_OK(cuMemMap(va, gran, 0, mh, 0));
  CUmemAccessDesc access{};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  ASSERT_CU_OK(cuMemSetAccess(va, gran, &access, 1));
  ASSERT_CU_OK(
      cuPointerGetAttribute(&capable, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, va));
  EXPECT_EQ(capable, 0);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuIpcGetMemHandle(&h, va));
  EXPECT_CU_OK(cuMemUnmap(va, gran));
  EXPECT_CU_OK(cuMemAddressFree(va, gran));
  EXPECT_CU_OK(cuMemRelease(mh));
  EXPECT_CU_OK(cuMemFree(p));
}

TEST_F(IpcTest, AProcessDoesNotOpenItsOwnHandle) {
  CUdeviceptr p = 0, q = 0;
  ASSERT_CU_OK(cuMemAlloc(&p, 1 << 20));
  CUipcMemHandle h;
  ASSERT_CU_OK(cuIpcGetMemHandle(&h, p));
  EXPECT_NE(cuIpcOpenMemHandle(&q, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS), CUDA_SUCCESS);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuIpcCloseMemHandle(p));  // never opened
  EXPECT_CU_OK(cuMemFree(p));
}

TEST_F(IpcTest, EventHandleNeedsAnInterprocessEvent) {
  CUevent e = nullptr;
  CUipcEventHandle h;
  ASSERT_CU_OK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuIpcGetEventHandle(&h, e));
  EXPECT_CU_OK(cuEventDestroy(e));
  EXPECT_CU(CUDA_ERROR_INVALID_HANDLE, cuIpcGetEventHandle(&h, e));
  ASSERT_CU_OK(cuEventCreate(&e, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING));
  EXPECT_CU_OK(cuIpcGetEventHandle(&h, e));
  EXPECT_CU_OK(cuEventQuery(e));  // never recorded
  EXPECT_CU_OK(cuEventDestroy(e));
}

// The other process's stream waits for this process's record, and its query
// and synchronize see it: the record sits behind a wait on a host flag.
TEST_F(IpcTest, InterprocessEventOrdersWorkAcrossProcesses) {
  volatile uint32_t* flag = nullptr;
  ASSERT_CU_OK(cuMemHostAlloc(reinterpret_cast<void**>(const_cast<uint32_t**>(&flag)), 4096,
                              CU_MEMHOSTALLOC_DEVICEMAP));
  *flag = 0;
  CUdeviceptr dflag = 0;
  ASSERT_CU_OK(cuMemHostGetDevicePointer(&dflag, const_cast<uint32_t*>(flag), 0));
  CUstream s = nullptr;
  CUevent e = nullptr;
  ASSERT_CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  ASSERT_CU_OK(cuEventCreate(&e, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING));
  ASSERT_CU_OK(cuStreamWaitValue32(s, dflag, 1, CU_STREAM_WAIT_VALUE_GEQ));
  ASSERT_CU_OK(cuEventRecord(e, s));
  EXPECT_CU(CUDA_ERROR_NOT_READY, cuEventQuery(e));
  CUipcEventHandle h;
  ASSERT_CU_OK(cuIpcGetEventHandle(&h, e));
  Child c;
  ASSERT_TRUE(SpawnChild(CONF_CHILD_PATH, {"ipcevent", ToHex(&h, sizeof(h))}, {}, &c));
  EXPECT_EQ(Field(&c, "open"), "0");
  EXPECT_EQ(Field(&c, "query"), Str(CUDA_ERROR_NOT_READY));
  EXPECT_EQ(Field(&c, "blocked"), Str(CUDA_ERROR_NOT_READY));
  *flag = 1;
  ASSERT_TRUE(WriteLine(&c, "sync"));
  EXPECT_EQ(Field(&c, "done"), "0 0 0");
  int status = WaitChild(&c);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_CU_OK(cuStreamSynchronize(s));
  EXPECT_CU_OK(cuEventQuery(e));
  EXPECT_CU_OK(cuEventDestroy(e));
  EXPECT_CU_OK(cuStreamDestroy(s));
  EXPECT_CU_OK(cuMemFreeHost(const_cast<uint32_t*>(flag)));
}

// Two processes (one per device where there are two) sum their buffers
// through each other's IPC-opened memory, ordered by IPC events only.
TEST_F(IpcTest, RingAllReduceThroughLegacyIpcMemoryAndEvents) {
  std::string out[2];
  RunRing("legacy", 12, 1 << 16, out);
  for (int r = 0; r < 2; ++r)
    EXPECT_EQ(out[r].rfind("0 0 ", 0), 0u) << "rank " << r << ": " << out[r];
}

// NCCL's way: cuMemCreate memory exported as a POSIX fd and imported by the peer.
TEST_F(IpcTest, RingAllReduceThroughFdExportedVmmMemory) {
  std::string out[2];
  RunRing("fd", 12, 1 << 16, out);
  for (int r = 0; r < 2; ++r)
    EXPECT_EQ(out[r].rfind("0 0 ", 0), 0u) << "rank " << r << ": " << out[r];
}

class SimIpcTest : public IpcTest {
 protected:
  void SetUp() override {
    IpcTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    SKIP_UNLESS_SIM();
  }
};

TEST_F(SimIpcTest, OwnHandleIsRefusedAsAnInvalidContext) {
  CUdeviceptr p = 0, q = 0;
  ASSERT_CU_OK(cuMemAlloc(&p, 1 << 20));
  CUipcMemHandle h;
  ASSERT_CU_OK(cuIpcGetMemHandle(&h, p));
  EXPECT_CU(CUDA_ERROR_INVALID_CONTEXT, cuIpcOpenMemHandle(&q, h, 0));
  CUevent e = nullptr, opened = nullptr;
  CUipcEventHandle eh;
  ASSERT_CU_OK(cuEventCreate(&e, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING));
  ASSERT_CU_OK(cuIpcGetEventHandle(&eh, e));
  EXPECT_CU(CUDA_ERROR_INVALID_CONTEXT, cuIpcOpenEventHandle(&opened, eh));
  EXPECT_CU_OK(cuEventDestroy(e));
  EXPECT_CU_OK(cuMemFree(p));
}

// A handle names a live allocation and event: once freed (or destroyed), or
// garbage, it does not open.
TEST_F(SimIpcTest, HandlesOfFreedMemoryAndDestroyedEventsDoNotOpen) {
  CUdeviceptr p = 0;
  ASSERT_CU_OK(cuMemAlloc(&p, 1 << 20));
  CUipcMemHandle h;
  ASSERT_CU_OK(cuIpcGetMemHandle(&h, p));
  ASSERT_CU_OK(cuMemFree(p));
  CUevent e = nullptr;
  CUipcEventHandle eh;
  ASSERT_CU_OK(cuEventCreate(&e, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING));
  ASSERT_CU_OK(cuIpcGetEventHandle(&eh, e));
  ASSERT_CU_OK(cuEventDestroy(e));
  int status = 0;
  std::string bad = Str(CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(RunChild({"ipcopen", ToHex(&h, sizeof(h)), "4096"}, {}, &status), "open " + bad + "\n");
  EXPECT_EQ(RunChild({"ipcevent", ToHex(&eh, sizeof(eh))}, {}, &status), "open " + bad + "\n");
  CUipcMemHandle zero{};
  EXPECT_EQ(RunChild({"ipcopen", ToHex(&zero, sizeof(zero)), "4096"}, {}, &status),
            "open " + bad + "\n");
}

// Exporting moves the allocation's pages into shareable memory: only the pages
// ever touched are copied, so a large, mostly untouched allocation exports cheaply.
TEST_F(SimIpcTest, ExportCopiesOnlyTouchedPages) {
  size_t total = 0;
  ASSERT_CU_OK(cuDeviceTotalMem(&total, dev_));
  const size_t kBytes = total / 4;
  CUdeviceptr p = 0;
  ASSERT_CU_OK(cuMemAlloc(&p, kBytes));
  ASSERT_CU_OK(cuMemsetD32(p + kBytes - 4096, 77, 1024));
  ASSERT_CU_OK(cuCtxSynchronize());
  const long shmem_before = RssShmemKiB();
  CUipcMemHandle h;
  ASSERT_CU_OK(cuIpcGetMemHandle(&h, p));
  EXPECT_LT(RssShmemKiB() - shmem_before, 16 * 1024) << "untouched pages were copied";
  uint32_t v = 0;
  ASSERT_CU_OK(cuMemcpyDtoH(&v, p + kBytes - 4, 4));
  EXPECT_EQ(v, 77u);
  ASSERT_CU_OK(cuMemcpyDtoH(&v, p, 4));
  EXPECT_EQ(v, 0u);
  EXPECT_CU_OK(cuMemFree(p));
}

}  // namespace
}  // namespace vgpu::conformance
