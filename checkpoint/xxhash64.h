// XXH64 (https://github.com/Cyan4973/xxHash/blob/dev/doc/xxhash_spec.md),
// written from the public specification: Debian's libzstd bundles XXH64 but
// does not export it. Used for per-frame checksums and the image digest.
// Matches the reference implementation bit for bit (the unit test checks it
// against the content checksum zstd itself stores in frames).
#pragma once

#include <cstddef>
#include <cstdint>

namespace vgpu::checkpoint {

uint64_t Xxh64(const void* data, size_t size, uint64_t seed = 0);

}  // namespace vgpu::checkpoint
