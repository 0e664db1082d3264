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
// A chunk whose last allocation is freed may be kept in a small per-device
// cache and handed out again, at the same VA, for a request of the same chunk
// size: it is unmapped (a use after free faults as without the cache) but its
// physical memory and its charge are kept, which saves the cuMemCreate and
// cuMemRelease of each allocation/free pair and the VA and ledger updates.
// Cached chunks are destroyed before any allocation would fail for quota or
// device memory, when the context that freed them is destroyed, by TrimCache
// (cuMemGetInfo and NVML memory queries, so that what they report is what a
// program without the cache would see) and by ReleaseAll (suspend and
// checkpoint never copy them).
//
// Every driver call goes through the driver table the owner passes in
// (libvgpu: the real driver; unit tests: the simulated one or fakes).
// Thread-safe; the allocation path takes one mutex.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "driver/real_driver.h"
#include "vmm/host_copies.h"

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
  bool exported = false;  // its physical memory was shared (CUDA IPC): never cached
  CUmemGenericAllocationHandle handle = 0;  // 0: no physical memory (released)
  bool mapped = false;  // false with a handle: cached, physical memory kept
  std::map<size_t, size_t> free_list;  // small chunks: offset -> length
  size_t live = 0;                     // allocations in it
  HostBuf host;  // contents while released to host RAM (HostPool's)
};

// Bounds of the freed-chunk cache, per device: at most kCacheMaxChunks chunks
// and kCacheMaxBytes bytes, and at most 1/kCacheShare of the device's memory
// and of its quota, so that what a process keeps for itself stays small next
// to what the other members of its group (who cannot evict it) may ask for.
// And nothing is cached while the group has less than 1/kCacheHeadroom of its
// quota unused: near the quota, freed memory goes back at once.
inline constexpr size_t kCacheMaxChunks = 8;
inline constexpr uint64_t kCacheMaxBytes = 256ull << 20;
inline constexpr uint64_t kCacheShare = 16;
inline constexpr uint64_t kCacheHeadroom = 4;

// The quota: physical memory is charged when a chunk is created and returned
// when it is destroyed (suspend keeps the charge: the job still owns it; so
// does a cached chunk: it is still held).
struct Accounting {
  // false: over quota. Must not log: a refusal is retried once the cache is
  // emptied; `refused` reports the final one.
  bool (*reserve)(int device, uint64_t bytes) = nullptr;
  void (*release)(int device, uint64_t bytes) = nullptr;
  void (*refused)(int device, uint64_t bytes) = nullptr;
  uint64_t (*limit)(int device) = nullptr;      // the quota; UINT64_MAX if none
  uint64_t (*available)(int device) = nullptr;  // unused quota; UINT64_MAX if none
};

// The physical memory behind one allocation, exported for CUDA IPC (legacy
// handles of VMM-served memory, docs/vmm.md "CUDA IPC"): the allocation's
// chunk as a POSIX file descriptor the caller owns, and where the allocation
// sits in it.
struct ExportedChunk {
  int fd = -1;
  size_t chunk_size = 0;
  size_t offset = 0;  // of the allocation in the chunk
  size_t size = 0;    // the allocation's, as requested
  int device = 0;     // physical ordinal
  uint64_t buffer_id = 0;
};

class Manager {
 public:
  // `cuda` must outlive the manager.
  explicit Manager(const driver::RealCuda& cuda);
  ~Manager() { host_pool_.FreeKept(); }
  Manager(const Manager&) = delete;
  Manager& operator=(const Manager&) = delete;
  void SetAccounting(const Accounting& a) { accounting_ = a; }

  // Allocates on physical device `device` for `ctx`. CUDA_ERROR_OUT_OF_MEMORY
  // when the device (or the reserved range) is full.
  CUresult Alloc(int device, CUcontext ctx, size_t bytes, CUmemoryPool pool, CUdeviceptr* out);
  // CUDA_ERROR_INVALID_VALUE if `base` is not the base of a VMM allocation.
  // *bytes receives the requested size.
  CUresult Free(CUdeviceptr base, size_t* bytes);
  // The allocation containing p; false if p is not in one.
  bool Find(CUdeviceptr p, AllocationInfo* out);
  // Exports the chunk of the allocation based at `base`.
  // CUDA_ERROR_INVALID_VALUE if `base` is not one's base, or its chunk is
  // released (suspended).
  CUresult ExportAllocation(CUdeviceptr base, ExportedChunk* out);
  // Frees every allocation of ctx (the context is gone) and destroys the
  // cached chunks it freed last.
  void FreeContext(CUcontext ctx);
  // Destroys the cached chunks of physical device `device` (every device if
  // negative), returning their charge. TryTrimCache does nothing if the
  // manager is busy (an allocation, or a suspend copying memory out) rather
  // than wait: for callers that must not block, like NVML queries.
  void TrimCache(int device);
  void TryTrimCache(int device);

