#include "vmm/vmm.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <utility>

namespace vgpu::vmm {
namespace {

size_t RoundUp(size_t v, size_t a) { return (v + a - 1) / a * a; }

CUmemAllocationProp PropFor(int device) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  // Exportable, so that legacy CUDA IPC of the memory works (ExportAllocation).
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return prop;
}

// First fit in an offset -> length free list; returns false if nothing fits.
bool TakeFirstFit(std::map<size_t, size_t>* fl, size_t len, size_t align, size_t* off) {
  for (auto it = fl->begin(); it != fl->end(); ++it) {
    size_t start = RoundUp(it->first, align);
    size_t end = it->first + it->second;
    if (start + len > end) continue;
    size_t lo = it->first;
    fl->erase(it);
    if (start > lo) (*fl)[lo] = start - lo;
    if (start + len < end) (*fl)[start + len] = end - (start + len);
    *off = start;
    return true;
  }
  return false;
}

// First fit of `size` bytes of address space; false if nothing fits.
bool TakeVa(std::map<CUdeviceptr, size_t>* free_va, size_t size, CUdeviceptr* va) {
  for (auto it = free_va->begin(); it != free_va->end(); ++it) {
    if (it->second < size) continue;
    *va = it->first;
    size_t rest = it->second - size;
    free_va->erase(it);
    if (rest > 0) (*free_va)[*va + size] = rest;
    return true;
  }
  return false;
}

template <typename K>
void GiveBack(std::map<K, size_t>* fl, K off, size_t len) {
  auto [it, ok] = fl->emplace(off, len);
  (void)ok;
  auto next = std::next(it);
  if (next != fl->end() && it->first + it->second == next->first) {
    it->second += next->second;
    fl->erase(next);
  }
  if (it != fl->begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second == it->first) {
      prev->second += it->second;
      fl->erase(it);
    }
  }
}

// Host copies kept page-locked between suspends: at most a quarter of the
// host's memory (the rest of a job's copies are allocated per suspend).
uint64_t KeepHostMax() {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return 0;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) / 4;
}

}  // namespace

Manager::Manager(const driver::RealCuda& cuda) : cuda_(cuda), host_pool_(cuda, KeepHostMax()) {}

CUresult Manager::WithContext(CUcontext ctx, const std::function<CUresult()>& f) const {
  CUcontext prev = nullptr;
  TABLE_CALL(cuda_, cuCtxGetCurrent, &prev);
  if (ctx != nullptr && ctx != prev) {
    if (CUresult r = TABLE_CALL(cuda_, cuCtxSetCurrent, ctx); r != CUDA_SUCCESS) return r;
  }
  CUresult r = f();
  if (ctx != nullptr && ctx != prev) TABLE_CALL(cuda_, cuCtxSetCurrent, prev);
  return r;
}

CUresult Manager::SpaceFor(int device, Space** out) {
  auto it = spaces_.find(device);
  if (it != spaces_.end()) {
    *out = &it->second;
    return CUDA_SUCCESS;
  }
  CUmemAllocationProp prop = PropFor(device);
  size_t gran = 0;
  if (CUresult r = TABLE_CALL(cuda_, cuMemGetAllocationGranularity, &gran, &prop,
                             CU_MEM_ALLOC_GRANULARITY_MINIMUM);
      r != CUDA_SUCCESS) {
    return r;
  }
  if (gran == 0 || kSmallChunk % gran != 0) gran = std::max<size_t>(gran, 1);
  size_t total = 0;
  if (CUresult r = TABLE_CALL(cuda_, cuDeviceTotalMem_v2, &total, device); r != CUDA_SUCCESS) return r;
  size_t chunk = std::max(gran, kSmallChunk);
  size_t size = RoundUp(std::max<size_t>(total, chunk) * 2, chunk);
  CUdeviceptr base = 0;
  if (CUresult r = TABLE_CALL(cuda_, cuMemAddressReserve, &base, size, chunk, 0, 0); r != CUDA_SUCCESS) {
    return r;
  }
  Space& s = spaces_[device];
  s.base = base;
  s.size = size;
  s.granularity = gran;
  s.total = total;
  s.free_va[base] = size;
  *out = &s;
  return CUDA_SUCCESS;
}

