// Tensor maps (TMA descriptors). The encoders check every rule cuda.h lists
// for their parameters and fill the opaque 128-byte CUtensorMap with the
// sim's own encoding (a real driver writes the hardware's descriptor, which
// only the GPU reads; kernels in the sim run on the host and read neither):
//
//   q[0]      magic "VGPUTMA1" (what cuTensorMapReplaceAddress recognizes)
//   q[1]      globalAddress
//   q[2]      bits 0-7 data type, 8-15 rank, 16-23 interleave, 24-31 swizzle,
//             32-39 L2 promotion, 40-47 OOB fill, 48-55 kind (1 tiled,
//             2 im2col, 3 im2col wide), 56-63 im2col-wide mode
//   q[3..7]   globalDim[0..4]
//   q[8..11]  globalStrides[0..3]
//   q[12]     boxDim[0..3], 16 bits each (tiled)
//   q[13]     bits 0-15 boxDim[4]; 16-35 elementStrides[0..4], 4 bits each;
//             36-47 channelsPerPixel, 48-63 pixelsPerColumn (im2col)
//   q[14]     pixelBoxLowerCorner[0..2], 16-bit two's complement each (im2col;
//             the wide form's W offset in [0])
//   q[15]     pixelBoxUpperCorner[0..2], likewise
//
// Unused fields are 0. The devices' compute capability gates the API as on
// hardware: tiled and im2col maps need 9.0 (TMA), the wide im2col form 10.0.
#include <cstdint>
#include <cstring>

#include "sim/api/api_common.h"
#include "sim/engine/context.h"
#include "sim/engine/sim_state.h"

using namespace vgpu::sim;  // NOLINT: entry points below are the C ABI