  // --- residency (callers hold the quiesce gate exclusively) ---
  std::vector<AllocationInfo> Allocations();  // sorted by VA
  std::vector<CUcontext> Contexts();
  uint64_t LiveBytes();
  // Live allocation bytes by physical device: what a resume needs on each
  // (the agent's info and the coordination watchdog read it).
  std::map<int, uint64_t> LiveBytesByDevice();
  uint64_t MappedBytes();
  // Destroys the cached chunks, then copies every chunk to host RAM
  // (keep_host) and/or unmaps and releases its physical memory; the VAs stay
  // reserved. The copies go to page-locked buffers kept between suspends
  // (host_copies.h), several in flight. A failed copy leaves every chunk
  // mapped and no host copy.
  CUresult ReleaseAll(bool keep_host, const std::function<void(uint64_t, uint64_t)>& progress);
  // Maps fresh physical memory at every released chunk's VA and, if it has a
  // host copy, copies it back; the copies are dropped (kept for the next
  // suspend) once all are back. A failed map or copy leaves the chunks before
  // it mapped and the failed one and those after it released, each with its
  // host copy, so that the next call maps and copies what is missing.
  CUresult RecreateAll(const std::function<void(uint64_t, uint64_t)>& progress);
  void DropHostCopies();
  // Host bytes kept page-locked between suspends for the next one.
  uint64_t KeptHostBytes();
  // The host copy of the byte at va while its chunk is released; else null.
  const uint8_t* HostCopy(CUdeviceptr va);
  bool AllMapped();
  // Runs f with ctx current on this thread, restoring the previous one.
  CUresult WithContext(CUcontext ctx, const std::function<CUresult()>& f) const;

 private:
  struct Space {
    CUdeviceptr base = 0;
    size_t size = 0;
    size_t granularity = 0;
    size_t total = 0;  // the device's memory
    std::map<CUdeviceptr, size_t> free_va;  // address -> length
    // Freed chunks, unmapped, physical memory and charge kept, oldest
    // first; not in chunks_.
    std::vector<std::unique_ptr<Chunk>> cache;
    uint64_t cached_bytes = 0;
  };
  struct Entry {
    AllocationInfo info;
    Chunk* chunk = nullptr;
    size_t offset = 0;
    size_t length = 0;  // reserved length within the chunk
  };

  CUresult SpaceFor(int device, Space** out);
  // A chunk for ctx: a cached one of that size, else a new one.
  CUresult NewChunk(Space* s, int device, CUcontext ctx, size_t size, bool small, Chunk** out);
  CUresult CreateChunk(Space* s, int device, size_t size, std::unique_ptr<Chunk>* out);
  // Releases the physical memory of a chunk that is not in chunks_ (mapped
  // or cached), returns its charge and its VA.
  void ReleaseChunk(Chunk* c);
  // A chunk whose last allocation is gone: cached if may_cache and it fits
  // the bounds, else released.
  void Retire(Chunk* c, bool may_cache);
  std::unique_ptr<Chunk> TakeCached(Space* s, size_t size);
  void EvictLocked(Space* s, const CUcontext* only = nullptr);  // only: one context's chunks
  void TrimLocked(int device);  // every device if negative
  uint64_t CacheLimit(const Space& s, int device) const;
  // False while the group has less than 1/kCacheHeadroom of its quota unused.
  bool QuotaHasHeadroom(int device) const;
  // Creates physical memory for c and maps it at c->va.
  CUresult MapChunk(Chunk* c);
  // Maps c->handle at c->va with read-write access for its device.
  CUresult MapHandle(Chunk* c);
  // Unmaps (if mapped) and releases c's physical memory.
  void UnmapChunk(Chunk* c);
  // ReleaseAll's copy phase: every mapped chunk into a host buffer.
  CUresult CopyOutLocked(uint64_t total, const std::function<void(uint64_t, uint64_t)>& progress);
  // Gives every chunk's host copy back to the pool.
  void DropHostCopiesLocked();
  void FreeEntryLocked(std::unordered_map<CUdeviceptr, Entry>::iterator it, bool may_cache);

  const driver::RealCuda& cuda_;
  Accounting accounting_;
  std::mutex mu_;
  HostPool host_pool_;
  std::map<int, Space> spaces_;
  std::map<CUdeviceptr, std::unique_ptr<Chunk>> chunks_;       // by VA
  std::unordered_map<CUdeviceptr, Entry> entries_;              // by base VA
  std::map<CUdeviceptr, CUdeviceptr> by_va_;                    // base -> base (ordered lookup)
  uint64_t next_buffer_id_ = 1ull << 40;
  uint64_t live_bytes_ = 0;
};

}  // namespace vgpu::vmm