CUresult Manager::MapChunk(Chunk* c) {
  CUmemAllocationProp prop = PropFor(c->device);
  CUmemGenericAllocationHandle h = 0;
  if (CUresult r = TABLE_CALL(cuda_, cuMemCreate, &h, c->size, &prop, 0); r != CUDA_SUCCESS) return r;
  c->handle = h;
  if (CUresult r = MapHandle(c); r != CUDA_SUCCESS) {
    TABLE_CALL(cuda_, cuMemRelease, h);
    c->handle = 0;
    return r;
  }
  return CUDA_SUCCESS;
}

CUresult Manager::MapHandle(Chunk* c) {
  if (CUresult r = TABLE_CALL(cuda_, cuMemMap, c->va, c->size, 0, c->handle, 0); r != CUDA_SUCCESS) {
    return r;
  }
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = c->device;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  if (CUresult r = TABLE_CALL(cuda_, cuMemSetAccess, c->va, c->size, &access, 1); r != CUDA_SUCCESS) {
    TABLE_CALL(cuda_, cuMemUnmap, c->va, c->size);
    return r;
  }
  c->mapped = true;
  return CUDA_SUCCESS;
}

void Manager::UnmapChunk(Chunk* c) {
  if (c->mapped) TABLE_CALL(cuda_, cuMemUnmap, c->va, c->size);
  if (c->handle != 0) TABLE_CALL(cuda_, cuMemRelease, c->handle);
  c->handle = 0;
  c->mapped = false;
}

