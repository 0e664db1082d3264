// Device, pitched, managed and pinned host memory; memory info and pointer
// attributes; stream-ordered allocation and memory pools; arrays.
#include <sys/mman.h>
#include <sys/wait.h>

#include <cstdlib>
#include <cstring>

#include "test_util.h"

namespace vgpu::conformance {
namespace {

class MemoryTest : public ContextTest {
 protected:
  // Host -> array -> host, `row_bytes` x `rows`, with bytes that differ per offset.
  static void ExpectArrayRoundTrip(CUarray arr, size_t row_bytes, size_t rows) {
    std::vector<uint8_t> src(row_bytes * rows), dst(src.size(), 0);
    for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7 + 3);
    CUDA_MEMCPY2D c{};
    c.srcMemoryType = CU_MEMORYTYPE_HOST;
    c.srcHost = src.data();
    c.srcPitch = row_bytes;
    c.dstMemoryType = CU_MEMORYTYPE_ARRAY;
    c.dstArray = arr;
    c.WidthInBytes = row_bytes;
    c.Height = rows;
    ASSERT_CU_OK(cuMemcpy2D(&c));
    CUDA_MEMCPY2D b{};
    b.srcMemoryType = CU_MEMORYTYPE_ARRAY;
    b.srcArray = arr;
    b.dstMemoryType = CU_MEMORYTYPE_HOST;
    b.dstHost = dst.data();
    b.dstPitch = row_bytes;
    b.WidthInBytes = row_bytes;
    b.Height = rows;
    ASSERT_CU_OK(cuMemcpy2D(&b));
    EXPECT_EQ(src, dst);
  }
};

TEST_F(MemoryTest, AllocFreeAndMemGetInfo) {
  size_t free0, total;
  ASSERT_CU_OK(cuMemGetInfo(&free0, &total));
  const size_t kBytes = size_t{256} << 20;
  CUdeviceptr p = 0;
  ASSERT_CU_OK(cuMemAlloc(&p, kBytes));
  EXPECT_NE(p, 0u);
  EXPECT_EQ(p % 256, 0u) << "allocations are at least 256-byte aligned";
  size_t free1;
  ASSERT_CU_OK(cuMemGetInfo(&free1, &total));
  EXPECT_LE(free1 + kBytes, free0) << "free memory did not drop by the allocation";
  ASSERT_CU_OK(cuMemFree(p));
  size_t free2;
  ASSERT_CU_OK(cuMemGetInfo(&free2, &total));
  EXPECT_GE(free2, free1 + kBytes / 2);
  if (IsSim()) {
    EXPECT_EQ(free2, free0);
  }
}

TEST_F(MemoryTest, ZeroBytesAndBadFree) {
  CUdeviceptr p = 0;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemAlloc(&p, 0));
  ASSERT_CU_OK(cuMemAlloc(&p, 4096));
  ASSERT_CU_OK(cuMemFree(p));
  EXPECT_NE(CUDA_SUCCESS, cuMemFree(p)) << "double free accepted";
  EXPECT_NE(CUDA_SUCCESS, cuMemFree(0x1234));
}

TEST_F(MemoryTest, DistinctAllocationsDoNotOverlap) {
  CUdeviceptr a, b;
  ASSERT_CU_OK(cuMemAlloc(&a, 1 << 20));
  ASSERT_CU_OK(cuMemAlloc(&b, 1 << 20));
  EXPECT_TRUE(a + (1 << 20) <= b || b + (1 << 20) <= a);
  ASSERT_CU_OK(cuMemsetD32(a, 1, (1 << 20) / 4));
  ASSERT_CU_OK(cuMemsetD32(b, 2, (1 << 20) / 4));
  EXPECT_EQ(ReadU32(a + (1 << 20) - 4, 1)[0], 1u);
  EXPECT_EQ(ReadU32(b, 1)[0], 2u);
  ASSERT_CU_OK(cuMemFree(a));
  ASSERT_CU_OK(cuMemFree(b));
}

