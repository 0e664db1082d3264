#include "checkpoint/xxhash64.h"

#include <bit>
#include <cstring>

namespace vgpu::checkpoint {
namespace {

constexpr uint64_t kP1 = 0x9E3779B185EBCA87ull;
constexpr uint64_t kP2 = 0xC2B2AE3D27D4EB4Full;
constexpr uint64_t kP3 = 0x165667B19E3779F9ull;
constexpr uint64_t kP4 = 0x85EBCA77C2B2AE63ull;
constexpr uint64_t kP5 = 0x27D4EB2F165667C5ull;

// The format is little-endian; so is every platform vgpu targets (x86-64,
// aarch64), which the static_assert makes explicit.
static_assert(std::endian::native == std::endian::little);

uint64_t Read64(const unsigned char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

uint32_t Read32(const unsigned char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

uint64_t Round(uint64_t acc, uint64_t lane) {
  acc += lane * kP2;
  acc = std::rotl(acc, 31);
  return acc * kP1;
}

uint64_t Merge(uint64_t acc, uint64_t v) {
  acc ^= Round(0, v);
  return acc * kP1 + kP4;
}

}  // namespace

uint64_t Xxh64(const void* data, size_t size, uint64_t seed) {
  const auto* p = static_cast<const unsigned char*>(data);
  const unsigned char* end = p + size;
  uint64_t acc;
  if (size >= 32) {
    uint64_t v1 = seed + kP1 + kP2, v2 = seed + kP2, v3 = seed, v4 = seed - kP1;
    const unsigned char* limit = end - 32;
    do {
      v1 = Round(v1, Read64(p));
      v2 = Round(v2, Read64(p + 8));
      v3 = Round(v3, Read64(p + 16));
      v4 = Round(v4, Read64(p + 24));
      p += 32;
    } while (p <= limit);
    acc = std::rotl(v1, 1) + std::rotl(v2, 7) + std::rotl(v3, 12) + std::rotl(v4, 18);
    acc = Merge(Merge(Merge(Merge(acc, v1), v2), v3), v4);
  } else {
    acc = seed + kP5;
  }
  acc += size;
  for (; end - p >= 8; p += 8) {
    acc ^= Round(0, Read64(p));
    acc = std::rotl(acc, 27) * kP1 + kP4;
  }
  if (end - p >= 4) {
    acc ^= uint64_t{Read32(p)} * kP1;
    acc = std::rotl(acc, 23) * kP2 + kP3;
    p += 4;
  }
  for (; p < end; ++p) {
    acc ^= *p * kP5;
    acc = std::rotl(acc, 11) * kP1;
  }
  acc ^= acc >> 33;
  acc *= kP2;
  acc ^= acc >> 29;
  acc *= kP3;
  acc ^= acc >> 32;
  return acc;
}

}  // namespace vgpu::checkpoint
