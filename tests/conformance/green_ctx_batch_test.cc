// Green contexts, device resources, batched copies and managed-memory
// batches (issue 16: entry points that were NOT_SUPPORTED stubs). Portable
// suites assert what cuda.h documents; Sim* suites hold the simulator's own
// answers (split rules it chose, absent hardware).
#include <dlfcn.h>

#include <cstring>
#include <numeric>
#include <vector>

#include "test_util.h"

namespace vgpu::conformance {
namespace {

int Attr(CUdevice dev, CUdevice_attribute a) {
  int v = -1;
  EXPECT_CU_OK(cuDeviceGetAttribute(&v, a, dev));
  return v;
}

// ---- device resources and green contexts ---------------------------------

class GreenCtxTest : public ContextTest {
 protected:
  void SetUp() override {
    ContextTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    ASSERT_CU_OK(cuDeviceGetDevResource(dev_, &device_, CU_DEV_RESOURCE_TYPE_SM));
  }
  // One group of at least min_count SMs, made into a green context.
  void MakeGreen(unsigned min_count, CUgreenCtx* out, unsigned* sms) {
    CUdevResource group{};
    unsigned n = 1;
    ASSERT_CU_OK(cuDevSmResourceSplitByCount(&group, &n, &device_, nullptr, 0, min_count));
    ASSERT_EQ(n, 1u);
    CUdevResourceDesc desc = nullptr;
    ASSERT_CU_OK(cuDevResourceGenerateDesc(&desc, &group, 1));
    ASSERT_CU_OK(cuGreenCtxCreate(out, desc, dev_, CU_GREEN_CTX_DEFAULT_STREAM));
    *sms = group.sm.smCount;
  }
  CUdevResource device_{};
};

TEST_F(GreenCtxTest, DeviceResourceIsTheDevicesSms) {
  EXPECT_EQ(device_.type, CU_DEV_RESOURCE_TYPE_SM);
  EXPECT_EQ(static_cast<int>(device_.sm.smCount),
            Attr(dev_, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT));
  EXPECT_GT(device_.sm.minSmPartitionSize, 0u);
  EXPECT_GT(device_.sm.smCoscheduledAlignment, 0u);
  CUdevResource r{};
  EXPECT_CU(CUDA_ERROR_INVALID_RESOURCE_TYPE,
            cuDeviceGetDevResource(dev_, &r, static_cast<CUdevResourceType>(0)));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE,
            cuDeviceGetDevResource(dev_, nullptr, CU_DEV_RESOURCE_TYPE_SM));
  int count = 0;
  ASSERT_CU_OK(cuDeviceGetCount(&count));
  EXPECT_CU(CUDA_ERROR_INVALID_DEVICE, cuDeviceGetDevResource(count, &r, CU_DEV_RESOURCE_TYPE_SM));
  ASSERT_CU_OK(cuCtxGetDevResource(ctx_, &r, CU_DEV_RESOURCE_TYPE_SM));
  EXPECT_EQ(r.sm.smCount, device_.sm.smCount);  // an ordinary context has the whole device
}

// cuda.h: groups are disjoint, at least minCount (raised to the minimum
// partition size) and aligned; the remainder holds the rest.
TEST_F(GreenCtxTest, SplitByCountHonoursMinimumAndAlignment) {
  for (unsigned min_count : {0u, 1u, 8u, 9u, 16u, 33u}) {
    SCOPED_TRACE(min_count);
    if (min_count > device_.sm.smCount) continue;
    unsigned n = 0;
    ASSERT_CU_OK(cuDevSmResourceSplitByCount(nullptr, &n, &device_, nullptr, 0, min_count));
    ASSERT_GT(n, 0u);
    std::vector<CUdevResource> groups(n);
    CUdevResource rest{};
    unsigned got = n;
    ASSERT_CU_OK(cuDevSmResourceSplitByCount(groups.data(), &got, &device_, &rest, 0, min_count));
    ASSERT_EQ(got, n);
    unsigned used = 0;
    for (const CUdevResource& g : groups) {
      EXPECT_EQ(g.type, CU_DEV_RESOURCE_TYPE_SM);
      EXPECT_GE(g.sm.smCount, std::max(min_count, device_.sm.minSmPartitionSize));
      EXPECT_EQ(g.sm.smCount % g.sm.smCoscheduledAlignment, 0u);
      used += g.sm.smCount;
    }
    EXPECT_LE(used, device_.sm.smCount);
    EXPECT_EQ(used + rest.sm.smCount, device_.sm.smCount);
  }
}

TEST_F(GreenCtxTest, SplitAsksForFewerGroupsThanPossible) {
  CUdevResource g[2]{};
  unsigned n = 1;
  ASSERT_CU_OK(cuDevSmResourceSplitByCount(g, &n, &device_, nullptr, 0, 0));
  EXPECT_EQ(n, 1u);
  EXPECT_EQ(g[1].type, CU_DEV_RESOURCE_TYPE_INVALID);  // not written
}

struct SplitError {
  const char* name;
  unsigned flags;
  unsigned min_count_over;  // added to the device's SM count (0: minCount 0)
  bool null_nb;
  CUresult expected;
};

TEST_F(GreenCtxTest, SplitRejectsInvalidArguments) {
  const SplitError cases[] = {
      {"min above the SM count", 0, 1, false, CUDA_ERROR_INVALID_VALUE},
      {"unknown flag", 0x80, 0, false, CUDA_ERROR_INVALID_VALUE},
      {"NULL nbGroups", 0, 0, true, CUDA_ERROR_INVALID_VALUE},
  };
  for (const SplitError& c : cases) {
    SCOPED_TRACE(c.name);
    unsigned n = 0;
    unsigned min = c.min_count_over == 0 ? 0 : device_.sm.smCount + c.min_count_over;
    EXPECT_CU(c.expected, cuDevSmResourceSplitByCount(nullptr, c.null_nb ? nullptr : &n, &device_,
                                                      nullptr, c.flags, min));
  }
  CUdevResource bad{};
  unsigned n = 0;
  EXPECT_CU(CUDA_ERROR_INVALID_RESOURCE_TYPE,
            cuDevSmResourceSplitByCount(nullptr, &n, &bad, nullptr, 0, 0));
}

TEST_F(GreenCtxTest, GenerateDescChecksItsInputs) {
  CUdevResourceDesc desc = nullptr;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuDevResourceGenerateDesc(nullptr, &device_, 1));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuDevResourceGenerateDesc(&desc, &device_, 0));
  CUdevResource bad{};
  EXPECT_CU(CUDA_ERROR_INVALID_RESOURCE_TYPE, cuDevResourceGenerateDesc(&desc, &bad, 1));
  // Two groups of one split are allowed together; groups of two splits are not.
  CUdevResource a[2]{}, b[1]{};
  unsigned na = 2, nb = 1;
  ASSERT_CU_OK(cuDevSmResourceSplitByCount(a, &na, &device_, nullptr, 0, 0));
  ASSERT_CU_OK(cuDevSmResourceSplitByCount(b, &nb, &device_, nullptr, 0, 0));
  if (na == 2) {
    EXPECT_CU_OK(cuDevResourceGenerateDesc(&desc, a, 2));
  }
  CUdevResource mixed[2] = {a[0], b[0]};
  EXPECT_CU(CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION, cuDevResourceGenerateDesc(&desc, mixed, 2));
}

