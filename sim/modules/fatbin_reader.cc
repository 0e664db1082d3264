#include "sim/modules/fatbin_reader.h"

#include <zstd.h>

#include <cstring>

#include "sim/modules/lz4_block.h"

namespace vgpu::sim {
namespace {

// Layouts as nvcc 12/13 writes them (little endian, packed by construction).
struct FatbinHeader {
  uint32_t magic;
  uint16_t version;
  uint16_t header_size;
  uint64_t payload_size;  // bytes of entries after the header
};
static_assert(sizeof(FatbinHeader) == 16);

struct FatbinEntryHeader {
  uint16_t kind;
  uint16_t unknown0;
  uint32_t header_size;  // 64, or 80 for PTX entries; the payload follows it
  uint64_t payload_size;
  uint32_t compressed_size;
  uint32_t unknown1;
  uint16_t minor;
  uint16_t major;
  uint32_t arch;
  uint32_t name_offset;
  uint32_t name_size;
  uint64_t flags;
  uint64_t unknown2;
  uint64_t decompressed_size;
};
static_assert(sizeof(FatbinEntryHeader) == 64);

struct FatbinWrapper {
  int32_t magic;
  int32_t version;
  const unsigned long long* data;
  void* filename_or_fatbins;
};

constexpr uint64_t kFlagLz4 = 0x2000;
constexpr uint64_t kFlagZstd = 0x8000;
constexpr uint64_t kMaxFatbinBytes = 1ull << 32;
constexpr uint64_t kMaxDecompressedBytes = 1ull << 31;

}  // namespace

bool StartsWithMagic(const void* data, uint32_t magic) {
  // Byte by byte: never reads past the end of a shorter NUL-terminated string
  // (no magic number contains a zero byte).
  const auto* p = static_cast<const uint8_t*>(data);
  for (int i = 0; i < 4; ++i) {
    if (p[i] != ((magic >> (8 * i)) & 0xff)) return false;
  }
  return true;
}

const void* UnwrapFatbin(const void* data) {
  if (!StartsWithMagic(data, kFatbinWrapperMagic)) return nullptr;
  FatbinWrapper w;
  memcpy(&w, data, sizeof w);
  return w.data;
}

size_t FatbinExtent(const void* data) {
  if (!StartsWithMagic(data, kFatbinMagic)) return 0;
  FatbinHeader h;
  memcpy(&h, data, sizeof h);
  if (h.magic != kFatbinMagic || h.header_size < sizeof h || h.payload_size >= kMaxFatbinBytes) {
    return 0;
  }
  return h.header_size + h.payload_size;
}

bool ListFatbinEntries(const void* data, size_t size, std::vector<FatbinEntry>* out,
                       std::string* error) {
  const auto* base = static_cast<const uint8_t*>(data);
  FatbinHeader h;
  if (size < sizeof h) {
    *error = "invalid fatbin: truncated header";
    return false;
  }
  memcpy(&h, base, sizeof h);
  if (h.magic != kFatbinMagic || h.header_size < sizeof h || h.header_size > size ||
      h.payload_size > size - h.header_size) {
    *error = "invalid fatbin: bad header or truncated image";
    return false;
  }
  out->clear();
  uint64_t off = h.header_size;
  const uint64_t end = h.header_size + h.payload_size;
  while (off < end) {
    FatbinEntryHeader e;
    if (end - off < sizeof e) break;  // trailing padding
    memcpy(&e, base + off, sizeof e);
    if (e.header_size < sizeof e || e.header_size > end - off ||
        e.payload_size > end - off - e.header_size || e.compressed_size > e.payload_size) {
      *error = "invalid fatbin: entry at offset " + std::to_string(off) + " is truncated";
      return false;
    }
    FatbinEntry entry;
    entry.kind = e.kind;
    entry.arch = static_cast<int>(e.arch);
    entry.flags = e.flags;
    entry.payload = base + off + e.header_size;
    entry.payload_size = e.payload_size;
    entry.compressed_size = (e.flags & (kFlagLz4 | kFlagZstd)) ? e.compressed_size : 0;
    entry.decompressed_size = e.decompressed_size;
    out->push_back(entry);
    off += e.header_size + e.payload_size;
  }
  return true;
}

CUresult FatbinEntryPayload(const FatbinEntry& entry, std::vector<uint8_t>* out,
                            std::string* error) {
  if (!(entry.flags & (kFlagLz4 | kFlagZstd))) {
    out->assign(entry.payload, entry.payload + entry.payload_size);
    return CUDA_SUCCESS;
  }
  if (entry.decompressed_size == 0 || entry.decompressed_size > kMaxDecompressedBytes) {
    *error = "invalid fatbin: compressed entry with a bad size";
    return CUDA_ERROR_INVALID_IMAGE;
  }
  out->resize(entry.decompressed_size);
  if (entry.flags & kFlagLz4) {
    if (!Lz4DecompressBlock(entry.payload, entry.compressed_size, out->data(), out->size())) {
      *error = "invalid fatbin: corrupt LZ4-compressed entry";
      return CUDA_ERROR_INVALID_IMAGE;
    }
    return CUDA_SUCCESS;
  }
  const size_t n = ZSTD_decompress(out->data(), out->size(), entry.payload, entry.compressed_size);
  if (ZSTD_isError(n) || n != out->size()) {
    *error = std::string("invalid fatbin: corrupt zstd-compressed entry (") +
             (ZSTD_isError(n) ? ZSTD_getErrorName(n) : "size mismatch") + ")";
    return CUDA_ERROR_INVALID_IMAGE;
  }
  return CUDA_SUCCESS;
}

}  // namespace vgpu::sim
