#include "sim/engine/address_space.h"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <mutex>

#include "sim/engine/sim_state.h"

namespace vgpu::sim {
namespace {

constexpr int kAnonFlags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;

// VA budget: 8x the node's total capacity (the interposer reserves large VMM
// ranges up front), at least 256 GiB, at most 16 TiB.
size_t WindowSize() {
  uint64_t total = 0;
  if (SimState* s = State(); s != nullptr) {
    for (const auto& d : s->config.devices) total += d.total_bytes;
  }
  size_t size = std::max<uint64_t>(256ull << 30, 8 * total);
  return std::min<size_t>(size, 16ull << 40);
}

}  // namespace

AddressSpace& AddressSpace::Get() {
  static AddressSpace* space = new AddressSpace();  // never destroyed: workers may outlive exit
  return *space;
}

AddressSpace::AddressSpace() {
  size_t size = WindowSize();
  void* p = MAP_FAILED;
  while (p == MAP_FAILED && size >= (16ull << 30)) {
    p = mmap(nullptr, 2 * size + kVmmGranularity, PROT_NONE, kAnonFlags, -1, 0);
    if (p == MAP_FAILED) size /= 2;
  }
  if (p == MAP_FAILED) return;  // every allocation then fails with OOM
  // Device pointers aligned like a real GPU's 2 MiB pages.
  auto base = RoundUp(reinterpret_cast<uintptr_t>(p), kVmmGranularity);
  base_ = base;
  size_ = size;
  delta_ = static_cast<intptr_t>(size);
  free_va_[base_] = size_;
}

bool AddressSpace::AllocVa(size_t size, size_t align, CUdeviceptr hint, CUdeviceptr* out) {
  std::unique_lock lock(mu_);
  if (size == 0 || size > size_) return false;
  // An explicit hint is honoured when free, as cuMemAddressReserve does.
  if (hint != 0 && hint % align == 0) {
    auto it = free_va_.upper_bound(hint);
    if (it != free_va_.begin()) {
      --it;
      if (it->first <= hint && hint + size <= it->first + it->second) {
        CUdeviceptr start = it->first;
        size_t len = it->second;
        free_va_.erase(it);
        if (hint > start) free_va_[start] = hint - start;
        if (hint + size < start + len) free_va_[hint + size] = start + len - hint - size;
        *out = hint;
        return true;
      }
    }
  }
  for (auto it = free_va_.begin(); it != free_va_.end(); ++it) {
    CUdeviceptr start = it->first;
    size_t len = it->second;
    CUdeviceptr aligned = RoundUp(start, align);
    if (aligned - start > len || len - (aligned - start) < size) continue;
    free_va_.erase(it);
    if (aligned > start) free_va_[start] = aligned - start;
    if (aligned + size < start + len) free_va_[aligned + size] = start + len - aligned - size;
    *out = aligned;
    return true;
  }
  return false;
}

void AddressSpace::FreeVa(CUdeviceptr base, size_t size) {
  std::unique_lock lock(mu_);
  auto next = free_va_.lower_bound(base);
  if (next != free_va_.end() && base + size == next->first) {
    size += next->second;
    next = free_va_.erase(next);
  }
  if (next != free_va_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == base) {
      prev->second += size;
      return;
    }
  }
  free_va_[base] = size;
}

bool AddressSpace::BackAnonymous(CUdeviceptr va, size_t size) {
  return mmap(Shadow(va), size, PROT_READ | PROT_WRITE, kAnonFlags | MAP_FIXED, -1, 0) !=
         MAP_FAILED;
}

bool AddressSpace::BackFile(CUdeviceptr va, size_t size, int fd, size_t offset) {
  return mmap(Shadow(va), size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd,
              static_cast<off_t>(offset)) != MAP_FAILED;
}

void AddressSpace::Unback(CUdeviceptr va, size_t size) {
  // Replacing the pages returns them to the host kernel at once.
  mmap(Shadow(va), size, PROT_NONE, kAnonFlags | MAP_FIXED, -1, 0);
}