TEST_F(GreenCtxTest, GreenContextCarriesItsResources) {
  CUgreenCtx green = nullptr;
  unsigned sms = 0;
  ASSERT_NO_FATAL_FAILURE(MakeGreen(0, &green, &sms));
  CUdevResource r{};
  ASSERT_CU_OK(cuGreenCtxGetDevResource(green, &r, CU_DEV_RESOURCE_TYPE_SM));
  EXPECT_EQ(r.sm.smCount, sms);
  CUcontext converted = nullptr;
  ASSERT_CU_OK(cuCtxFromGreenCtx(&converted, green));
  ASSERT_NE(converted, nullptr);
  ASSERT_CU_OK(cuCtxGetDevResource(converted, &r, CU_DEV_RESOURCE_TYPE_SM));
  EXPECT_EQ(r.sm.smCount, sms);
  unsigned long long id = 0;
  ASSERT_CU_OK(cuGreenCtxGetId(green, &id));
  EXPECT_NE(id, 0u);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGreenCtxGetId(green, nullptr));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuCtxFromGreenCtx(nullptr, green));
  EXPECT_CU_OK(cuGreenCtxDestroy(green));
}

TEST_F(GreenCtxTest, CreateNeedsTheDefaultStreamFlag) {
  CUdevResource group{};
  unsigned n = 1;
  ASSERT_CU_OK(cuDevSmResourceSplitByCount(&group, &n, &device_, nullptr, 0, 0));
  CUdevResourceDesc desc = nullptr;
  ASSERT_CU_OK(cuDevResourceGenerateDesc(&desc, &group, 1));
  CUgreenCtx green = nullptr;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGreenCtxCreate(&green, desc, dev_, 0));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE,
            cuGreenCtxCreate(nullptr, desc, dev_, CU_GREEN_CTX_DEFAULT_STREAM));
  EXPECT_CU(CUDA_ERROR_INVALID_DEVICE,
            cuGreenCtxCreate(&green, desc, -1, CU_GREEN_CTX_DEFAULT_STREAM));
}

