// Decoder for the LZ4 block format (no frame header), which nvcc uses for
// fatbin entries built with --compress-mode=speed. Written against the format
// description at github.com/lz4/lz4/blob/dev/doc/lz4_Block_format.md so that
// libcuda needs no extra dependency.
#pragma once

#include <cstddef>
#include <cstdint>

namespace vgpu::sim {

// Decodes src into exactly dst_size bytes at dst. False if the block is
// malformed or does not decode to exactly dst_size bytes; never reads or
// writes out of bounds.
bool Lz4DecompressBlock(const uint8_t* src, size_t src_size, uint8_t* dst, size_t dst_size);

}  // namespace vgpu::sim
