// vmm::Manager on the simulated driver, linked directly (no libvgpu): quota
// charging in physical chunks and the freed-chunk cache (docs/vmm.md).
// One simulated node per test process (device 0: 64 MiB, device 1: 1 GiB);
// every test uses a Manager and contexts of its own and gives all memory
// back; the accounting callbacks record into a test ledger. The copies the
// manager makes for suspend/resume go through test wrappers that can fail one
// of them on demand (the sim's VGPU_SIM_FAULTS counts every call of the
// process, the test's own copies included).
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "driver/real_driver.h"
#include "vmm/imported_memory.h"
#include "vmm/vmm.h"

namespace vgpu {
namespace {

// Armed by a test: the n-th next copy of that direction that vmm::Manager
// makes fails (0: none fails).
std::atomic<int> g_fail_htod_in{0};
std::atomic<int> g_fail_dtoh_in{0};
constexpr CUresult kInjected = CUDA_ERROR_ILLEGAL_ADDRESS;

bool FailsNow(std::atomic<int>* countdown) {
  int n = countdown->load();
  while (n > 0 && !countdown->compare_exchange_weak(n, n - 1)) {
  }
  return n == 1;
}

CUresult CUDAAPI ManagerHtoD(CUdeviceptr dst, const void* src, size_t bytes, CUstream s) {
  return FailsNow(&g_fail_htod_in) ? kInjected : ::cuMemcpyHtoDAsync_v2(dst, src, bytes, s);
}
CUresult CUDAAPI ManagerDtoH(void* dst, CUdeviceptr src, size_t bytes, CUstream s) {
  return FailsNow(&g_fail_dtoh_in) ? kInjected : ::cuMemcpyDtoHAsync_v2(dst, src, bytes, s);
}

// The driver table the managers under test are given: the simulated driver
// this test links, for the entry points vmm::Manager uses, with the copies
// wrapped. A Manager reaches the driver only through the table it is given.
driver::RealCuda SimTable() {
  driver::RealCuda t;
  t.cuCtxGetCurrent_ = &::cuCtxGetCurrent;
  t.cuCtxSetCurrent_ = &::cuCtxSetCurrent;
  t.cuMemGetAllocationGranularity_ = &::cuMemGetAllocationGranularity;
  t.cuDeviceTotalMem_v2_ = &::cuDeviceTotalMem_v2;
  t.cuMemAddressReserve_ = &::cuMemAddressReserve;
  t.cuMemCreate_ = &::cuMemCreate;
  t.cuMemMap_ = &::cuMemMap;
  t.cuMemSetAccess_ = &::cuMemSetAccess;
  t.cuMemUnmap_ = &::cuMemUnmap;
  t.cuMemRelease_ = &::cuMemRelease;
  t.cuMemcpyDtoHAsync_v2_ = &ManagerDtoH;
  t.cuMemcpyHtoDAsync_v2_ = &ManagerHtoD;
  t.cuStreamCreate_ = &::cuStreamCreate;
  t.cuStreamSynchronize_ = &::cuStreamSynchronize;
  t.cuStreamDestroy_v2_ = &::cuStreamDestroy_v2;
  t.cuEventCreate_ = &::cuEventCreate;
  t.cuEventRecord_ = &::cuEventRecord;
  t.cuEventSynchronize_ = &::cuEventSynchronize;
  t.cuEventDestroy_v2_ = &::cuEventDestroy_v2;
  t.cuMemHostRegister_v2_ = &::cuMemHostRegister_v2;
  t.cuMemHostUnregister_ = &::cuMemHostUnregister;
  t.cuMemExportToShareableHandle_ = &::cuMemExportToShareableHandle;
  t.cuMemImportFromShareableHandle_ = &::cuMemImportFromShareableHandle;
  t.cuMemAddressFree_ = &::cuMemAddressFree;
  return t;
}

const driver::RealCuda& TestTable() {
  static const driver::RealCuda table = SimTable();
  return table;
}

}  // namespace

namespace vmm {
namespace {

constexpr uint64_t kMiB = 1ull << 20;

// The test's ledger: one device, a limit, what is charged, refusals.
uint64_t g_limit = UINT64_MAX;
uint64_t g_charged = 0;
int g_reserves = 0;
int g_refusals = 0;

Accounting TestAccounting() {
  Accounting a;
  a.reserve = [](int, uint64_t bytes) {
    ++g_reserves;
    if (g_limit != UINT64_MAX && g_charged + bytes > g_limit) return false;
    g_charged += bytes;
    return true;
  };
  a.release = [](int, uint64_t bytes) { g_charged -= bytes; };
  a.refused = [](int, uint64_t) { ++g_refusals; };
  a.limit = [](int) { return g_limit; };
  a.available = [](int) -> uint64_t {
    if (g_limit == UINT64_MAX) return UINT64_MAX;
    return g_charged >= g_limit ? 0 : g_limit - g_charged;
  };
  return a;
}

// The simulated node of this process, removed at exit.
class SimNode : public ::testing::Environment {
 public:
  void SetUp() override {
    setenv("VGPU_SIM_NODE", name_.c_str(), 1);
    setenv("VGPU_SIM_DEVICES", "1x64MiB,1x1GiB", 1);
    ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
  }
  void TearDown() override { shm_unlink(("/vgpu-sim-" + name_).c_str()); }

