#include "residency/engine.h"

#include <dirent.h>
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
#include "common/counters.h"
#include "common/log.h"
#include "common/process_info.h"
#include "driver/cu_status.h"
#include "driver/real_driver.h"
#include "residency/staging.h"
#include "vmm/vmm.h"

namespace vgpu::residency {

namespace {

constexpr const char* kImageSuffix = ".vgpuckpt";

// Named after the process (pid and start time name one process for the
// life of the system): jobs checkpointed into one directory never share a
// file, and neither does a later process that happens to get the same pid.
std::string ImageFileName() {
  pid_t pid = getpid();
  return "vgpu-" + std::to_string(pid) + "-" + std::to_string(ProcessStartTime(pid)) + kImageSuffix;
}

double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string CuErr(CUresult r) { return driver::CuErrorText(r); }

// The result of a finished checkpoint or restore, logged once.
Report Done(const char* verb, uint64_t bytes, std::chrono::steady_clock::time_point t0,
            const std::string& path) {
  Report res;
  res.bytes = bytes;
  res.seconds = Since(t0);
  res.path = path;
  VGPU_LOG(kInfo, "{} {} ({}) in {:.3f} s", verb, FormatByteSize(bytes).c_str(), path.c_str(),
           res.seconds);
  return res;
}

std::string ImagePath(const std::string& from) {
  std::error_code ec;
  if (std::filesystem::is_directory(from, ec)) return from + "/" + ImageFileName();
  return from;
}

// The other images in `dir`, for a restore that finds none of this process
// there (the job was restarted: its image has the old pid in its name).
std::string OtherImages(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n.ends_with(kImageSuffix)) names.push_back(n);
    }
    closedir(d);
  }
  if (names.empty()) return "";
  std::sort(names.begin(), names.end());
  std::string list;
  for (size_t i = 0; i < names.size() && i < 5; ++i) list += (i ? ", " : "") + names[i];
  if (names.size() > 5) list += ", ...";
  return "; it holds " + list + " (to restore another process's image, name the file with --from)";
}

std::string Hex(uint64_t v) {
  char b[32];
  snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
  return b;
}

// Counts a completed operation (common/counters.h); a refused or failed one
// counts nothing. A resume of a checkpointed process counts as a resume.
Result Counted(Result r, counters::Id ops, counters::Id bytes, counters::Id ns) {
  if (!r.ok()) return r;
  counters::Add(ops);
  counters::Add(bytes, r->bytes);
  counters::Add(ns, static_cast<uint64_t>(r->seconds * 1e9));
  return r;
}

}  // namespace

const char* StateName(State s) {
  switch (s) {
    case State::kRunning:
      return "running";
    case State::kSuspended:
      return "suspended";
    case State::kCheckpointed:
      return "suspended";
  }
  return "running";
}

Engine::Engine(EnginePorts ports) : ports_(std::move(ports)), staging_{ports_.cuda, ports_.vmm} {}

void Engine::ForgetContext(CUcontext ctx) {
  std::lock_guard<std::mutex> lock(book_mu_);
  contexts_.erase(ctx);
}

void Engine::NoteContext(CUcontext ctx) {
  if (ctx == nullptr) return;
  std::lock_guard<std::mutex> lock(book_mu_);
  contexts_.insert(ctx);
}

// Closes the gate and drains every context the process uses.
void Engine::Quiesce() {
  CloseGate();
  std::set<CUcontext> ctxs;
  {
    std::lock_guard<std::mutex> lock(book_mu_);
    ctxs = contexts_;
  }
  for (CUcontext c : ports_.vmm->Contexts()) ctxs.insert(c);
  for (CUcontext c : ctxs) {
    if (c == nullptr) continue;
    ports_.vmm->WithContext(c, [this] { return TABLE_CALL(*ports_.cuda, cuCtxSynchronize); });
  }
  int n = 0;
  if (TABLE_CALL(*ports_.cuda, cuDeviceGetCount, &n) != CUDA_SUCCESS) n = 0;
  for (int d = 0; d < n; ++d) {
    unsigned flags = 0;
    int active = 0;
    if (TABLE_CALL(*ports_.cuda, cuDevicePrimaryCtxGetState, d, &flags, &active) != CUDA_SUCCESS ||
        !active)
      continue;
    CUcontext c = nullptr;
    if (TABLE_CALL(*ports_.cuda, cuDevicePrimaryCtxRetain, &c, d) != CUDA_SUCCESS) continue;
    if (ctxs.count(c) == 0)
      ports_.vmm->WithContext(c, [this] { return TABLE_CALL(*ports_.cuda, cuCtxSynchronize); });
    TABLE_CALL(*ports_.cuda, cuDevicePrimaryCtxRelease_v2, d);
  }
}