CUresult Manager::CreateChunk(Space* s, int device, size_t size, std::unique_ptr<Chunk>* out) {
  // Each step that runs out first empties this device's cache and tries again:
  // a cached chunk must never make an allocation fail.
  CUdeviceptr va = 0;
  if (!TakeVa(&s->free_va, size, &va)) {
    EvictLocked(s);
    if (!TakeVa(&s->free_va, size, &va)) return CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (accounting_.reserve != nullptr && !accounting_.reserve(device, size)) {
    bool retried = !s->cache.empty();
    EvictLocked(s);
    if (!retried || !accounting_.reserve(device, size)) {
      if (accounting_.refused != nullptr) accounting_.refused(device, size);
      GiveBack(&s->free_va, va, size);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
  }
  auto c = std::make_unique<Chunk>();
  c->va = va;
  c->size = size;
  c->device = device;
  CUresult r = MapChunk(c.get());
  if (r == CUDA_ERROR_OUT_OF_MEMORY && !s->cache.empty()) {
    EvictLocked(s);
    r = MapChunk(c.get());
  }
  if (r != CUDA_SUCCESS) {
    GiveBack(&s->free_va, va, size);
    if (accounting_.release != nullptr) accounting_.release(device, size);
    return r;
  }
  *out = std::move(c);
  return CUDA_SUCCESS;
}

CUresult Manager::NewChunk(Space* s, int device, CUcontext ctx, size_t size, bool small,
                           Chunk** out) {
  std::unique_ptr<Chunk> c = TakeCached(s, size);
  if (c != nullptr && MapHandle(c.get()) != CUDA_SUCCESS) {
    ReleaseChunk(c.get());
    c.reset();
  }
  if (c == nullptr) {
    if (CUresult r = CreateChunk(s, device, size, &c); r != CUDA_SUCCESS) return r;
  }
  c->ctx = ctx;
  c->small = small;
  c->live = 0;
  c->free_list.clear();
  if (small) c->free_list[0] = size;
  *out = c.get();
  chunks_[c->va] = std::move(c);
  return CUDA_SUCCESS;
}

void Manager::ReleaseChunk(Chunk* c) {
  UnmapChunk(c);
  if (accounting_.release != nullptr) accounting_.release(c->device, c->size);
  auto sit = spaces_.find(c->device);
  if (sit != spaces_.end()) GiveBack(&sit->second.free_va, c->va, c->size);
}

uint64_t Manager::CacheLimit(const Space& s, int device) const {
  uint64_t limit = std::min<uint64_t>(kCacheMaxBytes, s.total / kCacheShare);
  if (accounting_.limit != nullptr) {
    uint64_t quota = accounting_.limit(device);
    if (quota != UINT64_MAX) limit = std::min(limit, quota / kCacheShare);
  }
  return limit;
}

bool Manager::QuotaHasHeadroom(int device) const {
  if (accounting_.limit == nullptr || accounting_.available == nullptr) return true;
  uint64_t quota = accounting_.limit(device);
  return quota == UINT64_MAX || accounting_.available(device) >= quota / kCacheHeadroom;
}

void Manager::Retire(Chunk* c, bool may_cache) {
  auto node = chunks_.extract(c->va);
  std::unique_ptr<Chunk> owned = std::move(node.mapped());
  if (c->host.p != nullptr) {
    WithContext(c->ctx, [&] {
      host_pool_.Give(std::exchange(c->host, {}));
      return CUDA_SUCCESS;
    });
  }
  auto sit = spaces_.find(c->device);
  if (may_cache && c->mapped && !c->exported && sit != spaces_.end()) {
    Space& s = sit->second;
    uint64_t limit = CacheLimit(s, c->device);
    if (c->size <= limit && QuotaHasHeadroom(c->device)) {
      // Oldest out first until the newcomer fits both bounds.
      while (!s.cache.empty() &&
             (s.cache.size() >= kCacheMaxChunks || s.cached_bytes + c->size > limit)) {
        std::unique_ptr<Chunk> old = std::move(s.cache.front());
        s.cache.erase(s.cache.begin());
        s.cached_bytes -= old->size;
        ReleaseChunk(old.get());
      }
      // Unmapped, so that a use after free faults as it would without the
      // cache; the physical memory (and its charge) is kept.
      if (TABLE_CALL(cuda_, cuMemUnmap, c->va, c->size) == CUDA_SUCCESS) {
        c->mapped = false;
        c->free_list.clear();
        s.cached_bytes += c->size;
        s.cache.push_back(std::move(owned));
        return;
      }
    }
  }
  ReleaseChunk(c);
}

std::unique_ptr<Chunk> Manager::TakeCached(Space* s, size_t size) {
  for (size_t i = s->cache.size(); i-- > 0;) {  // newest first
    if (s->cache[i]->size != size) continue;
    std::unique_ptr<Chunk> c = std::move(s->cache[i]);
    s->cache.erase(s->cache.begin() + static_cast<std::ptrdiff_t>(i));
    s->cached_bytes -= c->size;
    return c;
  }
  return nullptr;
}

void Manager::EvictLocked(Space* s, const CUcontext* only) {
  for (auto it = s->cache.begin(); it != s->cache.end();) {
    if (only != nullptr && (*it)->ctx != *only) {
      ++it;
      continue;
    }
    s->cached_bytes -= (*it)->size;
    ReleaseChunk(it->get());
    it = s->cache.erase(it);
  }
}

void Manager::TrimLocked(int device) {
  for (auto& [d, s] : spaces_) {
    if (device < 0 || d == device) EvictLocked(&s);
  }
}

void Manager::TrimCache(int device) {
  std::lock_guard<std::mutex> lock(mu_);
  TrimLocked(device);
}

void Manager::TryTrimCache(int device) {
  std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
  if (lock.owns_lock()) TrimLocked(device);
}

CUresult Manager::Alloc(int device, CUcontext ctx, size_t bytes, CUmemoryPool pool,
                        CUdeviceptr* out) {
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(mu_);
  Space* s = nullptr;
  if (CUresult r = SpaceFor(device, &s); r != CUDA_SUCCESS) return r;
  size_t len = RoundUp(bytes, kAlignment);
  Chunk* chunk = nullptr;
  size_t off = 0;
  if (len < kSmallLimit) {
    for (auto& [va, c] : chunks_) {
      if (!c->small || c->device != device || c->ctx != ctx || !c->mapped) continue;
      if (TakeFirstFit(&c->free_list, len, kAlignment, &off)) {
        chunk = c.get();
        break;
      }
    }
    if (chunk == nullptr) {
      size_t csize = RoundUp(kSmallChunk, s->granularity);
      if (CUresult r = NewChunk(s, device, ctx, csize, true, &chunk); r != CUDA_SUCCESS) return r;
      TakeFirstFit(&chunk->free_list, len, kAlignment, &off);
    }
  } else {
    size_t csize = RoundUp(len, s->granularity);
    if (CUresult r = NewChunk(s, device, ctx, csize, false, &chunk); r != CUDA_SUCCESS) return r;
    len = csize;
  }
  chunk->live++;
  Entry e;
  e.info.va = chunk->va + off;
  e.info.size = bytes;
  e.info.device = device;
  e.info.ctx = ctx;
  e.info.pool = pool;
  e.info.buffer_id = next_buffer_id_++;
  e.chunk = chunk;
  e.offset = off;
  e.length = len;
  entries_[e.info.va] = e;
  by_va_[e.info.va] = e.info.va;
  live_bytes_ += bytes;
  *out = e.info.va;
  return CUDA_SUCCESS;
}

void Manager::FreeEntryLocked(std::unordered_map<CUdeviceptr, Entry>::iterator it,
                              bool may_cache) {
  Entry e = it->second;
  entries_.erase(it);
  by_va_.erase(e.info.va);
  live_bytes_ -= e.info.size;
  Chunk* c = e.chunk;
  if (c->small) GiveBack(&c->free_list, e.offset, e.length);
  if (--c->live == 0) Retire(c, may_cache);
}

CUresult Manager::Free(CUdeviceptr base, size_t* bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(base);
  if (it == entries_.end()) return CUDA_ERROR_INVALID_VALUE;
  if (bytes != nullptr) *bytes = it->second.info.size;
  FreeEntryLocked(it, true);
  return CUDA_SUCCESS;
}

CUresult Manager::ExportAllocation(CUdeviceptr base, ExportedChunk* out) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(base);
  if (it == entries_.end() || it->second.chunk == nullptr || it->second.chunk->handle == 0 ||
      !it->second.chunk->mapped) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  Chunk* c = it->second.chunk;
  int fd = -1;
  if (CUresult r = TABLE_CALL(cuda_, cuMemExportToShareableHandle, &fd, c->handle,
                              CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
      r != CUDA_SUCCESS) {
    return r;
  }
  c->exported = true;
  *out = ExportedChunk{
      fd, c->size, it->second.offset, it->second.info.size, c->device, it->second.info.buffer_id};
  return CUDA_SUCCESS;
}

bool Manager::Find(CUdeviceptr p, AllocationInfo* out) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_va_.upper_bound(p);
  if (it == by_va_.begin()) return false;
  --it;
  const Entry& e = entries_.at(it->second);
  if (p >= e.info.va + e.info.size) return false;
  *out = e.info;
  return true;
}

void Manager::FreeContext(CUcontext ctx) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = entries_.begin(); it != entries_.end();) {
    auto next = std::next(it);
    if (it->second.info.ctx == ctx) FreeEntryLocked(it, false);
    it = next;
  }
  // What the context freed last goes with it (its memory must show free
  // again, as the driver's would).
  for (auto& [d, s] : spaces_) EvictLocked(&s, &ctx);
}