 private:
  std::string name_ = "vmm-unit-" + std::to_string(getpid());
};
const auto* const g_node = ::testing::AddGlobalTestEnvironment(new SimNode);

class VmmManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int d = 1; d >= 0; --d) ASSERT_EQ(cuCtxCreate_v2(&ctx_[d], 0, d), CUDA_SUCCESS);  // 0 current
    g_limit = UINT64_MAX;
    g_charged = 0;
    g_reserves = 0;
    g_refusals = 0;
    g_fail_htod_in = 0;
    g_fail_dtoh_in = 0;
    m_.SetAccounting(TestAccounting());
  }
  void TearDown() override {
    for (CUcontext c : ctx_) m_.FreeContext(c);
    EXPECT_EQ(g_charged, 0u) << "charge left after the contexts' memory was freed";
    m_.TrimCache(-1);
    for (CUcontext c : ctx_) cuCtxDestroy_v2(c);
  }
  CUdeviceptr Alloc(size_t bytes, CUresult want = CUDA_SUCCESS, int device = 0) {
    CUdeviceptr p = 0;
    EXPECT_EQ(m_.Alloc(device, ctx_[device], bytes, nullptr, &p), want) << bytes << " bytes";
    return p;
  }
  void Free(CUdeviceptr p) { EXPECT_EQ(m_.Free(p, nullptr), CUDA_SUCCESS); }

  // A buffer's expected contents: bytes that differ per buffer and offset,
  // never all zero (fresh physical memory reads as zeros).
  static std::vector<uint8_t> Pattern(size_t bytes, uint32_t seed) {
    std::vector<uint8_t> v(bytes);
    uint32_t x = seed * 2654435761u + 1;
    for (auto& b : v) {
      x = x * 1664525u + 1013904223u;
      b = static_cast<uint8_t>(x >> 24);
    }
    return v;
  }
  // Copies to/from device memory of `device` with its context current (the
  // test's own copies: never failed by the wrappers).
  void Write(CUdeviceptr p, const std::vector<uint8_t>& data, int device = 0) {
    ASSERT_EQ(cuCtxSetCurrent(ctx_[device]), CUDA_SUCCESS);
    EXPECT_EQ(cuMemcpyHtoD_v2(p, data.data(), data.size()), CUDA_SUCCESS);
    ASSERT_EQ(cuCtxSetCurrent(ctx_[0]), CUDA_SUCCESS);
  }
  std::vector<uint8_t> Read(CUdeviceptr p, size_t bytes, int device = 0) {
    std::vector<uint8_t> out(bytes, 0);
    EXPECT_EQ(cuCtxSetCurrent(ctx_[device]), CUDA_SUCCESS);
    EXPECT_EQ(cuMemcpyDtoH_v2(out.data(), p, bytes), CUDA_SUCCESS);
    EXPECT_EQ(cuCtxSetCurrent(ctx_[0]), CUDA_SUCCESS);
    return out;
  }

