// Legacy texture and surface references. A texture reference made by
// cuTexRefCreate holds the state the cuTexRefSet* calls store (validated per
// cuda.h) and the cuTexRefGet* calls return; kernels in the sim never sample
// through it. Modules carry no texture or surface references (nvcc 12+ emits
// none; cuModuleGetTexRef/GetSurfRef find none), and nothing creates a
// surface reference, so no CUsurfref handle is ever valid.
//
// A fresh reference reads: no binding, format CU_AD_FORMAT_FLOAT with 1
// channel, address mode WRAP, filter POINT, flags 0, max anisotropy 0,
// mipmap bias and clamps 0, border color 0 (cuda.h documents no defaults;
// these are a zero-initialized reference's, with format FLOAT as the
// runtime's texture<float>).
#include <mutex>
#include <unordered_map>

#include "sim/api/api_common.h"
#include "sim/engine/context.h"
#include "sim/engine/copy_engine.h"
#include "sim/engine/texture.h"

using namespace vgpu::sim;  // NOLINT: entry points below are the C ABI

namespace {

enum class Binding { kNone, kLinear, kPitch2D, kArray, kMipmap };

struct TexRef {
  Binding binding = Binding::kNone;
  CUdeviceptr dptr = 0;
  CUarray array = nullptr;
  CUmipmappedArray mipmap = nullptr;
  CUarray_format format = CU_AD_FORMAT_FLOAT;
  int channels = 1;
  CUaddress_mode address_mode[3] = {CU_TR_ADDRESS_MODE_WRAP, CU_TR_ADDRESS_MODE_WRAP,
                                    CU_TR_ADDRESS_MODE_WRAP};
  CUfilter_mode filter = CU_TR_FILTER_MODE_POINT;
  CUfilter_mode mipmap_filter = CU_TR_FILTER_MODE_POINT;
  unsigned flags = 0;
  unsigned max_anisotropy = 0;
  float level_bias = 0, min_clamp = 0, max_clamp = 0;
  float border[4] = {};
};

std::mutex g_mu;
auto* g_refs = new std::unordered_map<CUtexref, TexRef*>();

// Runs fn on the live reference under the lock; CUDA_ERROR_INVALID_HANDLE if
// the handle is not one.
template <typename Fn>
CUresult WithRef(CUtexref h, Fn fn) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_refs->find(h);
  if (it == g_refs->end()) return CUDA_ERROR_INVALID_HANDLE;
  return fn(*it->second);
}

bool ValidFormat(CUarray_format f, int channels) {
  return FormatBytes(f) != 0 && (channels == 1 || channels == 2 || channels == 4);
}

bool ValidFilter(CUfilter_mode fm) {
  return RawEnum(fm) == CU_TR_FILTER_MODE_POINT || RawEnum(fm) == CU_TR_FILTER_MODE_LINEAR;
}

void Unbind(TexRef& t) {
  t.binding = Binding::kNone;
  t.dptr = 0;
  t.array = nullptr;
  t.mipmap = nullptr;
}

CUresult SetAddress2D(CUtexref h, const CUDA_ARRAY_DESCRIPTOR* d, CUdeviceptr dptr, size_t pitch) {
  if (d == nullptr || !ValidFormat(d->Format, static_cast<int>(d->NumChannels))) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const size_t elem = FormatBytes(d->Format) * d->NumChannels;
  if (dptr % kTextureAlignment != 0 || pitch % kTexturePitchAlignment != 0 || d->Width == 0 ||
      d->Height == 0 || d->Width > kMaxTexture2DLinearWidth ||
      d->Height > kMaxTexture2DLinearHeight || pitch > kMaxTexture2DLinearPitch ||
      pitch < d->Width * elem ||
      !TextureRangeValid(dptr, pitch * (d->Height - 1) + d->Width * elem)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return WithRef(h, [&](TexRef& t) {
    Unbind(t);
    t.binding = Binding::kPitch2D;
    t.dptr = dptr;
    t.format = d->Format;
    t.channels = static_cast<int>(d->NumChannels);
    return CUDA_SUCCESS;
  });
}

}  // namespace

namespace vgpu::sim {

bool IsLiveTexRef(CUtexref t) {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_refs->count(t) != 0;
}

}  // namespace vgpu::sim