Status Engine::RefuseNonMigratable() {
  if (std::string why = ports_.sharing_refusal ? ports_.sharing_refusal() : ""; !why.empty()) {
    return Status::Error(ErrorCode::kBusy, why);
  }
  // Graph pools' cached memory is given back first by the owner's count.
  const uint64_t n = ports_.non_migratable_bytes ? ports_.non_migratable_bytes() : 0;
  if (n == 0) return Status::Ok();
  return Status::Error(
      ErrorCode::kBusy,
      "process holds " + std::to_string(n) +
          " bytes of non-migratable memory (on the driver's path: managed memory, arrays, "
          "imported or self-mapped memory, graph memory a launch holds, or any "
          "allocation with VGPU_VMM=off)");
}

// Appends a suspended allocation from its host copy.
Status Engine::AppendHostCopy(const vmm::AllocationInfo& a, checkpoint::ImageWriter* w) {
  constexpr size_t kPiece = 16ull << 20;
  for (size_t o = 0; o < a.size; o += kPiece) {
    const uint8_t* src = ports_.vmm->HostCopy(a.va + o);
    if (src == nullptr)
      return Status::Error(ErrorCode::kIo, "suspended allocation has no host copy");
    if (auto st = w->Append(src, std::min(kPiece, a.size - o)); !st.ok()) {
      return Status::Error(ErrorCode::kIo, st.message);
    }
  }
  return Status::Ok();
}

// Writes every allocation into a new image at `path` (from the device when
// `from_device`, else from the host copies of a suspended process). When it
// returns, no copy is in flight and a failed image's temp file is gone.
Status Engine::WriteImage(const std::string& path, bool replace, bool from_device,
                          const std::vector<vmm::AllocationInfo>& allocs, uint64_t total,
                          const Progress& progress) {
  nlohmann::json meta = {{"pid", getpid()}, {"allocations", allocs.size()}, {"bytes", total}};
  checkpoint::ImageMetadata md;
  md.device_metadata = meta.dump();
  checkpoint::WriterOptions wo;
  wo.total_bytes = total;
  wo.replace = replace;  // else an image appearing meanwhile is left alone
  wo.log = [](const std::string& line) { VGPU_LOG(kDebug, "{}", line.c_str()); };
  if (progress) wo.progress = [&](uint64_t d, uint64_t t) { progress("write", d, t); };
  // From the device: the copies go by DMA straight into pinned frame buffers.
  if (from_device && !allocs.empty())
    wo.frame_buffers = PinnedFrameBuffers(staging_, allocs[0].ctx);
  std::unique_ptr<checkpoint::ImageWriter> w;
  if (auto st = checkpoint::ImageWriter::Create(path, md, wo, &w); !st.ok()) {
    return Status::Error(ErrorCode::kIo, st.message);
  }
  CopyStreams streams(staging_);  // declared after w: its copies finish before w's buffers go
  for (const auto& a : allocs) {
    if (auto st = w->BeginRecord(a.va, a.size, 0, a.device); !st.ok()) {
      return Status::Error(ErrorCode::kIo, st.message);
    }
    if (from_device) {
      if (std::string e = streams.CopyOut(a, w.get()); !e.empty())
        return Status::Error(ErrorCode::kIo, e);
    } else if (Status r = AppendHostCopy(a, w.get()); !r.ok()) {
      return r;
    }
    if (auto st = w->EndRecord(); !st.ok()) return Status::Error(ErrorCode::kIo, st.message);
  }
  if (auto st = w->Finish(); !st.ok()) return Status::Error(ErrorCode::kIo, st.message);
  return Status::Ok();
}

