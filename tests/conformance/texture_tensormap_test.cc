// Texture and surface objects, legacy texture references, tensor maps and
// IPC handles (issue 16: these used to be NOT_SUPPORTED stubs in the
// simulator). Portable suites assert only what cuda.h documents; Sim* suites
// hold the simulator's own answers.
#include <unistd.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "test_util.h"

// The texture reference API is deprecated but still exported and answered.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace vgpu::conformance {
namespace {

int Attr(CUdevice dev, CUdevice_attribute a) {
  int v = -1;
  EXPECT_CU_OK(cuDeviceGetAttribute(&v, a, dev));
  return v;
}

CUDA_TEXTURE_DESC NormalizedLinearTex() {
  CUDA_TEXTURE_DESC t{};
  t.addressMode[0] = CU_TR_ADDRESS_MODE_WRAP;
  t.addressMode[1] = CU_TR_ADDRESS_MODE_MIRROR;
  t.addressMode[2] = CU_TR_ADDRESS_MODE_BORDER;
  t.filterMode = CU_TR_FILTER_MODE_LINEAR;
  t.flags = CU_TRSF_NORMALIZED_COORDINATES;
  t.maxAnisotropy = 4;
  t.mipmapFilterMode = CU_TR_FILTER_MODE_LINEAR;
  t.mipmapLevelBias = 0.5f;
  t.maxMipmapLevelClamp = 3.0f;
  return t;
}

// A context, a 64 x 32 float array (surface load/store enabled), a 4-level
// mipmapped array and 1 MiB of device memory.
class TextureTest : public ContextTest {
 protected:
  void SetUp() override {
    ContextTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    CUDA_ARRAY3D_DESCRIPTOR d{};
    d.Width = 64, d.Height = 32, d.Format = CU_AD_FORMAT_FLOAT, d.NumChannels = 1;
    d.Flags = CUDA_ARRAY3D_SURFACE_LDST;
    ASSERT_CU_OK(cuArray3DCreate(&array_, &d));
    d.Flags = 0;
    ASSERT_CU_OK(cuArray3DCreate(&plain_array_, &d));
    ASSERT_CU_OK(cuMipmappedArrayCreate(&mipmap_, &d, 4));
    ASSERT_CU_OK(cuMemAlloc(&mem_, kBytes));
    pitch_align_ = static_cast<size_t>(Attr(dev_, CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT));
  }
  void TearDown() override {
    if (mem_ != 0) cuMemFree(mem_);
    if (mipmap_ != nullptr) cuMipmappedArrayDestroy(mipmap_);
    if (plain_array_ != nullptr) cuArrayDestroy(plain_array_);
    if (array_ != nullptr) cuArrayDestroy(array_);
    ContextTest::TearDown();
  }

  CUDA_RESOURCE_DESC ArrayRes(CUarray a) const {
    CUDA_RESOURCE_DESC r{};
    r.resType = CU_RESOURCE_TYPE_ARRAY;
    r.res.array.hArray = a;
    return r;
  }
  CUDA_RESOURCE_DESC LinearRes() const {
    CUDA_RESOURCE_DESC r{};
    r.resType = CU_RESOURCE_TYPE_LINEAR;
    r.res.linear.devPtr = mem_;
    r.res.linear.format = CU_AD_FORMAT_UNSIGNED_INT32;
    r.res.linear.numChannels = 2;
    r.res.linear.sizeInBytes = kBytes;
    return r;
  }
  CUDA_RESOURCE_DESC Pitch2DRes() const {
    CUDA_RESOURCE_DESC r{};
    r.resType = CU_RESOURCE_TYPE_PITCH2D;
    r.res.pitch2D.devPtr = mem_;
    r.res.pitch2D.format = CU_AD_FORMAT_FLOAT;
    r.res.pitch2D.numChannels = 4;
    r.res.pitch2D.width = 100;
    r.res.pitch2D.height = 64;
    r.res.pitch2D.pitchInBytes = (100 * 16 + pitch_align_ - 1) / pitch_align_ * pitch_align_;
    return r;
  }

