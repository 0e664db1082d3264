// Texture and surface objects: validated per cuda.h's cuTexObjectCreate and
// cuSurfObjectCreate and kept, with their descriptors, in a table keyed by
// the object's value. Kernels in the sim never sample, so an object is the
// state the Get* queries return. Handles count up from 1 (0 is never a
// valid object), like the real driver's small integers.
#include <map>
#include <mutex>

#include "sim/api/api_common.h"
#include "sim/engine/context.h"
#include "sim/engine/copy_engine.h"
#include "sim/engine/device_memory.h"
#include "sim/engine/texture.h"

using namespace vgpu::sim;  // NOLINT: entry points below are the C ABI

namespace vgpu::sim {

bool TextureRangeValid(CUdeviceptr dptr, size_t bytes) {
  return dptr != 0 && bytes != 0 && Translate(dptr, bytes) != nullptr;
}

}  // namespace vgpu::sim

namespace {

struct TexObject {
  CUDA_RESOURCE_DESC res{};
  CUDA_TEXTURE_DESC tex{};
  CUDA_RESOURCE_VIEW_DESC view{};
  bool has_view = false;
  bool surface = false;
};

std::mutex g_mu;
auto* g_objects = new std::map<unsigned long long, TexObject>();
unsigned long long g_next = 1;

bool ValidChannels(unsigned n) { return n == 1 || n == 2 || n == 4; }

// The array behind an ARRAY or MIPMAPPED_ARRAY resource (level 0), if live.
bool ResourceArray(const CUDA_RESOURCE_DESC& r, CUDA_ARRAY3D_DESCRIPTOR* d, unsigned* levels) {
  const int type = RawEnum(r.resType);
  if (type == CU_RESOURCE_TYPE_ARRAY) {
    auto* a = reinterpret_cast<ArrayObject*>(r.res.array.hArray);
    if (!IsLiveArray(a)) return false;
    *d = a->desc;
    *levels = 1;
    return true;
  }
  return type == CU_RESOURCE_TYPE_MIPMAPPED_ARRAY &&
         MipmappedArrayInfo(r.res.mipmap.hMipmappedArray, d, levels);
}

bool ValidLinear(const CUDA_RESOURCE_DESC& r) {
  const auto& l = r.res.linear;
  const size_t elem = FormatBytes(l.format) * l.numChannels;
  if (elem == 0 || !ValidChannels(l.numChannels) || l.devPtr % kTextureAlignment != 0) return false;
  if (l.sizeInBytes / elem > kMaxTexture1DLinear) return false;
  return TextureRangeValid(l.devPtr, l.sizeInBytes);
}

bool ValidPitch2D(const CUDA_RESOURCE_DESC& r) {
  const auto& p = r.res.pitch2D;
  const size_t elem = FormatBytes(p.format) * p.numChannels;
  if (elem == 0 || !ValidChannels(p.numChannels) || p.devPtr % kTextureAlignment != 0) return false;
  if (p.width == 0 || p.height == 0 || p.width > kMaxTexture2DLinearWidth ||
      p.height > kMaxTexture2DLinearHeight) {
    return false;
  }
  if (p.pitchInBytes % kTexturePitchAlignment != 0 || p.pitchInBytes > kMaxTexture2DLinearPitch ||
      p.pitchInBytes < p.width * elem) {
    return false;
  }
  return TextureRangeValid(p.devPtr, p.pitchInBytes * (p.height - 1) + p.width * elem);
}

bool ValidResource(const CUDA_RESOURCE_DESC& r) {
  if (r.flags != 0) return false;
  CUDA_ARRAY3D_DESCRIPTOR d{};
  unsigned levels = 0;
  switch (RawEnum(r.resType)) {
    case CU_RESOURCE_TYPE_ARRAY:
    case CU_RESOURCE_TYPE_MIPMAPPED_ARRAY:
      return ResourceArray(r, &d, &levels);
    case CU_RESOURCE_TYPE_LINEAR:
      return ValidLinear(r);
    case CU_RESOURCE_TYPE_PITCH2D:
      return ValidPitch2D(r);
    default:
      return false;
  }
}

bool ValidTextureDesc(const CUDA_TEXTURE_DESC& t, const CUDA_RESOURCE_DESC& r) {
  for (const CUaddress_mode& m : t.addressMode) {
    if (RawEnum(m) < CU_TR_ADDRESS_MODE_WRAP || RawEnum(m) > CU_TR_ADDRESS_MODE_BORDER) {
      return false;
    }
  }
  for (int f : {RawEnum(t.filterMode), RawEnum(t.mipmapFilterMode)}) {
    if (f != CU_TR_FILTER_MODE_POINT && f != CU_TR_FILTER_MODE_LINEAR) return false;
  }
  if ((t.flags & ~kTextureFlagMask) != 0) return false;
  const int type = RawEnum(r.resType);
  // cuda.h: "for CUDA mipmapped arrays, this flag has to be set".
  if (type == CU_RESOURCE_TYPE_MIPMAPPED_ARRAY && (t.flags & CU_TRSF_NORMALIZED_COORDINATES) == 0) {
    return false;
  }
  if ((t.flags & CU_TRSF_SEAMLESS_CUBEMAP) != 0) {
    CUDA_ARRAY3D_DESCRIPTOR d{};
    unsigned levels = 0;
    if (!ResourceArray(r, &d, &levels) || (d.Flags & CUDA_ARRAY3D_CUBEMAP) == 0) return false;
  }
  return true;
}

bool IsBlockCompressed(int format) {
  return format >= CU_RES_VIEW_FORMAT_UNSIGNED_BC1 && format <= CU_RES_VIEW_FORMAT_UNSIGNED_BC7;
}

// BC1 and BC4 read 8-byte blocks (2 x uint32), the other BC formats 16-byte ones.
unsigned BlockChannels(int format) {
  return format == CU_RES_VIEW_FORMAT_UNSIGNED_BC1 || format == CU_RES_VIEW_FORMAT_UNSIGNED_BC4 ||
                 format == CU_RES_VIEW_FORMAT_SIGNED_BC4
             ? 2
             : 4;
}

bool ValidViewExtent(const CUDA_RESOURCE_VIEW_DESC& v, const CUDA_ARRAY3D_DESCRIPTOR& d) {
  const int format = RawEnum(v.format);
  if (format < CU_RES_VIEW_FORMAT_NONE || format > CU_RES_VIEW_FORMAT_UNSIGNED_BC7) return false;
  if (!IsBlockCompressed(format)) {
    return v.width == d.Width && v.height == d.Height && v.depth == d.Depth;
  }
  if (d.Format != CU_AD_FORMAT_UNSIGNED_INT32 || d.NumChannels != BlockChannels(format)) {
    return false;
  }
  return v.width == 4 * d.Width && v.height == 4 * d.Height && v.depth == d.Depth;
}

// cuda.h's rules for a resource view: only of arrays, the same extent (4x in
// width and height for block-compressed views), levels and layers in range.
bool ValidView(const CUDA_RESOURCE_VIEW_DESC& v, const CUDA_RESOURCE_DESC& r) {
  CUDA_ARRAY3D_DESCRIPTOR d{};
  unsigned levels = 0;
  if (!ResourceArray(r, &d, &levels) || !ValidViewExtent(v, d)) return false;
  const bool mipmapped = RawEnum(r.resType) == CU_RESOURCE_TYPE_MIPMAPPED_ARRAY;
  if (!mipmapped && (v.firstMipmapLevel != 0 || v.lastMipmapLevel != 0)) return false;
  if (v.firstMipmapLevel > v.lastMipmapLevel || v.lastMipmapLevel >= levels) return false;
  const bool layered = (d.Flags & CUDA_ARRAY3D_LAYERED) != 0;
  if (!layered) return v.firstLayer == 0 && v.lastLayer == 0;
  return v.firstLayer <= v.lastLayer && v.lastLayer < (d.Depth == 0 ? 1 : d.Depth);
}

unsigned long long AddObject(const TexObject& o) {
  std::lock_guard<std::mutex> lock(g_mu);
  const unsigned long long handle = g_next++;
  g_objects->emplace(handle, o);
  return handle;
}

bool FindObject(unsigned long long handle, bool surface, TexObject* out) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_objects->find(handle);
  if (it == g_objects->end() || it->second.surface != surface) return false;
  *out = it->second;
  return true;
}