// Whether a new image may go to `path`: nothing is there, or an image this
// process wrote (*replace), which the writer replaces atomically, so it stays
// whole until the new one is. Anything else may be another job's only copy
// of its memory, or one left by an earlier process with our pid (exec, a
// reboot): never replaced.
Status Engine::CheckImageTarget(const std::string& path, bool* replace) {
  struct stat st {};
  *replace = false;
  if (lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return Status::Ok();
    return Status::Error(ErrorCode::kIo, "cannot check " + path + ": " + strerror(errno));
  }
  if (S_ISREG(st.st_mode) && own_images_.count(IdentityOf(st)) != 0) {
    *replace = true;
    return Status::Ok();
  }
  return Status::Error(ErrorCode::kExist,
                       "refusing to replace " + path +
                           ": this process did not write it (another job's image, or an "
                           "earlier process's with the same pid); move it away or "
                           "checkpoint into another directory");
}

Engine::FileIdentity Engine::IdentityOf(const struct stat& st) {
  return {st.st_dev, st.st_ino, st.st_size,
          static_cast<int64_t>(st.st_ctim.tv_sec) * 1'000'000'000 + st.st_ctim.tv_nsec};
}

void Engine::NoteOwnImage(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) == 0) own_images_.insert(IdentityOf(st));
}

// The image must describe exactly this process's allocations (same VAs,
// sizes, devices): pairs every record with its allocation, or says why not.
Status Engine::MatchImage(const checkpoint::ImageReader& reader, const std::string& path,
                          std::vector<RestoreTarget>* targets) {
  targets->clear();  // a second match (after quiescing) replaces the first
  std::vector<vmm::AllocationInfo> allocs = ports_.vmm->Allocations();
  auto recs = reader.records();
  const std::string prefix = "checkpoint image " + path + " does not match this process: ";
  if (recs.size() != allocs.size()) {
    return Status::Error(ErrorCode::kIo, prefix + std::to_string(recs.size()) +
                                             " records, the process has " +
                                             std::to_string(allocs.size()) + " allocations");
  }
  std::vector<size_t> order(recs.size());
  for (size_t i = 0; i < recs.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return recs[a].va < recs[b].va; });
  for (size_t i = 0; i < allocs.size(); ++i) {
    const auto& r = recs[order[i]];
    if (r.va != allocs[i].va || r.size != allocs[i].size ||
        static_cast<int>(r.device) != allocs[i].device) {
      return Status::Error(ErrorCode::kIo,
                           prefix + "record at VA " + Hex(r.va) + " has no matching allocation");
    }
    targets->push_back({order[i], allocs[i]});
  }
  return Status::Ok();
}

// Maps fresh device memory and streams the image into it.
std::string Engine::MapAndLoad(const checkpoint::ImageReader& reader,
                               const std::vector<RestoreTarget>& targets,
                               const Progress& progress) {
  if (CUresult r = ports_.vmm->RecreateAll(nullptr); r != CUDA_SUCCESS) {
    return "cannot map device memory for the restore: " + CuErr(r);
  }
  uint64_t total = reader.info().data_bytes;
  if (progress) progress("restore", 0, total);
  int threads = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 4u));
  return RestoreFrames(staging_, reader, targets, threads, [&](uint64_t d, uint64_t t) {
    if (progress) progress("restore", d, t);
  });
}