TEST_F(GreenCtxTest, StreamsNameTheirGreenContext) {
  CUgreenCtx green = nullptr;
  unsigned sms = 0;
  ASSERT_NO_FATAL_FAILURE(MakeGreen(0, &green, &sms));
  CUstream s = nullptr;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuGreenCtxStreamCreate(&s, green, 0, 0));
  ASSERT_CU_OK(cuGreenCtxStreamCreate(&s, green, CU_STREAM_NON_BLOCKING, 0));
  CUgreenCtx got = nullptr;
  ASSERT_CU_OK(cuStreamGetGreenCtx(s, &got));
  EXPECT_EQ(got, green);
  CUcontext pctx = nullptr;
  got = nullptr;
  ASSERT_CU_OK(cuStreamGetCtx_v2(s, &pctx, &got));
  EXPECT_EQ(got, green);
  EXPECT_EQ(pctx, ctx_);  // the device's primary context (cuda.h)
  CUcontext converted = nullptr;
  ASSERT_CU_OK(cuCtxFromGreenCtx(&converted, green));
  ASSERT_CU_OK(cuStreamGetCtx(s, &pctx));
  EXPECT_EQ(pctx, converted);
  // Work runs on it, and events order it.
  CUdeviceptr d = 0;
  ASSERT_CU_OK(cuMemAlloc(&d, 4096));
  ASSERT_CU_OK(cuMemsetD32Async(d, 0xabcd, 1024, s));
  CUevent ev = nullptr;
  ASSERT_CU_OK(cuEventCreate(&ev, 0));
  ASSERT_CU_OK(cuGreenCtxRecordEvent(green, ev));
  ASSERT_CU_OK(cuEventSynchronize(ev));
  ASSERT_CU_OK(cuGreenCtxWaitEvent(green, ev));
  uint32_t v = 0;
  ASSERT_CU_OK(cuMemcpyDtoH(&v, d, 4));
  EXPECT_EQ(v, 0xabcdu);
  EXPECT_CU_OK(cuStreamDestroy(s));
  EXPECT_CU_OK(cuEventDestroy(ev));
  EXPECT_CU_OK(cuMemFree(d));
  EXPECT_CU_OK(cuGreenCtxDestroy(green));
}

TEST_F(GreenCtxTest, OrdinaryStreamHasNoGreenContext) {
  CUstream s = nullptr;
  ASSERT_CU_OK(cuStreamCreate(&s, 0));
  CUgreenCtx got = reinterpret_cast<CUgreenCtx>(1);
  ASSERT_CU_OK(cuStreamGetGreenCtx(s, &got));
  EXPECT_EQ(got, nullptr);
  CUcontext pctx = nullptr;
  got = reinterpret_cast<CUgreenCtx>(1);
  ASSERT_CU_OK(cuStreamGetCtx_v2(s, &pctx, &got));
  EXPECT_EQ(got, nullptr);
  EXPECT_EQ(pctx, ctx_);
  EXPECT_CU_OK(cuStreamDestroy(s));
}

// The sim's split rules: cuda.h's guideline for cc 9.0 (8 SMs, multiples of
// 8); a split's output cannot be split again.
class SimGreenCtxTest : public GreenCtxTest {};

TEST_F(SimGreenCtxTest, SplitRulesOfComputeCapability90) {
  SKIP_UNLESS_SIM();
  EXPECT_EQ(device_.sm.minSmPartitionSize, 8u);
  EXPECT_EQ(device_.sm.smCoscheduledAlignment, 8u);
  CUdevResource g[64]{};
  CUdevResource rest{};
  unsigned n = 64;
  ASSERT_CU_OK(cuDevSmResourceSplitByCount(g, &n, &device_, &rest, 0, 9));
  EXPECT_EQ(g[0].sm.smCount, 16u);
  EXPECT_EQ(n, device_.sm.smCount / 16);
  unsigned m = 0;
  EXPECT_CU(CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION,
            cuDevSmResourceSplitByCount(nullptr, &m, &g[0], nullptr, 0, 0));
  n = 64;
  ASSERT_CU_OK(cuDevSmResourceSplitByCount(g, &n, &device_, nullptr,
                                           CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING, 1));
  EXPECT_EQ(g[0].sm.smCount, 2u);
}

// ---- batched copies -------------------------------------------------------

