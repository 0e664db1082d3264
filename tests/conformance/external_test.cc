// External memory and semaphores (cuImportExternalMemory and friends). The
// exporter of the memory is the driver itself (cuMemCreate + a POSIX fd);
// a semaphore fd is what the simulated node defines one to be (docs/sim.md:
// a file whose first 8 bytes are the payload), so these suites are sim-only.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "test_util.h"

namespace vgpu::conformance {
namespace {

bool FdOpen(int fd) { return fcntl(fd, F_GETFD) != -1; }

void Pause() { std::this_thread::sleep_for(std::chrono::milliseconds(30)); }

class SimExternalTest : public ContextTest {
 protected:
  void SetUp() override {
    ContextTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    SKIP_UNLESS_SIM();
    prop_.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop_.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop_.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    ASSERT_CU_OK(cuMemGetAllocationGranularity(&gran_, &prop_, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  }
  // A cuMemCreate allocation mapped at va_ and exported as a POSIX fd.
  void Export(size_t size, int* fd) {
    ASSERT_CU_OK(cuMemCreate(&h_, size, &prop_, 0));
    ASSERT_CU_OK(cuMemAddressReserve(&va_, size, 0, 0, 0));
    ASSERT_CU_OK(cuMemMap(va_, size, 0, h_, 0));
    CUmemAccessDesc access{};
    access.location = prop_.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    ASSERT_CU_OK(cuMemSetAccess(va_, size, &access, 1));
    ASSERT_CU_OK(cuMemExportToShareableHandle(fd, h_, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    size_ = size;
  }
  void ReleaseExporter() {
    if (va_ == 0) return;
    EXPECT_CU_OK(cuMemUnmap(va_, size_));
    EXPECT_CU_OK(cuMemAddressFree(va_, size_));
    EXPECT_CU_OK(cuMemRelease(h_));
    va_ = 0;
  }
  void TearDown() override {
    ReleaseExporter();
    ContextTest::TearDown();
  }
  static CUDA_EXTERNAL_MEMORY_HANDLE_DESC MemDesc(int fd, size_t size) {
    CUDA_EXTERNAL_MEMORY_HANDLE_DESC d{};
    d.type = CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD;
    d.handle.fd = fd;
    d.size = size;
    return d;
  }
  static CUDA_EXTERNAL_MEMORY_BUFFER_DESC BufDesc(size_t offset, size_t size) {
    CUDA_EXTERNAL_MEMORY_BUFFER_DESC d{};
    d.offset = offset;
    d.size = size;
    return d;
  }
  CUmemAllocationProp prop_{};
  size_t gran_ = 0, size_ = 0;
  CUmemGenericAllocationHandle h_ = 0;
  CUdeviceptr va_ = 0;
};

using SimExternalMemoryTest = SimExternalTest;

TEST_F(SimExternalMemoryTest, MappedBufferAliasesTheExporter) {
  int fd = -1;
  ASSERT_NO_FATAL_FAILURE(Export(2 * gran_, &fd));
  ASSERT_CU_OK(cuMemsetD32(va_, 0x1234, 2 * gran_ / 4));
  size_t free0 = 0, total = 0;
  ASSERT_CU_OK(cuMemGetInfo(&free0, &total));
  CUexternalMemory mem = nullptr;
  auto md = MemDesc(fd, 2 * gran_);
  md.flags = CUDA_EXTERNAL_MEMORY_DEDICATED;
  ASSERT_CU_OK(cuImportExternalMemory(&mem, &md));
  CUdeviceptr whole = 0, part = 0;
  auto bd = BufDesc(0, 2 * gran_);
  ASSERT_CU_OK(cuExternalMemoryGetMappedBuffer(&whole, mem, &bd));
  bd = BufDesc(gran_ + 4104, 64);  // not page-aligned
  ASSERT_CU_OK(cuExternalMemoryGetMappedBuffer(&part, mem, &bd));
  EXPECT_NE(whole, va_);
  // Imported memory is the exporter's: not charged again.
  size_t free1 = 0;
  ASSERT_CU_OK(cuMemGetInfo(&free1, &total));
  EXPECT_EQ(free1, free0);

  EXPECT_EQ(ReadU32(whole + gran_, 1)[0], 0x1234u);
  ASSERT_CU_OK(cuMemsetD32(whole + 8, 0xBEEF, 1));
  EXPECT_EQ(ReadU32(va_ + 8, 1)[0], 0xBEEFu);
  ASSERT_CU_OK(cuMemsetD32(va_ + gran_ + 4104, 0xCAFE, 1));
  EXPECT_EQ(ReadU32(part, 1)[0], 0xCAFEu);
  ASSERT_CU_OK(cuMemsetD32(part + 60, 0xF00D, 1));
  EXPECT_EQ(ReadU32(whole + gran_ + 4164, 1)[0], 0xF00Du);

  CUdeviceptr base = 0;
  size_t size = 0;
  ASSERT_CU_OK(cuMemGetAddressRange(&base, &size, part + 10));
  EXPECT_EQ(base, part);
  EXPECT_EQ(size, 64u);
  unsigned type = 0;
  ASSERT_CU_OK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, whole));
  EXPECT_EQ(type, CU_MEMORYTYPE_DEVICE);

  EXPECT_CU_OK(cuMemFree(part));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemFree(part));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemFree(whole + 4));  // not a base
  EXPECT_CU_OK(cuMemFree(whole));
  EXPECT_CU_OK(cuDestroyExternalMemory(mem));
  EXPECT_CU(CUDA_ERROR_INVALID_HANDLE, cuDestroyExternalMemory(mem));
  EXPECT_EQ(ReadU32(va_ + 8, 1)[0], 0xBEEFu);  // the exporter's memory stays
}

TEST_F(SimExternalMemoryTest, DriverOwnsTheFdOnlyAfterSuccess) {
  int fd = -1;
  ASSERT_NO_FATAL_FAILURE(Export(gran_, &fd));
  CUexternalMemory mem = nullptr;
  auto md = MemDesc(fd, gran_ + 1);  // larger than the object
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuImportExternalMemory(&mem, &md));
  EXPECT_TRUE(FdOpen(fd)) << "a failed import must leave the fd to the caller";
  md.size = gran_;
  ASSERT_CU_OK(cuImportExternalMemory(&mem, &md));
  EXPECT_TRUE(FdOpen(fd));
  ASSERT_CU_OK(cuDestroyExternalMemory(mem));
  EXPECT_FALSE(FdOpen(fd)) << "destroy closes the imported fd";
}

TEST_F(SimExternalMemoryTest, BufferOutlivesItsExternalMemory) {
  int fd = -1;
  ASSERT_NO_FATAL_FAILURE(Export(gran_, &fd));
  ASSERT_CU_OK(cuMemsetD32(va_, 0x77, gran_ / 4));
  CUexternalMemory mem = nullptr;
  auto md = MemDesc(fd, gran_);
  ASSERT_CU_OK(cuImportExternalMemory(&mem, &md));
  CUdeviceptr p = 0;
  auto bd = BufDesc(0, gran_);
  ASSERT_CU_OK(cuExternalMemoryGetMappedBuffer(&p, mem, &bd));
  ASSERT_CU_OK(cuDestroyExternalMemory(mem));
  ReleaseExporter();  // the last other reference to the pages
  EXPECT_EQ(ReadU32(p + gran_ - 4, 1)[0], 0x77u);
  ASSERT_CU_OK(cuMemsetD32(p, 0x99, 1));
  EXPECT_EQ(ReadU32(p, 1)[0], 0x99u);
  EXPECT_CU_OK(cuMemFree(p));
}

TEST_F(SimExternalMemoryTest, InvalidArguments) {
  int fd = -1;
  ASSERT_NO_FATAL_FAILURE(Export(gran_, &fd));
  CUexternalMemory mem = nullptr;
  auto md = MemDesc(fd, gran_);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuImportExternalMemory(nullptr, &md));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuImportExternalMemory(&mem, nullptr));
  auto bad = md;
  bad.flags = 2;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuImportExternalMemory(&mem, &bad));
  bad = md;
  bad.size = 0;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuImportExternalMemory(&mem, &bad));
  bad = md;
  bad.reserved[3] = 1;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuImportExternalMemory(&mem, &bad));
  bad = md;
  bad.type = static_cast<CUexternalMemoryHandleType>(42);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuImportExternalMemory(&mem, &bad));
  // fds that are no memory object of the node.
  int other = memfd_create("not-device-memory", MFD_CLOEXEC);
  ASSERT_GE(other, 0);
  ASSERT_EQ(0, ftruncate(other, static_cast<off_t>(gran_)));
  bad = MemDesc(other, gran_);
  EXPECT_CU(CUDA_ERROR_INVALID_HANDLE, cuImportExternalMemory(&mem, &bad));
  EXPECT_TRUE(FdOpen(other));
  close(other);
  bad = MemDesc(-1, gran_);
  EXPECT_CU(CUDA_ERROR_INVALID_HANDLE, cuImportExternalMemory(&mem, &bad));
  EXPECT_TRUE(FdOpen(fd));

  ASSERT_CU_OK(cuImportExternalMemory(&mem, &md));
  CUdeviceptr p = 0;
  auto bd = BufDesc(0, gran_);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuExternalMemoryGetMappedBuffer(nullptr, mem, &bd));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuExternalMemoryGetMappedBuffer(&p, mem, nullptr));
  auto bb = bd;
  bb.flags = 1;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuExternalMemoryGetMappedBuffer(&p, mem, &bb));
  bb = BufDesc(0, 0);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuExternalMemoryGetMappedBuffer(&p, mem, &bb));
  bb = BufDesc(4096, gran_);  // runs past the end
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuExternalMemoryGetMappedBuffer(&p, mem, &bb));
  bb = BufDesc(gran_ + 4096, 16);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuExternalMemoryGetMappedBuffer(&p, mem, &bb));
  bb = BufDesc(~0ull - 8, 16);  // offset + size overflows
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuExternalMemoryGetMappedBuffer(&p, mem, &bb));
  bb = bd;
  bb.reserved[0] = 1;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuExternalMemoryGetMappedBuffer(&p, mem, &bb));
  auto bogus = reinterpret_cast<CUexternalMemory>(&p);
  EXPECT_CU(CUDA_ERROR_INVALID_HANDLE, cuExternalMemoryGetMappedBuffer(&p, bogus, &bd));

  // Sim arrays cannot alias imported memory (docs/sim.md).
  CUDA_EXTERNAL_MEMORY_MIPMAPPED_ARRAY_DESC ad{};
  ad.arrayDesc.Width = 64;
  ad.arrayDesc.Height = 64;
  ad.arrayDesc.Format = CU_AD_FORMAT_FLOAT;
  ad.arrayDesc.NumChannels = 1;
  ad.numLevels = 2;
  CUmipmappedArray mm = nullptr;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuExternalMemoryGetMappedMipmappedArray(&mm, mem, &ad));
  ad.numLevels = 1;
  EXPECT_CU(CUDA_ERROR_INVALID_HANDLE, cuExternalMemoryGetMappedMipmappedArray(&mm, bogus, &ad));
  EXPECT_CU(CUDA_ERROR_NOT_SUPPORTED, cuExternalMemoryGetMappedMipmappedArray(&mm, mem, &ad));
  EXPECT_CU_OK(cuDestroyExternalMemory(mem));
  EXPECT_CU(CUDA_ERROR_INVALID_HANDLE, cuExternalMemoryGetMappedBuffer(&p, mem, &bd));
  EXPECT_CU(CUDA_ERROR_INVALID_HANDLE, cuDestroyExternalMemory(bogus));
}