  static constexpr size_t kBytes = size_t{1} << 20;
  CUarray array_ = nullptr, plain_array_ = nullptr;
  CUmipmappedArray mipmap_ = nullptr;
  CUdeviceptr mem_ = 0;
  size_t pitch_align_ = 32;
};

TEST_F(TextureTest, ObjectKeepsItsDescriptors) {
  const CUDA_RESOURCE_DESC res = ArrayRes(array_);
  const CUDA_TEXTURE_DESC tex = NormalizedLinearTex();
  CUtexObject t = 0;
  ASSERT_CU_OK(cuTexObjectCreate(&t, &res, &tex, nullptr));
  CUDA_RESOURCE_DESC got_res{};
  ASSERT_CU_OK(cuTexObjectGetResourceDesc(&got_res, t));
  EXPECT_EQ(got_res.resType, CU_RESOURCE_TYPE_ARRAY);
  EXPECT_EQ(got_res.res.array.hArray, array_);
  CUDA_TEXTURE_DESC got_tex{};
  ASSERT_CU_OK(cuTexObjectGetTextureDesc(&got_tex, t));
  EXPECT_EQ(got_tex.addressMode[1], CU_TR_ADDRESS_MODE_MIRROR);
  EXPECT_EQ(got_tex.filterMode, CU_TR_FILTER_MODE_LINEAR);
  EXPECT_EQ(got_tex.flags, unsigned{CU_TRSF_NORMALIZED_COORDINATES});
  EXPECT_EQ(got_tex.maxMipmapLevelClamp, 3.0f);
  // cuda.h: no view set -> CUDA_ERROR_INVALID_VALUE.
  CUDA_RESOURCE_VIEW_DESC view{};
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuTexObjectGetResourceViewDesc(&view, t));
  EXPECT_CU_OK(cuTexObjectDestroy(t));
}

TEST_F(TextureTest, LinearPitchedAndMipmappedResources) {
  const CUDA_TEXTURE_DESC tex = NormalizedLinearTex();
  CUDA_RESOURCE_DESC mip{};
  mip.resType = CU_RESOURCE_TYPE_MIPMAPPED_ARRAY;
  mip.res.mipmap.hMipmappedArray = mipmap_;
  for (const CUDA_RESOURCE_DESC& res : {LinearRes(), Pitch2DRes(), mip}) {
    SCOPED_TRACE(res.resType);
    CUtexObject t = 0;
    ASSERT_CU_OK(cuTexObjectCreate(&t, &res, &tex, nullptr));
    CUDA_RESOURCE_DESC got{};
    ASSERT_CU_OK(cuTexObjectGetResourceDesc(&got, t));
    EXPECT_EQ(got.resType, res.resType);
    if (res.resType == CU_RESOURCE_TYPE_LINEAR) {
      EXPECT_EQ(got.res.linear.devPtr, mem_);
      EXPECT_EQ(got.res.linear.sizeInBytes, kBytes);
    } else if (res.resType == CU_RESOURCE_TYPE_PITCH2D) {
      EXPECT_EQ(got.res.pitch2D.pitchInBytes, res.res.pitch2D.pitchInBytes);
    } else {
      EXPECT_EQ(got.res.mipmap.hMipmappedArray, mipmap_);
    }
    EXPECT_CU_OK(cuTexObjectDestroy(t));
  }
}

TEST_F(TextureTest, ResourceViewIsReturned) {
  const CUDA_RESOURCE_DESC res = ArrayRes(array_);
  const CUDA_TEXTURE_DESC tex = NormalizedLinearTex();
  CUDA_RESOURCE_VIEW_DESC view{};
  view.format = CU_RES_VIEW_FORMAT_FLOAT_1X32;
  view.width = 64;
  view.height = 32;
  CUtexObject t = 0;
  ASSERT_CU_OK(cuTexObjectCreate(&t, &res, &tex, &view));
  CUDA_RESOURCE_VIEW_DESC got{};
  ASSERT_CU_OK(cuTexObjectGetResourceViewDesc(&got, t));
  EXPECT_EQ(got.format, CU_RES_VIEW_FORMAT_FLOAT_1X32);
  EXPECT_EQ(got.width, 64u);
  EXPECT_EQ(got.height, 32u);
  EXPECT_CU_OK(cuTexObjectDestroy(t));
}

// One documented rule broken per row: cuTexObjectCreate answers CUDA_ERROR_INVALID_VALUE.
struct BadTexture {
  const char* name;
  std::function<void(CUDA_RESOURCE_DESC&, CUDA_TEXTURE_DESC&, CUDA_RESOURCE_VIEW_DESC*&)> edit;
};