namespace {

// The map's 16 words. CUtensorMap is declared 128-byte aligned but cuda.h
// asks callers for 64 bytes only: reach it as words, not through the
// struct's members (a misaligned member access, for UBSan).
uint64_t* Words(CUtensorMap* map) { return static_cast<uint64_t*>(static_cast<void*>(map)); }

constexpr uint64_t kMagic = 0x3141544d55504756ull;  // "VGPUTMA1" little-endian
constexpr int kTiled = 1, kIm2col = 2, kIm2colWide = 3;

// Everything the three encoders share, as passed (enums as raw integers).
struct Common {
  int type;
  int interleave;
  int swizzle;
  int l2;
  int oob;
  uint32_t rank;
  uintptr_t address;
  const cuuint64_t* dims;
  const cuuint64_t* strides;
  const cuuint32_t* element_strides;
};

bool Packed16B(int type) {
  return type == CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B ||
         type == CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B;
}

bool IsFloat(int type) {
  return type == CU_TENSOR_MAP_DATA_TYPE_FLOAT16 || type == CU_TENSOR_MAP_DATA_TYPE_FLOAT32 ||
         type == CU_TENSOR_MAP_DATA_TYPE_FLOAT64 || type == CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 ||
         type == CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ || type == CU_TENSOR_MAP_DATA_TYPE_TFLOAT32 ||
         type == CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ;
}

// Element size in 4-bit units, so that the packed 16 x U4 type (half a byte
// per value) is exact; the 16-byte-aligned packed types take one byte per value.
uint64_t ElementNibbles(int type) {
  static constexpr uint64_t kNibbles[] = {2, 4, 8, 8, 16, 16, 4, 8, 16, 4, 8, 8, 8, 1, 2, 2};
  return kNibbles[type];
}

bool AddressAligned(int type, int interleave, uintptr_t address) {
  const bool wide = interleave == CU_TENSOR_MAP_INTERLEAVE_32B || Packed16B(type);
  return address % (wide ? 32 : 16) == 0;
}

bool InRange(int v, int lo, int hi) { return v >= lo && v <= hi; }

bool EnumsInRange(const Common& c) {
  return InRange(c.type, CU_TENSOR_MAP_DATA_TYPE_UINT8, CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B) &&
         InRange(c.interleave, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_INTERLEAVE_32B) &&
         InRange(c.swizzle, CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_SWIZZLE_128B_ATOM_64B) &&
         InRange(c.l2, CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_256B) &&
         InRange(c.oob, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
                 CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA);
}

// The swizzle modes cuda.h allows for each packed type, interleave 32B's
// only swizzle, and which types may ask for the NaN OOB fill.
bool CombinationAllowed(const Common& c) {
  if (c.interleave == CU_TENSOR_MAP_INTERLEAVE_32B && c.swizzle != CU_TENSOR_MAP_SWIZZLE_32B) {
    return false;
  }
  const bool base_swizzle = c.swizzle == CU_TENSOR_MAP_SWIZZLE_NONE ||
                            c.swizzle == CU_TENSOR_MAP_SWIZZLE_128B ||
                            c.swizzle == CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B;
  if (c.type == CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B &&
      (c.interleave != CU_TENSOR_MAP_INTERLEAVE_NONE ||
       !(base_swizzle || c.swizzle == CU_TENSOR_MAP_SWIZZLE_128B_ATOM_64B))) {
    return false;
  }
  if (c.type == CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B && !base_swizzle) return false;
  return c.oob != CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA || IsFloat(c.type);
}

bool DimsValid(const Common& c) {
  if (c.dims == nullptr || (c.rank > 1 && c.strides == nullptr) || c.element_strides == nullptr) {
    return false;
  }
  for (uint32_t i = 0; i < c.rank; ++i) {
    if (c.dims[i] == 0 || c.dims[i] > (uint64_t{1} << 32)) return false;
    if (c.element_strides[i] == 0 || c.element_strides[i] > 8) return false;
  }
  if (Packed16B(c.type) && c.dims[0] % 128 != 0) return false;
  if (c.type == CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B && c.dims[0] % 2 != 0) return false;
  const bool stride32 = c.interleave == CU_TENSOR_MAP_INTERLEAVE_32B || Packed16B(c.type);
  for (uint32_t i = 0; i + 1 < c.rank; ++i) {
    if (c.strides[i] % (stride32 ? 32 : 16) != 0 || c.strides[i] >= (uint64_t{1} << 40)) {
      return false;
    }
  }
  return true;
}

// Rules of every encoder; min_rank is 1 for tiled maps, 3 for im2col ones.
bool CommonValid(const CUtensorMap* map, const Common& c, uint32_t min_rank) {
  if (map == nullptr || reinterpret_cast<uintptr_t>(map) % 64 != 0) return false;
  if (!EnumsInRange(c) || !CombinationAllowed(c)) return false;
  if (c.interleave != CU_TENSOR_MAP_INTERLEAVE_NONE && min_rank < 3) min_rank = 3;
  if (c.rank < min_rank || c.rank > 5) return false;
  return AddressAligned(c.type, c.interleave, c.address) && DimsValid(c);
}

// Without interleave, a swizzled box's inner dimension must fit the swizzle span.
bool InnerFitsSwizzle(const Common& c, uint64_t inner_nibbles) {
  if (c.interleave != CU_TENSOR_MAP_INTERLEAVE_NONE || c.swizzle == CU_TENSOR_MAP_SWIZZLE_NONE) {
    return true;
  }
  const uint64_t span = c.swizzle == CU_TENSOR_MAP_SWIZZLE_32B   ? 32
                        : c.swizzle == CU_TENSOR_MAP_SWIZZLE_64B ? 64
                                                                 : 128;
  return inner_nibbles <= 2 * span;
}

// The current context's device's compute capability, as major * 10 + minor;
// 0 without a current context.
int CurrentCapability() {
  Context* ctx = CurrentContextOrNull();
  if (ctx == nullptr) return 0;
  const DeviceState& d = Node().device(ctx->device);
  return d.cc_major * 10 + d.cc_minor;
}

// Tiled and im2col maps need TMA (9.0); encoding needs no context, as it
// writes only host memory, but one on an older device refuses.
CUresult CheckTmaDevice() {
  const int cc = CurrentCapability();
  return cc != 0 && cc < 90 ? CUDA_ERROR_NOT_SUPPORTED : CUDA_SUCCESS;
}

void Encode(CUtensorMap* map, const Common& c, int kind) {
  std::memset(map, 0, sizeof *map);
  uint64_t* q = Words(map);
  q[0] = kMagic;
  q[1] = c.address;
  q[2] = uint64_t(c.type) | uint64_t(c.rank) << 8 | uint64_t(c.interleave) << 16 |
         uint64_t(c.swizzle) << 24 | uint64_t(c.l2) << 32 | uint64_t(c.oob) << 40 |
         uint64_t(kind) << 48;
  for (uint32_t i = 0; i < c.rank; ++i) {
    q[3 + i] = c.dims[i];
    q[13] |= uint64_t(c.element_strides[i]) << (16 + 4 * i);
    if (i + 1 < c.rank) q[8 + i] = c.strides[i];
  }
}

void EncodeCorners(CUtensorMap* map, const int* lower, const int* upper, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) {
    Words(map)[14] |= uint64_t(uint16_t(lower[i])) << (16 * i);
    Words(map)[15] |= uint64_t(uint16_t(upper[i])) << (16 * i);
  }
}