TEST_F(MemoryTest, OutOfMemoryLeaksNothing) {
  size_t free0, total;
  ASSERT_CU_OK(cuMemGetInfo(&free0, &total));
  CUdeviceptr p = 0;
  EXPECT_CU(CUDA_ERROR_OUT_OF_MEMORY, cuMemAlloc(&p, total + (size_t{1} << 30)));
  size_t free1;
  ASSERT_CU_OK(cuMemGetInfo(&free1, &total));
  if (IsSim()) {
    EXPECT_EQ(free1, free0);
  }
  // The context is still usable.
  ASSERT_CU_OK(cuMemAlloc(&p, 4096));
  ASSERT_CU_OK(cuMemFree(p));
}

TEST_F(MemoryTest, SimCapacityIsEnforcedExactly) {
  SKIP_UNLESS_SIM();
  size_t free0, total;
  ASSERT_CU_OK(cuMemGetInfo(&free0, &total));
  const size_t kSlack = size_t{64} << 20;
  CUdeviceptr big = 0, more = 0;
  ASSERT_CU_OK(cuMemAlloc(&big, free0 - kSlack));  // lazily backed: costs nothing
  EXPECT_CU(CUDA_ERROR_OUT_OF_MEMORY, cuMemAlloc(&more, 2 * kSlack));
  ASSERT_CU_OK(cuMemAlloc(&more, kSlack / 2));
  ASSERT_CU_OK(cuMemFree(more));
  ASSERT_CU_OK(cuMemFree(big));
  size_t free1;
  ASSERT_CU_OK(cuMemGetInfo(&free1, &total));
  EXPECT_EQ(free1, free0);
}

TEST_F(MemoryTest, AllocPitch) {
  CUdeviceptr p;
  size_t pitch = 0;
  const size_t kWidth = 1000, kHeight = 10;
  ASSERT_CU_OK(cuMemAllocPitch(&p, &pitch, kWidth, kHeight, 4));
  int align = 0;
  ASSERT_CU_OK(cuDeviceGetAttribute(&align, CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT, dev_));
  EXPECT_GE(pitch, kWidth);
  ASSERT_GT(align, 0);
  EXPECT_EQ(pitch % static_cast<size_t>(align), 0u) << "pitch " << pitch;
  CUdeviceptr base;
  size_t size = 0;
  ASSERT_CU_OK(cuMemGetAddressRange(&base, &size, p));
  EXPECT_GE(size, pitch * kHeight);
  ASSERT_CU_OK(cuMemFree(p));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemAllocPitch(&p, &pitch, kWidth, kHeight, 3));
}

TEST_F(MemoryTest, AddressRangeOfInteriorPointer) {
  CUdeviceptr p;
  const size_t kBytes = 3 * 4096 + 100;
  ASSERT_CU_OK(cuMemAlloc(&p, kBytes));
  CUdeviceptr base = 0;
  size_t size = 0;
  ASSERT_CU_OK(cuMemGetAddressRange(&base, &size, p + 5000));
  EXPECT_EQ(base, p);
  EXPECT_GE(size, kBytes);
  ASSERT_CU_OK(cuMemGetAddressRange(&base, nullptr, p + kBytes - 1));
  EXPECT_EQ(base, p);
  ASSERT_CU_OK(cuMemFree(p));
  EXPECT_NE(CUDA_SUCCESS, cuMemGetAddressRange(&base, &size, p + 5000));
}