Result Engine::RestoreLocked(const std::string& from, const Progress& progress) {
  std::string path = ImagePath(from.empty() ? last_path_ : from);
  if (path.empty()) return Status::Error(ErrorCode::kNoEnt, "no checkpoint to restore from");
  auto t0 = std::chrono::steady_clock::now();
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    std::string others = !from.empty() && path != from ? OtherImages(from) : "";
    return Status::Error(ErrorCode::kNoEnt, "no checkpoint image at " + path + others);
  }
  checkpoint::ReaderOptions ro;
  ro.log = [](const std::string& line) { VGPU_LOG(kDebug, "{}", line.c_str()); };
  std::unique_ptr<checkpoint::ImageReader> reader;
  if (auto s = checkpoint::ImageReader::Open(path, ro, &reader); !s.ok()) {
    return Status::Error(ErrorCode::kIo, s.message);
  }
  std::vector<RestoreTarget> targets;
  if (Status r = MatchImage(*reader, path, &targets); !r.ok()) return r;
  vmm::Manager& m = (*ports_.vmm);
  State before = state_.load();
  if (before == State::kCheckpointed) {
    // The device memory is released and the data lives only in an image:
    // one pass, each frame verified as it is read. A bad frame releases what
    // was mapped again, which is exactly the state before the call.
    if (std::string e = MapAndLoad(*reader, targets, progress); !e.empty()) {
      m.ReleaseAll(false, nullptr);
      return Status::Error(ErrorCode::kIo,
                           "restore from " + path + " refused: " + e +
                               " (the process stays suspended; its memory is still in " +
                               last_path_ + ")");
    }
  } else {
    // Running, or suspended with host copies: those are the data until the
    // whole image is known good, so verify every frame before touching them.
    if (progress) progress("verify", 0, reader->info().data_bytes);
    if (auto s = reader->VerifyData(); !s.ok()) return Status::Error(ErrorCode::kIo, s.message);
    if (before == State::kRunning) {
      Quiesce();
      // The application may have allocated or freed since the first match.
      if (Status r = MatchImage(*reader, path, &targets); !r.ok()) {
        OpenGate();
        return r;
      }
    }
    m.DropHostCopies();
    if (std::string e = MapAndLoad(*reader, targets, progress); !e.empty()) {
      // The verified image is now the only good copy: release what was
      // loaded and stay checkpointed on it, so that resume restores from it.
      m.ReleaseAll(false, nullptr);
      last_path_ = path;
      state_.store(State::kCheckpointed);
      return Status::Error(ErrorCode::kIo, "restore from " + path + " failed midway: " + e +
                                               " (the process stays suspended; its memory is in " +
                                               path + ")");
    }
  }
  state_.store(State::kRunning);
  OpenGate();
  return Done("restored", reader->info().data_bytes, t0, path);
}

Result Engine::DoSuspend(const Progress& progress) {
  std::lock_guard<std::mutex> lock(op_mu_);
  if (state_.load() != State::kRunning)
    return Status::Error(ErrorCode::kBusy, "process is already suspended");
  if (Status r = RefuseNonMigratable(); !r.ok()) return r;
  auto t0 = std::chrono::steady_clock::now();
  Quiesce();
  // Again, drained: a managed allocation may have been inside the gate.
  if (Status r = RefuseNonMigratable(); !r.ok()) {
    OpenGate();
    return r;
  }
  auto t_drained = std::chrono::steady_clock::now();
  vmm::Manager& m = (*ports_.vmm);
  uint64_t bytes = m.MappedBytes();
  // ReleaseAll copies every chunk out before it unmaps any: the progress call
  // that reports the last byte marks the end of the copy phase.
  auto t_copied = t_drained;
  CUresult r = m.ReleaseAll(true, [&](uint64_t d, uint64_t t) {
    if (d == t) t_copied = std::chrono::steady_clock::now();
    if (progress) progress("copy", d, t);
  });
  if (r != CUDA_SUCCESS) {
    OpenGate();
    return Status::Error(ErrorCode::kIo, "suspend failed copying device memory out: " + CuErr(r));
  }
  state_.store(State::kSuspended);
  auto t_end = std::chrono::steady_clock::now();
  auto secs = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
  Report res;
  res.bytes = bytes;
  res.seconds = secs(t0, t_end);
  res.phases = {{"drain", secs(t0, t_drained)},
                {"copy_out", secs(t_drained, t_copied)},
                {"release", secs(t_copied, t_end)}};
  VGPU_LOG(kInfo,
           "suspended: {} released in {:.3f} s (drain {:.3f}, copy out {:.3f}, release {:.3f})",
           FormatByteSize(bytes).c_str(), res.seconds, res.phases[0].second, res.phases[1].second,
           res.phases[2].second);
  return res;
}

