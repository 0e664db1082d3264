// CUDA arrays: opaque, backed by linear device memory in row-major order.
// A mipmapped array is a set of such arrays, one per level, each level half
// the size of the one above in every dimension (layers are not halved).
#include <algorithm>
#include <mutex>
#include <unordered_set>
#include <vector>

#include "sim/api/api_common.h"
#include "sim/engine/context.h"
#include "sim/engine/copy_engine.h"
#include "sim/engine/device_memory.h"
#include "sim/engine/sim_state.h"

using namespace vgpu::sim;  // NOLINT: entry points below are the C ABI

namespace {

struct MipmappedArray {
  std::vector<ArrayObject*> levels;
};

std::mutex g_mu;
auto* g_arrays = new std::unordered_set<ArrayObject*>();
auto* g_mipmaps = new std::unordered_set<MipmappedArray*>();

CUresult CreateArray(CUarray* out, const CUDA_ARRAY3D_DESCRIPTOR& d) {
  if (out == nullptr || d.Width == 0 || FormatBytes(d.Format) == 0 ||
      (d.NumChannels != 1 && d.NumChannels != 2 && d.NumChannels != 4)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  Context* ctx = CurrentContextOrNull();
  if (ctx == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  auto* a = new ArrayObject();
  a->desc = d;
  a->device = ctx->device;
  a->row_bytes = d.Width * FormatBytes(d.Format) * d.NumChannels;
  size_t bytes = a->row_bytes * (d.Height == 0 ? 1 : d.Height) * (d.Depth == 0 ? 1 : d.Depth);
  if (CUresult r = AllocDeviceMemory(ctx->device, AsHandle(ctx), bytes, &a->mem); r != CUDA_SUCCESS) {
    delete a;
    return r;
  }
  std::lock_guard<std::mutex> lock(g_mu);
  g_arrays->insert(a);
  *out = reinterpret_cast<CUarray>(a);
  return CUDA_SUCCESS;
}

void DestroyArray(ArrayObject* a) {
  FreeDeviceMemory(a->mem);
  delete a;
}

// Levels a mipmapped array of this extent can have: down to 1 in the largest
// dimension.
unsigned MaxLevels(const CUDA_ARRAY3D_DESCRIPTOR& d) {
  size_t extent = std::max({d.Width, d.Height, (d.Flags & CUDA_ARRAY3D_LAYERED) != 0 ? 0 : d.Depth});
  unsigned levels = 1;
  while (extent > 1) {
    extent >>= 1;
    ++levels;
  }
  return levels;
}

CUDA_ARRAY3D_DESCRIPTOR LevelOf(CUDA_ARRAY3D_DESCRIPTOR d, unsigned level) {
  auto half = [level](size_t v) { return v == 0 ? 0 : std::max<size_t>(1, v >> level); };
  d.Width = half(d.Width);
  d.Height = half(d.Height);
  if ((d.Flags & CUDA_ARRAY3D_LAYERED) == 0) d.Depth = half(d.Depth);
  return d;
}

void DestroyMipmap(MipmappedArray* m) {
  for (ArrayObject* a : m->levels) DestroyArray(a);
  delete m;
}

}  // namespace

namespace vgpu::sim {

bool IsLiveArray(ArrayObject* a) {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_arrays->count(a) != 0;
}

bool MipmappedArrayInfo(CUmipmappedArray h, CUDA_ARRAY3D_DESCRIPTOR* level0, unsigned* levels) {
  auto* m = reinterpret_cast<MipmappedArray*>(h);
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_mipmaps->count(m) == 0) return false;
  *level0 = m->levels[0]->desc;
  *levels = static_cast<unsigned>(m->levels.size());
  return true;
}

size_t FormatBytes(CUarray_format f) {
  switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8: case CU_AD_FORMAT_SIGNED_INT8: return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16: case CU_AD_FORMAT_SIGNED_INT16: case CU_AD_FORMAT_HALF: return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32: case CU_AD_FORMAT_SIGNED_INT32: case CU_AD_FORMAT_FLOAT: return 4;
    default: return 0;
  }
}

}  // namespace vgpu::sim