void AddressSpace::AddAllocation(const AllocInfo& info) {
  static std::atomic<uint64_t> next_id{1};
  std::unique_lock lock(mu_);
  AllocInfo copy = info;
  copy.buffer_id = next_id.fetch_add(1);
  allocs_[info.base] = copy;
}

bool AddressSpace::RemoveAllocation(CUdeviceptr base, AllocInfo* out) {
  std::unique_lock lock(mu_);
  auto it = allocs_.find(base);
  if (it == allocs_.end()) return false;
  if (out != nullptr) *out = it->second;
  allocs_.erase(it);
  return true;
}

bool AddressSpace::FindAllocation(CUdeviceptr p, AllocInfo* out) const {
  std::shared_lock lock(mu_);
  auto it = allocs_.upper_bound(p);
  if (it == allocs_.begin()) return false;
  --it;
  if (p - it->first >= it->second.size) return false;
  if (out != nullptr) *out = it->second;
  return true;
}

bool AddressSpace::SetSyncMemops(CUdeviceptr p, bool value) {
  std::unique_lock lock(mu_);
  auto it = allocs_.upper_bound(p);
  if (it == allocs_.begin()) return false;
  --it;
  if (p - it->first >= it->second.size) return false;
  it->second.sync_memops = value;
  return true;
}

bool AddressSpace::SetIpcExport(CUdeviceptr base, int fd, uint64_t inode) {
  std::unique_lock lock(mu_);
  auto it = allocs_.find(base);
  if (it == allocs_.end()) return false;
  it->second.ipc_fd = fd;
  it->second.ipc_inode = inode;
  return true;
}

std::vector<AllocInfo> AddressSpace::AllocationsOf(CUcontext ctx) const {
  std::shared_lock lock(mu_);
  std::vector<AllocInfo> out;
  for (const auto& [base, info] : allocs_) {
    if (info.ctx == ctx) out.push_back(info);
  }
  return out;
}

void AddressSpace::AddMapping(CUdeviceptr base, size_t size, void* host, int device,
                              bool accessible) {
  std::unique_lock lock(mu_);
  maps_[base] = Mapping{size, host, device, accessible};
}

void AddressSpace::RemoveMapping(CUdeviceptr base) {
  std::unique_lock lock(mu_);
  maps_.erase(base);
}

bool AddressSpace::SetMappingAccess(CUdeviceptr base, size_t size, bool accessible) {
  std::unique_lock lock(mu_);
  // Every byte of the range must be mapped; mappings are contiguous pieces.
  CUdeviceptr p = base;
  auto it = maps_.upper_bound(p);
  if (it == maps_.begin()) return false;
  --it;
  if (p - it->first >= it->second.size) return false;
  auto first = it;
  while (p < base + size) {
    if (it == maps_.end() || it->first > p) return false;
    p = it->first + it->second.size;
    ++it;
  }
  for (auto j = first; j != it; ++j) j->second.accessible = accessible;
  return true;
}

bool AddressSpace::MappingAccessible(CUdeviceptr base, int* device) const {
  std::shared_lock lock(mu_);
  auto it = maps_.find(base);
  if (it == maps_.end()) return false;
  if (device != nullptr) *device = it->second.device;
  return it->second.accessible;
}

bool AddressSpace::FindMapping(CUdeviceptr p, CUdeviceptr* base, size_t* size,
                               int* device) const {
  std::shared_lock lock(mu_);
  auto it = maps_.upper_bound(p);
  if (it == maps_.begin()) return false;
  --it;
  if (p - it->first >= it->second.size) return false;
  *base = it->first;
  *size = it->second.size;
  *device = it->second.device;
  return true;
}

bool AddressSpace::AnyMapping(CUdeviceptr base, size_t size) const {
  std::shared_lock lock(mu_);
  auto it = maps_.lower_bound(base);
  if (it != maps_.end() && it->first < base + size) return true;
  if (it == maps_.begin()) return false;
  --it;
  return it->first + it->second.size > base;
}