TEST_F(SimExternalMemoryTest, NonLinuxHandleTypesAreNotSupported) {
  int fd = memfd_create("dmabuf-stand-in", MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  CUexternalMemory mem = nullptr;
  for (int t = CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_WIN32;
       t <= CU_EXTERNAL_MEMORY_HANDLE_TYPE_DMABUF_FD; ++t) {
    CUDA_EXTERNAL_MEMORY_HANDLE_DESC d{};
    d.type = static_cast<CUexternalMemoryHandleType>(t);
    if (t == CU_EXTERNAL_MEMORY_HANDLE_TYPE_DMABUF_FD) {
      d.handle.fd = fd;
    } else {
      d.handle.win32.handle = &mem;
    }
    d.size = 4096;
    EXPECT_CU(CUDA_ERROR_NOT_SUPPORTED, cuImportExternalMemory(&mem, &d)) << "type " << t;
  }
  EXPECT_TRUE(FdOpen(fd));
  close(fd);
  CUexternalSemaphore sem = nullptr;
  for (int t = CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_WIN32;
       t <= CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_WIN32; ++t) {
    if (t == CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD) continue;
    CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC d{};
    d.type = static_cast<CUexternalSemaphoreHandleType>(t);
    d.handle.win32.handle = &sem;
    EXPECT_CU(CUDA_ERROR_NOT_SUPPORTED, cuImportExternalSemaphore(&sem, &d)) << "type " << t;
  }
}

TEST_F(SimExternalMemoryTest, ImportInAnotherProcess) {
  int fd = -1;
  ASSERT_NO_FATAL_FAILURE(Export(gran_, &fd));
  ASSERT_CU_OK(cuMemsetD32(va_, 0xA5A5, 1));
  int sem_fd = memfd_create("sem", MFD_CLOEXEC);
  ASSERT_GE(sem_fd, 0);
  ASSERT_EQ(0, ftruncate(sem_fd, 8));
  int keep = dup(sem_fd);
  int host = dup(sem_fd);  // to release the stream should the child fail
  CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC sd{};
  sd.type = CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD;
  sd.handle.fd = keep;
  CUexternalSemaphore sem = nullptr;
  ASSERT_CU_OK(cuImportExternalSemaphore(&sem, &sd));
  CUstream s = nullptr;
  ASSERT_CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS wp{};
  wp.params.fence.value = 5;
  ASSERT_CU_OK(cuWaitExternalSemaphoresAsync(&sem, &wp, 1, s));
  CUdeviceptr seen = 0;  // device memory: a copy to pageable memory would be synchronous
  ASSERT_CU_OK(cuMemAlloc(&seen, 4));
  ASSERT_CU_OK(cuMemcpyDtoDAsync(seen, va_ + 4, 4, s));  // after the child's signal

  int sv[2];
  ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
  Child child;
  ASSERT_TRUE(SpawnChild(CONF_CHILD_PATH, {"extimport", std::to_string(gran_)}, {}, &child, sv[1]));
  close(sv[1]);
  ASSERT_TRUE(SendFd(sv[0], fd));
  ASSERT_TRUE(SendFd(sv[0], sem_fd));
  close(fd);
  close(sem_fd);
  std::string out = ReadRest(&child, 20000);
  int status = WaitChild(&child);
  close(sv[0]);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;
  EXPECT_NE(out.find("map 0 42405\n"), std::string::npos) << out;  // 0xA5A5
  bool signaled = out.find("signal 0\n") != std::string::npos;
  EXPECT_TRUE(signaled) << out;
  uint64_t five = 5;
  if (!signaled) {
    EXPECT_EQ(8, pwrite(host, &five, 8, 0));
  }
  close(host);
  ASSERT_CU_OK(cuStreamSynchronize(s));
  EXPECT_EQ(ReadU32(seen, 1)[0], 0xFEEDu);
  EXPECT_CU_OK(cuMemFree(seen));
  EXPECT_CU_OK(cuStreamDestroy(s));
  EXPECT_CU_OK(cuDestroyExternalSemaphore(sem));
}

// A semaphore of the simulated node: a memfd holding the 64-bit payload. The
// test keeps its own descriptor of the file to read and write the payload.
class SimExternalSemaphoreTest : public SimExternalTest {
 protected:
  CUexternalSemaphore Import(CUexternalSemaphoreHandleType type, int* host_fd) {
    int fd = memfd_create("vgpu-test-sem", MFD_CLOEXEC);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(0, ftruncate(fd, 8));
    *host_fd = dup(fd);
    CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC d{};
    d.type = type;
    d.handle.fd = fd;
    CUexternalSemaphore sem = nullptr;
    EXPECT_CU_OK(cuImportExternalSemaphore(&sem, &d));
    return sem;
  }
  static uint64_t Payload(int fd) {
    uint64_t v = ~0ull;
    EXPECT_EQ(8, pread(fd, &v, 8, 0));
    return v;
  }
  static void SetPayload(int fd, uint64_t v) { EXPECT_EQ(8, pwrite(fd, &v, 8, 0)); }
  void SetUp() override {
    SimExternalTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    ASSERT_CU_OK(cuStreamCreate(&a_, CU_STREAM_NON_BLOCKING));
    ASSERT_CU_OK(cuStreamCreate(&b_, CU_STREAM_NON_BLOCKING));
  }
  void TearDown() override {
    for (CUstream s : {a_, b_}) {
      if (s != nullptr) {
        EXPECT_CU_OK(cuStreamDestroy(s));
      }
    }
    SimExternalTest::TearDown();
  }
  CUstream a_ = nullptr, b_ = nullptr;
};

TEST_F(SimExternalSemaphoreTest, BinaryWaitBlocksUntilSignaledAndConsumes) {
  int host = -1;
  CUexternalSemaphore sem = Import(CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD, &host);
  ASSERT_NE(sem, nullptr);
  CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS wp{};
  CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS sp{};
  ASSERT_CU_OK(cuWaitExternalSemaphoresAsync(&sem, &wp, 1, a_));
  Pause();
  EXPECT_CU(CUDA_ERROR_NOT_READY, cuStreamQuery(a_));
  SetPayload(host, 1);  // signaled from the host, through the file
  ASSERT_CU_OK(cuStreamSynchronize(a_));
  EXPECT_EQ(Payload(host), 0u) << "a wait resets a binary semaphore";

  // Signaled by another stream, in that stream's order.
  ASSERT_CU_OK(cuWaitExternalSemaphoresAsync(&sem, &wp, 1, a_));
  ASSERT_CU_OK(cuSignalExternalSemaphoresAsync(&sem, &sp, 1, b_));
  Pause();
  EXPECT_CU_OK(cuStreamSynchronize(b_));
  ASSERT_CU_OK(cuStreamSynchronize(a_));
  EXPECT_EQ(Payload(host), 0u);
  ASSERT_CU_OK(cuSignalExternalSemaphoresAsync(&sem, &sp, 1, b_));
  ASSERT_CU_OK(cuStreamSynchronize(b_));
  EXPECT_EQ(Payload(host), 1u) << "no waiter: stays signaled";
  EXPECT_CU_OK(cuDestroyExternalSemaphore(sem));
  close(host);
}

TEST_F(SimExternalSemaphoreTest, TimelineWaitsForValue) {
  int host = -1;
  CUexternalSemaphore sem = Import(CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD, &host);
  ASSERT_NE(sem, nullptr);
  CUdeviceptr flag = 0;
  ASSERT_CU_OK(cuMemAlloc(&flag, 4));
  ASSERT_CU_OK(cuMemsetD32(flag, 0, 1));
  CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS wp{};
  wp.params.fence.value = 3;
  ASSERT_CU_OK(cuWaitExternalSemaphoresAsync(&sem, &wp, 1, a_));
  ASSERT_CU_OK(cuMemsetD32Async(flag, 1, 1, a_));  // stream order: after the wait
  CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS sp{};
  sp.params.fence.value = 2;
  ASSERT_CU_OK(cuSignalExternalSemaphoresAsync(&sem, &sp, 1, b_));
  ASSERT_CU_OK(cuStreamSynchronize(b_));
  EXPECT_EQ(Payload(host), 2u);
  Pause();
  EXPECT_CU(CUDA_ERROR_NOT_READY, cuStreamQuery(a_));
  EXPECT_EQ(ReadU32(flag, 1)[0], 0u);
  sp.params.fence.value = 3;
  ASSERT_CU_OK(cuSignalExternalSemaphoresAsync(&sem, &sp, 1, b_));
  ASSERT_CU_OK(cuStreamSynchronize(a_));
  EXPECT_EQ(ReadU32(flag, 1)[0], 1u);
  EXPECT_EQ(Payload(host), 3u) << "a timeline wait does not consume";
  wp.params.fence.value = 1;  // already reached
  ASSERT_CU_OK(cuWaitExternalSemaphoresAsync(&sem, &wp, 1, a_));
  ASSERT_CU_OK(cuStreamSynchronize(a_));
  SetPayload(host, 10);  // a host signal through the file
  wp.params.fence.value = 10;
  ASSERT_CU_OK(cuWaitExternalSemaphoresAsync(&sem, &wp, 1, a_));
  ASSERT_CU_OK(cuStreamSynchronize(a_));
  EXPECT_CU_OK(cuMemFree(flag));
  EXPECT_CU_OK(cuDestroyExternalSemaphore(sem));
  close(host);
}

TEST_F(SimExternalSemaphoreTest, InvalidArgumentsAndOwnership) {
  CUexternalSemaphore sem = nullptr;
  CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC d{};
  d.type = CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuImportExternalSemaphore(nullptr, &d));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuImportExternalSemaphore(&sem, nullptr));
  int small = memfd_create("too-small", MFD_CLOEXEC);
  ASSERT_GE(small, 0);
  ASSERT_EQ(0, ftruncate(small, 4));
  d.handle.fd = small;
  EXPECT_CU(CUDA_ERROR_INVALID_HANDLE, cuImportExternalSemaphore(&sem, &d));
  EXPECT_TRUE(FdOpen(small)) << "a failed import leaves the fd to the caller";
  ASSERT_EQ(0, ftruncate(small, 8));
  d.flags = 1;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuImportExternalSemaphore(&sem, &d));
  d.flags = 0;
  d.reserved[0] = 1;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuImportExternalSemaphore(&sem, &d));
  d.reserved[0] = 0;
  d.type = static_cast<CUexternalSemaphoreHandleType>(0);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuImportExternalSemaphore(&sem, &d));
  d.type = CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD;
  d.handle.fd = -1;
  EXPECT_CU(CUDA_ERROR_INVALID_HANDLE, cuImportExternalSemaphore(&sem, &d));
  d.handle.fd = small;
  ASSERT_CU_OK(cuImportExternalSemaphore(&sem, &d));
  EXPECT_TRUE(FdOpen(small));

  CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS sp{};
  CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS wp{};
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuSignalExternalSemaphoresAsync(nullptr, &sp, 1, a_));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuSignalExternalSemaphoresAsync(&sem, nullptr, 1, a_));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuWaitExternalSemaphoresAsync(&sem, nullptr, 1, a_));
  EXPECT_CU_OK(cuSignalExternalSemaphoresAsync(nullptr, nullptr, 0, a_));
  auto bad_sp = sp;
  bad_sp.flags = CUDA_EXTERNAL_SEMAPHORE_SIGNAL_SKIP_NVSCIBUF_MEMSYNC;  // NvSciSync only
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuSignalExternalSemaphoresAsync(&sem, &bad_sp, 1, a_));
  bad_sp = sp;
  bad_sp.reserved[15] = 1;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuSignalExternalSemaphoresAsync(&sem, &bad_sp, 1, a_));
  auto bad_wp = wp;
  bad_wp.params.reserved[0] = 1;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuWaitExternalSemaphoresAsync(&sem, &bad_wp, 1, a_));
  CUexternalSemaphore two[2] = {sem, reinterpret_cast<CUexternalSemaphore>(&d)};
  CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS sps[2] = {};
  EXPECT_CU(CUDA_ERROR_INVALID_HANDLE, cuSignalExternalSemaphoresAsync(two, sps, 2, a_));
  ASSERT_CU_OK(cuStreamSynchronize(a_));
  EXPECT_EQ(Payload(small), 0u) << "nothing is queued when one semaphore is invalid";
  auto bogus_stream = reinterpret_cast<CUstream>(&d);
  EXPECT_CU(CUDA_ERROR_INVALID_HANDLE, cuSignalExternalSemaphoresAsync(&sem, &sp, 1, bogus_stream));

  EXPECT_CU_OK(cuDestroyExternalSemaphore(sem));
  EXPECT_FALSE(FdOpen(small)) << "destroy closes the imported fd";
  EXPECT_CU(CUDA_ERROR_INVALID_HANDLE, cuDestroyExternalSemaphore(sem));
  EXPECT_CU(CUDA_ERROR_INVALID_HANDLE, cuSignalExternalSemaphoresAsync(&sem, &sp, 1, a_));
}