Common MakeCommon(CUtensorMapDataType type, cuuint32_t rank, void* address, const cuuint64_t* dims,
                  const cuuint64_t* strides, const cuuint32_t* element_strides,
                  CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
                  CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob) {
  return Common{.type = RawEnum(type),
                .interleave = RawEnum(interleave),
                .swizzle = RawEnum(swizzle),
                .l2 = RawEnum(l2),
                .oob = RawEnum(oob),
                .rank = rank,
                .address = reinterpret_cast<uintptr_t>(address),
                .dims = dims,
                .strides = strides,
                .element_strides = element_strides};
}

bool BoxValid(const Common& c, const cuuint32_t* box) {
  if (box == nullptr) return false;
  for (uint32_t i = 0; i < c.rank; ++i) {
    if (box[i] == 0 || box[i] > 256) return false;
  }
  const uint64_t inner = box[0] * ElementNibbles(c.type);
  if (c.interleave == CU_TENSOR_MAP_INTERLEAVE_NONE && inner % 32 != 0) return false;
  if (Packed16B(c.type) && box[0] != 128) return false;
  return InnerFitsSwizzle(c, inner);
}

// The im2col channel and pixel counts, shared by both im2col forms.
bool PixelsValid(const Common& c, cuuint32_t channels, cuuint32_t pixels, bool check_pixels) {
  if (channels == 0 || channels > 256 || (Packed16B(c.type) && channels != 128)) return false;
  if (check_pixels && (pixels == 0 || pixels > 1024)) return false;
  return InnerFitsSwizzle(c, channels * ElementNibbles(c.type));
}

// The corner offsets' range shrinks with rank (cuda.h), and the box they
// bound must be non-empty in every spatial dimension (dims 1 .. rank-2).
bool CornersValid(const Common& c, const int* lower, const int* upper) {
  if (lower == nullptr || upper == nullptr) return false;
  const int limit = c.rank == 3 ? 32768 : c.rank == 4 ? 128 : 16;
  for (uint32_t i = 0; i + 2 < c.rank; ++i) {
    if (lower[i] < -limit || lower[i] >= limit || upper[i] < -limit || upper[i] >= limit) {
      return false;
    }
    if (int64_t(c.dims[1 + i]) + upper[i] - lower[i] <= 0) return false;
  }
  return true;
}

}  // namespace