TEST_F(TextureTest, ObjectCreateRejectsWhatCudaHForbids) {
  CUDA_RESOURCE_VIEW_DESC bad_view{};
  bad_view.format = CU_RES_VIEW_FORMAT_FLOAT_1X32;
  bad_view.width = 63;  // must equal the array's width
  bad_view.height = 32;
  const auto max_width =
      static_cast<size_t>(Attr(dev_, CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_WIDTH));
  const CUDA_RESOURCE_DESC linear = LinearRes(), pitched = Pitch2DRes();
  const CUmipmappedArray mipmap = mipmap_;
  const size_t align = pitch_align_;
  const std::vector<BadTexture> rows = {
      {"resource flags not zero", [&](auto& r, auto&, auto*&) { r = linear, r.flags = 1; }},
      {"linear devPtr not aligned",
       [&](auto& r, auto&, auto*&) { r = linear, r.res.linear.devPtr += 4; }},
      {"pitch not a multiple of the pitch alignment",
       [&](auto& r, auto&, auto*&) { r = pitched, r.res.pitch2D.pitchInBytes += 4; }},
      {"pitch2D wider than the device allows",
       [&](auto& r, auto&, auto*&) {
         r = pitched;
         r.res.pitch2D.format = CU_AD_FORMAT_UNSIGNED_INT8;
         r.res.pitch2D.numChannels = 1;
         r.res.pitch2D.width = max_width + 1;
         r.res.pitch2D.height = 1;
         r.res.pitch2D.pitchInBytes = (max_width + 1 + align - 1) / align * align;
       }},
      {"mipmapped array without normalized coordinates",
       [&](auto& r, auto& t, auto*&) {
         r.resType = CU_RESOURCE_TYPE_MIPMAPPED_ARRAY;
         r.res.mipmap.hMipmappedArray = mipmap;
         t.flags = 0;
       }},
      {"view width differs from the array's", [&](auto&, auto&, auto*& v) { v = &bad_view; }},
  };
  for (const BadTexture& row : rows) {
    SCOPED_TRACE(row.name);
    CUDA_RESOURCE_DESC res = ArrayRes(array_);
    CUDA_TEXTURE_DESC tex = NormalizedLinearTex();
    CUDA_RESOURCE_VIEW_DESC* view = nullptr;
    row.edit(res, tex, view);
    CUtexObject t = 0;
    EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuTexObjectCreate(&t, &res, &tex, view));
  }
}

TEST_F(TextureTest, SurfaceObjectNeedsALoadStoreArray) {
  CUDA_RESOURCE_DESC res = ArrayRes(array_);
  CUsurfObject s = 0;
  ASSERT_CU_OK(cuSurfObjectCreate(&s, &res));
  CUDA_RESOURCE_DESC got{};
  ASSERT_CU_OK(cuSurfObjectGetResourceDesc(&got, s));
  EXPECT_EQ(got.resType, CU_RESOURCE_TYPE_ARRAY);
  EXPECT_EQ(got.res.array.hArray, array_);
  EXPECT_CU_OK(cuSurfObjectDestroy(s));
  // cuda.h: resType must be CU_RESOURCE_TYPE_ARRAY; flags zero.
  res = LinearRes();
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuSurfObjectCreate(&s, &res));
  res = ArrayRes(array_);
  res.flags = 1;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuSurfObjectCreate(&s, &res));
  res = ArrayRes(plain_array_);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuSurfObjectCreate(&s, &res));
}

// ---- Texture references (cuTexRefCreate) ----

TEST_F(TextureTest, TexRefStoresItsState) {
  CUtexref r = nullptr;
  ASSERT_CU_OK(cuTexRefCreate(&r));
  ASSERT_CU_OK(cuTexRefSetFormat(r, CU_AD_FORMAT_UNSIGNED_INT16, 2));
  CUarray_format fmt{};
  int channels = 0;
  ASSERT_CU_OK(cuTexRefGetFormat(&fmt, &channels, r));
  EXPECT_EQ(fmt, CU_AD_FORMAT_UNSIGNED_INT16);
  EXPECT_EQ(channels, 2);
  ASSERT_CU_OK(cuTexRefSetAddressMode(r, 1, CU_TR_ADDRESS_MODE_MIRROR));
  CUaddress_mode am{};
  ASSERT_CU_OK(cuTexRefGetAddressMode(&am, r, 1));
  EXPECT_EQ(am, CU_TR_ADDRESS_MODE_MIRROR);
  ASSERT_CU_OK(cuTexRefSetFilterMode(r, CU_TR_FILTER_MODE_LINEAR));
  CUfilter_mode fm{};
  ASSERT_CU_OK(cuTexRefGetFilterMode(&fm, r));
  EXPECT_EQ(fm, CU_TR_FILTER_MODE_LINEAR);
  ASSERT_CU_OK(cuTexRefSetFlags(r, CU_TRSF_NORMALIZED_COORDINATES | CU_TRSF_READ_AS_INTEGER));
  unsigned flags = 0;
  ASSERT_CU_OK(cuTexRefGetFlags(&flags, r));
  EXPECT_EQ(flags, unsigned{CU_TRSF_NORMALIZED_COORDINATES | CU_TRSF_READ_AS_INTEGER});
  float border[4] = {1, 2, 3, 4}, got_border[4] = {};
  ASSERT_CU_OK(cuTexRefSetBorderColor(r, border));
  ASSERT_CU_OK(cuTexRefGetBorderColor(got_border, r));
  EXPECT_EQ(0, std::memcmp(border, got_border, sizeof border));
  ASSERT_CU_OK(cuTexRefSetMaxAnisotropy(r, 8));
  int aniso = 0;
  ASSERT_CU_OK(cuTexRefGetMaxAnisotropy(&aniso, r));
  EXPECT_EQ(aniso, 8);
  ASSERT_CU_OK(cuTexRefSetMipmapLevelClamp(r, 1.0f, 5.0f));
  float lo = 0, hi = 0;
  ASSERT_CU_OK(cuTexRefGetMipmapLevelClamp(&lo, &hi, r));
  EXPECT_EQ(lo, 1.0f);
  EXPECT_EQ(hi, 5.0f);
  EXPECT_CU_OK(cuTexRefDestroy(r));
}