bool EraseObject(unsigned long long handle, bool surface) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_objects->find(handle);
  if (it == g_objects->end() || it->second.surface != surface) return false;
  g_objects->erase(it);
  return true;
}

}  // namespace

SIM_EXPORT CUresult CUDAAPI cuTexObjectCreate(CUtexObject* pTexObject, const CUDA_RESOURCE_DESC* pResDesc, const CUDA_TEXTURE_DESC* pTexDesc, const CUDA_RESOURCE_VIEW_DESC* pResViewDesc) {
  SIM_ENTER("cuTexObjectCreate");
  if (pTexObject == nullptr || pResDesc == nullptr || pTexDesc == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (CurrentContextOrNull() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (!ValidResource(*pResDesc) || !ValidTextureDesc(*pTexDesc, *pResDesc)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  TexObject o;
  o.res = *pResDesc;
  o.tex = *pTexDesc;
  if (pResViewDesc != nullptr) {
    if (!ValidView(*pResViewDesc, *pResDesc)) return CUDA_ERROR_INVALID_VALUE;
    o.view = *pResViewDesc;
    o.has_view = true;
  }
  *pTexObject = AddObject(o);
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuTexObjectDestroy(CUtexObject texObject) {
  SIM_ENTER("cuTexObjectDestroy");
  return EraseObject(texObject, false) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SIM_EXPORT CUresult CUDAAPI cuTexObjectGetResourceDesc(CUDA_RESOURCE_DESC* pResDesc, CUtexObject texObject) {
  SIM_ENTER("cuTexObjectGetResourceDesc");
  TexObject o;
  if (pResDesc == nullptr || !FindObject(texObject, false, &o)) return CUDA_ERROR_INVALID_VALUE;
  *pResDesc = o.res;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuTexObjectGetTextureDesc(CUDA_TEXTURE_DESC* pTexDesc, CUtexObject texObject) {
  SIM_ENTER("cuTexObjectGetTextureDesc");
  TexObject o;
  if (pTexDesc == nullptr || !FindObject(texObject, false, &o)) return CUDA_ERROR_INVALID_VALUE;
  *pTexDesc = o.tex;
  return CUDA_SUCCESS;
}

// cuda.h: "If no resource view was set for texObject, the
// CUDA_ERROR_INVALID_VALUE is returned."
SIM_EXPORT CUresult CUDAAPI cuTexObjectGetResourceViewDesc(CUDA_RESOURCE_VIEW_DESC* pResViewDesc, CUtexObject texObject) {
  SIM_ENTER("cuTexObjectGetResourceViewDesc");
  TexObject o;
  if (pResViewDesc == nullptr || !FindObject(texObject, false, &o) || !o.has_view) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *pResViewDesc = o.view;
  return CUDA_SUCCESS;
}

// cuda.h: the resource must be a CUDA array; surface load/store needs one
// made with CUDA_ARRAY3D_SURFACE_LDST.
SIM_EXPORT CUresult CUDAAPI cuSurfObjectCreate(CUsurfObject* pSurfObject, const CUDA_RESOURCE_DESC* pResDesc) {
  SIM_ENTER("cuSurfObjectCreate");
  if (pSurfObject == nullptr || pResDesc == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CurrentContextOrNull() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  auto* a = reinterpret_cast<ArrayObject*>(pResDesc->res.array.hArray);
  if (RawEnum(pResDesc->resType) != CU_RESOURCE_TYPE_ARRAY || pResDesc->flags != 0 ||
      !IsLiveArray(a) || (a->desc.Flags & CUDA_ARRAY3D_SURFACE_LDST) == 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  TexObject o;
  o.res = *pResDesc;
  o.surface = true;
  *pSurfObject = AddObject(o);
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuSurfObjectDestroy(CUsurfObject surfObject) {
  SIM_ENTER("cuSurfObjectDestroy");
  return EraseObject(surfObject, true) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SIM_EXPORT CUresult CUDAAPI cuSurfObjectGetResourceDesc(CUDA_RESOURCE_DESC* pResDesc, CUsurfObject surfObject) {
  SIM_ENTER("cuSurfObjectGetResourceDesc");
  TexObject o;
  if (pResDesc == nullptr || !FindObject(surfObject, true, &o)) return CUDA_ERROR_INVALID_VALUE;
  *pResDesc = o.res;
  return CUDA_SUCCESS;
}
