// CUfunction and CUkernel handles: slots in one address range reserved at
// first use and never unmapped, so any handle value can be checked without a
// lock (range, alignment, live flag) and a stale one never crashes.
//
// A slot in use is pinned by a user count: Acquire increments it and checks
// the slot is live, Retire clears the live flag and waits for the count to
// drain before the slot's module state may be freed. Both sides use seq_cst,
// so either Acquire sees the slot retired or Retire sees the user.
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "vgpu/sim_kernel.h"

namespace vgpu::sim {

struct Module;
struct Library;
struct ProgramKernel;

enum class HandleKind : uint8_t { kFunction, kKernel };

// Attributes an application may set (cuFuncSetAttribute, cuKernelSetAttribute,
// cuFuncSetCacheConfig). A library kernel and its per-context functions share
// the kernel's copy.
struct KernelAttributes {
  std::atomic<int32_t> max_dynamic_shared{-1};  // -1: the default
  std::atomic<int32_t> carveout{-1};
  std::atomic<int32_t> non_portable_cluster{0};
  std::atomic<int32_t> cluster_policy{0};
  std::atomic<int32_t> cache_config{CU_FUNC_CACHE_PREFER_NONE};
  std::atomic<uint32_t> cluster_dims[3] = {0, 0, 0};  // set at runtime; 0: none
  void Reset();
};

struct KernelHandle {
  std::atomic<uint32_t> live{0};
  std::atomic<uint32_t> users{0};
  // Set before the slot goes live, constant until it is retired.
  HandleKind kind = HandleKind::kFunction;
  const ProgramKernel* kernel = nullptr;  // owned by the module's / library's Program
  Module* module = nullptr;               // kFunction: its module
  Library* library = nullptr;             // kKernel; kFunction of a library's module
  KernelHandle* attrs_owner = this;       // where attributes live
  KernelAttributes attrs;
  // kKernel: the context the launch path last loaded the library into.
  std::atomic<CUcontext> last_ctx{nullptr};

  KernelAttributes& attributes() { return attrs_owner->attrs; }
};

class HandleTable {
 public:
  static HandleTable& Get();

  // A fresh slot (not live yet: fill it, then Publish). nullptr when all
  // slots are in use.
  KernelHandle* Allocate();
  void Publish(KernelHandle* h) { h->live.store(1, std::memory_order_seq_cst); }
  // Makes h invalid, waits for its users to leave, then recycles it.
  void Retire(KernelHandle* h);

  // The live slot `handle` names, pinned until Release; nullptr otherwise.
  KernelHandle* Acquire(const void* handle);
  static void Release(KernelHandle* h) { h->users.fetch_sub(1, std::memory_order_release); }

 private:
  HandleTable();
  KernelHandle* Find(const void* handle) const;

  KernelHandle* base_ = nullptr;
  size_t capacity_ = 0;
  std::atomic<size_t> constructed_{0};  // slots [0, constructed_) exist
};

// RAII pin of a handle.
class HandleRef {
 public:
  explicit HandleRef(const void* handle) : h_(HandleTable::Get().Acquire(handle)) {}
  ~HandleRef() {
    if (h_) HandleTable::Release(h_);
  }
  HandleRef(const HandleRef&) = delete;
  HandleRef& operator=(const HandleRef&) = delete;
  KernelHandle* get() const { return h_; }
  KernelHandle* operator->() const { return h_; }
  explicit operator bool() const { return h_ != nullptr; }

 private:
  KernelHandle* h_;
};

}  // namespace vgpu::sim