Result Engine::DoResume(const Progress& progress) {
  std::lock_guard<std::mutex> lock(op_mu_);
  State s = state_.load();
  if (s == State::kRunning) return Status::Error(ErrorCode::kBusy, "process is not suspended");
  if (s == State::kCheckpointed) return RestoreLocked(last_path_, progress);
  auto t0 = std::chrono::steady_clock::now();
  vmm::Manager& m = (*ports_.vmm);
  CUresult r = m.RecreateAll([&](uint64_t d, uint64_t t) {
    if (progress) progress("copy", d, t);
  });
  if (r != CUDA_SUCCESS) {
    return Status::Error(ErrorCode::kIo,
                         "resume failed mapping or copying back device memory: " + CuErr(r) +
                             " (still suspended; retry when memory is free)");
  }
  state_.store(State::kRunning);
  OpenGate();
  Report res;
  res.bytes = m.MappedBytes();
  res.seconds = Since(t0);
  return res;
}

Result Engine::DoCheckpoint(const std::string& dir, bool leave_running, const Progress& progress) {
  std::lock_guard<std::mutex> lock(op_mu_);
  State s = state_.load();
  if (s == State::kCheckpointed) {
    return Status::Error(ErrorCode::kBusy, "process is already checkpointed to " + last_path_ +
                                               "; restore or resume it first");
  }
  if (s == State::kRunning) {
    if (Status r = RefuseNonMigratable(); !r.ok()) return r;
  }
  if (dir.empty()) return Status::Error(ErrorCode::kInval, "no checkpoint directory given");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::Error(ErrorCode::kIo, "cannot create " + dir + ": " + ec.message());
  std::string path = dir + "/" + ImageFileName();
  bool replace = false;
  if (Status r = CheckImageTarget(path, &replace); !r.ok()) return r;
  auto t0 = std::chrono::steady_clock::now();
  if (s == State::kRunning) Quiesce();
  auto undo = [&](Status r) -> Result {
    if (s == State::kRunning) OpenGate();
    return r;
  };
  if (s == State::kRunning) {
    if (Status r = RefuseNonMigratable(); !r.ok()) return undo(r);  // allocated while draining
  }
  vmm::Manager& m = (*ports_.vmm);
  std::vector<vmm::AllocationInfo> allocs = m.Allocations();
  uint64_t total = 0;
  for (const auto& a : allocs) total += a.size;
  // The gate reopens only after WriteImage returns: its copy streams are
  // drained and the failed image's buffers are gone by then.
  if (Status r = WriteImage(path, replace, s == State::kRunning, allocs, total, progress);
      !r.ok()) {
    return undo(r);
  }
  NoteOwnImage(path);
  last_path_ = path;
  if (!leave_running) {
    if (s == State::kRunning) m.ReleaseAll(false, nullptr);
    m.DropHostCopies();
    state_.store(State::kCheckpointed);
  } else if (s == State::kRunning) {
    OpenGate();
  }
  return Done("checkpointed", total, t0, path);
}

Result Engine::Suspend(const Progress& progress) {
  using counters::Id;
  return Counted(DoSuspend(progress), Id::kSuspends, Id::kSuspendBytes, Id::kSuspendNs);
}

Result Engine::Resume(const Progress& progress) {
  using counters::Id;
  return Counted(DoResume(progress), Id::kResumes, Id::kResumeBytes, Id::kResumeNs);
}

Result Engine::Checkpoint(const std::string& dir, bool leave_running, const Progress& progress) {
  using counters::Id;
  return Counted(DoCheckpoint(dir, leave_running, progress), Id::kCheckpoints, Id::kCheckpointBytes,
                 Id::kCheckpointNs);
}

Result Engine::Restore(const std::string& from, const Progress& progress) {
  using counters::Id;
  Result r = [&] {
    std::lock_guard<std::mutex> lock(op_mu_);
    return RestoreLocked(from, progress);
  }();
  return Counted(std::move(r), Id::kRestores, Id::kRestoreBytes, Id::kRestoreNs);
}

}  // namespace vgpu::residency