class BatchCopyTest : public ContextTest {
 protected:
  void SetUp() override {
    ContextTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    ASSERT_CU_OK(cuStreamCreate(&s_, CU_STREAM_NON_BLOCKING));
    ASSERT_CU_OK(cuMemHostAlloc(&host_, 3 * kBytes, 0));
    for (CUdeviceptr& d : dev_bufs_) ASSERT_CU_OK(cuMemAlloc(&d, kBytes));
  }
  void TearDown() override {
    if (s_ != nullptr) cuStreamDestroy(s_);
    for (CUdeviceptr d : dev_bufs_) {
      if (d != 0) cuMemFree(d);
    }
    if (host_ != nullptr) cuMemFreeHost(host_);
    ContextTest::TearDown();
  }
  CUdeviceptr H(size_t i) {
    return reinterpret_cast<CUdeviceptr>(static_cast<uint8_t*>(host_) + i * kBytes);
  }
  static CUmemcpyAttributes Order(CUmemcpySrcAccessOrder o) {
    CUmemcpyAttributes a{};
    a.srcAccessOrder = o;
    return a;
  }

  static constexpr size_t kBytes = 1 << 16;
  CUstream s_ = nullptr;
  void* host_ = nullptr;
  CUdeviceptr dev_bufs_[2] = {};
};

TEST_F(BatchCopyTest, CopiesEveryPairWithGroupedAttributes) {
  auto* h = static_cast<uint8_t*>(host_);
  for (size_t i = 0; i < kBytes; ++i) h[i] = static_cast<uint8_t>(i * 7);
  // H0 -> D0 (stream order), then in a second batch D0 -> D1, D1 -> H1, half each.
  CUdeviceptr dsts1[] = {dev_bufs_[0]};
  CUdeviceptr srcs1[] = {H(0)};
  size_t sizes1[] = {kBytes};
  CUmemcpyAttributes a1[] = {Order(CU_MEMCPY_SRC_ACCESS_ORDER_STREAM)};
  size_t idx1[] = {0};
  ASSERT_CU_OK(cuMemcpyBatchAsync(dsts1, srcs1, sizes1, 1, a1, idx1, 1, s_));
  CUdeviceptr dsts2[] = {dev_bufs_[1], dev_bufs_[1] + kBytes / 2};
  CUdeviceptr srcs2[] = {dev_bufs_[0], dev_bufs_[0] + kBytes / 2};
  size_t sizes2[] = {kBytes / 2, kBytes / 2};
  CUmemcpyAttributes a2[] = {Order(CU_MEMCPY_SRC_ACCESS_ORDER_STREAM),
                             Order(CU_MEMCPY_SRC_ACCESS_ORDER_ANY)};
  size_t idx2[] = {0, 1};
  ASSERT_CU_OK(cuMemcpyBatchAsync(dsts2, srcs2, sizes2, 2, a2, idx2, 2, s_));
  CUdeviceptr dsts3[] = {H(1)};
  CUdeviceptr srcs3[] = {dev_bufs_[1]};
  ASSERT_CU_OK(cuMemcpyBatchAsync(dsts3, srcs3, sizes1, 1, a1, idx1, 1, s_));
  ASSERT_CU_OK(cuStreamSynchronize(s_));
  EXPECT_EQ(std::memcmp(h, h + kBytes, kBytes), 0);
}

struct BatchError {
  const char* name;
  size_t count;
  size_t idx0;
  size_t num_attrs;
  int order;
  unsigned flags;
  bool legacy_stream;
};

TEST_F(BatchCopyTest, RejectsInvalidBatches) {
  const BatchError cases[] = {
      {"count 0", 0, 0, 1, CU_MEMCPY_SRC_ACCESS_ORDER_STREAM, 0, false},
      {"first index not 0", 2, 1, 1, CU_MEMCPY_SRC_ACCESS_ORDER_STREAM, 0, false},
      {"more attributes than copies", 1, 0, 2, CU_MEMCPY_SRC_ACCESS_ORDER_STREAM, 0, false},
      {"no attributes", 1, 0, 0, CU_MEMCPY_SRC_ACCESS_ORDER_STREAM, 0, false},
      {"invalid access order", 1, 0, 1, CU_MEMCPY_SRC_ACCESS_ORDER_INVALID, 0, false},
      {"legacy stream", 1, 0, 1, CU_MEMCPY_SRC_ACCESS_ORDER_STREAM, 0, true},
  };
  CUdeviceptr dsts[] = {dev_bufs_[0], dev_bufs_[1]};
  CUdeviceptr srcs[] = {H(0), H(1)};
  size_t sizes[] = {64, 64};
  for (const BatchError& c : cases) {
    SCOPED_TRACE(c.name);
    CUmemcpyAttributes attrs[2] = {Order(static_cast<CUmemcpySrcAccessOrder>(c.order)),
                                   Order(static_cast<CUmemcpySrcAccessOrder>(c.order))};
    attrs[0].flags = attrs[1].flags = c.flags;
    size_t idxs[2] = {c.idx0, c.idx0 + 1};
    EXPECT_CU(CUDA_ERROR_INVALID_VALUE,
              cuMemcpyBatchAsync(dsts, srcs, sizes, c.count, attrs, idxs, c.num_attrs,
                                 c.legacy_stream ? CU_STREAM_LEGACY : s_));
  }
}

