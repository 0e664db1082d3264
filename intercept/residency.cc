#include "intercept/residency.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>
#include <unordered_map>
#include <vector>

#include "checkpoint/image_reader.h"
#include "checkpoint/image_writer.h"
#include "common/byte_size.h"
#include "intercept/log.h"
#include "intercept/real_driver.h"
#include "vmm/vmm.h"

namespace vgpu::residency {

std::atomic<bool> g_gate_closed{false};

namespace {

// --- the gate ---------------------------------------------------------------
std::mutex g_slots_mu;
GateSlot* g_slots = nullptr;       // every slot ever registered (never freed)
std::mutex g_wait_mu;
std::condition_variable g_wait_cv;

struct SlotReturner {
  GateSlot* slot = nullptr;
  ~SlotReturner() {
    if (slot != nullptr) slot->in_use.store(false, std::memory_order_release);
  }
};
thread_local SlotReturner t_returner;

void CloseGate() {
  g_gate_closed.store(true, std::memory_order_seq_cst);
  for (;;) {
    bool busy = false;
    {
      std::lock_guard<std::mutex> lock(g_slots_mu);
      for (GateSlot* s = g_slots; s != nullptr; s = s->next) {
        if (s->active.load(std::memory_order_seq_cst) != 0) {
          busy = true;
          break;
        }
      }
    }
    if (!busy) return;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

void OpenGate() {
  {
    std::lock_guard<std::mutex> lock(g_wait_mu);
    g_gate_closed.store(false, std::memory_order_seq_cst);
  }
  g_wait_cv.notify_all();
}

// --- bookkeeping -------------------------------------------------------------
struct NonMigratable {
  uint64_t bytes;
  CUcontext ctx;
};
std::mutex g_book_mu;
std::unordered_map<uint64_t, NonMigratable>* g_nonmig = new std::unordered_map<uint64_t, NonMigratable>();
std::set<CUcontext>* g_contexts = new std::set<CUcontext>();

std::mutex g_op_mu;  // one operation at a time
std::atomic<State> g_state{State::kRunning};
std::string* g_last_path = new std::string();

constexpr const char* kImageName = "image.vgpuckpt";

double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string CuErr(CUresult r) { return "CUDA error " + std::to_string(static_cast<int>(r)); }

// Closes the gate and drains every context the process uses.
void Quiesce() {
  CloseGate();
  std::set<CUcontext> ctxs;
  {
    std::lock_guard<std::mutex> lock(g_book_mu);
    ctxs = *g_contexts;
  }
  for (CUcontext c : vmm::Manager::Get().Contexts()) ctxs.insert(c);
  for (CUcontext c : ctxs) {
    if (c == nullptr) continue;
    vmm::Manager::WithContext(c, [] { return REAL_CALL(cuCtxSynchronize); });
  }
  int n = 0;
  if (REAL_CALL(cuDeviceGetCount, &n) != CUDA_SUCCESS) n = 0;
  for (int d = 0; d < n; ++d) {
    unsigned flags = 0;
    int active = 0;
    if (REAL_CALL(cuDevicePrimaryCtxGetState, d, &flags, &active) != CUDA_SUCCESS || !active) continue;
    CUcontext c = nullptr;
    if (REAL_CALL(cuDevicePrimaryCtxRetain, &c, d) != CUDA_SUCCESS) continue;
    if (ctxs.count(c) == 0) vmm::Manager::WithContext(c, [] { return REAL_CALL(cuCtxSynchronize); });
    REAL_CALL(cuDevicePrimaryCtxRelease_v2, d);
  }
}

// The result of a finished checkpoint or restore, logged once.
Result Done(const char* verb, uint64_t bytes, std::chrono::steady_clock::time_point t0,
            const std::string& path) {
  Result res;
  res.bytes = bytes;
  res.seconds = Since(t0);
  res.path = path;
  VGPU_LOG(kInfo, "%s %s (%s) in %.3f s", verb, FormatByteSize(bytes).c_str(), path.c_str(),
           res.seconds);
  return res;
}

Result RefuseNonMigratable() {
  uint64_t n = NonMigratableBytes();
  if (n == 0) return Result::Ok();
  return Result::Error("EBUSY", "process holds " + std::to_string(n) +
                                    " bytes of non-migratable memory (managed/arrays)");
}

std::string ImagePath(const std::string& from) {
  std::error_code ec;
  if (std::filesystem::is_directory(from, ec)) return from + "/" + kImageName;
  return from;
}

Result RestoreLocked(const std::string& from, const Progress& progress) {
  std::string path = ImagePath(from.empty() ? *g_last_path : from);
  if (path.empty()) return Result::Error("ENOENT", "no checkpoint to restore from");
  auto t0 = std::chrono::steady_clock::now();
  struct stat st{};
  if (stat(path.c_str(), &st) != 0) return Result::Error("ENOENT", "no checkpoint image at " + path);
  checkpoint::ReaderOptions ro;
  std::unique_ptr<checkpoint::ImageReader> reader;
  if (auto s = checkpoint::ImageReader::Open(path, ro, &reader); !s.ok()) {
    return Result::Error("EIO", s.message());
  }
  // The image must describe exactly this process's allocations.
  std::vector<vmm::AllocationInfo> allocs = vmm::Manager::Get().Allocations();
  auto recs = reader->records();
  if (recs.size() != allocs.size()) {
    return Result::Error("EIO", "checkpoint image " + path + " does not match this process: " +
                                       std::to_string(recs.size()) + " records, the process has " +
                                       std::to_string(allocs.size()) + " allocations");
  }
  std::vector<size_t> order(recs.size());
  for (size_t i = 0; i < recs.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return recs[a].va < recs[b].va; });
  for (size_t i = 0; i < allocs.size(); ++i) {
    const auto& r = recs[order[i]];
    if (r.va != allocs[i].va || r.size != allocs[i].size ||
        static_cast<int>(r.device) != allocs[i].device) {
      return Result::Error("EIO", "checkpoint image " + path +
                                         " does not match this process: record at VA 0x" +
                                         [&] { char b[32]; snprintf(b, sizeof b, "%llx", (unsigned long long)r.va); return std::string(b); }() +
                                         " has no matching allocation");
    }
  }
  if (progress) progress("verify", 0, reader->info().data_bytes);
  if (auto s = reader->VerifyData(); !s.ok()) return Result::Error("EIO", s.message());

  // Nothing has changed so far. From here on the process's memory is rewritten.
  State before = g_state.load();
  if (before == State::kRunning) Quiesce();
  vmm::Manager& m = vmm::Manager::Get();
  m.DropHostCopies();
  if (CUresult r = m.RecreateAll(nullptr); r != CUDA_SUCCESS) {
    g_state.store(State::kCheckpointed);  // no host copy any more: the image is the data
    *g_last_path = path;
    return Result::Error("EIO", "cannot map device memory for the restore: " + CuErr(r));
  }
  uint64_t total = reader->info().data_bytes, done = 0;
  constexpr uint64_t kBatch = 256ull << 20;
  std::vector<std::unique_ptr<uint8_t[]>> bufs;
  std::vector<checkpoint::ReadTarget> targets;
  std::vector<const vmm::AllocationInfo*> dsts;
  uint64_t batch_bytes = 0;
  std::string failure;
  auto flush = [&]() -> bool {
    if (targets.empty()) return true;
    if (auto s = reader->ReadRecords(targets); !s.ok()) {
      failure = s.message();
      return false;
    }
    for (size_t k = 0; k < targets.size(); ++k) {
      const vmm::AllocationInfo* a = dsts[k];
      CUresult r = vmm::Manager::WithContext(a->ctx, [&] {
        return REAL_CALL(cuMemcpyHtoD_v2, a->va, targets[k].dst, targets[k].size);
      });
      if (r != CUDA_SUCCESS) {
        failure = "copy to device: " + CuErr(r);
        return false;
      }
      done += targets[k].size;
      if (progress) progress("restore", done, total);
    }
    targets.clear();
    dsts.clear();
    bufs.clear();
    batch_bytes = 0;
    return true;
  };
  for (size_t i = 0; i < allocs.size(); ++i) {
    size_t n = allocs[i].size;
    std::unique_ptr<uint8_t[]> b(new (std::nothrow) uint8_t[n]);
    if (b == nullptr) {
      failure = "out of host memory";
      break;
    }
    targets.push_back({order[i], b.get(), n});
    dsts.push_back(&allocs[i]);
    bufs.push_back(std::move(b));
    batch_bytes += n;
    if (batch_bytes >= kBatch && !flush()) break;
  }
  if (failure.empty()) flush();
  if (!failure.empty()) {
    g_state.store(State::kSuspended);
    return Result::Error("EIO", "restore from " + path + " failed midway: " + failure);
  }
  g_state.store(State::kRunning);
  OpenGate();
  return Done("restored", total, t0, path);
}

}  // namespace

GateSlot* ThisThreadSlot() {
  std::lock_guard<std::mutex> lock(g_slots_mu);
  GateSlot* slot = nullptr;
  for (GateSlot* s = g_slots; s != nullptr; s = s->next) {
    bool expected = false;
    if (s->in_use.compare_exchange_strong(expected, true)) {
      slot = s;
      break;
    }
  }
  if (slot == nullptr) {
    slot = new GateSlot();
    slot->next = g_slots;
    g_slots = slot;
  }
  t_returner.slot = slot;
  return slot;
}

void WaitWhileClosed(GateSlot* slot) {
  for (;;) {
    slot->active.store(0, std::memory_order_seq_cst);
    {
      std::unique_lock<std::mutex> lock(g_wait_mu);
      g_wait_cv.wait(lock, [] { return !g_gate_closed.load(std::memory_order_seq_cst); });
    }
    slot->active.store(1, std::memory_order_seq_cst);
    if (!g_gate_closed.load(std::memory_order_seq_cst)) return;
  }
}

const char* StateName(State s) {
  switch (s) {
    case State::kRunning: return "running";
    case State::kSuspended: return "suspended";
    case State::kCheckpointed: return "suspended";
  }
  return "running";
}

State CurrentState() { return g_state.load(); }

void NoteNonMigratable(uint64_t key, uint64_t bytes, CUcontext ctx) {
  std::lock_guard<std::mutex> lock(g_book_mu);
  (*g_nonmig)[key] = NonMigratable{bytes, ctx};
}
void ForgetNonMigratable(uint64_t key) {
  std::lock_guard<std::mutex> lock(g_book_mu);
  g_nonmig->erase(key);
}
void ForgetNonMigratableContext(CUcontext ctx) {
  std::lock_guard<std::mutex> lock(g_book_mu);
  for (auto it = g_nonmig->begin(); it != g_nonmig->end();) {
    it = it->second.ctx == ctx ? g_nonmig->erase(it) : std::next(it);
  }
  g_contexts->erase(ctx);
}
uint64_t NonMigratableBytes() {
  std::lock_guard<std::mutex> lock(g_book_mu);
  uint64_t n = 0;
  for (const auto& [k, v] : *g_nonmig) n += v.bytes;
  return n;
}
void NoteContext(CUcontext ctx) {
  if (ctx == nullptr) return;
  std::lock_guard<std::mutex> lock(g_book_mu);
  g_contexts->insert(ctx);
}
void ForgetContext(CUcontext ctx) {
  std::lock_guard<std::mutex> lock(g_book_mu);
  g_contexts->erase(ctx);
}

uint64_t VmmBytes() { return vmm::Manager::Get().LiveBytes(); }

std::string LastCheckpointPath() {
  std::lock_guard<std::mutex> lock(g_op_mu);
  return *g_last_path;
}

Result Suspend(const Progress& progress) {
  std::lock_guard<std::mutex> lock(g_op_mu);
  if (g_state.load() != State::kRunning) return Result::Error("EBUSY", "process is already suspended");
  if (Result r = RefuseNonMigratable(); !r.ok) return r;
  auto t0 = std::chrono::steady_clock::now();
  Quiesce();
  vmm::Manager& m = vmm::Manager::Get();
  uint64_t bytes = m.MappedBytes();
  CUresult r = m.ReleaseAll(true, [&](uint64_t d, uint64_t t) {
    if (progress) progress("copy", d, t);
  });
  if (r != CUDA_SUCCESS) {
    OpenGate();
    return Result::Error("EIO", "suspend failed copying device memory out: " + CuErr(r));
  }
  g_state.store(State::kSuspended);
  Result res;
  res.bytes = bytes;
  res.seconds = Since(t0);
  VGPU_LOG(kInfo, "suspended: %s released in %.3f s", FormatByteSize(bytes).c_str(), res.seconds);
  return res;
}

Result Resume(const Progress& progress) {
  std::lock_guard<std::mutex> lock(g_op_mu);
  State s = g_state.load();
  if (s == State::kRunning) return Result::Error("EBUSY", "process is not suspended");
  if (s == State::kCheckpointed) return RestoreLocked(*g_last_path, progress);
  auto t0 = std::chrono::steady_clock::now();
  vmm::Manager& m = vmm::Manager::Get();
  CUresult r = m.RecreateAll([&](uint64_t d, uint64_t t) {
    if (progress) progress("copy", d, t);
  });
  if (r != CUDA_SUCCESS) {
    return Result::Error("EIO", "resume failed mapping device memory: " + CuErr(r) +
                                    " (still suspended; retry when memory is free)");
  }
  g_state.store(State::kRunning);
  OpenGate();
  Result res;
  res.bytes = m.MappedBytes();
  res.seconds = Since(t0);
  return res;
}

Result Checkpoint(const std::string& dir, bool leave_running, const Progress& progress) {
  std::lock_guard<std::mutex> lock(g_op_mu);
  State s = g_state.load();
  if (s == State::kCheckpointed) {
    return Result::Error("EBUSY", "process is already checkpointed to " + *g_last_path +
                                      "; restore or resume it first");
  }
  if (s == State::kRunning) {
    if (Result r = RefuseNonMigratable(); !r.ok) return r;
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Result::Error("EIO", "cannot create " + dir + ": " + ec.message());
  std::string path = dir + "/" + kImageName;
  auto t0 = std::chrono::steady_clock::now();
  if (s == State::kRunning) Quiesce();
  auto undo = [&](Result r) {
    if (s == State::kRunning) OpenGate();
    return r;
  };
  vmm::Manager& m = vmm::Manager::Get();
  std::vector<vmm::AllocationInfo> allocs = m.Allocations();
  uint64_t total = 0;
  for (const auto& a : allocs) total += a.size;
  nlohmann::json meta = {{"pid", getpid()}, {"allocations", allocs.size()}, {"bytes", total}};
  checkpoint::ImageMetadata md;
  md.device_metadata = meta.dump();
  checkpoint::WriterOptions wo;
  wo.total_bytes = total;
  if (progress) wo.progress = [&](uint64_t d, uint64_t t) { progress("write", d, t); };
  std::unique_ptr<checkpoint::ImageWriter> w;
  if (auto st = checkpoint::ImageWriter::Create(path, md, wo, &w); !st.ok()) {
    return undo(Result::Error("EIO", st.message()));
  }
  constexpr size_t kPiece = 16ull << 20;
  std::unique_ptr<uint8_t[]> staging(new (std::nothrow) uint8_t[kPiece]);
  if (staging == nullptr) return undo(Result::Error("EIO", "out of host memory"));
  for (const auto& a : allocs) {
    if (auto st = w->BeginRecord(a.va, a.size, 0, a.device); !st.ok()) {
      return undo(Result::Error("EIO", st.message()));
    }
    for (size_t o = 0; o < a.size; o += kPiece) {
      size_t n = std::min(kPiece, a.size - o);
      const uint8_t* src = nullptr;
      if (s == State::kSuspended) {
        src = m.HostCopy(a.va + o);
        if (src == nullptr) return undo(Result::Error("EIO", "suspended allocation has no host copy"));
      } else {
        CUresult r = vmm::Manager::WithContext(
            a.ctx, [&] { return REAL_CALL(cuMemcpyDtoH_v2, staging.get(), a.va + o, n); });
        if (r != CUDA_SUCCESS) return undo(Result::Error("EIO", "copy from device: " + CuErr(r)));
        src = staging.get();
      }
      if (auto st = w->Append(src, n); !st.ok()) return undo(Result::Error("EIO", st.message()));
    }
    if (auto st = w->EndRecord(); !st.ok()) return undo(Result::Error("EIO", st.message()));
  }
  if (auto st = w->Finish(); !st.ok()) return undo(Result::Error("EIO", st.message()));
  *g_last_path = path;
  if (!leave_running) {
    if (s == State::kRunning) m.ReleaseAll(false, nullptr);
    m.DropHostCopies();
    g_state.store(State::kCheckpointed);
  } else if (s == State::kRunning) {
    OpenGate();
  }
  return Done("checkpointed", total, t0, path);
}

Result Restore(const std::string& from, const Progress& progress) {
  std::lock_guard<std::mutex> lock(g_op_mu);
  return RestoreLocked(from, progress);
}

}  // namespace vgpu::residency