void* AddressSpace::Translate(CUdeviceptr p, size_t n) const {
  std::shared_lock lock(mu_);
  auto it = maps_.upper_bound(p);
  if (it == maps_.begin()) return nullptr;
  --it;
  if (p - it->first >= it->second.size || !it->second.accessible) return nullptr;
  auto* host = static_cast<uint8_t*>(it->second.host) + (p - it->first);
  // A range may span adjacent mappings (VMM chunks): their shadows are
  // contiguous too, since the shadow is the window shifted by a constant.
  CUdeviceptr end = p + n;
  CUdeviceptr covered = it->first + it->second.size;
  bool in_window = InWindow(p, n);
  while (covered < end) {
    ++it;
    if (!in_window || it == maps_.end() || it->first != covered || !it->second.accessible) {
      return nullptr;
    }
    covered += it->second.size;
  }
  return host;
}

void* Translate(CUdeviceptr dptr, size_t bytes) {
  return AddressSpace::Get().Translate(dptr, bytes);
}

bool LookupAllocation(CUdeviceptr dptr, AllocInfo* out) {
  return AddressSpace::Get().FindAllocation(dptr, out);
}

namespace {

// Address and backing of a linear device allocation; the caller charges it.
CUresult MapDevice(int device, CUcontext ctx, size_t bytes, CUdeviceptr* out) {
  AddressSpace& as = AddressSpace::Get();
  size_t size = RoundUp(bytes, kPageSize);
  CUdeviceptr va = 0;
  size_t align = size >= kVmmGranularity ? kVmmGranularity : kPageSize;
  if (!as.AllocVa(size, align, 0, &va)) return CUDA_ERROR_OUT_OF_MEMORY;
  if (!as.BackAnonymous(va, size)) {
    as.FreeVa(va, size);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  AllocInfo info;
  info.base = va;
  info.size = bytes;
  info.kind = AllocKind::kDevice;
  info.device = device;
  info.ctx = ctx;
  as.AddAllocation(info);
  as.AddMapping(va, size, as.Shadow(va), device, true);
  *out = va;
  return CUDA_SUCCESS;
}

// Removes a linear device allocation; its size (rounded) in *size.
CUresult UnmapDevice(CUdeviceptr dptr, AllocInfo* info, size_t* size) {
  AddressSpace& as = AddressSpace::Get();
  if (!as.FindAllocation(dptr, info) || info->base != dptr || info->kind != AllocKind::kDevice) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (!as.RemoveAllocation(dptr, info)) return CUDA_ERROR_INVALID_VALUE;
  *size = RoundUp(info->size, kPageSize);
  // Importers keep their mappings (and so the pages) until they close.
  if (info->ipc_fd >= 0) close(info->ipc_fd);
  as.RemoveMapping(dptr);
  as.Unback(dptr, *size);
  as.FreeVa(dptr, *size);
  return CUDA_SUCCESS;
}

}  // namespace

CUresult AllocDeviceMemory(int device, CUcontext ctx, size_t bytes, CUdeviceptr* out) {
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  size_t size = RoundUp(bytes, kPageSize);
  if (!Node().Reserve(device, size)) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult r = MapDevice(device, ctx, bytes, out);
  if (r != CUDA_SUCCESS) Node().Unreserve(device, size);
  return r;
}

CUresult FreeDeviceMemory(CUdeviceptr dptr) {
  AllocInfo info;
  size_t size = 0;
  if (CUresult r = UnmapDevice(dptr, &info, &size); r != CUDA_SUCCESS) return r;
  Node().Unreserve(info.device, size);
  return CUDA_SUCCESS;
}

CUresult MapGraphMemory(int device, size_t bytes, CUdeviceptr* out) {
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  // No context: graph memory is the device's, and a context's destruction
  // (which frees the context's allocations) must not unmap it.
  return MapDevice(device, nullptr, bytes, out);
}

void UnmapGraphMemory(CUdeviceptr dptr) {
  AllocInfo info;
  size_t size = 0;
  UnmapDevice(dptr, &info, &size);
}

}  // namespace vgpu::sim
