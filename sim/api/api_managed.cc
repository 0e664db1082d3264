// Unified (managed) memory hints: cuMemAdvise, cuMemPrefetchAsync and the
// range queries cuMemRangeGetAttribute(s).
//
// Managed memory is host memory here (device pointer == host pointer, always
// coherent), so advice and prefetches move nothing: they are validated as the
// driver validates them and recorded per CPU page, so that the range queries
// answer as documented (read-mostly, preferred location, accessed-by, last
// prefetch location: a value only when every page of the range agrees). A
// prefetch is ordered on its stream like other work (it completes when the
// stream reaches it, taking no time); its location is recorded at the call, as
// cuda.h says the query "gives no indication as to whether the prefetch
// operation ... has completed or even begun".
#include <algorithm>
#include <iterator>
#include <map>
#include <mutex>
#include <vector>

#include "sim/engine/address_space.h"
#include "sim/api/api_common.h"
#include "sim/engine/context.h"
#include "sim/engine/device_memory.h"
#include "sim/engine/sim_state.h"
#include "sim/engine/stream.h"

using namespace vgpu::sim;  // NOLINT: entry points below are the C ABI

namespace {

constexpr uint32_t kHostBit = 1u << 31;  // accessed-by: the CPU

struct Loc {
  CUmemLocationType type = CU_MEM_LOCATION_TYPE_INVALID;
  int id = 0;
  bool operator==(const Loc& o) const {
    return type == o.type && (type != CU_MEM_LOCATION_TYPE_DEVICE && type != CU_MEM_LOCATION_TYPE_HOST_NUMA
                                  ? true
                                  : id == o.id);
  }
};

struct PageState {
  bool read_mostly = false;
  Loc preferred;
  uint32_t accessed_by = 0;  // bit d: device d; kHostBit: the CPU
  Loc prefetched;
};

struct Segment {
  uint64_t end;
  PageState st;
};

std::mutex g_mu;
auto* g_segments = new std::map<uint64_t, Segment>();  // disjoint [start, end)

// Splits the segment that strictly contains addr (g_mu held).
void Split(uint64_t addr) {
  auto it = g_segments->upper_bound(addr);
  if (it == g_segments->begin()) return;
  --it;
  if (it->first < addr && addr < it->second.end) {
    Segment tail{it->second.end, it->second.st};
    it->second.end = addr;
    g_segments->emplace(addr, tail);
  }
}

// Applies f to every page state of [start, end), creating default ones for
// pages never advised (g_mu held).
template <typename F>
void Apply(uint64_t start, uint64_t end, F f) {
  Split(start);
  Split(end);
  uint64_t at = start;
  auto it = g_segments->lower_bound(start);
  while (at < end) {
    if (it == g_segments->end() || it->first > at) {
      uint64_t gap_end = it == g_segments->end() ? end : std::min(end, it->first);
      it = g_segments->emplace_hint(it, at, Segment{gap_end, PageState{}});
    }
    f(it->second.st);
    at = it->second.end;
    ++it;
  }
}

// Calls f for each page state covering [start, end), PageState{} for gaps.
template <typename F>
void Visit(uint64_t start, uint64_t end, F f) {
  auto it = g_segments->upper_bound(start);
  if (it != g_segments->begin() && std::prev(it)->second.end > start) --it;
  uint64_t at = start;
  for (; at < end && it != g_segments->end() && it->first < end; ++it) {
    if (it->first > at) f(PageState{});
    f(it->second.st);
    at = it->second.end;
  }
  if (at < end) f(PageState{});
}

// The page-aligned range [*start, *end) of a managed allocation covering
// [p, p + count); INVALID_VALUE if it is not managed memory.
CUresult ManagedRange(CUdeviceptr p, size_t count, uint64_t* start, uint64_t* end) {
  if (p == 0 || count == 0) return CUDA_ERROR_INVALID_VALUE;
  AllocInfo info;
  if (!LookupAllocation(p, &info) || info.kind != AllocKind::kManaged) return CUDA_ERROR_INVALID_VALUE;
  if (count > info.size || p - info.base > info.size - count) return CUDA_ERROR_INVALID_VALUE;
  *start = p & ~uint64_t{kPageSize - 1};
  *end = RoundUp(p + count, kPageSize);
  return CUDA_SUCCESS;
}

bool ValidDevice(int d) { return d >= 0 && d < Node().device_count(); }

// A location for a prefetch or a preferred location: a device, the host or
// its NUMA node 0 (the sim's host has one). HOST_NUMA_CURRENT is node 0.
CUresult Normalize(CUmemLocation in, Loc* out) {
  switch (in.type) {
    case CU_MEM_LOCATION_TYPE_DEVICE:
      if (!ValidDevice(in.id)) return CUDA_ERROR_INVALID_DEVICE;
      *out = {CU_MEM_LOCATION_TYPE_DEVICE, in.id};
      return CUDA_SUCCESS;
    case CU_MEM_LOCATION_TYPE_HOST:
      *out = {CU_MEM_LOCATION_TYPE_HOST, 0};
      return CUDA_SUCCESS;
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:
      if (in.id != 0) return CUDA_ERROR_INVALID_VALUE;
      *out = {CU_MEM_LOCATION_TYPE_HOST_NUMA, 0};
      return CUDA_SUCCESS;
    case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT:
      *out = {CU_MEM_LOCATION_TYPE_HOST_NUMA, 0};
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

// The legacy APIs name a device ordinal or CU_DEVICE_CPU.
CUresult FromDevice(CUdevice d, CUmemLocation* out) {
  if (d == CU_DEVICE_CPU) {
    *out = {CU_MEM_LOCATION_TYPE_HOST, 0};
    return CUDA_SUCCESS;
  }
  if (!ValidDevice(d)) return CUDA_ERROR_INVALID_DEVICE;
  *out = {CU_MEM_LOCATION_TYPE_DEVICE, d};
  return CUDA_SUCCESS;
}

CUresult Advise(CUdeviceptr p, size_t count, CUmem_advise advice, CUmemLocation location) {
  uint64_t start = 0, end = 0;
  if (CUresult r = ManagedRange(p, count, &start, &end); r != CUDA_SUCCESS) return r;
  Loc loc;
  uint32_t bit = 0;
  switch (RawEnum(advice)) {
    case CU_MEM_ADVISE_SET_READ_MOSTLY:
    case CU_MEM_ADVISE_UNSET_READ_MOSTLY:
    case CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION:
      break;  // location ignored
    case CU_MEM_ADVISE_SET_PREFERRED_LOCATION:
      if (CUresult r = Normalize(location, &loc); r != CUDA_SUCCESS) return r;
      break;
    case CU_MEM_ADVISE_SET_ACCESSED_BY:
    case CU_MEM_ADVISE_UNSET_ACCESSED_BY:
      if (location.type == CU_MEM_LOCATION_TYPE_HOST) {
        bit = kHostBit;
      } else if (location.type == CU_MEM_LOCATION_TYPE_DEVICE) {
        if (!ValidDevice(location.id)) return CUDA_ERROR_INVALID_DEVICE;
        bit = 1u << location.id;
      } else {
        return CUDA_ERROR_INVALID_VALUE;  // "All other location types are invalid."
      }
      break;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
  std::lock_guard<std::mutex> lock(g_mu);
  Apply(start, end, [&](PageState& s) {
    switch (advice) {
      case CU_MEM_ADVISE_SET_READ_MOSTLY: s.read_mostly = true; break;
      case CU_MEM_ADVISE_UNSET_READ_MOSTLY: s.read_mostly = false; break;
      case CU_MEM_ADVISE_SET_PREFERRED_LOCATION: s.preferred = loc; break;
      case CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION: s.preferred = Loc{}; break;
      case CU_MEM_ADVISE_SET_ACCESSED_BY: s.accessed_by |= bit; break;
      default: s.accessed_by &= ~bit; break;
    }
  });
  return CUDA_SUCCESS;
}

CUresult Prefetch(CUdeviceptr p, size_t count, CUmemLocation location, unsigned flags, CUstream h,
                  bool ptsz) {
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  uint64_t start = 0, end = 0;
  if (CUresult r = ManagedRange(p, count, &start, &end); r != CUDA_SUCCESS) return r;
  Loc loc;
  if (CUresult r = Normalize(location, &loc); r != CUDA_SUCCESS) return r;
  Stream* s = nullptr;
  if (CUresult r = ResolveStream(h, ptsz, &s); r != CUDA_SUCCESS) return r;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    Apply(start, end, [&](PageState& st) { st.prefetched = loc; });
  }
  Op* op = s->Begin();  // ordered on the stream; the data is already everywhere
  op->kind = OpKind::kNop;
  s->Commit();
  return CUDA_SUCCESS;
}

// The location every page agrees on, or INVALID.
template <typename Get>
Loc Common(uint64_t start, uint64_t end, Get get) {
  bool first = true, same = true;
  Loc common;
  Visit(start, end, [&](const PageState& s) {
    Loc l = get(s);
    if (first) {
      common = l;
      first = false;
    } else if (!(l == common)) {
      same = false;
    }
  });
  return same ? common : Loc{};
}

int AsDeviceId(const Loc& l) {
  switch (l.type) {
    case CU_MEM_LOCATION_TYPE_DEVICE: return l.id;
    case CU_MEM_LOCATION_TYPE_HOST:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA: return CU_DEVICE_CPU;
    default: return CU_DEVICE_INVALID;
  }
}

CUresult RangeAttribute(void* data, size_t size, CUmem_range_attribute attr, CUdeviceptr p, size_t count) {
  if (data == nullptr) return CUDA_ERROR_INVALID_VALUE;
  uint64_t start = 0, end = 0;
  if (CUresult r = ManagedRange(p, count, &start, &end); r != CUDA_SUCCESS) return r;
  auto* out = static_cast<int*>(data);
  if (attr == CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY) {
    if (size == 0 || size % 4 != 0) return CUDA_ERROR_INVALID_VALUE;
  } else if (size != 4) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  std::lock_guard<std::mutex> lock(g_mu);
  auto preferred = [](const PageState& s) { return s.preferred; };
  auto prefetched = [](const PageState& s) { return s.prefetched; };
  switch (attr) {
    case CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY: {
      bool all = true;
      Visit(start, end, [&](const PageState& s) { all = all && s.read_mostly; });
      *out = all ? 1 : 0;
      return CUDA_SUCCESS;
    }
    case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION:
      *out = AsDeviceId(Common(start, end, preferred));
      return CUDA_SUCCESS;
    case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE:
      *out = Common(start, end, preferred).type;
      return CUDA_SUCCESS;
    case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID:
      *out = Common(start, end, preferred).id;
      return CUDA_SUCCESS;
    case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION:
      *out = AsDeviceId(Common(start, end, prefetched));
      return CUDA_SUCCESS;
    case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE:
      *out = Common(start, end, prefetched).type;
      return CUDA_SUCCESS;
    case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_ID:
      *out = Common(start, end, prefetched).id;
      return CUDA_SUCCESS;
    case CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY: {
      uint32_t mask = ~0u;
      Visit(start, end, [&](const PageState& s) { mask &= s.accessed_by; });
      size_t n = size / 4, i = 0;
      for (int d = 0; d < Node().device_count() && i < n; ++d) {
        if ((mask & (1u << d)) != 0) out[i++] = d;
      }
      if ((mask & kHostBit) != 0 && i < n) out[i++] = CU_DEVICE_CPU;
      for (; i < n; ++i) out[i] = CU_DEVICE_INVALID;
      return CUDA_SUCCESS;
    }
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

}  // namespace

namespace vgpu::sim {

void ForgetManagedRange(CUdeviceptr base, size_t size) {
  uint64_t start = base, end = RoundUp(base + size, kPageSize);
  std::lock_guard<std::mutex> lock(g_mu);
  Split(start);
  Split(end);
  g_segments->erase(g_segments->lower_bound(start), g_segments->lower_bound(end));
}

}  // namespace vgpu::sim

SIM_EXPORT CUresult CUDAAPI cuMemAdvise_v2(CUdeviceptr devPtr, size_t count, CUmem_advise advice,
                                           CUmemLocation location) {
  SIM_ENTER("cuMemAdvise_v2");
  return Advise(devPtr, count, advice, location);
}

#undef cuMemAdvise  // cuda.h maps the name to cuMemAdvise_v2
SIM_EXPORT CUresult CUDAAPI cuMemAdvise(CUdeviceptr devPtr, size_t count, CUmem_advise advice, CUdevice device) {
  SIM_ENTER("cuMemAdvise");
  CUmemLocation loc{};
  bool location_used = advice == CU_MEM_ADVISE_SET_PREFERRED_LOCATION ||
                       advice == CU_MEM_ADVISE_SET_ACCESSED_BY || advice == CU_MEM_ADVISE_UNSET_ACCESSED_BY;
  if (location_used) {
    if (CUresult r = FromDevice(device, &loc); r != CUDA_SUCCESS) return r;
  }
  return Advise(devPtr, count, advice, loc);
}

SIM_EXPORT CUresult CUDAAPI cuMemPrefetchAsync_v2(CUdeviceptr devPtr, size_t count, CUmemLocation location,
                                                  unsigned int flags, CUstream hStream) {
  SIM_ENTER("cuMemPrefetchAsync_v2");
  return Prefetch(devPtr, count, location, flags, hStream, false);
}
SIM_EXPORT CUresult CUDAAPI cuMemPrefetchAsync_v2_ptsz(CUdeviceptr devPtr, size_t count, CUmemLocation location,
                                                       unsigned int flags, CUstream hStream) {
  SIM_ENTER("cuMemPrefetchAsync_v2_ptsz");
  return Prefetch(devPtr, count, location, flags, hStream, true);
}

#undef cuMemPrefetchAsync  // cuda.h maps the name to cuMemPrefetchAsync_v2
SIM_EXPORT CUresult CUDAAPI cuMemPrefetchAsync(CUdeviceptr devPtr, size_t count, CUdevice dstDevice, CUstream hStream) {
  SIM_ENTER("cuMemPrefetchAsync");
  CUmemLocation loc{};
  if (CUresult r = FromDevice(dstDevice, &loc); r != CUDA_SUCCESS) return r;
  return Prefetch(devPtr, count, loc, 0, hStream, false);
}
SIM_EXPORT CUresult CUDAAPI cuMemPrefetchAsync_ptsz(CUdeviceptr devPtr, size_t count, CUdevice dstDevice, CUstream hStream) {
  SIM_ENTER("cuMemPrefetchAsync_ptsz");
  CUmemLocation loc{};
  if (CUresult r = FromDevice(dstDevice, &loc); r != CUDA_SUCCESS) return r;
  return Prefetch(devPtr, count, loc, 0, hStream, true);
}

SIM_EXPORT CUresult CUDAAPI cuMemRangeGetAttribute(void* data, size_t dataSize, CUmem_range_attribute attribute,
                                                   CUdeviceptr devPtr, size_t count) {
  SIM_ENTER("cuMemRangeGetAttribute");
  return RangeAttribute(data, dataSize, attribute, devPtr, count);
}

SIM_EXPORT CUresult CUDAAPI cuMemRangeGetAttributes(void** data, size_t* dataSizes, CUmem_range_attribute* attributes,
                                                    size_t numAttributes, CUdeviceptr devPtr, size_t count) {
  SIM_ENTER("cuMemRangeGetAttributes");
  if (data == nullptr || dataSizes == nullptr || attributes == nullptr || numAttributes == 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  for (size_t i = 0; i < numAttributes; ++i) {
    if (CUresult r = RangeAttribute(data[i], dataSizes[i], attributes[i], devPtr, count); r != CUDA_SUCCESS) {
      return r;
    }
  }
  return CUDA_SUCCESS;
}

// Batched managed-memory operations (CUDA 13) and stream attachment. Managed
// memory is host memory here, reachable from every device at once
// (CONCURRENT_MANAGED_ACCESS 1), so a prefetch only records its location, a
// discard keeps the bytes (cuda.h leaves a discarded range's contents
// indeterminate) and an attachment changes no visibility.
namespace {

// cuda.h's rules for per-group arrays (prefetchLocIdxs, attrsIdxs): first 0,
// strictly increasing, below count, no more groups than operations.
bool ValidGroups(const size_t* idxs, size_t n, size_t count) {
  if (idxs == nullptr || n == 0 || n > count || idxs[0] != 0) return false;
  for (size_t k = 1; k < n; ++k) {
    if (idxs[k] <= idxs[k - 1]) return false;
  }
  return idxs[n - 1] < count;
}

CUresult ValidRanges(const CUdeviceptr* p, const size_t* sizes, size_t count) {
  if (p == nullptr || sizes == nullptr || count == 0) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < count; ++i) {
    uint64_t start = 0, end = 0;
    if (CUresult r = ManagedRange(p[i], sizes[i], &start, &end); r != CUDA_SUCCESS) return r;
  }
  return CUDA_SUCCESS;
}

// One no-op in stream order: the batch completes when the stream reaches it.
CUresult QueueMarker(CUstream h, bool ptsz) {
  if (h == CU_STREAM_LEGACY || (!ptsz && h == nullptr)) return CUDA_ERROR_INVALID_VALUE;
  Stream* s = nullptr;
  if (CUresult r = ResolveStream(h, ptsz, &s); r != CUDA_SUCCESS) return r;
  Op* op = s->Begin();
  op->kind = OpKind::kNop;
  s->Commit();
  return CUDA_SUCCESS;
}

CUresult PrefetchBatch(const CUdeviceptr* p, const size_t* sizes, size_t count,
                       const CUmemLocation* locs, const size_t* idxs, size_t n_locs,
                       unsigned long long flags, CUstream h, bool ptsz) {
  if (flags != 0 || locs == nullptr || !ValidGroups(idxs, n_locs, count))
    return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = ValidRanges(p, sizes, count); r != CUDA_SUCCESS) return r;
  std::vector<Loc> norm(n_locs);
  for (size_t k = 0; k < n_locs; ++k) {
    if (CUresult r = Normalize(locs[k], &norm[k]); r != CUDA_SUCCESS) return r;
  }
  if (CUresult r = QueueMarker(h, ptsz); r != CUDA_SUCCESS) return r;
  std::lock_guard<std::mutex> lock(g_mu);
  size_t k = 0;
  for (size_t i = 0; i < count; ++i) {
    while (k + 1 < n_locs && idxs[k + 1] <= i) ++k;
    uint64_t start = 0, end = 0;
    ManagedRange(p[i], sizes[i], &start, &end);
    Apply(start, end, [&](PageState& st) { st.prefetched = norm[k]; });
  }
  return CUDA_SUCCESS;
}

CUresult DiscardBatch(const CUdeviceptr* p, const size_t* sizes, size_t count,
                      unsigned long long flags, CUstream h, bool ptsz) {
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = ValidRanges(p, sizes, count); r != CUDA_SUCCESS) return r;
  return QueueMarker(h, ptsz);
}

CUresult AttachMem(CUstream h, CUdeviceptr p, size_t length, unsigned flags, bool ptsz) {
  if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST &&
      flags != CU_MEM_ATTACH_SINGLE) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  AllocInfo info;
  if (!LookupAllocation(p, &info) || info.kind != AllocKind::kManaged)
    return CUDA_ERROR_INVALID_VALUE;
  // cuda.h: the whole allocation (length 0 or its size), never a part of it.
  if (length != 0 && (length != info.size || p != info.base)) return CUDA_ERROR_INVALID_VALUE;
  Stream* s = nullptr;
  if (CUresult r = ResolveStream(h, ptsz, &s); r != CUDA_SUCCESS) return r;
  // "It is illegal to attach singly to the NULL stream" (either default stream).
  if (flags == CU_MEM_ATTACH_SINGLE &&
      (h == nullptr || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  Op* op = s->Begin();  // ordered like any stream operation; nothing to change
  op->kind = OpKind::kNop;
  s->Commit();
  return CUDA_SUCCESS;
}

}  // namespace

SIM_EXPORT CUresult CUDAAPI cuMemPrefetchBatchAsync(CUdeviceptr* dptrs, size_t* sizes, size_t count,
                                                    CUmemLocation* prefetchLocs,
                                                    size_t* prefetchLocIdxs, size_t numPrefetchLocs,
                                                    unsigned long long flags, CUstream hStream) {
  SIM_ENTER("cuMemPrefetchBatchAsync");
  return PrefetchBatch(dptrs, sizes, count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs, flags,
                       hStream, false);
}

SIM_EXPORT CUresult CUDAAPI cuMemPrefetchBatchAsync_ptsz(
    CUdeviceptr* dptrs, size_t* sizes, size_t count, CUmemLocation* prefetchLocs,
    size_t* prefetchLocIdxs, size_t numPrefetchLocs, unsigned long long flags, CUstream hStream) {
  SIM_ENTER("cuMemPrefetchBatchAsync_ptsz");
  return PrefetchBatch(dptrs, sizes, count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs, flags,
                       hStream, true);
}

SIM_EXPORT CUresult CUDAAPI cuMemDiscardBatchAsync(CUdeviceptr* dptrs, size_t* sizes, size_t count,
                                                   unsigned long long flags, CUstream hStream) {
  SIM_ENTER("cuMemDiscardBatchAsync");
  return DiscardBatch(dptrs, sizes, count, flags, hStream, false);
}

SIM_EXPORT CUresult CUDAAPI cuMemDiscardBatchAsync_ptsz(CUdeviceptr* dptrs, size_t* sizes,
                                                        size_t count, unsigned long long flags,
                                                        CUstream hStream) {
  SIM_ENTER("cuMemDiscardBatchAsync_ptsz");
  return DiscardBatch(dptrs, sizes, count, flags, hStream, true);
}

// Discarding then prefetching: the prefetch alone, as discarding changes nothing here.
SIM_EXPORT CUresult CUDAAPI cuMemDiscardAndPrefetchBatchAsync(
    CUdeviceptr* dptrs, size_t* sizes, size_t count, CUmemLocation* prefetchLocs,
    size_t* prefetchLocIdxs, size_t numPrefetchLocs, unsigned long long flags, CUstream hStream) {
  SIM_ENTER("cuMemDiscardAndPrefetchBatchAsync");
  return PrefetchBatch(dptrs, sizes, count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs, flags,
                       hStream, false);
}

SIM_EXPORT CUresult CUDAAPI cuMemDiscardAndPrefetchBatchAsync_ptsz(
    CUdeviceptr* dptrs, size_t* sizes, size_t count, CUmemLocation* prefetchLocs,
    size_t* prefetchLocIdxs, size_t numPrefetchLocs, unsigned long long flags, CUstream hStream) {
  SIM_ENTER("cuMemDiscardAndPrefetchBatchAsync_ptsz");
  return PrefetchBatch(dptrs, sizes, count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs, flags,
                       hStream, true);
}

SIM_EXPORT CUresult CUDAAPI cuStreamAttachMemAsync(CUstream hStream, CUdeviceptr dptr,
                                                   size_t length, unsigned int flags) {
  SIM_ENTER("cuStreamAttachMemAsync");
  return AttachMem(hStream, dptr, length, flags, false);
}

SIM_EXPORT CUresult CUDAAPI cuStreamAttachMemAsync_ptsz(CUstream hStream, CUdeviceptr dptr,
                                                        size_t length, unsigned int flags) {
  SIM_ENTER("cuStreamAttachMemAsync_ptsz");
  return AttachMem(hStream, dptr, length, flags, true);
}