namespace {

CUresult SetAddress(size_t* offset, CUtexref h, CUdeviceptr dptr, size_t bytes) {
  if (!IsLiveTexRef(h)) return CUDA_ERROR_INVALID_HANDLE;
  if (!TextureRangeValid(dptr, bytes)) return CUDA_ERROR_INVALID_VALUE;
  return WithRef(h, [&](TexRef& t) {
    const size_t elem = FormatBytes(t.format) * static_cast<size_t>(t.channels);
    if (bytes / elem > kMaxTexture1DLinear) return CUDA_ERROR_INVALID_VALUE;
    Unbind(t);
    t.binding = Binding::kLinear;
    t.dptr = dptr - dptr % kTextureAlignment;
    if (offset != nullptr) *offset = dptr % kTextureAlignment;
    return CUDA_SUCCESS;
  });
}

CUresult GetAddress(CUdeviceptr* pdptr, CUtexref h) {
  return WithRef(h, [&](TexRef& t) {
    if (pdptr == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (t.binding != Binding::kLinear && t.binding != Binding::kPitch2D) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    *pdptr = t.dptr;
    return CUDA_SUCCESS;
  });
}

}  // namespace

SIM_EXPORT CUresult CUDAAPI cuTexRefCreate(CUtexref* pTexRef) {
  SIM_ENTER("cuTexRefCreate");
  if (pTexRef == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CurrentContextOrNull() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  auto* t = new TexRef();
  std::lock_guard<std::mutex> lock(g_mu);
  auto handle = reinterpret_cast<CUtexref>(t);
  g_refs->emplace(handle, t);
  *pTexRef = handle;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuTexRefDestroy(CUtexref hTexRef) {
  SIM_ENTER("cuTexRefDestroy");
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_refs->find(hTexRef);
  if (it == g_refs->end()) return CUDA_ERROR_INVALID_HANDLE;
  delete it->second;
  g_refs->erase(it);
  return CUDA_SUCCESS;
}

// cuda.h: the hardware wants bases aligned to CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT,
// so the reference binds the aligned base and *ByteOffset says how far in dptr
// lies (0 for cuMemAlloc memory, whose allocations are aligned).
SIM_EXPORT CUresult CUDAAPI cuTexRefSetAddress_v2(size_t* ByteOffset, CUtexref hTexRef, CUdeviceptr dptr, size_t bytes) {
  SIM_ENTER("cuTexRefSetAddress_v2");
  return SetAddress(ByteOffset, hTexRef, dptr, bytes);
}

SIM_EXPORT CUresult CUDAAPI cuTexRefSetAddress2D_v3(CUtexref hTexRef, const CUDA_ARRAY_DESCRIPTOR* desc, CUdeviceptr dptr, size_t Pitch) {
  SIM_ENTER("cuTexRefSetAddress2D_v3");
  if (!IsLiveTexRef(hTexRef)) return CUDA_ERROR_INVALID_HANDLE;
  return SetAddress2D(hTexRef, desc, dptr, Pitch);
}

// The CUDA 3.2 symbol: the same arguments as _v3.
SIM_EXPORT CUresult CUDAAPI cuTexRefSetAddress2D_v2(CUtexref hTexRef, const CUDA_ARRAY_DESCRIPTOR* desc, CUdeviceptr dptr, size_t Pitch) {
  SIM_ENTER("cuTexRefSetAddress2D_v2");
  if (!IsLiveTexRef(hTexRef)) return CUDA_ERROR_INVALID_HANDLE;
  return SetAddress2D(hTexRef, desc, dptr, Pitch);
}

// cuda.h: Flags must be CU_TRSA_OVERRIDE_FORMAT; the array's format replaces
// the reference's.
SIM_EXPORT CUresult CUDAAPI cuTexRefSetArray(CUtexref hTexRef, CUarray hArray, unsigned int Flags) {
  SIM_ENTER("cuTexRefSetArray");
  auto* a = reinterpret_cast<ArrayObject*>(hArray);
  if (!IsLiveTexRef(hTexRef)) return CUDA_ERROR_INVALID_HANDLE;
  if (Flags != CU_TRSA_OVERRIDE_FORMAT || !IsLiveArray(a)) return CUDA_ERROR_INVALID_VALUE;
  return WithRef(hTexRef, [&](TexRef& t) {
    Unbind(t);
    t.binding = Binding::kArray;
    t.array = hArray;
    t.format = a->desc.Format;
    t.channels = static_cast<int>(a->desc.NumChannels);
    return CUDA_SUCCESS;
  });
}

SIM_EXPORT CUresult CUDAAPI cuTexRefSetMipmappedArray(CUtexref hTexRef, CUmipmappedArray hMipmappedArray, unsigned int Flags) {
  SIM_ENTER("cuTexRefSetMipmappedArray");
  CUDA_ARRAY3D_DESCRIPTOR d{};
  unsigned levels = 0;
  if (!IsLiveTexRef(hTexRef)) return CUDA_ERROR_INVALID_HANDLE;
  if (Flags != CU_TRSA_OVERRIDE_FORMAT || !MipmappedArrayInfo(hMipmappedArray, &d, &levels)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return WithRef(hTexRef, [&](TexRef& t) {
    Unbind(t);
    t.binding = Binding::kMipmap;
    t.mipmap = hMipmappedArray;
    t.format = d.Format;
    t.channels = static_cast<int>(d.NumChannels);
    return CUDA_SUCCESS;
  });
}

SIM_EXPORT CUresult CUDAAPI cuTexRefSetFormat(CUtexref hTexRef, CUarray_format fmt, int NumPackedComponents) {
  SIM_ENTER("cuTexRefSetFormat");
  if (!IsLiveTexRef(hTexRef)) return CUDA_ERROR_INVALID_HANDLE;
  if (!ValidFormat(fmt, NumPackedComponents)) return CUDA_ERROR_INVALID_VALUE;
  return WithRef(hTexRef, [&](TexRef& t) {
    t.format = fmt;
    t.channels = NumPackedComponents;
    return CUDA_SUCCESS;
  });
}

SIM_EXPORT CUresult CUDAAPI cuTexRefSetAddressMode(CUtexref hTexRef, int dim, CUaddress_mode am) {
  SIM_ENTER("cuTexRefSetAddressMode");
  if (!IsLiveTexRef(hTexRef)) return CUDA_ERROR_INVALID_HANDLE;
  if (dim < 0 || dim > 2 || RawEnum(am) < CU_TR_ADDRESS_MODE_WRAP ||
      RawEnum(am) > CU_TR_ADDRESS_MODE_BORDER) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return WithRef(hTexRef, [&](TexRef& t) {
    t.address_mode[dim] = am;
    return CUDA_SUCCESS;
  });
}

SIM_EXPORT CUresult CUDAAPI cuTexRefSetFilterMode(CUtexref hTexRef, CUfilter_mode fm) {
  SIM_ENTER("cuTexRefSetFilterMode");
  if (!IsLiveTexRef(hTexRef)) return CUDA_ERROR_INVALID_HANDLE;
  if (!ValidFilter(fm)) return CUDA_ERROR_INVALID_VALUE;
  return WithRef(hTexRef, [&](TexRef& t) {
    t.filter = fm;
    return CUDA_SUCCESS;
  });
}

SIM_EXPORT CUresult CUDAAPI cuTexRefSetMipmapFilterMode(CUtexref hTexRef, CUfilter_mode fm) {
  SIM_ENTER("cuTexRefSetMipmapFilterMode");
  if (!IsLiveTexRef(hTexRef)) return CUDA_ERROR_INVALID_HANDLE;
  if (!ValidFilter(fm)) return CUDA_ERROR_INVALID_VALUE;
  return WithRef(hTexRef, [&](TexRef& t) {
    t.mipmap_filter = fm;
    return CUDA_SUCCESS;
  });
}

SIM_EXPORT CUresult CUDAAPI cuTexRefSetMipmapLevelBias(CUtexref hTexRef, float bias) {
  SIM_ENTER("cuTexRefSetMipmapLevelBias");
  return WithRef(hTexRef, [&](TexRef& t) {
    t.level_bias = bias;
    return CUDA_SUCCESS;
  });
}

SIM_EXPORT CUresult CUDAAPI cuTexRefSetMipmapLevelClamp(CUtexref hTexRef, float minMipmapLevelClamp, float maxMipmapLevelClamp) {
  SIM_ENTER("cuTexRefSetMipmapLevelClamp");
  return WithRef(hTexRef, [&](TexRef& t) {
    t.min_clamp = minMipmapLevelClamp;
    t.max_clamp = maxMipmapLevelClamp;
    return CUDA_SUCCESS;
  });
}

SIM_EXPORT CUresult CUDAAPI cuTexRefSetMaxAnisotropy(CUtexref hTexRef, unsigned int maxAniso) {
  SIM_ENTER("cuTexRefSetMaxAnisotropy");
  return WithRef(hTexRef, [&](TexRef& t) {
    t.max_anisotropy = maxAniso;
    return CUDA_SUCCESS;
  });
}

SIM_EXPORT CUresult CUDAAPI cuTexRefSetBorderColor(CUtexref hTexRef, float* pBorderColor) {
  SIM_ENTER("cuTexRefSetBorderColor");
  if (!IsLiveTexRef(hTexRef)) return CUDA_ERROR_INVALID_HANDLE;
  if (pBorderColor == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return WithRef(hTexRef, [&](TexRef& t) {
    for (int i = 0; i < 4; ++i) t.border[i] = pBorderColor[i];
    return CUDA_SUCCESS;
  });
}

SIM_EXPORT CUresult CUDAAPI cuTexRefSetFlags(CUtexref hTexRef, unsigned int Flags) {
  SIM_ENTER("cuTexRefSetFlags");
  if (!IsLiveTexRef(hTexRef)) return CUDA_ERROR_INVALID_HANDLE;
  if ((Flags & ~kTextureFlagMask) != 0) return CUDA_ERROR_INVALID_VALUE;
  return WithRef(hTexRef, [&](TexRef& t) {
    t.flags = Flags;
    return CUDA_SUCCESS;
  });
}

// The Get* calls answer CUDA_ERROR_INVALID_VALUE for a null output and, as
// cuda.h says, for a reference bound to no memory of the asked kind.

SIM_EXPORT CUresult CUDAAPI cuTexRefGetAddress_v2(CUdeviceptr* pdptr, CUtexref hTexRef) {
  SIM_ENTER("cuTexRefGetAddress_v2");
  return GetAddress(pdptr, hTexRef);
}

SIM_EXPORT CUresult CUDAAPI cuTexRefGetArray(CUarray* phArray, CUtexref hTexRef) {
  SIM_ENTER("cuTexRefGetArray");
  return WithRef(hTexRef, [&](TexRef& t) {
    if (phArray == nullptr || t.binding != Binding::kArray) return CUDA_ERROR_INVALID_VALUE;
    *phArray = t.array;
    return CUDA_SUCCESS;
  });
}

SIM_EXPORT CUresult CUDAAPI cuTexRefGetMipmappedArray(CUmipmappedArray* phMipmappedArray, CUtexref hTexRef) {
  SIM_ENTER("cuTexRefGetMipmappedArray");
  return WithRef(hTexRef, [&](TexRef& t) {
    if (phMipmappedArray == nullptr || t.binding != Binding::kMipmap) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    *phMipmappedArray = t.mipmap;
    return CUDA_SUCCESS;
  });
}

SIM_EXPORT CUresult CUDAAPI cuTexRefGetAddressMode(CUaddress_mode* pam, CUtexref hTexRef, int dim) {
  SIM_ENTER("cuTexRefGetAddressMode");
  return WithRef(hTexRef, [&](TexRef& t) {
    if (pam == nullptr || dim < 0 || dim > 2) return CUDA_ERROR_INVALID_VALUE;
    *pam = t.address_mode[dim];
    return CUDA_SUCCESS;
  });
}

SIM_EXPORT CUresult CUDAAPI cuTexRefGetFilterMode(CUfilter_mode* pfm, CUtexref hTexRef) {
  SIM_ENTER("cuTexRefGetFilterMode");
  return WithRef(hTexRef, [&](TexRef& t) {
    if (pfm == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *pfm = t.filter;
    return CUDA_SUCCESS;
  });
}

// cuda.h: pNumChannels may be NULL.
SIM_EXPORT CUresult CUDAAPI cuTexRefGetFormat(CUarray_format* pFormat, int* pNumChannels, CUtexref hTexRef) {
  SIM_ENTER("cuTexRefGetFormat");
  return WithRef(hTexRef, [&](TexRef& t) {
    if (pFormat == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *pFormat = t.format;
    if (pNumChannels != nullptr) *pNumChannels = t.channels;
    return CUDA_SUCCESS;
  });
}

SIM_EXPORT CUresult CUDAAPI cuTexRefGetMipmapFilterMode(CUfilter_mode* pfm, CUtexref hTexRef) {
  SIM_ENTER("cuTexRefGetMipmapFilterMode");
  return WithRef(hTexRef, [&](TexRef& t) {
    if (pfm == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *pfm = t.mipmap_filter;
    return CUDA_SUCCESS;
  });
}

SIM_EXPORT CUresult CUDAAPI cuTexRefGetMipmapLevelBias(float* pbias, CUtexref hTexRef) {
  SIM_ENTER("cuTexRefGetMipmapLevelBias");
  return WithRef(hTexRef, [&](TexRef& t) {
    if (pbias == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *pbias = t.level_bias;
    return CUDA_SUCCESS;
  });
}

SIM_EXPORT CUresult CUDAAPI cuTexRefGetMipmapLevelClamp(float* pminMipmapLevelClamp, float* pmaxMipmapLevelClamp, CUtexref hTexRef) {
  SIM_ENTER("cuTexRefGetMipmapLevelClamp");
  return WithRef(hTexRef, [&](TexRef& t) {
    if (pminMipmapLevelClamp == nullptr || pmaxMipmapLevelClamp == nullptr) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    *pminMipmapLevelClamp = t.min_clamp;
    *pmaxMipmapLevelClamp = t.max_clamp;
    return CUDA_SUCCESS;
  });
}

SIM_EXPORT CUresult CUDAAPI cuTexRefGetMaxAnisotropy(int* pmaxAniso, CUtexref hTexRef) {
  SIM_ENTER("cuTexRefGetMaxAnisotropy");
  return WithRef(hTexRef, [&](TexRef& t) {
    if (pmaxAniso == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *pmaxAniso = static_cast<int>(t.max_anisotropy);
    return CUDA_SUCCESS;
  });
}

SIM_EXPORT CUresult CUDAAPI cuTexRefGetBorderColor(float* pBorderColor, CUtexref hTexRef) {
  SIM_ENTER("cuTexRefGetBorderColor");
  return WithRef(hTexRef, [&](TexRef& t) {
    if (pBorderColor == nullptr) return CUDA_ERROR_INVALID_VALUE;
    for (int i = 0; i < 4; ++i) pBorderColor[i] = t.border[i];
    return CUDA_SUCCESS;
  });
}

SIM_EXPORT CUresult CUDAAPI cuTexRefGetFlags(unsigned int* pFlags, CUtexref hTexRef) {
  SIM_ENTER("cuTexRefGetFlags");
  return WithRef(hTexRef, [&](TexRef& t) {
    if (pFlags == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *pFlags = t.flags;
    return CUDA_SUCCESS;
  });
}

// ---- The CUDA 2.x forms (32-bit device pointers and sizes) ----
// Device addresses all lie above 4 GiB here (sim/api/api_legacy.cc), so a 32-bit
// pointer names no device memory and a bound address cannot be returned.

#undef cuTexRefSetAddress
#undef cuTexRefGetAddress
#undef cuTexRefSetAddress2D

namespace {
struct ArrayDescriptorV1 {
  unsigned int Width, Height;
  CUarray_format Format;
  unsigned int NumChannels;
};
}  // namespace

SIM_EXPORT CUresult CUDAAPI cuTexRefSetAddress(unsigned int* ByteOffset, CUtexref hTexRef, unsigned int dptr, unsigned int bytes) {
  SIM_ENTER("cuTexRefSetAddress");
  size_t offset = 0;
  CUresult r = SetAddress(&offset, hTexRef, dptr, bytes);
  if (r == CUDA_SUCCESS && ByteOffset != nullptr) *ByteOffset = static_cast<unsigned>(offset);
  return r;
}

SIM_EXPORT CUresult CUDAAPI cuTexRefGetAddress(unsigned int* pdptr, CUtexref hTexRef) {
  SIM_ENTER("cuTexRefGetAddress");
  CUdeviceptr p = 0;
  CUresult r = GetAddress(pdptr == nullptr ? nullptr : &p, hTexRef);
  if (r != CUDA_SUCCESS) return r;
  return CUDA_ERROR_NOT_SUPPORTED;  // the bound address does not fit 32 bits
}

SIM_EXPORT CUresult CUDAAPI cuTexRefSetAddress2D(CUtexref hTexRef, const ArrayDescriptorV1* desc, unsigned int dptr, unsigned int Pitch) {
  SIM_ENTER("cuTexRefSetAddress2D");
  if (desc == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUDA_ARRAY_DESCRIPTOR d{desc->Width, desc->Height, desc->Format, desc->NumChannels};
  if (!IsLiveTexRef(hTexRef)) return CUDA_ERROR_INVALID_HANDLE;
  return SetAddress2D(hTexRef, &d, dptr, Pitch);
}

// ---- Surface references ----

SIM_EXPORT CUresult CUDAAPI cuSurfRefSetArray(CUsurfref hSurfRef, CUarray hArray, unsigned int Flags) {
  SIM_ENTER("cuSurfRefSetArray");
  return CUDA_ERROR_INVALID_HANDLE;  // no surface reference exists (above)
}

SIM_EXPORT CUresult CUDAAPI cuSurfRefGetArray(CUarray* phArray, CUsurfref hSurfRef) {
  SIM_ENTER("cuSurfRefGetArray");
  if (phArray == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_ERROR_INVALID_HANDLE;
}