TEST_F(TextureTest, TexRefBindings) {
  CUtexref r = nullptr;
  ASSERT_CU_OK(cuTexRefCreate(&r));
  ASSERT_CU_OK(cuTexRefSetFormat(r, CU_AD_FORMAT_FLOAT, 1));
  // cuda.h: memory from cuMemAlloc binds at offset 0.
  size_t offset = 99;
  ASSERT_CU_OK(cuTexRefSetAddress(&offset, r, mem_, kBytes));
  EXPECT_EQ(offset, 0u);
  CUdeviceptr bound = 0;
  ASSERT_CU_OK(cuTexRefGetAddress(&bound, r));
  EXPECT_EQ(bound, mem_);
  CUarray a = nullptr;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuTexRefGetArray(&a, r));  // not bound to an array
  // An array supersedes the address and overrides the format.
  CUDA_ARRAY_DESCRIPTOR d{16, 16, CU_AD_FORMAT_SIGNED_INT8, 4};
  CUarray small = nullptr;
  ASSERT_CU_OK(cuArrayCreate(&small, &d));
  ASSERT_CU_OK(cuTexRefSetArray(r, small, CU_TRSA_OVERRIDE_FORMAT));
  ASSERT_CU_OK(cuTexRefGetArray(&a, r));
  EXPECT_EQ(a, small);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuTexRefGetAddress(&bound, r));
  CUarray_format fmt{};
  int channels = 0;
  ASSERT_CU_OK(cuTexRefGetFormat(&fmt, &channels, r));
  EXPECT_EQ(fmt, CU_AD_FORMAT_SIGNED_INT8);
  EXPECT_EQ(channels, 4);
  // A pitched 2D binding: dptr aligned, pitch a multiple of the pitch alignment.
  CUDA_ARRAY_DESCRIPTOR d2{100, 64, CU_AD_FORMAT_FLOAT, 1};
  const size_t pitch = (400 + pitch_align_ - 1) / pitch_align_ * pitch_align_;
  ASSERT_CU_OK(cuTexRefSetAddress2D(r, &d2, mem_, pitch));
  ASSERT_CU_OK(cuTexRefGetAddress(&bound, r));
  EXPECT_EQ(bound, mem_);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuTexRefSetAddress2D(r, &d2, mem_, pitch + 4));
  ASSERT_CU_OK(cuTexRefSetMipmappedArray(r, mipmap_, CU_TRSA_OVERRIDE_FORMAT));
  CUmipmappedArray m = nullptr;
  ASSERT_CU_OK(cuTexRefGetMipmappedArray(&m, r));
  EXPECT_EQ(m, mipmap_);
  EXPECT_CU_OK(cuTexRefDestroy(r));
  EXPECT_CU_OK(cuArrayDestroy(small));
}

// ---- Simulator specifics ----

class SimTextureTest : public TextureTest {
 protected:
  void SetUp() override {
    TextureTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    SKIP_UNLESS_SIM();
  }
};

TEST_F(SimTextureTest, ObjectsAreSmallIntegersAndDieOnce) {
  const CUDA_RESOURCE_DESC res = LinearRes();
  const CUDA_TEXTURE_DESC tex = NormalizedLinearTex();
  CUtexObject t1 = 0, t2 = 0;
  ASSERT_CU_OK(cuTexObjectCreate(&t1, &res, &tex, nullptr));
  ASSERT_CU_OK(cuTexObjectCreate(&t2, &res, &tex, nullptr));
  EXPECT_NE(t1, 0u);
  EXPECT_EQ(t2, t1 + 1);
  EXPECT_CU_OK(cuTexObjectDestroy(t1));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuTexObjectDestroy(t1));
  CUDA_TEXTURE_DESC got{};
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuTexObjectGetTextureDesc(&got, t1));
  // A texture object is no surface object.
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuSurfObjectDestroy(t2));
  EXPECT_CU_OK(cuTexObjectDestroy(t2));
}