TEST_F(MemoryTest, PointerAttributesOfDeviceMemory) {
  CUdeviceptr p;
  const size_t kBytes = 1 << 20;
  ASSERT_CU_OK(cuMemAlloc(&p, kBytes));
  unsigned type = 0;
  ASSERT_CU_OK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p + 10));
  EXPECT_EQ(type, unsigned{CU_MEMORYTYPE_DEVICE});
  int ordinal = -1;
  ASSERT_CU_OK(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p));
  EXPECT_EQ(ordinal, 0);
  CUcontext ctx = nullptr;
  ASSERT_CU_OK(cuPointerGetAttribute(&ctx, CU_POINTER_ATTRIBUTE_CONTEXT, p));
  EXPECT_EQ(ctx, ctx_);
  CUdeviceptr start = 0;
  ASSERT_CU_OK(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, p + 77));
  EXPECT_EQ(start, p);
  size_t size = 0;
  ASSERT_CU_OK(cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, p + 77));
  EXPECT_GE(size, kBytes);
  int managed = -1;
  ASSERT_CU_OK(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, p));
  EXPECT_EQ(managed, 0);
  CUdeviceptr dptr = 0;
  ASSERT_CU_OK(cuPointerGetAttribute(&dptr, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, p));
  EXPECT_EQ(dptr, p);

  CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                 CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                 CU_POINTER_ATTRIBUTE_IS_MANAGED, CU_POINTER_ATTRIBUTE_CONTEXT};
  unsigned t2 = 0;
  int o2 = -1, m2 = -1;
  CUcontext c2 = nullptr;
  void* data[] = {&t2, &o2, &m2, &c2};
  ASSERT_CU_OK(cuPointerGetAttributes(4, attrs, data, p));
  EXPECT_EQ(t2, unsigned{CU_MEMORYTYPE_DEVICE});
  EXPECT_EQ(o2, 0);
  EXPECT_EQ(m2, 0);
  EXPECT_EQ(c2, ctx_);
  ASSERT_CU_OK(cuMemFree(p));
}

TEST_F(MemoryTest, PointerAttributesOfUnknownPointer) {
  std::vector<char> host(64);
  CUdeviceptr hp = reinterpret_cast<CUdeviceptr>(host.data());
  unsigned type = 0;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE,
            cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, hp));
  // cuPointerGetAttributes does not fail: attributes get their null values.
  CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_CONTEXT};
  unsigned t = 77;
  CUcontext c = reinterpret_cast<CUcontext>(1);
  void* data[] = {&t, &c};
  ASSERT_CU_OK(cuPointerGetAttributes(2, attrs, data, hp));
  EXPECT_EQ(t, 0u);
  EXPECT_EQ(c, nullptr);
}

TEST_F(MemoryTest, ManagedMemoryIsHostAccessible) {
  CUdeviceptr p;
  const size_t kCount = 4096;
  ASSERT_CU_OK(cuMemAllocManaged(&p, kCount * 4, CU_MEM_ATTACH_GLOBAL));
  uint32_t* host = reinterpret_cast<uint32_t*>(p);
  for (size_t i = 0; i < kCount; ++i) host[i] = static_cast<uint32_t>(i);
  std::vector<uint32_t> back = ReadU32(p, kCount);
  EXPECT_EQ(back[4095], 4095u);
  ASSERT_CU_OK(cuMemsetD32(p, 7, kCount));
  ASSERT_CU_OK(cuCtxSynchronize());
  EXPECT_EQ(host[0], 7u);
  EXPECT_EQ(host[kCount - 1], 7u);
  int managed = 0;
  ASSERT_CU_OK(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, p));
  EXPECT_EQ(managed, 1);
  ASSERT_CU_OK(cuMemFree(p));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemAllocManaged(&p, 0, CU_MEM_ATTACH_GLOBAL));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMemAllocManaged(&p, 4096, 0x100));
}

TEST_F(MemoryTest, PinnedHostMemory) {
  void* h = nullptr;
  ASSERT_CU_OK(cuMemAllocHost(&h, 1 << 20));
  ASSERT_NE(h, nullptr);
  memset(h, 0xab, 1 << 20);  // host accessible
  unsigned type = 0;
  ASSERT_CU_OK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                     reinterpret_cast<CUdeviceptr>(h)));
  EXPECT_EQ(type, unsigned{CU_MEMORYTYPE_HOST});
  CUdeviceptr d = 0;
  ASSERT_CU_OK(cuMemHostGetDevicePointer(&d, h, 0));
  EXPECT_EQ(d, reinterpret_cast<CUdeviceptr>(h)) << "UVA: device pointer equals host pointer";
  // Device-side access through the device pointer. A synchronous memset to
  // pinned host memory is fully synchronous: no cuCtxSynchronize needed.
  ASSERT_CU_OK(cuMemsetD8(d, 0x11, 16));
  EXPECT_EQ(static_cast<unsigned char*>(h)[15], 0x11);
  EXPECT_EQ(static_cast<unsigned char*>(h)[16], 0xab);
  ASSERT_CU_OK(cuMemFreeHost(h));

  void* h2 = nullptr;
  ASSERT_CU_OK(cuMemHostAlloc(&h2, 8192, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE));
  unsigned flags = 0;
  ASSERT_CU_OK(cuMemHostGetFlags(&flags, h2));
  EXPECT_TRUE(flags & CU_MEMHOSTALLOC_DEVICEMAP);
  EXPECT_TRUE(flags & CU_MEMHOSTALLOC_PORTABLE);
  ASSERT_CU_OK(cuMemFreeHost(h2));
}