std::vector<AllocationInfo> Manager::Allocations() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<AllocationInfo> out;
  out.reserve(by_va_.size());
  for (const auto& [va, base] : by_va_) out.push_back(entries_.at(base).info);
  return out;
}

std::vector<CUcontext> Manager::Contexts() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<CUcontext> out;
  for (const auto& [va, c] : chunks_) {
    if (std::find(out.begin(), out.end(), c->ctx) == out.end()) out.push_back(c->ctx);
  }
  return out;
}

uint64_t Manager::LiveBytes() {
  std::lock_guard<std::mutex> lock(mu_);
  return live_bytes_;
}

std::map<int, uint64_t> Manager::LiveBytesByDevice() {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<int, uint64_t> out;
  for (const auto& [va, base] : by_va_) {
    const AllocationInfo& a = entries_.at(base).info;
    out[a.device] += a.size;
  }
  return out;
}

uint64_t Manager::MappedBytes() {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t n = 0;
  for (const auto& [va, c] : chunks_) n += c->mapped ? c->size : 0;
  return n;
}

bool Manager::AllMapped() {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [va, c] : chunks_) {
    if (!c->mapped) return false;
  }
  return true;
}

CUresult Manager::CopyOutLocked(uint64_t total,
                                const std::function<void(uint64_t, uint64_t)>& progress) {
  CUresult r = CUDA_SUCCESS;
  {
    CopyQueue q(
        cuda_,
        [this](CUcontext ctx, const std::function<CUresult()>& f) { return WithContext(ctx, f); },
        total, progress);
    for (auto& [va, c] : chunks_) {
      if (!c->mapped) continue;
      c->host = host_pool_.Take(c->size);
      if (c->host.p == nullptr) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
        break;
      }
      // Pinning is best effort: a pageable buffer is staged by the driver.
      WithContext(c->ctx,
                  [&] { return host_pool_.Pin(c->host) ? CUDA_SUCCESS : CUDA_ERROR_UNKNOWN; });
      r = q.Add(c->ctx, /*to_host=*/true, c->host.p, c->va, c->size, c.get());
      if (r != CUDA_SUCCESS) break;
    }
    CUresult f = q.Finish();
    if (r == CUDA_SUCCESS) r = f;
  }
  if (r != CUDA_SUCCESS) {
    DropHostCopiesLocked();  // the copies made so far are stale
    return r;
  }
  // Kept buffers no chunk took are of sizes the job no longer has.
  CUcontext any = chunks_.empty() ? nullptr : chunks_.begin()->second->ctx;
  WithContext(any, [&] {
    host_pool_.FreeKept();
    return CUDA_SUCCESS;
  });
  return CUDA_SUCCESS;
}