TEST_F(BatchCopyTest, Copies3DBetweenPointersAndArrays) {
  constexpr size_t kW = 64, kH = 16;  // elements of 4 bytes
  CUDA_ARRAY3D_DESCRIPTOR ad{};
  ad.Width = kW;
  ad.Height = kH;
  ad.Format = CU_AD_FORMAT_UNSIGNED_INT32;
  ad.NumChannels = 1;
  CUarray arr = nullptr;
  ASSERT_CU_OK(cuArray3DCreate(&arr, &ad));
  auto* in = static_cast<uint32_t*>(host_);
  auto* out = in + kW * kH;
  for (size_t i = 0; i < kW * kH; ++i) in[i] = static_cast<uint32_t>(i + 1), out[i] = 0;
  CUDA_MEMCPY3D_BATCH_OP ops[2]{};
  ops[0].src.type = CU_MEMCPY_OPERAND_TYPE_POINTER;
  ops[0].src.op.ptr.ptr = reinterpret_cast<CUdeviceptr>(in);
  ops[0].dst.type = CU_MEMCPY_OPERAND_TYPE_ARRAY;
  ops[0].dst.op.array.array = arr;
  ops[0].extent = {kW, kH, 1};
  ops[0].srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
  ASSERT_CU_OK(cuMemcpy3DBatchAsync(1, ops, 0, s_));
  // Back: a 16x4 window at (8, 2), into rows of kW elements.
  ops[1].src.type = CU_MEMCPY_OPERAND_TYPE_ARRAY;
  ops[1].src.op.array.array = arr;
  ops[1].src.op.array.offset = {8, 2, 0};
  ops[1].dst.type = CU_MEMCPY_OPERAND_TYPE_POINTER;
  ops[1].dst.op.ptr.ptr = reinterpret_cast<CUdeviceptr>(out);
  ops[1].dst.op.ptr.rowLength = kW;
  ops[1].extent = {16, 4, 1};
  ops[1].srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
  ASSERT_CU_OK(cuMemcpy3DBatchAsync(1, &ops[1], 0, s_));
  ASSERT_CU_OK(cuStreamSynchronize(s_));
  for (size_t y = 0; y < 4; ++y) {
    for (size_t x = 0; x < 16; ++x)
      ASSERT_EQ(out[y * kW + x], in[(y + 2) * kW + x + 8]) << x << "," << y;
  }
  EXPECT_EQ(out[16], 0u);  // outside the window
  ops[1].extent = {0, 4, 1};
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemcpy3DBatchAsync(1, &ops[1], 0, s_));
  ops[1].extent = {16, 4, 1};
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemcpy3DBatchAsync(1, &ops[1], 1, s_));  // flags must be 0
  ops[1].dst.op.ptr.rowLength = 8;  // shorter than the copy's width
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemcpy3DBatchAsync(1, &ops[1], 0, s_));
  EXPECT_CU_OK(cuArrayDestroy(arr));
}

// The CUDA 12.8 entry point (with failIdx), exported under its own name.
using Batch128 = CUresult(CUDAAPI*)(CUdeviceptr*, CUdeviceptr*, size_t*, size_t,
                                    CUmemcpyAttributes*, size_t*, size_t, size_t*, CUstream);

class SimBatchCopyTest : public BatchCopyTest {};

TEST_F(SimBatchCopyTest, Cuda128FormReportsTheFailingCopy) {
  SKIP_UNLESS_SIM();
  auto fn = reinterpret_cast<Batch128>(dlsym(RTLD_DEFAULT, "cuMemcpyBatchAsync"));
  ASSERT_NE(fn, nullptr);
  CUdeviceptr dsts[] = {dev_bufs_[0], dev_bufs_[1]};
  CUdeviceptr srcs[] = {H(0), H(1)};
  // The second overruns its allocation (even a VMM-backed one under libvgpu).
  size_t sizes[] = {64, size_t{1} << 30};
  CUmemcpyAttributes a[] = {Order(CU_MEMCPY_SRC_ACCESS_ORDER_STREAM)};
  size_t idx[] = {0};
  size_t fail = 0;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, fn(dsts, srcs, sizes, 2, a, idx, 1, &fail, s_));
  EXPECT_EQ(fail, 1u);
  sizes[1] = 64;
  EXPECT_CU_OK(fn(dsts, srcs, sizes, 2, a, idx, 1, &fail, s_));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, fn(dsts, srcs, sizes, 0, a, idx, 1, &fail, s_));
  EXPECT_EQ(fail, SIZE_MAX);
  EXPECT_CU_OK(cuStreamSynchronize(s_));
}