TEST_F(MemoryTest, HostRegister) {
  const size_t kBytes = 64 * 1024;
  void* h = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(h, MAP_FAILED);
  unsigned type = 0;
  EXPECT_NE(CUDA_SUCCESS, cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                                reinterpret_cast<CUdeviceptr>(h)));
  ASSERT_CU_OK(cuMemHostRegister(h, kBytes, CU_MEMHOSTREGISTER_DEVICEMAP));
  ASSERT_CU_OK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                     reinterpret_cast<CUdeviceptr>(h)));
  EXPECT_EQ(type, unsigned{CU_MEMORYTYPE_HOST});
  CUdeviceptr d = 0;
  ASSERT_CU_OK(cuMemHostGetDevicePointer(&d, h, 0));
  CUdeviceptr dev;
  ASSERT_CU_OK(cuMemAlloc(&dev, kBytes));
  ASSERT_CU_OK(cuMemsetD32(dev, 0x5a5a5a5a, kBytes / 4));
  ASSERT_CU_OK(cuMemcpyDtoD(d, dev, kBytes));
  ASSERT_CU_OK(cuCtxSynchronize());  // device-to-device copies do not block the host
  EXPECT_EQ(static_cast<uint32_t*>(h)[kBytes / 4 - 1], 0x5a5a5a5au);
  EXPECT_NE(CUDA_SUCCESS, cuMemHostRegister(h, kBytes, 0)) << "registered twice";
  ASSERT_CU_OK(cuMemHostUnregister(h));
  EXPECT_NE(CUDA_SUCCESS, cuMemHostUnregister(h));
  ASSERT_CU_OK(cuMemFree(dev));
  munmap(h, kBytes);
}

TEST_F(MemoryTest, ArrayCreateAndDescriptor) {
  CUDA_ARRAY_DESCRIPTOR desc{};
  desc.Format = CU_AD_FORMAT_UNSIGNED_INT32;
  desc.NumChannels = 1;
  desc.Width = 64;
  desc.Height = 16;
  CUarray arr = nullptr;
  ASSERT_CU_OK(cuArrayCreate(&arr, &desc));
  CUDA_ARRAY_DESCRIPTOR got{};
  ASSERT_CU_OK(cuArrayGetDescriptor(&got, arr));
  EXPECT_EQ(got.Format, CU_AD_FORMAT_UNSIGNED_INT32);
  EXPECT_EQ(got.NumChannels, 1u);
  EXPECT_EQ(got.Width, 64u);
  EXPECT_EQ(got.Height, 16u);

  ExpectArrayRoundTrip(arr, 64 * 4, 16);
  ASSERT_CU_OK(cuArrayDestroy(arr));

  desc.NumChannels = 3;  // 1, 2 or 4
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuArrayCreate(&arr, &desc));
}

