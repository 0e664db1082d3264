// vmm::Manager on the simulated driver, linked directly (no libvgpu): quota
// charging in physical chunks and the freed-chunk cache (docs/vmm.md).
// One simulated node per test process (device 0: 64 MiB, device 1: 1 GiB);
// every test uses a Manager and contexts of its own and gives all memory
// back; the accounting callbacks record into a test ledger.
#include <sys/mman.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "intercept/real_driver.h"
#include "vmm/vmm.h"

namespace vgpu {

// The table REAL_CALL reads; here it points straight at the simulated driver
// this test links, for the entry points vmm::Manager uses.
const RealCuda& Cuda() {
  static const RealCuda table = [] {
    RealCuda t;
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
    t.cuMemcpyDtoH_v2_ = &::cuMemcpyDtoH_v2;
    t.cuMemcpyHtoD_v2_ = &::cuMemcpyHtoD_v2;
    return t;
  }();
  return table;
}

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

  CUcontext ctx_[2] = {nullptr, nullptr};
  Manager m_;
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

}  // namespace
}  // namespace vmm
}  // namespace vgpu