TEST_F(SimTextureTest, ObjectCreateRejectsBadEnumsAndPointers) {
  CUDA_RESOURCE_DESC res = ArrayRes(array_);
  CUDA_TEXTURE_DESC tex = NormalizedLinearTex();
  CUtexObject t = 0;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuTexObjectCreate(nullptr, &res, &tex, nullptr));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuTexObjectCreate(&t, nullptr, &tex, nullptr));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuTexObjectCreate(&t, &res, nullptr, nullptr));
  const int bad = 9;
  std::memcpy(&tex.addressMode[2], &bad, sizeof bad);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuTexObjectCreate(&t, &res, &tex, nullptr));
  tex = NormalizedLinearTex();
  tex.flags = 0x100;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuTexObjectCreate(&t, &res, &tex, nullptr));
  tex = NormalizedLinearTex();
  tex.flags |= CU_TRSF_SEAMLESS_CUBEMAP;  // the array is no cubemap
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuTexObjectCreate(&t, &res, &tex, nullptr));
  tex = NormalizedLinearTex();
  std::memcpy(&res.resType, &bad, sizeof bad);
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuTexObjectCreate(&t, &res, &tex, nullptr));
  // A view of linear memory; linear memory outside any allocation.
  res = LinearRes();
  CUDA_RESOURCE_VIEW_DESC view{};
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuTexObjectCreate(&t, &res, &tex, &view));
  res.res.linear.sizeInBytes = 2 * kBytes;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuTexObjectCreate(&t, &res, &tex, nullptr));
}

TEST_F(SimTextureTest, TexRefDefaultsAndChecks) {
  CUtexref r = nullptr;
  ASSERT_CU_OK(cuTexRefCreate(&r));
  CUarray_format fmt{};
  ASSERT_CU_OK(cuTexRefGetFormat(&fmt, nullptr, r));
  EXPECT_EQ(fmt, CU_AD_FORMAT_FLOAT);
  CUdeviceptr p = 0;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuTexRefGetAddress(&p, r));  // unbound
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuTexRefSetAddressMode(r, 3, CU_TR_ADDRESS_MODE_CLAMP));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuTexRefSetFormat(r, CU_AD_FORMAT_FLOAT, 3));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuTexRefSetFlags(r, 0x100));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuTexRefSetArray(r, array_, 2));
  // A misaligned address binds the aligned base and reports the offset.
  size_t offset = 0;
  ASSERT_CU_OK(cuTexRefSetAddress(&offset, r, mem_ + 64, 4096));
  EXPECT_EQ(offset, 64u);
  ASSERT_CU_OK(cuTexRefGetAddress(&p, r));
  EXPECT_EQ(p, mem_);
  EXPECT_CU_OK(cuTexRefDestroy(r));
  EXPECT_CU(CUDA_ERROR_INVALID_HANDLE, cuTexRefDestroy(r));
  EXPECT_CU(CUDA_ERROR_INVALID_HANDLE, cuTexRefGetFormat(&fmt, nullptr, r));
  // No surface reference exists: modules carry none.
  CUarray a = nullptr;
  EXPECT_CU(CUDA_ERROR_INVALID_HANDLE, cuSurfRefGetArray(&a, reinterpret_cast<CUsurfref>(&a)));
}

TEST_F(SimTextureTest, DeviceReportsH100TextureLimits) {
  EXPECT_EQ(Attr(dev_, CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_PITCH), 2097120);
  EXPECT_EQ(Attr(dev_, CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LINEAR_WIDTH), 1 << 28);
  EXPECT_EQ(Attr(dev_, CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_DEPTH), 16384);
  EXPECT_EQ(Attr(dev_, CU_DEVICE_ATTRIBUTE_SURFACE_ALIGNMENT), 512);
  EXPECT_EQ(Attr(dev_, CU_DEVICE_ATTRIBUTE_TENSOR_MAP_ACCESS_SUPPORTED), 1);
  EXPECT_EQ(Attr(dev_, CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED), 1);  // ipc_test.cc
}

// ---- Tensor maps ----

// The arguments of cuTensorMapEncodeTiled, valid as built: a rank-3 half
// tensor of 64 x 32 x 8 elements (rows of 128 bytes), boxes of 64 x 8 x 1.
// Enum arguments are held and passed as int: a row may put a value outside
// the enum there, and loading such an enum is undefined behaviour (UBSan).
using EncodeTiledRaw = CUresult (*)(CUtensorMap*, int, cuuint32_t, void*, const cuuint64_t*,
                                    const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, int,
                                    int, int, int);