  CUcontext ctx_[2] = {nullptr, nullptr};
  Manager m_{TestTable()};
};

TEST_F(VmmManagerTest, ChargesWholeChunks) {
  CUdeviceptr small = Alloc(256);
  EXPECT_EQ(g_charged, 2 * kMiB);
  Alloc(256);  // same chunk
  EXPECT_EQ(g_charged, 2 * kMiB);
  Alloc(3000000);  // a chunk of its own, rounded to 2 MiB
  EXPECT_EQ(g_charged, 6 * kMiB);
  EXPECT_EQ(m_.LiveBytes(), 256u + 256u + 3000000u);
  Free(small);
  EXPECT_EQ(g_charged, 6 * kMiB) << "the small chunk still holds an allocation";
}

TEST_F(VmmManagerTest, FreedChunkIsReusedAtTheSameAddressWithoutANewCharge) {
  CUdeviceptr a = Alloc(4 * kMiB);
  Free(a);
  EXPECT_EQ(g_charged, 4 * kMiB) << "a cached chunk stays charged";
  EXPECT_EQ(m_.MappedBytes(), 0u) << "a cached chunk is not in use";
  int reserves = g_reserves;
  CUdeviceptr b = Alloc(4 * kMiB);
  EXPECT_EQ(b, a);
  EXPECT_EQ(g_reserves, reserves) << "reuse must not touch the ledger";
  EXPECT_EQ(g_charged, 4 * kMiB);
  // Still usable after the re-map.
  std::vector<uint8_t> in(4096, 0x5a), out(4096, 0);
  ASSERT_EQ(cuMemcpyHtoD_v2(b, in.data(), in.size()), CUDA_SUCCESS);
  ASSERT_EQ(cuMemcpyDtoH_v2(out.data(), b, out.size()), CUDA_SUCCESS);
  EXPECT_EQ(out, in);
  Free(b);
  m_.TrimCache(0);
  EXPECT_EQ(g_charged, 0u);
}

TEST_F(VmmManagerTest, UseAfterFreeOfACachedChunkFails) {
  CUdeviceptr a = Alloc(2 * kMiB);
  Free(a);
  std::vector<uint8_t> host(16);
  EXPECT_NE(cuMemcpyHtoD_v2(a, host.data(), host.size()), CUDA_SUCCESS);
}

TEST_F(VmmManagerTest, CacheIsBoundedByTheQuota) {
  g_limit = 64 * kMiB;  // 1/16: 4 MiB of cache
  CUdeviceptr a = Alloc(4 * kMiB), b = Alloc(4 * kMiB), c = Alloc(8 * kMiB);
  Free(a);
  Free(b);  // the older one goes
  EXPECT_EQ(g_charged, 12 * kMiB);
  Free(c);  // bigger than the bound: never cached
  EXPECT_EQ(g_charged, 4 * kMiB);
}

TEST_F(VmmManagerTest, CacheIsBoundedByTheDevice) {
  std::vector<CUdeviceptr> ps;
  for (int i = 0; i < 3; ++i) ps.push_back(Alloc(1 * kMiB));  // 1 MiB: a 2 MiB chunk each
  EXPECT_EQ(g_charged, 6 * kMiB);
  for (CUdeviceptr p : ps) Free(p);
  EXPECT_EQ(g_charged, 4 * kMiB) << "64 MiB device: 1/16 of it";
}

TEST_F(VmmManagerTest, CacheIsBoundedInChunks) {
  std::vector<CUdeviceptr> ps;  // on the 1 GiB device: 64 MiB of cache, 8 chunks
  for (size_t i = 0; i < kCacheMaxChunks + 2; ++i) ps.push_back(Alloc(1 * kMiB, CUDA_SUCCESS, 1));
  EXPECT_EQ(g_charged, (kCacheMaxChunks + 2) * 2 * kMiB);
  for (CUdeviceptr p : ps) Free(p);
  EXPECT_EQ(g_charged, kCacheMaxChunks * 2 * kMiB);
}

