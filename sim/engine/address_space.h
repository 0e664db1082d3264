// The process's simulated device address space: a device window reserved
// PROT_NONE (device pointers live here and fault on host dereference) and a
// shadow window of the same size at a fixed distance that holds the backing
// pages. Also the registry of allocations and of mapped (backed) ranges that
// translation and pointer queries use.
#pragma once

#include <cuda.h>

#include <map>
#include <shared_mutex>
#include <vector>

#include "sim/engine/device_memory.h"

namespace vgpu::sim {

class AddressSpace {
 public:
  static AddressSpace& Get();

  // VA management inside the device window.
  bool AllocVa(size_t size, size_t align, CUdeviceptr hint, CUdeviceptr* out);
  void FreeVa(CUdeviceptr base, size_t size);
  bool InWindow(CUdeviceptr p, size_t n) const {
    return p >= base_ && n <= size_ && p - base_ <= size_ - n;
  }
  void* Shadow(CUdeviceptr p) const { return reinterpret_cast<void*>(p + delta_); }

  // Backs [va, va+size) with fresh anonymous pages (linear allocations), with
  // pages of memfd `fd` at `offset` (VMM mappings), or drops the backing.
  bool BackAnonymous(CUdeviceptr va, size_t size);
  bool BackFile(CUdeviceptr va, size_t size, int fd, size_t offset);
  void Unback(CUdeviceptr va, size_t size);

  // Allocation records (what cuMemGetAddressRange and pointer attributes see).
  void AddAllocation(const AllocInfo& info);
  bool RemoveAllocation(CUdeviceptr base, AllocInfo* out);
  bool FindAllocation(CUdeviceptr p, AllocInfo* out) const;
  std::vector<AllocInfo> AllocationsOf(CUcontext ctx) const;
  // Sets CU_POINTER_ATTRIBUTE_SYNC_MEMOPS on the allocation containing p.
  bool SetSyncMemops(CUdeviceptr p, bool value);
  // Records that the allocation at `base` is now backed by memfd `fd` (CUDA IPC).
  bool SetIpcExport(CUdeviceptr base, int fd, uint64_t inode);

  // Backed ranges that Translate may resolve. `host` is the host address of base.
  void AddMapping(CUdeviceptr base, size_t size, void* host, int device, bool accessible);
  void RemoveMapping(CUdeviceptr base);
  bool SetMappingAccess(CUdeviceptr base, size_t size, bool accessible);
  bool MappingAccessible(CUdeviceptr base, int* device) const;
  // The mapping containing p: its base, size and device.
  bool FindMapping(CUdeviceptr p, CUdeviceptr* base, size_t* size, int* device) const;
  // True if any mapping overlaps [base, base+size).
  bool AnyMapping(CUdeviceptr base, size_t size) const;

  void* Translate(CUdeviceptr p, size_t n) const;

 private:
  AddressSpace();
  struct Mapping {
    size_t size;
    void* host;
    int device;
    bool accessible;
  };

  CUdeviceptr base_ = 0;
  size_t size_ = 0;
  intptr_t delta_ = 0;
  mutable std::shared_mutex mu_;
  std::map<CUdeviceptr, size_t> free_va_;
  std::map<CUdeviceptr, AllocInfo> allocs_;
  std::map<CUdeviceptr, Mapping> maps_;
};

inline constexpr size_t kPageSize = 4096;
inline constexpr size_t kVmmGranularity = 2ull << 20;
inline size_t RoundUp(size_t v, size_t a) { return (v + a - 1) / a * a; }

}  // namespace vgpu::sim