SIM_EXPORT CUresult CUDAAPI cuTensorMapEncodeTiled(CUtensorMap* tensorMap, CUtensorMapDataType tensorDataType, cuuint32_t tensorRank, void* globalAddress, const cuuint64_t* globalDim, const cuuint64_t* globalStrides, const cuuint32_t* boxDim, const cuuint32_t* elementStrides, CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2Promotion, CUtensorMapFloatOOBfill oobFill) {
  SIM_ENTER("cuTensorMapEncodeTiled");
  const Common c = MakeCommon(tensorDataType, tensorRank, globalAddress, globalDim, globalStrides,
                              elementStrides, interleave, swizzle, l2Promotion, oobFill);
  if (!CommonValid(tensorMap, c, 1) || !BoxValid(c, boxDim)) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = CheckTmaDevice(); r != CUDA_SUCCESS) return r;
  Encode(tensorMap, c, kTiled);
  for (uint32_t i = 0; i < c.rank; ++i) {
    if (i < 4) {
      Words(tensorMap)[12] |= uint64_t(boxDim[i]) << (16 * i);
    } else {
      Words(tensorMap)[13] |= boxDim[i];
    }
  }
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuTensorMapEncodeIm2col(CUtensorMap* tensorMap, CUtensorMapDataType tensorDataType, cuuint32_t tensorRank, void* globalAddress, const cuuint64_t* globalDim, const cuuint64_t* globalStrides, const int* pixelBoxLowerCorner, const int* pixelBoxUpperCorner, cuuint32_t channelsPerPixel, cuuint32_t pixelsPerColumn, const cuuint32_t* elementStrides, CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2Promotion, CUtensorMapFloatOOBfill oobFill) {
  SIM_ENTER("cuTensorMapEncodeIm2col");
  const Common c = MakeCommon(tensorDataType, tensorRank, globalAddress, globalDim, globalStrides,
                              elementStrides, interleave, swizzle, l2Promotion, oobFill);
  if (!CommonValid(tensorMap, c, 3) || !CornersValid(c, pixelBoxLowerCorner, pixelBoxUpperCorner) ||
      !PixelsValid(c, channelsPerPixel, pixelsPerColumn, true)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (CUresult r = CheckTmaDevice(); r != CUDA_SUCCESS) return r;
  Encode(tensorMap, c, kIm2col);
  Words(tensorMap)[13] |= uint64_t(channelsPerPixel) << 36 | uint64_t(pixelsPerColumn) << 48;
  EncodeCorners(tensorMap, pixelBoxLowerCorner, pixelBoxUpperCorner, c.rank - 2);
  return CUDA_SUCCESS;
}

// cuda.h lists only the 64B and 128B swizzles for this form without
// interleave; the box is one pixel high and deep, so only W's offsets count.
SIM_EXPORT CUresult CUDAAPI cuTensorMapEncodeIm2colWide(CUtensorMap* tensorMap, CUtensorMapDataType tensorDataType, cuuint32_t tensorRank, void* globalAddress, const cuuint64_t* globalDim, const cuuint64_t* globalStrides, int pixelBoxLowerCornerWidth, int pixelBoxUpperCornerWidth, cuuint32_t channelsPerPixel, cuuint32_t pixelsPerColumn, const cuuint32_t* elementStrides, CUtensorMapInterleave interleave, CUtensorMapIm2ColWideMode mode, CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2Promotion, CUtensorMapFloatOOBfill oobFill) {
  SIM_ENTER("cuTensorMapEncodeIm2colWide");
  const Common c = MakeCommon(tensorDataType, tensorRank, globalAddress, globalDim, globalStrides,
                              elementStrides, interleave, swizzle, l2Promotion, oobFill);
  const int m = RawEnum(mode);
  const int lo = pixelBoxLowerCornerWidth, hi = pixelBoxUpperCornerWidth;
  if (!CommonValid(tensorMap, c, 3) || m < CU_TENSOR_MAP_IM2COL_WIDE_MODE_W ||
      m > CU_TENSOR_MAP_IM2COL_WIDE_MODE_W128 || lo < -32768 || lo > 32767 || hi < -32768 ||
      hi > 32767 || int64_t(globalDim[1]) + hi - lo <= 0 ||
      !PixelsValid(c, channelsPerPixel, pixelsPerColumn,
                   m != CU_TENSOR_MAP_IM2COL_WIDE_MODE_W128)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (c.interleave == CU_TENSOR_MAP_INTERLEAVE_NONE &&
      (c.swizzle == CU_TENSOR_MAP_SWIZZLE_NONE || c.swizzle == CU_TENSOR_MAP_SWIZZLE_32B)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (CurrentContextOrNull() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (CurrentCapability() < 100) return CUDA_ERROR_NOT_SUPPORTED;  // cuda.h: 10.0 or higher
  Encode(tensorMap, c, kIm2colWide);
  Words(tensorMap)[2] |= uint64_t(m) << 56;
  Words(tensorMap)[13] |= uint64_t(channelsPerPixel) << 36 | uint64_t(pixelsPerColumn) << 48;
  EncodeCorners(tensorMap, &lo, &hi, 1);
  return CUDA_SUCCESS;
}

// Only a map an encoder made can be updated; the new address must meet the
// alignment its data type and interleave ask for.
SIM_EXPORT CUresult CUDAAPI cuTensorMapReplaceAddress(CUtensorMap* tensorMap, void* globalAddress) {
  SIM_ENTER("cuTensorMapReplaceAddress");
  if (tensorMap == nullptr || reinterpret_cast<uintptr_t>(tensorMap) % 64 != 0 ||
      Words(tensorMap)[0] != kMagic) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const uint64_t fields = Words(tensorMap)[2];
  const int type = static_cast<int>(fields & 0xff);
  const int interleave = static_cast<int>(fields >> 16 & 0xff);
  const auto address = reinterpret_cast<uintptr_t>(globalAddress);
  if (!AddressAligned(type, interleave, address)) return CUDA_ERROR_INVALID_VALUE;
  Words(tensorMap)[1] = address;
  return CUDA_SUCCESS;
}