struct Tiled {
  int type = CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  cuuint32_t rank = 3;
  uintptr_t address = 0;
  cuuint64_t dims[5] = {64, 32, 8, 1, 1};
  cuuint64_t strides[4] = {128, 128 * 32, 128 * 32 * 8, 128 * 32 * 8};
  cuuint32_t box[5] = {64, 8, 1, 1, 1};
  cuuint32_t element_strides[5] = {1, 1, 1, 1, 1};
  int interleave = CU_TENSOR_MAP_INTERLEAVE_NONE;
  int swizzle = CU_TENSOR_MAP_SWIZZLE_128B;
  int l2 = CU_TENSOR_MAP_L2_PROMOTION_L2_128B;
  int oob = CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA;

  CUresult Encode(CUtensorMap* map) const {
    auto encode = reinterpret_cast<EncodeTiledRaw>(&cuTensorMapEncodeTiled);
    return encode(map, type, rank, reinterpret_cast<void*>(address), dims, strides, box,
                  element_strides, interleave, swizzle, l2, oob);
  }
};

// The arguments of cuTensorMapEncodeIm2col, valid as built: NHWC half,
// N 2, H 16, W 16, C 64, corners -1 / +1 in W and H.
struct Im2col {
  CUtensorMapDataType type = CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  cuuint32_t rank = 4;
  uintptr_t address = 0;
  cuuint64_t dims[5] = {64, 16, 16, 2, 1};
  cuuint64_t strides[4] = {128, 128 * 16, 128 * 16 * 16, 128 * 16 * 16 * 2};
  int lower[3] = {-1, -1, 0};
  int upper[3] = {1, 1, 0};
  cuuint32_t channels = 64, pixels = 128;
  cuuint32_t element_strides[5] = {1, 1, 1, 1, 1};
  CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_128B;

  CUresult Encode(CUtensorMap* map) const {
    return cuTensorMapEncodeIm2col(
        map, type, rank, reinterpret_cast<void*>(address), dims, strides, lower, upper, channels,
        pixels, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
        CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  }
};

// An out-of-range value for an enum argument (held as int, see Tiled).
template <typename E>
int BadEnum() {
  return 99;
}

class TensorMapTest : public ContextTest {
 protected:
  void SetUp() override {
    ContextTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    if (Attr(dev_, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR) < 9) {
      GTEST_SKIP() << "tensor maps need compute capability 9.0";
    }
    ASSERT_CU_OK(cuMemAlloc(&mem_, size_t{1} << 20));
  }
  void TearDown() override {
    if (mem_ != 0) cuMemFree(mem_);
    ContextTest::TearDown();
  }
  CUdeviceptr mem_ = 0;
};

struct TiledRow {
  const char* name;
  std::function<void(Tiled&)> edit;
};

TEST_F(TensorMapTest, TiledAcceptsDocumentedShapes) {
  const std::vector<TiledRow> rows = {
      {"as built", [](Tiled&) {}},
      {"rank 1", [](Tiled& t) { t.rank = 1, t.swizzle = CU_TENSOR_MAP_SWIZZLE_NONE; }},
      {"rank 5", [](Tiled& t) { t.rank = 5; }},
      {"interleave 32B with swizzle 32B",
       [](Tiled& t) {
         t.interleave = CU_TENSOR_MAP_INTERLEAVE_32B, t.swizzle = CU_TENSOR_MAP_SWIZZLE_32B;
         t.box[0] = 16;
       }},
      {"element strides up to 8", [](Tiled& t) { t.element_strides[1] = 8; }},
      {"2^32 elements in a dimension",
       [](Tiled& t) { t.rank = 2, t.dims[1] = cuuint64_t{1} << 32; }},
  };
  for (const TiledRow& row : rows) {
    SCOPED_TRACE(row.name);
    Tiled t;
    t.address = mem_;
    row.edit(t);
    alignas(64) CUtensorMap map{};
    EXPECT_CU_OK(t.Encode(&map));
  }
}

TEST_F(TensorMapTest, TiledRejectsWhatCudaHForbids) {
  const std::vector<TiledRow> rows = {
      {"address not 16-byte aligned", [](Tiled& t) { t.address += 8; }},
      {"interleave 32B, address not 32-byte aligned",
       [](Tiled& t) {
         t.interleave = CU_TENSOR_MAP_INTERLEAVE_32B, t.swizzle = CU_TENSOR_MAP_SWIZZLE_32B;
         t.address += 16;
       }},
      {"rank 0", [](Tiled& t) { t.rank = 0; }},
      {"rank 6", [](Tiled& t) { t.rank = 6; }},
      {"interleave with rank 2",
       [](Tiled& t) { t.rank = 2, t.interleave = CU_TENSOR_MAP_INTERLEAVE_16B; }},
      {"dimension 0", [](Tiled& t) { t.dims[1] = 0; }},
      {"dimension above 2^32", [](Tiled& t) { t.dims[1] = (cuuint64_t{1} << 32) + 1; }},
      {"stride not a multiple of 16", [](Tiled& t) { t.strides[0] = 136; }},
      {"stride of 2^40", [](Tiled& t) { t.strides[1] = cuuint64_t{1} << 40; }},
      {"interleave 32B, stride not a multiple of 32",
       [](Tiled& t) {
         t.interleave = CU_TENSOR_MAP_INTERLEAVE_32B, t.swizzle = CU_TENSOR_MAP_SWIZZLE_32B;
         t.box[0] = 16, t.strides[0] = 144;
       }},
      {"box 0", [](Tiled& t) { t.box[1] = 0; }},
      {"box 257", [](Tiled& t) { t.box[1] = 257; }},
      {"inner box not a multiple of 16 bytes", [](Tiled& t) { t.box[0] = 60; }},
      {"element stride 0", [](Tiled& t) { t.element_strides[1] = 0; }},
      {"element stride 9", [](Tiled& t) { t.element_strides[2] = 9; }},
      {"interleave 32B without swizzle 32B",
       [](Tiled& t) { t.interleave = CU_TENSOR_MAP_INTERLEAVE_32B; }},
      {"inner box wider than the 64B swizzle",
       [](Tiled& t) { t.swizzle = CU_TENSOR_MAP_SWIZZLE_64B; }},
      {"NaN fill for an integer type", [](Tiled& t) { t.type = CU_TENSOR_MAP_DATA_TYPE_UINT16; }},
      {"16U6 with interleave",
       [](Tiled& t) {
         t.type = CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B, t.oob = CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE;
         t.interleave = CU_TENSOR_MAP_INTERLEAVE_16B, t.dims[0] = 128, t.box[0] = 128;
       }},
      {"data type out of range", [](Tiled& t) { t.type = BadEnum<CUtensorMapDataType>(); }},
      {"swizzle out of range", [](Tiled& t) { t.swizzle = BadEnum<CUtensorMapSwizzle>(); }},
      {"L2 promotion out of range", [](Tiled& t) { t.l2 = BadEnum<CUtensorMapL2promotion>(); }},
  };
  for (const TiledRow& row : rows) {
    SCOPED_TRACE(row.name);
    Tiled t;
    t.address = mem_;
    row.edit(t);
    alignas(64) CUtensorMap map{};
    EXPECT_CU(CUDA_ERROR_INVALID_VALUE, t.Encode(&map));
  }
  // The map itself must be 64-byte aligned.
  alignas(64) unsigned char buf[sizeof(CUtensorMap) + 64];
  Tiled t;
  t.address = mem_;
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, t.Encode(reinterpret_cast<CUtensorMap*>(buf + 16)));
}

