// Reads nvcc fatbins: a header followed by entries, each an ELF cubin or PTX
// text for one architecture, optionally compressed (LZ4 or zstd). Also unwraps
// the __fatBinC_Wrapper_t that host objects embed and cuModuleLoadFatBinary
// may receive.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace vgpu::sim {

inline constexpr uint32_t kFatbinMagic = 0xBA55ED50;
inline constexpr uint32_t kFatbinWrapperMagic = 0x466243b1;

enum class FatbinKind : uint16_t { kPtx = 1, kCubin = 2 };

struct FatbinEntry {
  uint16_t kind = 0;  // FatbinKind, or something this reader does not know
  int arch = 0;       // e.g. 90
  uint64_t flags = 0;
  const uint8_t* payload = nullptr;  // inside the fatbin
  uint64_t payload_size = 0;         // bytes stored (compressed: padded)
  uint64_t compressed_size = 0;      // bytes of compressed data, 0 if stored as is
  uint64_t decompressed_size = 0;
};

// Whether `data` starts with the 4-byte little-endian `magic`; reads no more
// than a NUL-terminated string's bytes.
bool StartsWithMagic(const void* data, uint32_t magic);

// The fatbin a __fatBinC_Wrapper_t points at, or nullptr if `data` does not
// start with the wrapper's magic.
const void* UnwrapFatbin(const void* data);

// Size of the fatbin at `data` from its header (header plus entries); 0 if
// `data` is not a fatbin.
size_t FatbinExtent(const void* data);

// Lists the entries of `size` bytes of fatbin; false with *error if the header
// or an entry does not fit in the image.
bool ListFatbinEntries(const void* data, size_t size, std::vector<FatbinEntry>* out,
                       std::string* error);

// The bytes of an entry, decompressed if needed (LZ4 block or zstd frame).
// CUDA_ERROR_INVALID_IMAGE for a corrupt payload.
CUresult FatbinEntryPayload(const FatbinEntry& entry, std::vector<uint8_t>* out,
                            std::string* error);

}  // namespace vgpu::sim