// A mipmapped array: each level halves every dimension down to 1, a level
// beyond the last is refused, its levels are arrays that copies accept, and
// destroying it gives the memory back.
TEST_F(MemoryTest, MipmappedArrayLevels) {
  size_t free0 = 0, total = 0;
  ASSERT_CU_OK(cuMemGetInfo(&free0, &total));
  CUDA_ARRAY3D_DESCRIPTOR desc{};
  desc.Format = CU_AD_FORMAT_UNSIGNED_INT8;
  desc.NumChannels = 4;
  desc.Width = 64;
  desc.Height = 16;
  CUmipmappedArray mip = nullptr;
  // No level asked for makes one; more than the chain has make the chain
  // (64 wide: 7), as driver 580 does (docs/gpu-validation.md).
  for (auto [asked, want] : {std::pair{0u, 1u}, std::pair{8u, 7u}}) {
    ASSERT_CU_OK(cuMipmappedArrayCreate(&mip, &desc, asked));
    unsigned made = 0;
    CUarray level = nullptr;
    while (made < 64 && cuMipmappedArrayGetLevel(&level, mip, made) == CUDA_SUCCESS) ++made;
    EXPECT_EQ(made, want) << asked << " levels asked for";
    ASSERT_CU_OK(cuMipmappedArrayDestroy(mip));
  }
  ASSERT_CU_OK(cuMipmappedArrayCreate(&mip, &desc, 7));
  const size_t widths[] = {64, 32, 16, 8, 4, 2, 1}, heights[] = {16, 8, 4, 2, 1, 1, 1};
  for (unsigned l = 0; l < 7; ++l) {
    CUarray level = nullptr;
    ASSERT_CU_OK(cuMipmappedArrayGetLevel(&level, mip, l));
    CUDA_ARRAY3D_DESCRIPTOR got{};
    ASSERT_CU_OK(cuArray3DGetDescriptor(&got, level));
    EXPECT_EQ(got.Width, widths[l]) << "level " << l;
    EXPECT_EQ(got.Height, heights[l]) << "level " << l;
    EXPECT_EQ(got.Format, CU_AD_FORMAT_UNSIGNED_INT8);
    EXPECT_EQ(got.NumChannels, 4u);
  }
  CUarray level = nullptr;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuMipmappedArrayGetLevel(&level, mip, 7));

  // Level 1 (32 x 8 texels of 4 bytes) round trip.
  ASSERT_CU_OK(cuMipmappedArrayGetLevel(&level, mip, 1));
  ExpectArrayRoundTrip(level, 32 * 4, 8);

  ASSERT_CU_OK(cuMipmappedArrayDestroy(mip));
  size_t free1 = 0;
  ASSERT_CU_OK(cuMemGetInfo(&free1, &total));
  if (IsSim()) {  // a real driver may keep freed memory cached; a stale handle is undefined
    EXPECT_EQ(free1, free0);
    EXPECT_CU(CUDA_ERROR_INVALID_HANDLE, cuMipmappedArrayGetLevel(&level, mip, 0));
  }
}

TEST_F(MemoryTest, SimHostDereferenceOfDevicePointerFaults) {
  SKIP_UNLESS_SIM();
  int status = 0;
  // Under ASan its own SEGV handler would report and exit instead of dying.
  std::string out = RunChild({"deref"}, {"ASAN_OPTIONS=handle_segv=0"}, &status);
  EXPECT_NE(out.find("setup 0"), std::string::npos) << out;
  EXPECT_EQ(out.find("survived"), std::string::npos) << out;
  ASSERT_TRUE(WIFSIGNALED(status)) << "child exited normally: " << out;
  EXPECT_EQ(WTERMSIG(status), SIGSEGV);
}

// ---- Stream-ordered allocation ------------------------------------------

class StreamOrderedAllocTest : public ContextTest {};

TEST_F(StreamOrderedAllocTest, AllocAsyncFreeAsync) {
  CUstream s;
  ASSERT_CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUdeviceptr p = 0;
  const size_t kCount = 1 << 16;
  ASSERT_CU_OK(cuMemAllocAsync(&p, kCount * 4, s));
  EXPECT_NE(p, 0u);
  ASSERT_CU_OK(cuMemsetD32Async(p, 0xfeed, kCount, s));
  std::vector<uint32_t> host(kCount);
  ASSERT_CU_OK(cuMemcpyDtoHAsync(host.data(), p, kCount * 4, s));
  ASSERT_CU_OK(cuMemFreeAsync(p, s));
  ASSERT_CU_OK(cuStreamSynchronize(s));
  EXPECT_EQ(host[0], 0xfeedu);
  EXPECT_EQ(host[kCount - 1], 0xfeedu);
  CUmemoryPool def = nullptr, cur = nullptr;
  ASSERT_CU_OK(cuDeviceGetDefaultMemPool(&def, dev_));
  ASSERT_CU_OK(cuDeviceGetMemPool(&cur, dev_));
  EXPECT_NE(def, nullptr);
  EXPECT_EQ(def, cur);
  ASSERT_CU_OK(cuStreamDestroy(s));
}

