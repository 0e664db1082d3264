#include "residency/ipc_sharing.h"

namespace vgpu::residency {

void IpcSharing::NoteImporter(uint64_t buffer_id, int64_t pid) {
  std::lock_guard<std::mutex> lock(mu_);
  ++importers_[buffer_id][pid];
  exporting_.store(true, std::memory_order_release);
}

void IpcSharing::ForgetImporter(uint64_t buffer_id, int64_t pid) {
  std::vector<std::pair<uint64_t, uint64_t>> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = importers_.find(buffer_id);
    if (it == importers_.end()) return;
    auto p = it->second.find(pid);
    if (p != it->second.end() && --p->second == 0) it->second.erase(p);
    if (!it->second.empty()) return;
    importers_.erase(it);
    exporting_.store(!importers_.empty(), std::memory_order_release);
    if (auto d = deferred_.find(buffer_id); d != deferred_.end()) {
      done.emplace_back(d->first, d->second);
      deferred_.erase(d);
    }
  }
  CompleteFrees(done);
}

bool IpcSharing::DeferFree(uint64_t buffer_id, uint64_t base) {
  SharedWith({});  // importers that exited do not hold a free up
  std::lock_guard<std::mutex> lock(mu_);
  if (importers_.find(buffer_id) == importers_.end()) return false;
  deferred_[buffer_id] = base;
  return true;
}

std::vector<int64_t> IpcSharing::SharedWith(const std::set<int64_t>& exporters) {
  std::set<int64_t> pids;
  std::vector<std::pair<uint64_t, uint64_t>> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = importers_.begin(); it != importers_.end();) {
      std::erase_if(it->second, [&](const auto& entry) { return !alive_(entry.first); });
      if (!it->second.empty()) {
        for (const auto& [pid, mappings] : it->second) pids.insert(pid);
        ++it;
        continue;
      }
      if (auto d = deferred_.find(it->first); d != deferred_.end()) {
        done.emplace_back(d->first, d->second);
        deferred_.erase(d);
      }
      it = importers_.erase(it);
    }
    exporting_.store(!importers_.empty(), std::memory_order_release);
  }
  CompleteFrees(done);
  for (int64_t pid : exporters) {
    if (alive_(pid)) pids.insert(pid);
  }
  return {pids.begin(), pids.end()};
}

void IpcSharing::CompleteFrees(const std::vector<std::pair<uint64_t, uint64_t>>& frees) {
  for (const auto& [buffer_id, base] : frees) free_(buffer_id, base);
}

std::string SharedMemoryRefusal(const std::vector<int64_t>& pids) {
  if (pids.empty()) return "";
  std::string list;
  for (int64_t pid : pids) list += (list.empty() ? "" : ", ") + std::to_string(pid);
  return "memory shared with PIDs " + list +
         " (CUDA IPC): suspend, checkpoint and migration move one process's device memory, so "
         "they are refused while another process maps it or it maps another's (close the IPC "
         "handles, or stop the processes together)";
}

}  // namespace vgpu::residency