TEST_F(SimExternalSemaphoreTest, CapturedSignalIsAnExtSemasNode) {
  int host = -1;
  CUexternalSemaphore sem = Import(CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD, &host);
  CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS sp{};
  sp.params.fence.value = 4;
  ASSERT_CU_OK(cuStreamBeginCapture(a_, CU_STREAM_CAPTURE_MODE_GLOBAL));
  ASSERT_CU_OK(cuSignalExternalSemaphoresAsync(&sem, &sp, 1, a_));
  CUgraph g = nullptr;
  ASSERT_CU_OK(cuStreamEndCapture(a_, &g));
  EXPECT_EQ(Payload(host), 0u) << "captured, not run";
  size_t n = 1;
  CUgraphNode node = nullptr;
  ASSERT_CU_OK(cuGraphGetNodes(g, &node, &n));
  ASSERT_EQ(n, 1u);
  CUgraphNodeType type;
  ASSERT_CU_OK(cuGraphNodeGetType(node, &type));
  EXPECT_EQ(type, CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL);
  CUgraphExec exec = nullptr;
  ASSERT_CU_OK(cuGraphInstantiate(&exec, g, 0));
  ASSERT_CU_OK(cuGraphLaunch(exec, b_));
  ASSERT_CU_OK(cuStreamSynchronize(b_));
  EXPECT_EQ(Payload(host), 4u);
  EXPECT_CU_OK(cuGraphExecDestroy(exec));
  EXPECT_CU_OK(cuGraphDestroy(g));
  EXPECT_CU_OK(cuDestroyExternalSemaphore(sem));
  close(host);
}