// ---- managed-memory batches and stream attachment -------------------------

class ManagedBatchTest : public ContextTest {
 protected:
  void SetUp() override {
    ContextTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    if (Attr(dev_, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS) == 0)
      GTEST_SKIP() << "no concurrent managed access";
    ASSERT_CU_OK(cuStreamCreate(&s_, CU_STREAM_NON_BLOCKING));
    ASSERT_CU_OK(cuMemAllocManaged(&m_, kBytes, CU_MEM_ATTACH_GLOBAL));
  }
  void TearDown() override {
    if (s_ != nullptr) cuStreamDestroy(s_);
    if (m_ != 0) cuMemFree(m_);
    ContextTest::TearDown();
  }
  int LastPrefetch(CUdeviceptr p, size_t n) {
    int v = -2;
    EXPECT_CU_OK(
        cuMemRangeGetAttribute(&v, 4, CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, p, n));
    return v;
  }
  static constexpr size_t kBytes = 1 << 20;
  CUstream s_ = nullptr;
  CUdeviceptr m_ = 0;
};

TEST_F(ManagedBatchTest, PrefetchBatchAppliesEachGroupsLocation) {
  const size_t half = kBytes / 2;
  CUdeviceptr p[] = {m_, m_ + half};
  size_t sizes[] = {half, half};
  CUmemLocation locs[2]{};
  locs[0].type = CU_MEM_LOCATION_TYPE_DEVICE;
  locs[0].id = dev_;
  locs[1].type = CU_MEM_LOCATION_TYPE_HOST;
  size_t idx[] = {0, 1};
  ASSERT_CU_OK(cuMemPrefetchBatchAsync(p, sizes, 2, locs, idx, 2, 0, s_));
  ASSERT_CU_OK(cuStreamSynchronize(s_));
  EXPECT_EQ(LastPrefetch(m_, half), dev_);
  EXPECT_EQ(LastPrefetch(m_ + half, half), CU_DEVICE_CPU);
  EXPECT_CU_OK(cuMemDiscardBatchAsync(p, sizes, 2, 0, s_));
  EXPECT_CU_OK(cuMemDiscardAndPrefetchBatchAsync(p, sizes, 2, locs, idx, 1, 0, s_));
  ASSERT_CU_OK(cuStreamSynchronize(s_));
  EXPECT_EQ(LastPrefetch(m_ + half, half), dev_);
}

TEST_F(ManagedBatchTest, BatchesRejectInvalidArguments) {
  CUdeviceptr d = 0;
  ASSERT_CU_OK(cuMemAlloc(&d, 4096));
  CUdeviceptr p[] = {m_};
  CUdeviceptr dp[] = {d};
  size_t sizes[] = {4096};
  CUmemLocation loc{};
  loc.type = CU_MEM_LOCATION_TYPE_DEVICE;
  loc.id = dev_;
  size_t idx[] = {0};
  size_t bad_idx[] = {1};
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE,
            cuMemPrefetchBatchAsync(p, sizes, 1, &loc, idx, 1, 1, s_));  // flags
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE,
            cuMemPrefetchBatchAsync(p, sizes, 1, &loc, bad_idx, 1, 0, s_));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemPrefetchBatchAsync(p, sizes, 0, &loc, idx, 1, 0, s_));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemPrefetchBatchAsync(dp, sizes, 1, &loc, idx, 1, 0, s_));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemDiscardBatchAsync(dp, sizes, 1, 0, s_));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemDiscardBatchAsync(p, sizes, 1, 1, s_));
  EXPECT_CU_OK(cuMemFree(d));
}

TEST_F(ManagedBatchTest, StreamAttachMemAsync) {
  for (unsigned flags : {CU_MEM_ATTACH_GLOBAL, CU_MEM_ATTACH_HOST, CU_MEM_ATTACH_SINGLE}) {
    SCOPED_TRACE(flags);
    EXPECT_CU_OK(cuStreamAttachMemAsync(s_, m_, 0, flags));
    EXPECT_CU_OK(cuStreamAttachMemAsync(s_, m_, kBytes, flags));
  }
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuStreamAttachMemAsync(nullptr, m_, 0, CU_MEM_ATTACH_SINGLE));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuStreamAttachMemAsync(s_, m_, 0, 0));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE,
            cuStreamAttachMemAsync(s_, m_, 0, CU_MEM_ATTACH_GLOBAL | CU_MEM_ATTACH_HOST));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE,
            cuStreamAttachMemAsync(s_, m_, kBytes / 2, CU_MEM_ATTACH_GLOBAL));
  EXPECT_CU_OK(cuStreamSynchronize(s_));
}

