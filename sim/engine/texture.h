// Textures and surfaces of the simulated device: the H100's limits, shared by
// the device attributes (sim/api/api_device.cc) and the validation of texture and
// surface objects and references (sim/api/api_texobject.cc, sim/api/api_texref.cc).
// Kernels in the sim never sample: these objects hold state that the API
// stores, validates and returns.
#pragma once

#include <cuda.h>

#include <cstddef>

namespace vgpu::sim {

inline constexpr size_t kTextureAlignment = 512;
inline constexpr size_t kTexturePitchAlignment = 32;
inline constexpr size_t kMaxTexture1DLinear = size_t{1} << 28;  // elements
inline constexpr size_t kMaxTexture2DLinearWidth = 131072;
inline constexpr size_t kMaxTexture2DLinearHeight = 65000;
inline constexpr size_t kMaxTexture2DLinearPitch = 2097120;  // bytes

// The texture flags cuda.h defines (CU_TRSF_*).
inline constexpr unsigned kTextureFlagMask =
    CU_TRSF_READ_AS_INTEGER | CU_TRSF_NORMALIZED_COORDINATES | CU_TRSF_SRGB |
    CU_TRSF_DISABLE_TRILINEAR_OPTIMIZATION | CU_TRSF_SEAMLESS_CUBEMAP;

// True for a texture reference made by cuTexRefCreate and not destroyed.
bool IsLiveTexRef(CUtexref t);

// Checks a linear or pitched range for binding to a texture: [dptr, dptr +
// bytes) must be device-accessible memory (cuMemAlloc, managed, mapped VMM).
bool TextureRangeValid(CUdeviceptr dptr, size_t bytes);

}  // namespace vgpu::sim
