// VMM-backed device memory (docs/vmm.md).
//
// Per physical device, a large VA range is reserved at first use
// (cuMemAddressReserve, 2x the device's memory). Every allocation gets its VA
// from it and its physical memory from cuMemCreate chunks at the device's
// granularity: requests below kSmallLimit are sub-allocated (first fit,
// 256-byte alignment like cuMemAlloc) from 2 MiB chunks owned by one context,
// bigger ones get a chunk of their own. Because the application only ever sees
// these VAs, the physical memory behind them can be released and re-created
// (Release / Recreate) without the application noticing: that is what suspend,
// checkpoint and restore build on (intercept/residency.*).
//
// The quota is charged with physical memory, like a real GPU's usage: a
// chunk's whole size when it is created, returned when it is destroyed
// (Accounting), so the device can never run out before the quota does.
//
// Every driver call goes through REAL_CALL. Thread-safe; the allocation path
// takes one mutex.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace vgpu::vmm {

inline constexpr size_t kAlignment = 256;
inline constexpr size_t kSmallChunk = 2ull << 20;
inline constexpr size_t kSmallLimit = 1ull << 20;  // requests below: sub-allocated

struct AllocationInfo {
  CUdeviceptr va = 0;
  size_t size = 0;  // as requested
  int device = 0;   // physical ordinal
  CUcontext ctx = nullptr;
  CUmemoryPool pool = nullptr;  // stream-ordered allocations: the pool they name
  uint64_t buffer_id = 0;
};

struct Chunk {
  CUdeviceptr va = 0;
  size_t size = 0;
  int device = 0;
  CUcontext ctx = nullptr;  // a context of the device, for copies
  bool small = false;
  CUmemGenericAllocationHandle handle = 0;
  bool mapped = false;
  std::map<size_t, size_t> free_list;  // small chunks: offset -> length
  size_t live = 0;                     // allocations in it
  std::unique_ptr<uint8_t[]> host;     // contents while released to host RAM
};

// The quota: physical memory is charged when a chunk is created and returned
// when it is destroyed (suspend keeps the charge: the job still owns it).
struct Accounting {
  bool (*reserve)(int device, uint64_t bytes) = nullptr;  // false: over quota
  void (*release)(int device, uint64_t bytes) = nullptr;
};

class Manager {
 public:
  static Manager& Get();
  void SetAccounting(const Accounting& a) { accounting_ = a; }

  // Allocates on physical device `device` for `ctx`. CUDA_ERROR_OUT_OF_MEMORY
  // when the device (or the reserved range) is full.
  CUresult Alloc(int device, CUcontext ctx, size_t bytes, CUmemoryPool pool, CUdeviceptr* out);
  // CUDA_ERROR_INVALID_VALUE if `base` is not the base of a VMM allocation.
  // *bytes receives the requested size.
  CUresult Free(CUdeviceptr base, size_t* bytes);
  // The allocation containing p; false if p is not in one.
  bool Find(CUdeviceptr p, AllocationInfo* out);
  // True if p lies in a reserved range of ours (allocated or not).
  bool InRange(CUdeviceptr p);
  // Frees every allocation of ctx (the context is gone).
  void FreeContext(CUcontext ctx);

  // --- residency (callers hold the quiesce gate exclusively) ---
  std::vector<AllocationInfo> Allocations();  // sorted by VA
  std::vector<CUcontext> Contexts();
  uint64_t LiveBytes();
  uint64_t MappedBytes();
  size_t ChunkCount();
  // Copies every chunk to host RAM (keep_host) and/or unmaps and releases its
  // physical memory; the VAs stay reserved.
  CUresult ReleaseAll(bool keep_host, const std::function<void(uint64_t, uint64_t)>& progress);
  // Maps fresh physical memory at every released chunk's VA and, if it has a
  // host copy, copies it back (and drops the copy).
  CUresult RecreateAll(const std::function<void(uint64_t, uint64_t)>& progress);
  void DropHostCopies();
  // The host copy of the byte at va while its chunk is released; else null.
  const uint8_t* HostCopy(CUdeviceptr va);
  bool AllMapped();
  // Runs f with ctx current on this thread, restoring the previous one.
  static CUresult WithContext(CUcontext ctx, const std::function<CUresult()>& f);

 private:
  struct Space {
    CUdeviceptr base = 0;
    size_t size = 0;
    size_t granularity = 0;
    std::map<CUdeviceptr, size_t> free_va;  // address -> length
  };
  struct Entry {
    AllocationInfo info;
    Chunk* chunk = nullptr;
    size_t offset = 0;
    size_t length = 0;  // reserved length within the chunk
  };

  CUresult SpaceFor(int device, Space** out);
  CUresult NewChunk(Space* s, int device, CUcontext ctx, size_t size, bool small, Chunk** out);
  void DestroyChunk(Chunk* c);
  CUresult MapChunk(Chunk* c);
  void UnmapChunk(Chunk* c);
  void FreeEntryLocked(std::unordered_map<CUdeviceptr, Entry>::iterator it);

  Accounting accounting_;
  std::mutex mu_;
  std::map<int, Space> spaces_;
  std::map<CUdeviceptr, std::unique_ptr<Chunk>> chunks_;       // by VA
  std::unordered_map<CUdeviceptr, Entry> entries_;              // by base VA
  std::map<CUdeviceptr, CUdeviceptr> by_va_;                    // base -> base (ordered lookup)
  uint64_t next_buffer_id_ = 1ull << 40;
  uint64_t live_bytes_ = 0;
};

}  // namespace vgpu::vmm