// ---- memory pools: access, current pool, IPC of a non-IPC pool -----------

class PoolAccessTest : public ContextTest {
 protected:
  void SetUp() override {
    ContextTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    CUmemPoolProps props{};
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.handleTypes = CU_MEM_HANDLE_TYPE_NONE;
    props.location = {CU_MEM_LOCATION_TYPE_DEVICE, dev_};
    ASSERT_CU_OK(cuMemPoolCreate(&pool_, &props));
  }
  void TearDown() override {
    if (pool_ != nullptr) cuMemPoolDestroy(pool_);
    ContextTest::TearDown();
  }
  static CUmemAccessDesc Access(int dev, CUmemAccess_flags f) {
    CUmemAccessDesc d{};
    d.location = {CU_MEM_LOCATION_TYPE_DEVICE, dev};
    d.flags = f;
    return d;
  }
  CUmemoryPool pool_ = nullptr;
};

TEST_F(PoolAccessTest, SetAccessOnTheOwnDevice) {
  CUmemAccessDesc rw = Access(dev_, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  EXPECT_CU_OK(cuMemPoolSetAccess(pool_, &rw, 1));
  CUmemLocation loc{CU_MEM_LOCATION_TYPE_DEVICE, dev_};
  CUmemAccess_flags f = CU_MEM_ACCESS_FLAGS_PROT_NONE;
  ASSERT_CU_OK(cuMemPoolGetAccess(&f, pool_, &loc));
  EXPECT_EQ(f, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  CUmemAccessDesc bad = rw;
  bad.location.type = CU_MEM_LOCATION_TYPE_INVALID;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemPoolSetAccess(pool_, &bad, 1));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemPoolSetAccess(pool_, nullptr, 1));
}

TEST_F(PoolAccessTest, SetMemPoolMakesThePoolCurrent) {
  CUmemLocation loc{CU_MEM_LOCATION_TYPE_DEVICE, dev_};
  CUmemoryPool def = nullptr, cur = nullptr;
  ASSERT_CU_OK(cuMemGetDefaultMemPool(&def, &loc, CU_MEM_ALLOCATION_TYPE_PINNED));
  ASSERT_CU_OK(cuMemSetMemPool(&loc, CU_MEM_ALLOCATION_TYPE_PINNED, pool_));
  ASSERT_CU_OK(cuMemGetMemPool(&cur, &loc, CU_MEM_ALLOCATION_TYPE_PINNED));
  EXPECT_EQ(cur, pool_);
  ASSERT_CU_OK(cuDeviceGetMemPool(&cur, dev_));
  EXPECT_EQ(cur, pool_);
  ASSERT_CU_OK(cuMemSetMemPool(&loc, CU_MEM_ALLOCATION_TYPE_PINNED, def));
  ASSERT_CU_OK(cuMemGetMemPool(&cur, &loc, CU_MEM_ALLOCATION_TYPE_PINNED));
  EXPECT_EQ(cur, def);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE,
            cuMemSetMemPool(nullptr, CU_MEM_ALLOCATION_TYPE_PINNED, pool_));
}

// cuda.h: only a pool created with a handle type other than NONE is IPC-capable.
TEST_F(PoolAccessTest, NonIpcPoolDoesNotExport) {
  int fd = -1;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemPoolExportToShareableHandle(
                                          &fd, pool_, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
  CUdeviceptr p = 0;
  ASSERT_CU_OK(cuMemAllocFromPoolAsync(&p, 4096, pool_, nullptr));
  CUmemPoolPtrExportData data{};
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemPoolExportPointer(&data, p));
  EXPECT_CU_OK(cuMemFreeAsync(p, nullptr));
  EXPECT_CU_OK(cuStreamSynchronize(nullptr));
}

class SimPoolAccessTest : public PoolAccessTest {};

// The sim: no IPC-capable pools; the own device cannot lose its access.
TEST_F(SimPoolAccessTest, NoIpcPoolsAndTheOwnDeviceKeepsAccess) {
  SKIP_UNLESS_SIM();
  EXPECT_EQ(Attr(dev_, CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES),
            CU_MEM_HANDLE_TYPE_NONE);
  CUmemPoolProps props{};
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  props.location = {CU_MEM_LOCATION_TYPE_DEVICE, dev_};
  CUmemoryPool ipc = nullptr;
  EXPECT_CU(CUDA_ERROR_NOT_SUPPORTED, cuMemPoolCreate(&ipc, &props));
  CUmemAccessDesc none = Access(dev_, CU_MEM_ACCESS_FLAGS_PROT_NONE);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE,
            cuMemPoolSetAccess(pool_, &none, 1));  // its own device keeps access
}