TEST_F(TensorMapTest, Im2colRules) {
  struct Row {
    const char* name;
    CUresult expected;
    std::function<void(Im2col&)> edit;
  };
  const std::vector<Row> rows = {
      {"as built", CUDA_SUCCESS, [](Im2col&) {}},
      {"rank 3", CUDA_SUCCESS, [](Im2col& c) { c.rank = 3, c.lower[0] = -300, c.upper[0] = 300; }},
      {"rank 5", CUDA_SUCCESS, [](Im2col& c) { c.rank = 5; }},
      {"rank 2", CUDA_ERROR_INVALID_VALUE, [](Im2col& c) { c.rank = 2; }},
      {"rank-4 corner beyond 127", CUDA_ERROR_INVALID_VALUE, [](Im2col& c) { c.upper[1] = 128; }},
      {"rank-5 corner below -16", CUDA_ERROR_INVALID_VALUE,
       [](Im2col& c) { c.rank = 5, c.lower[2] = -17; }},
      {"empty box", CUDA_ERROR_INVALID_VALUE,
       [](Im2col& c) { c.lower[0] = 100, c.upper[0] = -100; }},
      {"257 channels per pixel", CUDA_ERROR_INVALID_VALUE, [](Im2col& c) { c.channels = 257; }},
      {"1025 pixels per column", CUDA_ERROR_INVALID_VALUE, [](Im2col& c) { c.pixels = 1025; }},
      {"channels wider than the swizzle", CUDA_ERROR_INVALID_VALUE,
       [](Im2col& c) { c.channels = 128; }},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    Im2col c;
    c.address = mem_;
    row.edit(c);
    alignas(64) CUtensorMap map{};
    EXPECT_CU(row.expected, c.Encode(&map));
  }
}