// wait(sem_in >= 1) -> memset -> signal(sem_out = 7)
TEST_F(SimExternalSemaphoreTest, GraphNodes) {
  int in_fd = -1, out_fd = -1;
  CUexternalSemaphore in = Import(CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD, &in_fd);
  CUexternalSemaphore out =
      Import(CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD, &out_fd);
  CUdeviceptr flag = 0;
  ASSERT_CU_OK(cuMemAlloc(&flag, 4));
  ASSERT_CU_OK(cuMemsetD32(flag, 0, 1));
  CUgraph g = nullptr;
  ASSERT_CU_OK(cuGraphCreate(&g, 0));
  CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS wp{};
  wp.params.fence.value = 1;
  CUDA_EXT_SEM_WAIT_NODE_PARAMS wn{&in, &wp, 1};
  CUgraphNode wait = nullptr, set = nullptr, signal = nullptr;
  ASSERT_CU_OK(cuGraphAddExternalSemaphoresWaitNode(&wait, g, nullptr, 0, &wn));
  CUDA_MEMSET_NODE_PARAMS ms{};
  ms.dst = flag;
  ms.value = 0x5A;
  ms.elementSize = 4;
  ms.width = 1;
  ms.height = 1;
  ASSERT_CU_OK(cuGraphAddMemsetNode(&set, g, &wait, 1, &ms, ctx_));
  CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS sp{};
  sp.params.fence.value = 6;
  CUDA_EXT_SEM_SIGNAL_NODE_PARAMS sn{&out, &sp, 1};
  ASSERT_CU_OK(cuGraphAddExternalSemaphoresSignalNode(&signal, g, &set, 1, &sn));
  CUgraphNodeType type;
  ASSERT_CU_OK(cuGraphNodeGetType(wait, &type));
  EXPECT_EQ(type, CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT);
  ASSERT_CU_OK(cuGraphNodeGetType(signal, &type));
  EXPECT_EQ(type, CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL);

  // Set, then get: the node's own copy of the arrays.
  sp.params.fence.value = 7;
  ASSERT_CU_OK(cuGraphExternalSemaphoresSignalNodeSetParams(signal, &sn));
  sp.params.fence.value = 99;  // the caller's array is not the node's
  CUDA_EXT_SEM_SIGNAL_NODE_PARAMS got{};
  ASSERT_CU_OK(cuGraphExternalSemaphoresSignalNodeGetParams(signal, &got));
  ASSERT_EQ(got.numExtSems, 1u);
  EXPECT_EQ(got.extSemArray[0], out);
  EXPECT_EQ(got.paramsArray[0].params.fence.value, 7u);
  CUDA_EXT_SEM_WAIT_NODE_PARAMS gw{};
  ASSERT_CU_OK(cuGraphExternalSemaphoresWaitNodeGetParams(wait, &gw));
  ASSERT_EQ(gw.numExtSems, 1u);
  EXPECT_EQ(gw.extSemArray[0], in);
  EXPECT_EQ(gw.paramsArray[0].params.fence.value, 1u);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGraphExternalSemaphoresWaitNodeGetParams(signal, &gw));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGraphExternalSemaphoresSignalNodeSetParams(wait, &sn));

  CUgraph clone = nullptr;
  ASSERT_CU_OK(cuGraphClone(&clone, g));
  CUgraphNode cloned = nullptr;
  ASSERT_CU_OK(cuGraphNodeFindInClone(&cloned, signal, clone));
  ASSERT_CU_OK(cuGraphExternalSemaphoresSignalNodeGetParams(cloned, &got));
  EXPECT_EQ(got.paramsArray[0].params.fence.value, 7u);

  CUgraphExec exec = nullptr;
  ASSERT_CU_OK(cuGraphInstantiate(&exec, g, 0));
  ASSERT_CU_OK(cuGraphLaunch(exec, a_));
  Pause();
  EXPECT_CU(CUDA_ERROR_NOT_READY, cuStreamQuery(a_));
  EXPECT_EQ(Payload(out_fd), 0u);
  EXPECT_EQ(ReadU32(flag, 1)[0], 0u);
  SetPayload(in_fd, 1);
  ASSERT_CU_OK(cuStreamSynchronize(a_));
  EXPECT_EQ(ReadU32(flag, 1)[0], 0x5Au);
  EXPECT_EQ(Payload(out_fd), 7u);

  // The executable graph's copy changes; the graph's node does not.
  sp.params.fence.value = 9;
  ASSERT_CU_OK(cuGraphExecExternalSemaphoresSignalNodeSetParams(exec, signal, &sn));
  wp.params.fence.value = 2;
  ASSERT_CU_OK(cuGraphExecExternalSemaphoresWaitNodeSetParams(exec, wait, &wn));
  ASSERT_CU_OK(cuGraphLaunch(exec, a_));
  Pause();
  EXPECT_CU(CUDA_ERROR_NOT_READY, cuStreamQuery(a_)) << "now waits for 2";
  SetPayload(in_fd, 2);
  ASSERT_CU_OK(cuStreamSynchronize(a_));
  EXPECT_EQ(Payload(out_fd), 9u);
  ASSERT_CU_OK(cuGraphExternalSemaphoresSignalNodeGetParams(signal, &got));
  EXPECT_EQ(got.paramsArray[0].params.fence.value, 7u);
  CUexternalSemaphore both[2] = {out, in};
  CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS sps[2] = {};
  CUDA_EXT_SEM_SIGNAL_NODE_PARAMS two{both, sps, 2};
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE,
            cuGraphExecExternalSemaphoresSignalNodeSetParams(exec, signal, &two))
      << "numExtSems cannot change";

  // The clone runs the parameters it was cloned with.
  CUgraphExec cexec = nullptr;
  ASSERT_CU_OK(cuGraphInstantiate(&cexec, clone, 0));
  ASSERT_CU_OK(cuGraphLaunch(cexec, a_));
  ASSERT_CU_OK(cuStreamSynchronize(a_));
  EXPECT_EQ(Payload(out_fd), 7u);

  EXPECT_CU_OK(cuGraphExecDestroy(cexec));
  EXPECT_CU_OK(cuGraphExecDestroy(exec));
  EXPECT_CU_OK(cuGraphDestroy(clone));
  EXPECT_CU_OK(cuGraphDestroy(g));
  EXPECT_CU_OK(cuMemFree(flag));
  EXPECT_CU_OK(cuDestroyExternalSemaphore(in));
  EXPECT_CU_OK(cuDestroyExternalSemaphore(out));
  close(in_fd);
  close(out_fd);
}