// A peer with a path to the pool's device gets access, and loses it again.
TEST_F(PoolAccessTest, PeerAccessFollowsThePeerPath) {
  int count = 0;
  ASSERT_CU_OK(cuDeviceGetCount(&count));
  if (count < 2) GTEST_SKIP() << "one device";
  const CUdevice peer_dev = dev_ == 0 ? 1 : 0;
  int can = 0;
  ASSERT_CU_OK(cuDeviceCanAccessPeer(&can, peer_dev, dev_));
  CUmemAccessDesc peer = Access(peer_dev, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  CUmemLocation loc{CU_MEM_LOCATION_TYPE_DEVICE, peer_dev};
  CUmemAccess_flags f = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  ASSERT_CU_OK(cuMemPoolGetAccess(&f, pool_, &loc));
  EXPECT_EQ(f, CU_MEM_ACCESS_FLAGS_PROT_NONE);
  if (can == 0) {
    if (IsSim()) {
      EXPECT_CU(CUDA_ERROR_INVALID_DEVICE, cuMemPoolSetAccess(pool_, &peer, 1));
    }
    return;
  }
  ASSERT_CU_OK(cuMemPoolSetAccess(pool_, &peer, 1));
  ASSERT_CU_OK(cuMemPoolGetAccess(&f, pool_, &loc));
  EXPECT_EQ(f, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  peer.flags = CU_MEM_ACCESS_FLAGS_PROT_NONE;
  ASSERT_CU_OK(cuMemPoolSetAccess(pool_, &peer, 1));
  ASSERT_CU_OK(cuMemPoolGetAccess(&f, pool_, &loc));
  EXPECT_EQ(f, CU_MEM_ACCESS_FLAGS_PROT_NONE);
}

// ---- hardware the simulated device does not have --------------------------

class SimAbsentHardwareTest : public ContextTest {};

TEST_F(SimAbsentHardwareTest, AnswersAsAGpuWithoutTheFeature) {
  SKIP_UNLESS_SIM();
  EXPECT_EQ(Attr(dev_, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED), 0);
  EXPECT_EQ(Attr(dev_, CU_DEVICE_ATTRIBUTE_SPARSE_CUDA_ARRAY_SUPPORTED), 0);
  CUdeviceptr d = 0;
  ASSERT_CU_OK(cuMemAlloc(&d, 1 << 21));
  int fd = -1;
  EXPECT_CU(CUDA_ERROR_NOT_SUPPORTED,
            cuMemGetHandleForAddressRange(&fd, d, 1 << 21, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0));
  EXPECT_CU(
      CUDA_ERROR_INVALID_VALUE,
      cuMemGetHandleForAddressRange(nullptr, d, 1 << 21, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0));
  CUmemDecompressParams params{};
  size_t err = 0;
  EXPECT_CU(CUDA_ERROR_NOT_SUPPORTED, cuMemBatchDecompressAsync(&params, 1, 0, &err, nullptr));
  EXPECT_EQ(err, SIZE_MAX);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemBatchDecompressAsync(&params, 1, 1, &err, nullptr));
  char attrs[64] = {};
  EXPECT_CU(CUDA_ERROR_NOT_SUPPORTED,
            cuDeviceGetNvSciSyncAttributes(attrs, dev_, CUDA_NVSCISYNC_ATTR_SIGNAL));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuDeviceGetNvSciSyncAttributes(attrs, dev_, 0));
  EXPECT_EQ(Attr(dev_, CU_DEVICE_ATTRIBUTE_COOPERATIVE_MULTI_DEVICE_LAUNCH), 0);
  using MultiLaunch = CUresult(CUDAAPI*)(CUDA_LAUNCH_PARAMS*, unsigned, unsigned);
  auto multi =
      reinterpret_cast<MultiLaunch>(dlsym(RTLD_DEFAULT, "cuLaunchCooperativeKernelMultiDevice"));
  ASSERT_NE(multi, nullptr);
  CUDA_LAUNCH_PARAMS lp{};
  EXPECT_CU(CUDA_ERROR_NOT_SUPPORTED, multi(&lp, 1, 0));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, multi(nullptr, 1, 0));
  CUarrayMapInfo info{};
  EXPECT_CU(CUDA_ERROR_NOT_SUPPORTED, cuMemMapArrayAsync(&info, 1, nullptr));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemMapArrayAsync(nullptr, 1, nullptr));
  EXPECT_CU_OK(cuMemFree(d));
}

}  // namespace
}  // namespace vgpu::conformance