SIM_EXPORT CUresult CUDAAPI cuArrayCreate_v2(CUarray* pHandle, const CUDA_ARRAY_DESCRIPTOR* d) {
  SIM_ENTER("cuArrayCreate_v2");
  if (d == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUDA_ARRAY3D_DESCRIPTOR d3{d->Width, d->Height, 0, d->Format, d->NumChannels, 0};
  return CreateArray(pHandle, d3);
}

SIM_EXPORT CUresult CUDAAPI cuArray3DCreate_v2(CUarray* pHandle, const CUDA_ARRAY3D_DESCRIPTOR* d) {
  SIM_ENTER("cuArray3DCreate_v2");
  if (d == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return CreateArray(pHandle, *d);
}

SIM_EXPORT CUresult CUDAAPI cuArrayGetDescriptor_v2(CUDA_ARRAY_DESCRIPTOR* out, CUarray h) {
  SIM_ENTER("cuArrayGetDescriptor_v2");
  auto* a = reinterpret_cast<ArrayObject*>(h);
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!IsLiveArray(a)) return CUDA_ERROR_INVALID_HANDLE;
  *out = {a->desc.Width, a->desc.Height, a->desc.Format, a->desc.NumChannels};
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuArray3DGetDescriptor_v2(CUDA_ARRAY3D_DESCRIPTOR* out, CUarray h) {
  SIM_ENTER("cuArray3DGetDescriptor_v2");
  auto* a = reinterpret_cast<ArrayObject*>(h);
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!IsLiveArray(a)) return CUDA_ERROR_INVALID_HANDLE;
  *out = a->desc;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuArrayDestroy(CUarray h) {
  SIM_ENTER("cuArrayDestroy");
  auto* a = reinterpret_cast<ArrayObject*>(h);
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (g_arrays->count(a) == 0 || a->mipmap_level) return CUDA_ERROR_INVALID_HANDLE;
    g_arrays->erase(a);
  }
  DestroyArray(a);
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuMipmappedArrayCreate(CUmipmappedArray* pHandle,
                                                  const CUDA_ARRAY3D_DESCRIPTOR* d,
                                                  unsigned int numMipmapLevels) {
  SIM_ENTER("cuMipmappedArrayCreate");
  if (pHandle == nullptr || d == nullptr) return CUDA_ERROR_INVALID_VALUE;
  // Driver 580 makes one level when asked for none and clamps a count above
  // the full chain (64x16 asked for 0 and 8: 1 and 7 levels).
  numMipmapLevels = std::clamp(numMipmapLevels, 1u, MaxLevels(*d));
  auto* m = new MipmappedArray();
  for (unsigned l = 0; l < numMipmapLevels; ++l) {
    CUarray level = nullptr;
    if (CUresult r = CreateArray(&level, LevelOf(*d, l)); r != CUDA_SUCCESS) {
      std::lock_guard<std::mutex> lock(g_mu);
      for (ArrayObject* a : m->levels) g_arrays->erase(a);
      DestroyMipmap(m);
      return r;
    }
    m->levels.push_back(reinterpret_cast<ArrayObject*>(level));
    m->levels.back()->mipmap_level = true;
  }
  std::lock_guard<std::mutex> lock(g_mu);
  g_mipmaps->insert(m);
  *pHandle = reinterpret_cast<CUmipmappedArray>(m);
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuMipmappedArrayGetLevel(CUarray* pLevelArray,
                                                    CUmipmappedArray hMipmappedArray,
                                                    unsigned int level) {
  SIM_ENTER("cuMipmappedArrayGetLevel");
  auto* m = reinterpret_cast<MipmappedArray*>(hMipmappedArray);
  if (pLevelArray == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_mipmaps->count(m) == 0) return CUDA_ERROR_INVALID_HANDLE;
  if (level >= m->levels.size()) return CUDA_ERROR_INVALID_VALUE;
  *pLevelArray = reinterpret_cast<CUarray>(m->levels[level]);
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray) {
  SIM_ENTER("cuMipmappedArrayDestroy");
  auto* m = reinterpret_cast<MipmappedArray*>(hMipmappedArray);
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (g_mipmaps->erase(m) == 0) return CUDA_ERROR_INVALID_HANDLE;
    for (ArrayObject* a : m->levels) g_arrays->erase(a);
  }
  DestroyMipmap(m);
  return CUDA_SUCCESS;
}

// ---- Descriptor (CUDA 3.x forms), memory-requirement and sparse queries ----

namespace {

// cuda.h declares the 32-bit descriptors only for the driver's own build.
struct ArrayDescriptorV1 {
  unsigned int Width, Height;
  CUarray_format Format;
  unsigned int NumChannels;
};
struct Array3DDescriptorV1 {
  unsigned int Width, Height, Depth;
  CUarray_format Format;
  unsigned int NumChannels, Flags;
};

// Arrays are mapped in the device's 2 MiB pages (cuMemGetAllocationGranularity's answer).
constexpr size_t kArrayAlignment = size_t{2} << 20;
// Sparse arrays are tiled in 64 KiB tiles.
constexpr size_t kSparseTileBytes = size_t{64} << 10;

size_t ArrayBytes(const CUDA_ARRAY3D_DESCRIPTOR& d) {
  return d.Width * FormatBytes(d.Format) * d.NumChannels * (d.Height == 0 ? 1 : d.Height) *
         (d.Depth == 0 ? 1 : d.Depth);
}

size_t RoundUp(size_t v, size_t a) { return (v + a - 1) / a * a; }

// The 64 KiB tile's extent in elements for an element of `bytes` bytes (the
// standard tile shapes: 2D and 3D).
void TileExtent(const CUDA_ARRAY3D_DESCRIPTOR& d, CUDA_ARRAY_SPARSE_PROPERTIES* p) {
  const size_t elem = FormatBytes(d.Format) * d.NumChannels;
  const bool three_d = d.Depth > 0 && (d.Flags & CUDA_ARRAY3D_LAYERED) == 0;
  unsigned w = 256, h = 256, z = 1;  // 1-byte elements, 2D
  if (three_d) {
    // 1, 2, 4, 8, 16 bytes: 64x32x32, 32x32x32, 32x32x16, 32x16x16, 16x16x16.
    static constexpr unsigned kShape[5][3] = {{64, 32, 32}, {32, 32, 32}, {32, 32, 16}, {32, 16, 16}, {16, 16, 16}};
    size_t i = 0;
    while ((size_t{1} << i) < elem && i < 4) ++i;
    w = kShape[i][0], h = kShape[i][1], z = kShape[i][2];
  } else {
    // 1, 2, 4, 8, 16 bytes: 256x256, 256x128, 128x128, 128x64, 64x64.
    for (size_t b = 1; b < elem && b < 16; b *= 2) {
      if (h == w) h /= 2;
      else w /= 2;
    }
  }
  p->tileExtent.width = w;
  p->tileExtent.height = d.Height == 0 ? 1 : h;
  p->tileExtent.depth = z;
}

bool LiveMipmap(MipmappedArray* m) {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_mipmaps->count(m) != 0;
}

}  // namespace

#undef cuArrayGetDescriptor
#undef cuArray3DGetDescriptor

SIM_EXPORT CUresult CUDAAPI cuArrayGetDescriptor(ArrayDescriptorV1* out, CUarray h) {
  SIM_ENTER("cuArrayGetDescriptor");
  auto* a = reinterpret_cast<ArrayObject*>(h);
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!IsLiveArray(a)) return CUDA_ERROR_INVALID_HANDLE;
  *out = {static_cast<unsigned>(a->desc.Width), static_cast<unsigned>(a->desc.Height), a->desc.Format,
          a->desc.NumChannels};
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuArray3DGetDescriptor(Array3DDescriptorV1* out, CUarray h) {
  SIM_ENTER("cuArray3DGetDescriptor");
  auto* a = reinterpret_cast<ArrayObject*>(h);
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!IsLiveArray(a)) return CUDA_ERROR_INVALID_HANDLE;
  *out = {static_cast<unsigned>(a->desc.Width), static_cast<unsigned>(a->desc.Height),
          static_cast<unsigned>(a->desc.Depth), a->desc.Format, a->desc.NumChannels, a->desc.Flags};
  return CUDA_SUCCESS;
}

#undef cuArrayCreate
#undef cuArray3DCreate

// The CUDA 3.x creators (32-bit descriptor fields): the same arrays. An
// array handle is no device address, so nothing here needs 64 bits.
SIM_EXPORT CUresult CUDAAPI cuArrayCreate(CUarray* pHandle, const ArrayDescriptorV1* d) {
  SIM_ENTER("cuArrayCreate");
  if (d == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUDA_ARRAY3D_DESCRIPTOR d3{d->Width, d->Height, 0, d->Format, d->NumChannels, 0};
  return CreateArray(pHandle, d3);
}

SIM_EXPORT CUresult CUDAAPI cuArray3DCreate(CUarray* pHandle, const Array3DDescriptorV1* d) {
  SIM_ENTER("cuArray3DCreate");
  if (d == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUDA_ARRAY3D_DESCRIPTOR d3{d->Width, d->Height, d->Depth, d->Format, d->NumChannels, d->Flags};
  return CreateArray(pHandle, d3);
}

// Planes exist only for multi-planar formats (NV12 and the like), which the
// sim does not create (cuArrayCreate refuses them): every live array is
// single-planar, for which cuda.h says CUDA_ERROR_INVALID_VALUE.
SIM_EXPORT CUresult CUDAAPI cuArrayGetPlane(CUarray* pPlaneArray, CUarray hArray, unsigned int planeIdx) {
  SIM_ENTER("cuArrayGetPlane");
  if (pPlaneArray == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!IsLiveArray(reinterpret_cast<ArrayObject*>(hArray))) return CUDA_ERROR_INVALID_HANDLE;
  return CUDA_ERROR_INVALID_VALUE;
}

SIM_EXPORT CUresult CUDAAPI cuArrayGetMemoryRequirements(CUDA_ARRAY_MEMORY_REQUIREMENTS* out, CUarray array, CUdevice device) {
  SIM_ENTER("cuArrayGetMemoryRequirements");
  auto* a = reinterpret_cast<ArrayObject*>(array);
  if (out == nullptr || !IsLiveArray(a)) return CUDA_ERROR_INVALID_VALUE;
  if (!ValidDevice(device)) return CUDA_ERROR_INVALID_DEVICE;
  if ((a->desc.Flags & CUDA_ARRAY3D_DEFERRED_MAPPING) == 0) return CUDA_ERROR_INVALID_VALUE;
  *out = CUDA_ARRAY_MEMORY_REQUIREMENTS{};
  out->size = RoundUp(ArrayBytes(a->desc), kArrayAlignment);
  out->alignment = kArrayAlignment;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuMipmappedArrayGetMemoryRequirements(CUDA_ARRAY_MEMORY_REQUIREMENTS* out, CUmipmappedArray mipmap, CUdevice device) {
  SIM_ENTER("cuMipmappedArrayGetMemoryRequirements");
  auto* m = reinterpret_cast<MipmappedArray*>(mipmap);
  if (out == nullptr || !LiveMipmap(m)) return CUDA_ERROR_INVALID_VALUE;
  if (!ValidDevice(device)) return CUDA_ERROR_INVALID_DEVICE;
  if ((m->levels[0]->desc.Flags & CUDA_ARRAY3D_DEFERRED_MAPPING) == 0) return CUDA_ERROR_INVALID_VALUE;
  size_t bytes = 0;
  for (const ArrayObject* a : m->levels) bytes += ArrayBytes(a->desc);
  *out = CUDA_ARRAY_MEMORY_REQUIREMENTS{};
  out->size = RoundUp(bytes, kArrayAlignment);
  out->alignment = kArrayAlignment;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuArrayGetSparseProperties(CUDA_ARRAY_SPARSE_PROPERTIES* out, CUarray array) {
  SIM_ENTER("cuArrayGetSparseProperties");
  auto* a = reinterpret_cast<ArrayObject*>(array);
  if (out == nullptr || !IsLiveArray(a)) return CUDA_ERROR_INVALID_VALUE;
  // Not sparse, or a mipmapped array's level: the documented CUDA_ERROR_INVALID_VALUE.
  if ((a->desc.Flags & CUDA_ARRAY3D_SPARSE) == 0 || a->mipmap_level) return CUDA_ERROR_INVALID_VALUE;
  *out = CUDA_ARRAY_SPARSE_PROPERTIES{};
  TileExtent(a->desc, out);
  return CUDA_SUCCESS;  // flags 0: no single mip tail, miptailSize 0, miptailFirstLevel 0
}

SIM_EXPORT CUresult CUDAAPI cuMipmappedArrayGetSparseProperties(CUDA_ARRAY_SPARSE_PROPERTIES* out, CUmipmappedArray mipmap) {
  SIM_ENTER("cuMipmappedArrayGetSparseProperties");
  auto* m = reinterpret_cast<MipmappedArray*>(mipmap);
  if (out == nullptr || !LiveMipmap(m)) return CUDA_ERROR_INVALID_VALUE;
  const CUDA_ARRAY3D_DESCRIPTOR& d = m->levels[0]->desc;
  if ((d.Flags & CUDA_ARRAY3D_SPARSE) == 0) return CUDA_ERROR_INVALID_VALUE;
  *out = CUDA_ARRAY_SPARSE_PROPERTIES{};
  TileExtent(d, out);
  // The mip tail: the levels smaller than a tile in some dimension, packed in
  // whole tiles (per layer for a layered array).
  const bool layered = (d.Flags & CUDA_ARRAY3D_LAYERED) != 0;
  const size_t layers = layered && d.Depth > 0 ? d.Depth : 1;
  size_t tail = 0;
  unsigned first = static_cast<unsigned>(m->levels.size());
  for (unsigned l = 0; l < m->levels.size(); ++l) {
    const CUDA_ARRAY3D_DESCRIPTOR& ld = m->levels[l]->desc;
    bool small = ld.Width < out->tileExtent.width || (ld.Height > 0 && ld.Height < out->tileExtent.height) ||
                 (!layered && ld.Depth > 0 && ld.Depth < out->tileExtent.depth);
    if (!small) continue;
    if (first == m->levels.size()) first = l;
    tail += ArrayBytes(ld) / layers;
  }
  if (tail != 0) {
    out->miptailFirstLevel = first;
    out->miptailSize = RoundUp(tail, kSparseTileBytes);
  }
  return CUDA_SUCCESS;
}