TEST_F(StreamOrderedAllocTest, PoolAttributes) {
  CUmemoryPool pool;
  ASSERT_CU_OK(cuDeviceGetDefaultMemPool(&pool, dev_));
  cuuint64_t threshold = 1;
  ASSERT_CU_OK(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold));
  EXPECT_EQ(threshold, 0u);
  cuuint64_t big = UINT64_MAX;
  ASSERT_CU_OK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &big));
  ASSERT_CU_OK(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold));
  EXPECT_EQ(threshold, UINT64_MAX);
  cuuint64_t zero = 0;
  ASSERT_CU_OK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &zero));
}

TEST_F(StreamOrderedAllocTest, CreatedPool) {
  CUmemPoolProps props{};
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.handleTypes = CU_MEM_HANDLE_TYPE_NONE;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = 0;
  CUmemoryPool pool = nullptr;
  ASSERT_CU_OK(cuMemPoolCreate(&pool, &props));
  CUstream s;
  ASSERT_CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  const size_t kBytes = 4 << 20;
  CUdeviceptr p = 0;
  ASSERT_CU_OK(cuMemAllocFromPoolAsync(&p, kBytes, pool, s));
  ASSERT_CU_OK(cuStreamSynchronize(s));
  CUmemoryPool owner = nullptr;
  ASSERT_CU_OK(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, p));
  EXPECT_EQ(owner, pool);
  cuuint64_t used = 0, reserved = 0;
  ASSERT_CU_OK(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used));
  ASSERT_CU_OK(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved));
  EXPECT_GE(used, kBytes);
  EXPECT_GE(reserved, used);
  ASSERT_CU_OK(cuMemsetD8Async(p, 3, kBytes, s));
  unsigned char last = 0;
  ASSERT_CU_OK(cuMemcpyDtoHAsync(&last, p + kBytes - 1, 1, s));
  ASSERT_CU_OK(cuMemFreeAsync(p, s));
  ASSERT_CU_OK(cuStreamSynchronize(s));
  EXPECT_EQ(last, 3);
  ASSERT_CU_OK(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used));
  EXPECT_EQ(used, 0u);
  ASSERT_CU_OK(cuMemPoolTrimTo(pool, 0));
  ASSERT_CU_OK(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved));
  EXPECT_EQ(reserved, 0u);
  ASSERT_CU_OK(cuStreamDestroy(s));
  ASSERT_CU_OK(cuMemPoolDestroy(pool));

  props.location.id = 999;
  EXPECT_NE(CUDA_SUCCESS, cuMemPoolCreate(&pool, &props));
}

TEST_F(StreamOrderedAllocTest, PoolMemoryCountsAgainstCapacity) {
  SKIP_UNLESS_SIM();
  size_t free0, total;
  ASSERT_CU_OK(cuMemGetInfo(&free0, &total));
  CUstream s;
  ASSERT_CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUdeviceptr p = 0;
  ASSERT_CU_OK(cuMemAllocAsync(&p, total - (size_t{32} << 20), s));
  ASSERT_CU_OK(cuStreamSynchronize(s));
  CUdeviceptr q = 0;
  EXPECT_CU(CUDA_ERROR_OUT_OF_MEMORY, cuMemAlloc(&q, size_t{256} << 20));
  ASSERT_CU_OK(cuMemFreeAsync(p, s));
  ASSERT_CU_OK(cuStreamSynchronize(s));
  CUmemoryPool pool;
  ASSERT_CU_OK(cuDeviceGetDefaultMemPool(&pool, dev_));
  ASSERT_CU_OK(cuMemPoolTrimTo(pool, 0));
  ASSERT_CU_OK(cuMemAlloc(&q, size_t{256} << 20));
  ASSERT_CU_OK(cuMemFree(q));
  ASSERT_CU_OK(cuStreamDestroy(s));
}

}  // namespace
}  // namespace vgpu::conformance