TEST_F(VmmManagerTest, NothingIsCachedNearTheQuota) {
  g_limit = 64 * kMiB;  // nothing cached with less than 16 MiB unused
  CUdeviceptr big = Alloc(46 * kMiB);
  CUdeviceptr a = Alloc(4 * kMiB);
  Free(a);  // 14 MiB unused: released
  EXPECT_EQ(g_charged, 46 * kMiB);
  Free(big);
  a = Alloc(4 * kMiB);
  Free(a);  // 60 MiB unused: cached
  EXPECT_EQ(g_charged, 4 * kMiB);
}

TEST_F(VmmManagerTest, QuotaRefusalEvictsTheCacheFirst) {
  g_limit = 32 * kMiB;  // cache bound 2 MiB
  CUdeviceptr a = Alloc(2 * kMiB);
  Free(a);
  EXPECT_EQ(g_charged, 2 * kMiB);
  Alloc(32 * kMiB);
  EXPECT_EQ(g_refusals, 0) << "a refusal that the cache resolved is not a refusal";
  EXPECT_EQ(g_charged, 32 * kMiB);
  Alloc(2 * kMiB, CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(g_refusals, 1);
}

TEST_F(VmmManagerTest, DeviceOutOfMemoryEvictsTheCacheFirst) {
  CUdeviceptr a = Alloc(4 * kMiB);  // no quota: bound 1/16 of 64 MiB
  Free(a);
  EXPECT_EQ(g_charged, 4 * kMiB);
  Alloc(62 * kMiB);
  EXPECT_EQ(g_charged, 62 * kMiB);
}

TEST_F(VmmManagerTest, DestroyedContextTakesItsCachedChunks) {
  CUcontext other = nullptr;  // on the 1 GiB device, where everything fits the cache
  ASSERT_EQ(cuCtxCreate_v2(&other, 0, 1), CUDA_SUCCESS);
  ASSERT_EQ(cuCtxSetCurrent(ctx_[0]), CUDA_SUCCESS);
  CUdeviceptr a = 0, b = 0;
  ASSERT_EQ(m_.Alloc(1, other, 2 * kMiB, nullptr, &a), CUDA_SUCCESS);
  ASSERT_EQ(m_.Alloc(1, other, 4 * kMiB, nullptr, &b), CUDA_SUCCESS);
  Free(a);
  CUdeviceptr mine = Alloc(6 * kMiB, CUDA_SUCCESS, 1);
  Free(mine);
  EXPECT_EQ(g_charged, 12 * kMiB);
  m_.FreeContext(other);  // b freed and not cached, a's cached chunk released; mine stays cached
  EXPECT_EQ(g_charged, 6 * kMiB);
  cuCtxDestroy_v2(other);
  ASSERT_EQ(cuCtxSetCurrent(ctx_[0]), CUDA_SUCCESS);
}

TEST_F(VmmManagerTest, ReleaseAllReleasesCachedChunksAndCopiesOnlyLiveOnes) {
  CUdeviceptr live = Alloc(2 * kMiB);
  CUdeviceptr gone = Alloc(2 * kMiB);
  Free(gone);
  uint64_t copied = 0;
  ASSERT_EQ(m_.ReleaseAll(true, [&](uint64_t done, uint64_t) { copied = done; }), CUDA_SUCCESS);
  EXPECT_EQ(copied, 2 * kMiB);
  EXPECT_EQ(g_charged, 2 * kMiB) << "the live chunk keeps its charge while released";
  ASSERT_EQ(m_.RecreateAll(nullptr), CUDA_SUCCESS);
  EXPECT_TRUE(m_.AllMapped());
  Free(live);
}

// Suspend and resume as residency does them (ReleaseAll keeping host copies,
// RecreateAll): the contents come back byte for byte, for sub-allocated and
// whole-chunk allocations on both devices, twice in a row.
TEST_F(VmmManagerTest, ReleaseAndRecreateGiveTheDataBack) {
  struct Buf {
    CUdeviceptr p;
    size_t bytes;
    int device;
    std::vector<uint8_t> data;
  };
  std::vector<Buf> bufs;
  const std::pair<size_t, int> shapes[] = {
      {1000, 0}, {300000, 0}, {5 * kMiB + 123, 0}, {4096, 1}, {3 * kMiB, 1}};
  for (const auto& [bytes, device] : shapes) {
    Buf b{Alloc(bytes, CUDA_SUCCESS, device), bytes, device,
          Pattern(bytes, static_cast<uint32_t>(bufs.size()))};
    Write(b.p, b.data, b.device);
    bufs.push_back(std::move(b));
  }
  for (int cycle = 0; cycle < 2; ++cycle) {
    SCOPED_TRACE("cycle " + std::to_string(cycle));
    uint64_t charged = g_charged;
    ASSERT_EQ(m_.ReleaseAll(true, nullptr), CUDA_SUCCESS);
    EXPECT_FALSE(m_.AllMapped());
    EXPECT_EQ(m_.MappedBytes(), 0u);
    for (const Buf& b : bufs) {
      const uint8_t* host = m_.HostCopy(b.p);
      ASSERT_NE(host, nullptr);
      EXPECT_EQ(std::vector<uint8_t>(host, host + b.bytes), b.data) << "host copy of " << b.bytes;
      // The memory is really gone, not merely flagged: the VA faults.
      uint8_t byte = 0;
      ASSERT_EQ(cuCtxSetCurrent(ctx_[b.device]), CUDA_SUCCESS);
      EXPECT_NE(cuMemcpyDtoH_v2(&byte, b.p, 1), CUDA_SUCCESS);
      ASSERT_EQ(cuCtxSetCurrent(ctx_[0]), CUDA_SUCCESS);
    }
    ASSERT_EQ(m_.RecreateAll(nullptr), CUDA_SUCCESS);
    EXPECT_TRUE(m_.AllMapped());
    EXPECT_EQ(g_charged, charged) << "a suspend keeps the charge; a resume adds none";
    for (const Buf& b : bufs) {
      EXPECT_EQ(m_.HostCopy(b.p), nullptr) << "the host copy is dropped once copied back";
      EXPECT_TRUE(Read(b.p, b.bytes, b.device) == b.data) << b.bytes << " bytes on device "
                                                           << b.device << " differ after resume";
    }
  }
  for (const Buf& b : bufs) Free(b.p);
}

// A resume copy that fails leaves its chunk released with its host copy (the
// chunks before it are resumed and keep theirs, those after it untouched), so that a second
// RecreateAll maps and copies it again: the data is then all there.
TEST_F(VmmManagerTest, FailedResumeCopyIsRetriedByTheNextRecreate) {
  std::vector<CUdeviceptr> ps;  // a 2 MiB chunk each, one copy per chunk, in VA order
  std::vector<std::vector<uint8_t>> data;
  for (uint32_t i = 0; i < 3; ++i) {
    ps.push_back(Alloc(2 * kMiB));
    data.push_back(Pattern(2 * kMiB, 100 + i));
    Write(ps.back(), data.back());
  }
  ASSERT_LT(ps[0], ps[1]);
  ASSERT_LT(ps[1], ps[2]);
  ASSERT_EQ(m_.ReleaseAll(true, nullptr), CUDA_SUCCESS);
  g_fail_htod_in = 2;
  EXPECT_EQ(m_.RecreateAll(nullptr), kInjected);
  EXPECT_FALSE(m_.AllMapped());
  EXPECT_EQ(m_.MappedBytes(), 2 * kMiB) << "only the chunk copied before the failure is mapped";
  EXPECT_NE(m_.HostCopy(ps[0]), nullptr)
      << "still suspended: a resumed chunk keeps its host copy (a checkpoint needs it)";
  EXPECT_NE(m_.HostCopy(ps[1]), nullptr) << "the failed chunk must keep its host copy";
  EXPECT_NE(m_.HostCopy(ps[2]), nullptr);
  EXPECT_EQ(g_charged, 6 * kMiB);
  ASSERT_EQ(m_.RecreateAll(nullptr), CUDA_SUCCESS);
  EXPECT_TRUE(m_.AllMapped());
  EXPECT_EQ(g_charged, 6 * kMiB) << "the retry must not charge the chunk twice";
  for (size_t i = 0; i < ps.size(); ++i) {
    EXPECT_TRUE(Read(ps[i], 2 * kMiB) == data[i]) << "buffer " << i << " differs after the retry";
    EXPECT_EQ(m_.HostCopy(ps[i]), nullptr);
  }
  for (CUdeviceptr p : ps) Free(p);
}

// A suspend copy that fails leaves every chunk mapped and drops the host
// copies already made (they would be stale once the application writes
// again, and a later suspend must not mistake them for current).
TEST_F(VmmManagerTest, FailedSuspendCopyKeepsEverythingMappedWithoutHostCopies) {
  std::vector<CUdeviceptr> ps;
  std::vector<std::vector<uint8_t>> data;
  for (uint32_t i = 0; i < 3; ++i) {
    ps.push_back(Alloc(2 * kMiB));
    data.push_back(Pattern(2 * kMiB, 200 + i));
    Write(ps.back(), data.back());
  }
  g_fail_dtoh_in = 2;
  EXPECT_EQ(m_.ReleaseAll(true, nullptr), kInjected);
  EXPECT_TRUE(m_.AllMapped());
  for (size_t i = 0; i < ps.size(); ++i) {
    EXPECT_EQ(m_.HostCopy(ps[i]), nullptr) << "buffer " << i << " kept a host copy";
    EXPECT_TRUE(Read(ps[i], 2 * kMiB) == data[i]) << "buffer " << i;
  }
  // And the next suspend works from scratch.
  ASSERT_EQ(m_.ReleaseAll(true, nullptr), CUDA_SUCCESS);
  ASSERT_EQ(m_.RecreateAll(nullptr), CUDA_SUCCESS);
  for (size_t i = 0; i < ps.size(); ++i) EXPECT_TRUE(Read(ps[i], 2 * kMiB) == data[i]);
  for (CUdeviceptr p : ps) Free(p);
}

// Suspend copies go into page-locked host buffers that are kept between
// cycles: the second suspend reuses the first one's buffer (same address,
// still registered) instead of faulting fresh host memory in, and the data
// still comes back byte for byte.
TEST_F(VmmManagerTest, HostCopiesArePinnedAndKeptBetweenSuspends) {
  CUdeviceptr p = Alloc(4 * kMiB);
  std::vector<uint8_t> data = Pattern(4 * kMiB, 7);
  Write(p, data);
  ASSERT_EQ(m_.ReleaseAll(true, nullptr), CUDA_SUCCESS);
  auto* first = const_cast<uint8_t*>(m_.HostCopy(p));
  ASSERT_NE(first, nullptr);
  unsigned flags = 0;
  EXPECT_EQ(cuMemHostGetFlags(&flags, first), CUDA_SUCCESS) << "the host copy is not page-locked";
  EXPECT_EQ(m_.KeptHostBytes(), 0u) << "a buffer in use is not a kept one";
  ASSERT_EQ(m_.RecreateAll(nullptr), CUDA_SUCCESS);
  EXPECT_EQ(m_.KeptHostBytes(), 4 * kMiB) << "the resumed chunk's buffer was not kept";
  data = Pattern(4 * kMiB, 8);  // new contents: the kept buffer's old ones must not come back
  Write(p, data);
  ASSERT_EQ(m_.ReleaseAll(true, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(m_.HostCopy(p), first) << "the second suspend did not reuse the kept buffer";
  EXPECT_EQ(m_.KeptHostBytes(), 0u);
  ASSERT_EQ(m_.RecreateAll(nullptr), CUDA_SUCCESS);
  EXPECT_TRUE(Read(p, 4 * kMiB) == data) << "the data differs after the second cycle";
  Free(p);
}

// Threads allocating and freeing while another trims the cache (run under
// the tsan preset too): every charge comes back.
TEST_F(VmmManagerTest, ConcurrentAllocFreeAndTrim) {
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0};
  std::thread trimmer([&] {
    while (!stop.load()) m_.TrimCache(1);
  });
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t) {
    ts.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        CUdeviceptr p = 0;
        size_t bytes = (i + t) % 3 == 0 ? (64u << 10) : ((i + t) % 3 == 1 ? 2 * kMiB : 6 * kMiB);
        if (m_.Alloc(1, ctx_[1], bytes, nullptr, &p) != CUDA_SUCCESS ||
            m_.Free(p, nullptr) != CUDA_SUCCESS) {
          failures++;
        }
      }
    });
  }
  for (auto& th : ts) th.join();
  stop = true;
  trimmer.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(m_.LiveBytes(), 0u);
  m_.TrimCache(1);
  EXPECT_EQ(g_charged, 0u);
}