TEST_F(SimExternalSemaphoreTest, GenericNodeParams) {
  int host = -1;
  CUexternalSemaphore sem = Import(CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD, &host);
  CUgraph g = nullptr;
  ASSERT_CU_OK(cuGraphCreate(&g, 0));
  CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS sp{};
  sp.params.fence.value = 3;
  CUgraphNodeParams p{};
  p.type = CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL;
  p.extSemSignal = {&sem, &sp, 1};
  CUgraphNode node = nullptr;
  ASSERT_CU_OK(cuGraphAddNode(&node, g, nullptr, nullptr, 0, &p));
  CUgraphNodeType type;
  ASSERT_CU_OK(cuGraphNodeGetType(node, &type));
  EXPECT_EQ(type, CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL);
  sp.params.fence.value = 4;
  ASSERT_CU_OK(cuGraphNodeSetParams(node, &p));
  CUgraphExec exec = nullptr;
  ASSERT_CU_OK(cuGraphInstantiate(&exec, g, 0));
  ASSERT_CU_OK(cuGraphLaunch(exec, a_));
  ASSERT_CU_OK(cuStreamSynchronize(a_));
  EXPECT_EQ(Payload(host), 4u);
  sp.params.fence.value = 5;
  ASSERT_CU_OK(cuGraphExecNodeSetParams(exec, node, &p));
  ASSERT_CU_OK(cuGraphLaunch(exec, a_));
  ASSERT_CU_OK(cuStreamSynchronize(a_));
  EXPECT_EQ(Payload(host), 5u);
  // A wait node through the generic entry point; bad semaphores are refused.
  CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS wp{};
  CUgraphNodeParams w{};
  w.type = CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT;
  w.extSemWait = {&sem, &wp, 1};
  CUgraphNode wait = nullptr;
  ASSERT_CU_OK(cuGraphAddNode(&wait, g, &node, nullptr, 1, &w));
  ASSERT_CU_OK(cuGraphNodeGetType(wait, &type));
  EXPECT_EQ(type, CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT);
  CUexternalSemaphore bogus = reinterpret_cast<CUexternalSemaphore>(&w);
  w.extSemWait.extSemArray = &bogus;
  EXPECT_CU(CUDA_ERROR_INVALID_HANDLE, cuGraphAddNode(&wait, g, nullptr, nullptr, 0, &w));
  EXPECT_CU_OK(cuGraphExecDestroy(exec));
  EXPECT_CU_OK(cuGraphDestroy(g));
  EXPECT_CU_OK(cuDestroyExternalSemaphore(sem));
  close(host);
}

}  // namespace
}  // namespace vgpu::conformance
