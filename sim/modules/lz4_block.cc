#include "sim/modules/lz4_block.h"

#include <cstring>

namespace vgpu::sim {
namespace {

// Reads the extension bytes of a 4-bit length field that was 15.
bool ReadLength(const uint8_t** ip, const uint8_t* end, size_t* len) {
  uint8_t b;
  do {
    if (*ip >= end) return false;
    b = *(*ip)++;
    *len += b;
  } while (b == 255);
  return true;
}

}  // namespace

bool Lz4DecompressBlock(const uint8_t* src, size_t src_size, uint8_t* dst, size_t dst_size) {
  const uint8_t* ip = src;
  const uint8_t* const iend = src + src_size;
  size_t op = 0;
  while (ip < iend) {
    const uint8_t token = *ip++;
    size_t literals = token >> 4;
    if (literals == 15 && !ReadLength(&ip, iend, &literals)) return false;
    if (literals > static_cast<size_t>(iend - ip) || literals > dst_size - op) return false;
    memcpy(dst + op, ip, literals);
    ip += literals;
    op += literals;
    if (ip == iend) break;  // the last sequence has literals only
    if (iend - ip < 2) return false;
    const size_t offset = ip[0] | (size_t{ip[1]} << 8);
    ip += 2;
    if (offset == 0 || offset > op) return false;
    size_t match = token & 15;
    if (match == 15 && !ReadLength(&ip, iend, &match)) return false;
    match += 4;
    if (match > dst_size - op) return false;
    // Byte by byte: a match may overlap the bytes it produces (offset < length).
    for (size_t i = 0; i < match; ++i, ++op) dst[op] = dst[op - offset];
  }
  return op == dst_size;
}

}  // namespace vgpu::sim