CUresult CUDAAPI RefuseCreate(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*,
                              unsigned long long) {
  return CUDA_ERROR_OUT_OF_MEMORY;
}

// The manager calls the table it was given, not a driver bound at link time:
// a table whose cuMemCreate refuses makes its allocations fail, while the
// fixture's manager on the unmodified table still allocates.
// CUDA IPC of VMM-served memory: the allocation's chunk exported as a POSIX fd
// and mapped again (here in the same process: the sim's fds are memfds) shows
// the same bytes, at the allocation's offset; an exported chunk is never cached.
TEST_F(VmmManagerTest, ExportedAllocationMapsElsewhereAndIsNeverCached) {
  CUdeviceptr other = Alloc(4096);
  CUdeviceptr p = Alloc(8192);  // shares the small chunk, at an offset
  const std::vector<uint8_t> data = Pattern(8192, 7);
  Write(p, data);
  ExportedChunk c;
  ASSERT_EQ(m_.ExportAllocation(p + 256, &c), CUDA_ERROR_INVALID_VALUE) << "not a base";
  ASSERT_EQ(m_.ExportAllocation(p, &c), CUDA_SUCCESS);
  EXPECT_EQ(c.chunk_size, 2 * kMiB);
  EXPECT_EQ(c.size, 8192u);
  EXPECT_NE(c.offset, 0u);
  ImportedMemory imported(TestTable());
  const ImportKey key{1234, c.buffer_id, ctx_[0]};
  EXPECT_EQ(imported.Reopen(key), 0u);
  CUdeviceptr q = 0;
  ASSERT_EQ(imported.Open(key, c.fd, c.chunk_size, c.offset, 0, &q), CUDA_SUCCESS);
  close(c.fd);
  EXPECT_NE(q, p);
  EXPECT_EQ(Read(q, data.size()), data);
  EXPECT_EQ(g_charged, 2 * kMiB) << "an import is not charged";
  EXPECT_EQ(imported.Reopen(key), q) << "opened again: the same pointer";
  EXPECT_EQ(imported.Exporters(), std::set<int64_t>{1234});
  ImportKey closed;
  bool last = true;
  ASSERT_EQ(imported.Close(q, &closed, &last), CUDA_SUCCESS);
  EXPECT_FALSE(last);
  ASSERT_EQ(imported.Close(q, &closed, &last), CUDA_SUCCESS);
  EXPECT_TRUE(last);
  EXPECT_EQ(closed, key);
  EXPECT_EQ(imported.Close(q, &closed, &last), CUDA_ERROR_INVALID_VALUE);
  EXPECT_TRUE(imported.Exporters().empty());
  Free(other);
  Free(p);
  EXPECT_EQ(g_charged, 0u) << "an exported chunk is released, not cached";
}

TEST_F(VmmManagerTest, UsesOnlyTheDriverTableItIsGiven) {
  driver::RealCuda refusing = SimTable();
  refusing.cuMemCreate_ = &RefuseCreate;
  Manager other(refusing);
  other.SetAccounting(TestAccounting());
  CUdeviceptr p = 0;
  EXPECT_EQ(other.Alloc(0, ctx_[0], kMiB, nullptr, &p), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(g_charged, 0u) << "a failed cuMemCreate must roll its charge back";
  CUdeviceptr q = Alloc(kMiB);
  EXPECT_NE(q, 0u);
  Free(q);
  other.FreeContext(ctx_[0]);
  other.TrimCache(-1);
}

}  // namespace
}  // namespace vmm
}  // namespace vgpu
