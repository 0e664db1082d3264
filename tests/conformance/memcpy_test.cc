// Copies and memsets, synchronous and asynchronous, 1D and 2D, with data
// verification.
#include <cudaTypedefs.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <numeric>

#include "test_util.h"

namespace vgpu::conformance {
namespace {

class MemcpyTest : public ContextTest {
 protected:
  void SetUp() override {
    ContextTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    ASSERT_CU_OK(cuMemAlloc(&a_, kBytes));
    ASSERT_CU_OK(cuMemAlloc(&b_, kBytes));
    pattern_.resize(kBytes / 4);
    for (size_t i = 0; i < pattern_.size(); ++i)
      pattern_[i] = static_cast<uint32_t>(i * 2654435761u);
  }
  void TearDown() override {
    if (a_ != 0) cuMemFree(a_);
    if (b_ != 0) cuMemFree(b_);
    ContextTest::TearDown();
  }
  static constexpr size_t kBytes = 1 << 20;
  CUdeviceptr a_ = 0, b_ = 0;
  std::vector<uint32_t> pattern_;
};

TEST_F(MemcpyTest, HtoDDtoDDtoH) {
  ASSERT_CU_OK(cuMemcpyHtoD(a_, pattern_.data(), kBytes));
  ASSERT_CU_OK(cuMemcpyDtoD(b_, a_, kBytes));
  std::vector<uint32_t> back(kBytes / 4, 0);
  ASSERT_CU_OK(cuMemcpyDtoH(back.data(), b_, kBytes));
  EXPECT_EQ(back, pattern_);
  // Partial copy at an offset.
  ASSERT_CU_OK(cuMemcpyDtoD(b_ + 4, a_ + 1024, 8));
  uint32_t two[3];
  ASSERT_CU_OK(cuMemcpyDtoH(two, b_, 12));
  EXPECT_EQ(two[0], pattern_[0]);
  EXPECT_EQ(two[1], pattern_[256]);
  EXPECT_EQ(two[2], pattern_[257]);
}

TEST_F(MemcpyTest, GenericMemcpyUsesUnifiedAddressing) {
  ASSERT_CU_OK(cuMemcpy(a_, reinterpret_cast<CUdeviceptr>(pattern_.data()), kBytes));  // H->D
  ASSERT_CU_OK(cuMemcpy(b_, a_, kBytes));                                              // D->D
  std::vector<uint32_t> back(kBytes / 4, 0);
  ASSERT_CU_OK(cuMemcpy(reinterpret_cast<CUdeviceptr>(back.data()), b_, kBytes));  // D->H
  EXPECT_EQ(back, pattern_);
}

TEST_F(MemcpyTest, CopiesWithFreedOrUnknownDevicePointersFail) {
  CUdeviceptr freed;
  ASSERT_CU_OK(cuMemAlloc(&freed, kBytes));
  ASSERT_CU_OK(cuMemFree(freed));
  std::vector<uint8_t> host(64);
  EXPECT_NE(CUDA_SUCCESS, cuMemcpyHtoD(freed, host.data(), 16));
  EXPECT_NE(CUDA_SUCCESS, cuMemcpyDtoH(host.data(), freed, 16));
  EXPECT_NE(CUDA_SUCCESS, cuMemcpyDtoD(a_, freed, 16));
  EXPECT_NE(CUDA_SUCCESS, cuMemcpyDtoH(host.data(), 0x10, 16));
  // Still usable.
  EXPECT_CU_OK(cuMemcpyHtoD(a_, host.data(), 16));
  EXPECT_CU_OK(cuCtxSynchronize());
}

TEST_F(MemcpyTest, Memset8_16_32) {
  ASSERT_CU_OK(cuMemsetD32(a_, 0xffffffffu, kBytes / 4));
  ASSERT_CU_OK(cuMemsetD8(a_ + 1, 0x42, 5));
  ASSERT_CU_OK(cuMemsetD16(a_ + 8, 0xbeef, 3));
  ASSERT_CU_OK(cuMemsetD32(a_ + 16, 0x01020304u, 2));
  uint8_t h[32];
  ASSERT_CU_OK(cuMemcpyDtoH(h, a_, sizeof h));
  EXPECT_EQ(h[0], 0xff);
  for (int i = 1; i <= 5; ++i) EXPECT_EQ(h[i], 0x42) << i;
  EXPECT_EQ(h[6], 0xff);
  uint16_t s[4];
  memcpy(s, h + 8, 8);
  EXPECT_EQ(s[0], 0xbeef);
  EXPECT_EQ(s[2], 0xbeef);
  EXPECT_EQ(s[3], 0xffff);
  uint32_t w[3];
  memcpy(w, h + 16, 12);
  EXPECT_EQ(w[0], 0x01020304u);
  EXPECT_EQ(w[1], 0x01020304u);
  EXPECT_EQ(w[2], 0xffffffffu);
  // Misaligned destinations.
  EXPECT_NE(CUDA_SUCCESS, cuMemsetD32(a_ + 2, 0, 1));
  EXPECT_NE(CUDA_SUCCESS, cuMemsetD16(a_ + 1, 0, 1));
}

TEST_F(MemcpyTest, Memcpy2DWithPitches) {
  const size_t kWidth = 80, kHeight = 16, kHostPitch = 100;
  CUdeviceptr d;
  size_t dpitch;
  ASSERT_CU_OK(cuMemAllocPitch(&d, &dpitch, kWidth, kHeight, 4));
  ASSERT_CU_OK(cuMemsetD8(d, 0xee, dpitch * kHeight));
  std::vector<uint8_t> src(kHostPitch * kHeight), dst(kHostPitch * kHeight, 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7 + 3);
  CUDA_MEMCPY2D up{};
  up.srcMemoryType = CU_MEMORYTYPE_HOST;
  up.srcHost = src.data();
  up.srcPitch = kHostPitch;
  up.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  up.dstDevice = d;
  up.dstPitch = dpitch;
  up.WidthInBytes = kWidth;
  up.Height = kHeight;
  ASSERT_CU_OK(cuMemcpy2D(&up));
  // The padding of each device row is untouched.
  std::vector<uint8_t> raw(dpitch * kHeight);
  ASSERT_CU_OK(cuMemcpyDtoH(raw.data(), d, raw.size()));
  for (size_t r = 0; r < kHeight; ++r) {
    EXPECT_EQ(0, memcmp(&raw[r * dpitch], &src[r * kHostPitch], kWidth)) << "row " << r;
    EXPECT_EQ(raw[r * dpitch + kWidth], 0xee) << "row " << r;
  }
  CUDA_MEMCPY2D down{};
  down.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  down.srcDevice = d;
  down.srcPitch = dpitch;
  down.srcXInBytes = 4;
  down.srcY = 2;
  down.dstMemoryType = CU_MEMORYTYPE_HOST;
  down.dstHost = dst.data();
  down.dstPitch = kHostPitch;
  down.WidthInBytes = kWidth - 4;
  down.Height = kHeight - 2;
  CUstream s;
  ASSERT_CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  ASSERT_CU_OK(cuMemcpy2DAsync(&down, s));
  ASSERT_CU_OK(cuStreamSynchronize(s));
  for (size_t r = 0; r < kHeight - 2; ++r)
    EXPECT_EQ(0, memcmp(&dst[r * kHostPitch], &src[(r + 2) * kHostPitch + 4], kWidth - 4))
        << "row " << r;
  EXPECT_EQ(dst[kWidth - 4], 0);  // beyond the copied width
  // A pitch smaller than the width is invalid.
  up.srcPitch = kWidth - 1;
  EXPECT_NE(CUDA_SUCCESS, cuMemcpy2D(&up));
  ASSERT_CU_OK(cuStreamDestroy(s));
  ASSERT_CU_OK(cuMemFree(d));
}

TEST_F(MemcpyTest, Memset2D) {
  const size_t kWidthElems = 10, kHeight = 6;
  CUdeviceptr d;
  size_t pitch;
  ASSERT_CU_OK(cuMemAllocPitch(&d, &pitch, kWidthElems * 4, kHeight, 4));
  ASSERT_CU_OK(cuMemsetD8(d, 0, pitch * kHeight));
  ASSERT_CU_OK(cuMemsetD2D32(d, pitch, 0xa0a0a0a0u, kWidthElems, kHeight));
  ASSERT_CU_OK(cuMemsetD2D16(d + 2 * pitch, pitch, 0x1234, 3, 2));
  ASSERT_CU_OK(cuMemsetD2D8(d + 5 * pitch, pitch, 0x7f, 5, 1));
  std::vector<uint8_t> raw(pitch * kHeight);
  ASSERT_CU_OK(cuMemcpyDtoH(raw.data(), d, raw.size()));
  auto u32 = [&](size_t row, size_t col) {
    uint32_t v;
    memcpy(&v, &raw[row * pitch + col * 4], 4);
    return v;
  };
  EXPECT_EQ(u32(0, 0), 0xa0a0a0a0u);
  EXPECT_EQ(u32(1, 9), 0xa0a0a0a0u);
  EXPECT_EQ(raw[0 * pitch + 40], 0) << "padding touched";
  uint16_t h;
  memcpy(&h, &raw[2 * pitch + 4], 2);
  EXPECT_EQ(h, 0x1234);
  memcpy(&h, &raw[3 * pitch + 4], 2);
  EXPECT_EQ(h, 0x1234);
  memcpy(&h, &raw[3 * pitch + 6], 2);
  EXPECT_EQ(h, 0xa0a0);
  EXPECT_EQ(u32(4, 0), 0xa0a0a0a0u);
  EXPECT_EQ(raw[5 * pitch + 4], 0x7f);
  EXPECT_EQ(raw[5 * pitch + 5], 0xa0);
  CUstream s;
  ASSERT_CU_OK(cuStreamCreate(&s, 0));
  ASSERT_CU_OK(cuMemsetD2D32Async(d, pitch, 1, kWidthElems, kHeight, s));
  ASSERT_CU_OK(cuMemsetD2D16Async(d, pitch, 2, 1, 1, s));
  ASSERT_CU_OK(cuMemsetD2D8Async(d + pitch, pitch, 3, 1, 1, s));
  ASSERT_CU_OK(cuStreamSynchronize(s));
  ASSERT_CU_OK(cuMemcpyDtoH(raw.data(), d, raw.size()));
  EXPECT_EQ(u32(0, 0), 0x00000002u);  // little endian: the low half was overwritten
  EXPECT_EQ(u32(1, 0), 0x00000003u);
  EXPECT_EQ(u32(5, 9), 1u);
  ASSERT_CU_OK(cuStreamDestroy(s));
  ASSERT_CU_OK(cuMemFree(d));
}

TEST_F(MemcpyTest, AsyncCopiesAndMemsetsOnStreams) {
  CUstream s;
  ASSERT_CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  void* pinned = nullptr;
  ASSERT_CU_OK(cuMemAllocHost(&pinned, kBytes));
  memcpy(pinned, pattern_.data(), kBytes);
  ASSERT_CU_OK(cuMemcpyHtoDAsync(a_, pinned, kBytes, s));
  ASSERT_CU_OK(cuMemcpyDtoDAsync(b_, a_, kBytes, s));
  ASSERT_CU_OK(cuMemsetD32Async(b_, 0xabcdef01u, 4, s));
  ASSERT_CU_OK(cuMemsetD16Async(b_ + 16, 0x2222, 2, s));
  ASSERT_CU_OK(cuMemsetD8Async(b_ + 20, 0x33, 1, s));
  ASSERT_CU_OK(cuStreamSynchronize(s));
  memset(pinned, 0, kBytes);  // the stream has consumed it
  ASSERT_CU_OK(cuMemcpyDtoHAsync(pinned, b_, kBytes, s));
  ASSERT_CU_OK(cuStreamSynchronize(s));
  const uint32_t* got = static_cast<const uint32_t*>(pinned);
  EXPECT_EQ(got[0], 0xabcdef01u);
  EXPECT_EQ(got[3], 0xabcdef01u);
  EXPECT_EQ(got[4], 0x22222222u);
  EXPECT_EQ(got[5] & 0xff, 0x33u);
  EXPECT_EQ(got[5] >> 8, pattern_[5] >> 8);
  EXPECT_EQ(0, memcmp(got + 6, pattern_.data() + 6, kBytes - 24));
  // Pageable host memory and the generic async copy.
  std::vector<uint32_t> pageable(kBytes / 4, 0);
  ASSERT_CU_OK(cuMemcpyAsync(reinterpret_cast<CUdeviceptr>(pageable.data()), a_, kBytes, s));
  ASSERT_CU_OK(cuStreamSynchronize(s));
  EXPECT_EQ(pageable, pattern_);
  ASSERT_CU_OK(cuMemFreeHost(pinned));
  ASSERT_CU_OK(cuStreamDestroy(s));
}

TEST_F(MemcpyTest, AsyncCopiesAreOrderedOnAStream) {
  CUstream s;
  ASSERT_CU_OK(cuStreamCreate(&s, 0));
  void* pinned = nullptr;
  ASSERT_CU_OK(cuMemAllocHost(&pinned, 4 * 64));
  uint32_t* h = static_cast<uint32_t*>(pinned);
  for (uint32_t i = 0; i < 64; ++i) {
    ASSERT_CU_OK(cuMemsetD32Async(a_, i, 1, s));
    ASSERT_CU_OK(cuMemcpyDtoHAsync(h + i, a_, 4, s));
  }
  ASSERT_CU_OK(cuStreamSynchronize(s));
  for (uint32_t i = 0; i < 64; ++i) EXPECT_EQ(h[i], i);
  ASSERT_CU_OK(cuMemFreeHost(pinned));
  ASSERT_CU_OK(cuStreamDestroy(s));
}

TEST_F(MemcpyTest, Memcpy3D) {
  // A 3D box of 16 x 4 x 3 u32 from a host volume with padding into linear
  // device memory.
  const size_t kW = 16, kH = 4, kD = 3, kHostPitch = 20 * 4, kHostHeight = 5;
  std::vector<uint32_t> src(kHostPitch / 4 * kHostHeight * kD);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint32_t>(i + 1000);
  CUDA_MEMCPY3D c{};
  c.srcMemoryType = CU_MEMORYTYPE_HOST;
  c.srcHost = src.data();
  c.srcPitch = kHostPitch;
  c.srcHeight = kHostHeight;
  c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  c.dstDevice = a_;
  c.dstPitch = kW * 4;
  c.dstHeight = kH;
  c.WidthInBytes = kW * 4;
  c.Height = kH;
  c.Depth = kD;
  ASSERT_CU_OK(cuMemcpy3D(&c));
  std::vector<uint32_t> dense = ReadU32(a_, kW * kH * kD);
  for (size_t z = 0; z < kD; ++z)
    for (size_t y = 0; y < kH; ++y)
      for (size_t x = 0; x < kW; ++x)
        ASSERT_EQ(dense[(z * kH + y) * kW + x], src[(z * kHostHeight + y) * (kHostPitch / 4) + x])
            << x << "," << y << "," << z;
}

TEST_F(MemcpyTest, HostToArrayAndBack) {
  CUDA_ARRAY_DESCRIPTOR desc{};
  desc.Format = CU_AD_FORMAT_UNSIGNED_INT32;
  desc.NumChannels = 1;
  desc.Width = 256;
  desc.Height = 0;  // 1D array
  CUarray arr;
  ASSERT_CU_OK(cuArrayCreate(&arr, &desc));
  // Resolved at run time so that the suite links against a driver lacking them.
  PFN_cuMemcpyHtoA_v3020 htoa = nullptr;
  PFN_cuMemcpyAtoH_v3020 atoh = nullptr;
  CUdriverProcAddressQueryResult st;
  ASSERT_CU_OK(cuGetProcAddress("cuMemcpyHtoA", reinterpret_cast<void**>(&htoa), 3020, 0, &st));
  ASSERT_CU_OK(cuGetProcAddress("cuMemcpyAtoH", reinterpret_cast<void**>(&atoh), 3020, 0, &st));
  ASSERT_NE(htoa, nullptr);
  ASSERT_NE(atoh, nullptr);
  ASSERT_CU_OK(htoa(arr, 0, pattern_.data(), 256 * 4));
  std::vector<uint32_t> back(256, 0);
  ASSERT_CU_OK(atoh(back.data(), arr, 16, 128 * 4));
  EXPECT_EQ(0, memcmp(back.data(), pattern_.data() + 4, 128 * 4));
  ASSERT_CU_OK(cuArrayDestroy(arr));
}

// Pageable copies bigger than a driver's staging buffer, of an odd size, in
// both directions and from the asynchronous entry points too: every byte
// arrives (the driver, and the simulator, copy them through bounce buffers).
TEST_F(MemcpyTest, PageableCopiesLargerThanTheStagingBuffer) {
  const size_t n = (3u << 20) + 123;
  CUdeviceptr d = 0;
  ASSERT_CU_OK(cuMemAlloc(&d, n));
  std::vector<uint8_t> src(n), back(n, 0), back_async(n, 0);
  for (size_t i = 0; i < n; ++i) src[i] = static_cast<uint8_t>(i * 131 + (i >> 20));
  ASSERT_CU_OK(cuMemcpyHtoD(d, src.data(), n));
  ASSERT_CU_OK(cuMemcpyDtoH(back.data(), d, n));
  EXPECT_TRUE(back == src);
  CUstream s;
  ASSERT_CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  // On s itself: a non-blocking stream does not wait for the legacy stream,
  // so a cuMemsetD8 (asynchronous for device memory) could land after the copy.
  ASSERT_CU_OK(cuMemsetD8Async(d, 0, n, s));
  ASSERT_CU_OK(cuMemcpyHtoDAsync(d, src.data(), n, s));
  ASSERT_CU_OK(cuMemcpyDtoHAsync(back_async.data(), d, n, s));
  ASSERT_CU_OK(cuStreamSynchronize(s));
  EXPECT_TRUE(back_async == src);
  ASSERT_CU_OK(cuStreamDestroy(s));
  ASSERT_CU_OK(cuMemFree(d));
}

class SimMemcpyTest : public MemcpyTest {
 protected:
  // Pages of [p, p+n) the host kernel has resident.
  static size_t ResidentPages(void* p, size_t n) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    std::vector<unsigned char> v((n + page - 1) / page);
    if (mincore(p, n, v.data()) != 0) return 0;
    size_t k = 0;
    for (unsigned char c : v) k += c & 1;
    return k;
  }
};

// Page-locked memory is resident from the call that makes it so, as the
// driver pins every page then: a DMA into it never faults pages in (the
// simulator populates cuMemHostAlloc memory and faults a registered range in).
TEST_F(SimMemcpyTest, PageLockedHostMemoryIsResidentFromTheStart) {
  SKIP_UNLESS_SIM();
  const size_t n = 8u << 20, pages = n / static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* pinned = nullptr;
  ASSERT_CU_OK(cuMemHostAlloc(&pinned, n, CU_MEMHOSTALLOC_PORTABLE));
  EXPECT_EQ(ResidentPages(pinned, n), pages) << "cuMemHostAlloc memory is not resident";
  ASSERT_CU_OK(cuMemFreeHost(pinned));
  void* mine = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mine, MAP_FAILED);
  ASSERT_EQ(ResidentPages(mine, n), 0u);
  ASSERT_CU_OK(cuMemHostRegister(mine, n, CU_MEMHOSTREGISTER_PORTABLE));
  EXPECT_EQ(ResidentPages(mine, n), pages) << "a registered range is not resident";
  ASSERT_CU_OK(cuMemHostUnregister(mine));
  munmap(mine, n);
}

}  // namespace
}  // namespace vgpu::conformance
