// Who shares device memory with this process through CUDA IPC of VMM-served
// memory (libvgpu: intercept/hooks_ipc.cc; docs/vmm.md "CUDA IPC"): the importers of
// each allocation it exported (told by its agent's "ipc_export" and
// "ipc_close") and the exporters of what it opened (vmm::ImportedMemory).
//
// Two rules rest on it:
//  - residency: suspend, checkpoint and migration move one process's memory,
//    so they are refused while the process shares memory with a live process
//    ("memory shared with PIDs ...") rather than leave a peer mapping memory
//    that moved, or half a group suspended;
//  - quota: an exported allocation freed while importers still map it stays
//    allocated (and charged to the exporter) until the last one closes or
//    exits; then it is freed.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace vgpu::residency {

class IpcSharing {
 public:
  // `alive(pid)`: false once the process is gone. `free(buffer_id, base)`:
  // frees a deferred allocation (the VMM manager's Free, if `base` still holds
  // that buffer).
  IpcSharing(std::function<bool(int64_t)> alive, std::function<void(uint64_t, uint64_t)> free)
      : alive_(std::move(alive)), free_(std::move(free)) {}

  // A process mapped the buffer (once per opening context), or closed one
  // such mapping.
  void NoteImporter(uint64_t buffer_id, int64_t pid);
  void ForgetImporter(uint64_t buffer_id, int64_t pid);
  // Whether any allocation of this process is imported anywhere: one load,
  // so that a free pays nothing more while nothing is shared.
  bool Exporting() const { return exporting_.load(std::memory_order_acquire); }
  // True if `buffer_id` (at `base`) still has importers: its free is deferred
  // until they are gone.
  bool DeferFree(uint64_t buffer_id, uint64_t base);
  // The live processes this one shares memory with: importers of its exports
  // and `exporters` (of what it opened), sorted. Forgets importers that exited
  // and completes the frees they held up.
  std::vector<int64_t> SharedWith(const std::set<int64_t>& exporters);

 private:
  // Frees deferred allocations nobody imports any more (mu_ released).
  void CompleteFrees(const std::vector<std::pair<uint64_t, uint64_t>>& frees);

  std::function<bool(int64_t)> alive_;
  std::function<void(uint64_t, uint64_t)> free_;
  std::mutex mu_;
  // buffer id -> importing pid -> its live mappings (one per context that
  // opened the buffer: each tells its own close)
  std::map<uint64_t, std::map<int64_t, int>> importers_;
  std::atomic<bool> exporting_{false};               // !importers_.empty()
  std::map<uint64_t, uint64_t> deferred_;            // buffer id -> base of a freed allocation
};

// "memory shared with PIDs 12, 34 (CUDA IPC): ..." for a refused operation,
// "" if `pids` is empty.
std::string SharedMemoryRefusal(const std::vector<int64_t>& pids);

}  // namespace vgpu::residency