TEST_F(TensorMapTest, ReplaceAddressKeepsTheAlignmentRule) {
  alignas(64) CUtensorMap map{};
  Tiled t;
  t.address = mem_;
  ASSERT_CU_OK(t.Encode(&map));
  EXPECT_CU_OK(cuTensorMapReplaceAddress(&map, reinterpret_cast<void*>(mem_ + 4096)));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE,
            cuTensorMapReplaceAddress(&map, reinterpret_cast<void*>(mem_ + 8)));
  t.interleave = CU_TENSOR_MAP_INTERLEAVE_32B, t.swizzle = CU_TENSOR_MAP_SWIZZLE_32B, t.box[0] = 16;
  ASSERT_CU_OK(t.Encode(&map));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE,
            cuTensorMapReplaceAddress(&map, reinterpret_cast<void*>(mem_ + 16)));
  EXPECT_CU_OK(cuTensorMapReplaceAddress(&map, reinterpret_cast<void*>(mem_ + 32)));
}

// ---- IPC ----

// Whatever the device says about IPC, the calls must agree with it.
TEST_F(TextureTest, IpcAgreesWithTheDeviceAttribute) {
  const bool ipc = Attr(dev_, CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED) != 0;
  CUipcMemHandle mh{};
  const CUresult mem_result = cuIpcGetMemHandle(&mh, mem_);
  EXPECT_EQ(mem_result == CUDA_SUCCESS, ipc) << CuName(mem_result);
  CUevent e = nullptr;
  ASSERT_CU_OK(cuEventCreate(&e, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING));
  CUipcEventHandle eh{};
  const CUresult event_result = cuIpcGetEventHandle(&eh, e);
  EXPECT_EQ(event_result == CUDA_SUCCESS, ipc) << CuName(event_result);
  EXPECT_CU_OK(cuEventDestroy(e));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuIpcGetMemHandle(nullptr, mem_));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE,
            cuIpcOpenMemHandle(nullptr, mh, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE, cuIpcOpenEventHandle(nullptr, eh));
}

// ---- Simulator specifics ----

class SimTensorMapTest : public TensorMapTest {
 protected:
  void SetUp() override {
    TensorMapTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    SKIP_UNLESS_SIM();
  }
  // conformance_child's "tensormap" on a node of its own with these devices.
  std::string RunOnOwnNode(const std::string& devices, int cc_major) {
    const std::string node =
        "conf-tmap-" + std::to_string(getpid()) + "-cc" + std::to_string(cc_major);
    int status = 0;
    std::string out =
        RunChild({"tensormap"}, {"VGPU_SIM_NODE=" + node, "VGPU_SIM_DEVICES=" + devices}, &status);
    UnlinkNodeShm(node);
    return out;
  }
};

// The documented encoding (sim/api/api_tensormap.cc): magic, address, packed enums.
TEST_F(SimTensorMapTest, EncodingCarriesTheAddress) {
  alignas(64) CUtensorMap map{};
  Tiled t;
  t.address = mem_;
  ASSERT_CU_OK(t.Encode(&map));
  EXPECT_EQ(map.opaque[0], 0x3141544d55504756ull);
  EXPECT_EQ(map.opaque[1], mem_);
  EXPECT_EQ(map.opaque[2] & 0xffff, unsigned{CU_TENSOR_MAP_DATA_TYPE_FLOAT16} | 3u << 8);
  EXPECT_EQ(map.opaque[3], 64u);
  EXPECT_EQ(map.opaque[8], 128u);
  ASSERT_CU_OK(cuTensorMapReplaceAddress(&map, reinterpret_cast<void*>(mem_ + 256)));
  EXPECT_EQ(map.opaque[1], mem_ + 256);
  // Only a map an encoder made can be updated.
  alignas(64) CUtensorMap blank{};
  EXPECT_CU(CUDA_ERROR_INVALID_VALUE,
            cuTensorMapReplaceAddress(&blank, reinterpret_cast<void*>(mem_)));
}

TEST_F(SimTensorMapTest, DeviceCapabilityGatesTheEncoders) {
  // The default devices are cc 9.0: TMA, but not the wide im2col form (10.0).
  alignas(64) CUtensorMap map{};
  cuuint64_t dims[] = {64, 32, 32, 2};
  cuuint64_t strides[] = {128, 128 * 32, 128 * 32 * 32};
  cuuint32_t ones[] = {1, 1, 1, 1};
  EXPECT_CU(CUDA_ERROR_NOT_SUPPORTED,
            cuTensorMapEncodeIm2colWide(
                &map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 4, reinterpret_cast<void*>(mem_), dims,
                strides, -1, 1, 64, 32, ones, CU_TENSOR_MAP_INTERLEAVE_NONE,
                CU_TENSOR_MAP_IM2COL_WIDE_MODE_W, CU_TENSOR_MAP_SWIZZLE_128B,
                CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  EXPECT_EQ(RunOnOwnNode("2x1GiB:cc=10.0", 10), "tiled 0\nwide 0\n");
  EXPECT_EQ(RunOnOwnNode("2x1GiB:cc=8.0", 8), "tiled 801\nwide 801\n");
}

}  // namespace
}  // namespace vgpu::conformance