CUresult Manager::ReleaseAll(bool keep_host,
                             const std::function<void(uint64_t, uint64_t)>& progress) {
  std::lock_guard<std::mutex> lock(mu_);
  // Cached chunks hold no data: give them back rather than copy them.
  TrimLocked(-1);
  uint64_t total = 0;
  for (const auto& [va, c] : chunks_) total += c->mapped ? c->size : 0;
  // Copy everything out first: a failed copy leaves every chunk mapped.
  if (keep_host) {
    if (CUresult r = CopyOutLocked(total, progress); r != CUDA_SUCCESS) return r;
  }
  for (auto& [va, c] : chunks_) UnmapChunk(c.get());
  return CUDA_SUCCESS;
}

CUresult Manager::RecreateAll(const std::function<void(uint64_t, uint64_t)>& progress) {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t total = 0;
  for (const auto& [va, c] : chunks_) total += (!c->mapped && c->host.p != nullptr) ? c->size : 0;
  CUresult r = CUDA_SUCCESS;
  {
    CopyQueue q(
        cuda_,
        [this](CUcontext ctx, const std::function<CUresult()>& f) { return WithContext(ctx, f); },
        total, progress);
    std::vector<Chunk*> mapped_now;  // in VA order
    // Chunk k+1 is mapped while chunk k copies. Only the job's own chunks
    // are mapped: a resume needs no more device memory than it had.
    for (auto& [va, c] : chunks_) {
      if (c->mapped) continue;
      if (r = MapChunk(c.get()); r != CUDA_SUCCESS) break;
      mapped_now.push_back(c.get());
      if (c->host.p == nullptr) continue;
      r = q.Add(c->ctx, /*to_host=*/false, c->host.p, c->va, c->size, c.get());
      if (r != CUDA_SUCCESS) break;
    }
    CUresult f = q.Finish();
    if (r == CUDA_SUCCESS) r = f;
    if (r != CUDA_SUCCESS) {
      // The chunks copied before the first failure stay resumed; that one
      // and those after it are released again, keeping their host copies:
      // a retry maps and copies them again.
      bool ok = true;
      for (Chunk* c : mapped_now) {
        ok = ok && q.Completed(c);
        if (!ok) UnmapChunk(c);
      }
    }
  }
  if (r != CUDA_SUCCESS) return r;
  // Only now: after a failure midway the process is still suspended, and a
  // checkpoint of it needs every chunk's host copy, restored ones included.
  DropHostCopiesLocked();
  return CUDA_SUCCESS;
}

const uint8_t* Manager::HostCopy(CUdeviceptr va) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = chunks_.upper_bound(va);
  if (it == chunks_.begin()) return nullptr;
  --it;
  Chunk* c = it->second.get();
  if (va >= c->va + c->size || c->host.p == nullptr) return nullptr;
  return c->host.p + (va - c->va);
}

void Manager::DropHostCopiesLocked() {
  for (auto& [va, c] : chunks_) {
    if (c->host.p == nullptr) continue;
    // Kept for the next suspend; one beyond the bound is unregistered (the
    // chunk's context current) and freed.
    WithContext(c->ctx, [&] {
      host_pool_.Give(std::exchange(c->host, {}));
      return CUDA_SUCCESS;
    });
  }
}

void Manager::DropHostCopies() {
  std::lock_guard<std::mutex> lock(mu_);
  DropHostCopiesLocked();
}

uint64_t Manager::KeptHostBytes() {
  std::lock_guard<std::mutex> lock(mu_);
  return host_pool_.kept_bytes();
}

}  // namespace vgpu::vmm
