// Shared by the memcpy/memset entry points, graphs and arrays: resolves
// addresses and queues copy or set operations on a stream.
#pragma once

#include <cuda.h>

#include "sim/engine/stream.h"

namespace vgpu::sim {

enum class Sync { kAsync, kHost };  // kHost: return when the operation is done
enum DefaultStream : bool { kLegacy = false, kPerThread = true };

struct ArrayObject {
  CUDA_ARRAY3D_DESCRIPTOR desc{};
  CUdeviceptr mem = 0;
  size_t row_bytes = 0;  // width * element size
  int device = 0;
  bool mipmap_level = false;  // owned by a mipmapped array: not destroyed alone
};
bool IsLiveArray(ArrayObject* a);
// A live mipmapped array's level-0 descriptor and level count (false for a
// destroyed or bogus handle): what texture objects and references validate.
bool MipmappedArrayInfo(CUmipmappedArray m, CUDA_ARRAY3D_DESCRIPTOR* level0, unsigned* levels);
size_t FormatBytes(CUarray_format f);

// Resolved endpoint of a copy: a host address and whether it is pageable host
// memory (which makes asynchronous copies synchronous).
struct Endpoint {
  uint8_t* p = nullptr;
  bool pageable = false;
};
// kind: CU_MEMORYTYPE_HOST / DEVICE / UNIFIED (inferred) for [ptr, ptr+bytes).
CUresult ResolveEndpoint(CUmemorytype kind, CUdeviceptr ptr, size_t bytes, Endpoint* out);

// Queues a row copy (height rows of width bytes) and, for kHost, waits for it.
CUresult QueueCopy(CUstream h, bool ptds, Sync sync, const Endpoint& dst, size_t dst_pitch,
                   const Endpoint& src, size_t src_pitch, size_t width, size_t height);
// `is_async_api`: called from a cuMemset*Async entry point (never made synchronous).
CUresult QueueSet(CUstream h, bool ptds, Sync sync, CUdeviceptr dst, size_t pitch, uint32_t value,
                  uint8_t elem, size_t width_elems, size_t height, bool is_async_api);
CUresult Copy2D(const CUDA_MEMCPY2D* c, CUstream h, bool ptds, Sync sync);
CUresult Copy3D(const CUDA_MEMCPY3D* c, CUstream h, bool ptds, Sync sync);

}  // namespace vgpu::sim
