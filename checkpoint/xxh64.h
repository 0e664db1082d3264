// XXH64 from Debian's libxxhash (libxxhash-dev): the image format's hash
// (docs/checkpoint-format.md), seed 0 for frame checksums and chained for the
// digest. Compiled inline (XXH_INLINE_ALL): libvgpu is preloaded into
// applications, so it adds no libxxhash.so to their dependencies and exports
// no XXH_* symbol that could meet an application's own xxHash.
#pragma once

#define XXH_INLINE_ALL
#include <xxhash.h>
