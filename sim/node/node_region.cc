#include "sim/node/node_region.h"

#include "common/atomic_ops.h"
#include "common/process_info.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

namespace vgpu::sim {
namespace {

constexpr uint64_t kUtilSampleSpacingNs = 10'000'000;  // 10 ms
// 16 samples 100 ms apart: at least the last 1.5 s of a busy process, the
// windows NVML clients ask for (HAMi-core: 1 s; nvidia-smi pmon: 1 s).
constexpr uint64_t kProcUtilSpacingNs = 100'000'000;

uint64_t Fnv1a(const void* data, size_t n, uint64_t h = 0xcbf29ce484222325ull) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

void InitEngineMutex(pthread_mutex_t* m) {
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
  pthread_mutex_init(m, &attr);
  pthread_mutexattr_destroy(&attr);
}

// Stable identity: the same node name and index give the same UUID in every
// process and every run, as a real board's UUID is fixed.
void InitDevice(DeviceState* d, const DeviceSpec& spec, const std::string& node, int index) {
  d->total_bytes = spec.total_bytes;
  d->mem_bandwidth_bytes_per_s = spec.mem_bandwidth_bytes_per_s;
  d->checkpoint_bytes_per_s = spec.checkpoint_bytes_per_s;
  d->restore_bytes_per_s = spec.restore_bytes_per_s;
  d->cc_major = spec.cc_major;
  d->cc_minor = spec.cc_minor;
  d->sm_count = spec.sm_count;
  d->pci_bus = 0x18 + 0x10 * index;
  uint64_t h1 = Fnv1a(node.data(), node.size());
  h1 = Fnv1a(&index, sizeof index, h1);
  uint64_t h2 = Fnv1a("vgpu-sim-uuid", 13, h1);
  std::memcpy(d->uuid, &h1, 8);
  std::memcpy(d->uuid + 8, &h2, 8);
  d->uuid[6] = static_cast<uint8_t>((d->uuid[6] & 0x0f) | 0x40);  // RFC 4122 v4 layout
  d->uuid[8] = static_cast<uint8_t>((d->uuid[8] & 0x3f) | 0x80);
  std::snprintf(d->name, sizeof d->name, "vgpu-sim GPU (sm_%d%d, %llu GiB)", spec.cc_major,
                spec.cc_minor, static_cast<unsigned long long>(spec.total_bytes >> 30));
  d->used_bytes.store(0);
  InitEngineMutex(&d->engine);
}

void InitHeader(NodeHeader* h, const SimConfig& config) {
  h->magic = kNodeMagic;
  h->version = kNodeVersion;
  h->region_bytes = sizeof(NodeHeader);
  h->device_count = static_cast<uint32_t>(config.devices.size());
  std::snprintf(h->devices_spec, sizeof h->devices_spec, "%s", config.devices_spec.c_str());
  h->created_ns = NowNs();
  for (size_t i = 0; i < config.devices.size(); ++i) {
    InitDevice(&h->devices[i], config.devices[i], config.node_name, static_cast<int>(i));
  }
  h->ready.store(1, std::memory_order_release);
}

std::string CheckHeader(const NodeHeader* h, const std::string& shm) {
  if (h->magic != kNodeMagic || h->version != kNodeVersion || h->region_bytes != sizeof(NodeHeader)) {
    return "simulated node region /dev/shm" + shm +
           " has a foreign or older layout; stop its processes and remove it";
  }
  return "";
}

// Maps an existing region once its creator has sized and initialized it.
NodeHeader* MapExisting(int fd, const std::string& shm, std::string* error) {
  struct stat st{};
  for (int i = 0; i < 500; ++i) {  // the creator sizes it in one ftruncate right after creating
    if (fstat(fd, &st) == 0 && st.st_size != 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (st.st_size != static_cast<off_t>(sizeof(NodeHeader))) {
    *error = "simulated node region /dev/shm" + shm + " has the wrong size (" +
             std::to_string(st.st_size) + " bytes); remove it";
    return nullptr;
  }
  void* p = mmap(nullptr, sizeof(NodeHeader), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    *error = "cannot map simulated node region /dev/shm" + shm + ": " + strerror(errno);
    return nullptr;
  }
  auto* h = static_cast<NodeHeader*>(p);
  for (int i = 0; i < 500 && h->ready.load(std::memory_order_acquire) == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::string bad = h->ready.load() == 0 ? "simulated node region /dev/shm" + shm +
                                               " was never initialized (its creator died); remove it"
                                         : CheckHeader(h, shm);
  if (!bad.empty()) {
    *error = bad;
    munmap(p, sizeof(NodeHeader));
    return nullptr;
  }
  return h;
}

// A region of another layout that no process holds (every user keeps a
// shared flock on it) is left over from an older build: replace it.
bool RemoveIfUnused(const std::string& shm) {
  int fd = shm_open(shm.c_str(), O_RDWR, 0);
  if (fd < 0) return errno == ENOENT;
  bool unused = flock(fd, LOCK_EX | LOCK_NB) == 0;
  if (unused) shm_unlink(shm.c_str());
  close(fd);
  return unused;
}

NodeHeader* OpenOrCreate(const SimConfig& config, bool* created, int* lock_fd, std::string* error,
                         bool retry = true) {
  std::string shm = NodeRegion::ShmName(config.node_name);
  *created = false;
  // 0666 whatever the umask: every user of a GPU node opens its devices
  // (/dev/nvidia* are 0666), so every user of the simulated node opens it.
  int fd = shm_open(shm.c_str(), O_RDWR | O_CREAT | O_EXCL, 0666);
  if (fd >= 0) {
    flock(fd, LOCK_SH);
    *created = true;
    if (fchmod(fd, 0666) != 0 || ftruncate(fd, sizeof(NodeHeader)) != 0) {
      *error = "cannot size simulated node region: " + std::string(strerror(errno));
      close(fd);
      shm_unlink(shm.c_str());
      return nullptr;
    }
    void* p = mmap(nullptr, sizeof(NodeHeader), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      *error = "cannot map simulated node region: " + std::string(strerror(errno));
      close(fd);
      return nullptr;
    }
    *lock_fd = fd;
    InitHeader(static_cast<NodeHeader*>(p), config);
    return static_cast<NodeHeader*>(p);
  }
  if (errno != EEXIST) {
    *error = "cannot create simulated node region /dev/shm" + shm + ": " + strerror(errno);
    return nullptr;
  }
  fd = shm_open(shm.c_str(), O_RDWR, 0);
  if (fd < 0) {
    *error = "cannot open simulated node region /dev/shm" + shm + ": " + strerror(errno);
    return nullptr;
  }
  flock(fd, LOCK_SH);
  NodeHeader* h = MapExisting(fd, shm, error);
  if (h == nullptr) {
    flock(fd, LOCK_UN);
    close(fd);
    if (retry && RemoveIfUnused(shm)) return OpenOrCreate(config, created, lock_fd, error, false);
    return nullptr;
  }
  *lock_fd = fd;
  return h;
}

// exec() frees the old image's device memory, as the real driver does when a
// process image ends; its slot keeps our pid and start time.

void ReleasePreviousImages(NodeHeader* h, ProcessSlot* mine, pid_t pid, uint64_t start) {
  for (auto& slot : h->processes) {
    int32_t p = slot.pid.load();
    if (&slot == mine || p != pid || slot.start_time.load() != start ||
        slot.pid_ns.load() != mine->pid_ns.load() ||
        slot.image_id.load() == ProcessImageId() || !slot.pid.compare_exchange_strong(p, -pid)) {
      continue;
    }
    for (uint32_t d = 0; d < h->device_count; ++d) {
      h->devices[d].used_bytes.fetch_sub(slot.used_bytes[d].exchange(0));
    }
    slot.pid.store(0, std::memory_order_release);
  }
}

bool RegisterSelf(NodeHeader* h, ProcessSlot** out) {
  pid_t pid = getpid();
  uint64_t start = ProcessStartTime(pid);
  {
    for (auto& slot : h->processes) {
      int32_t expected = 0;
      if (slot.pid.compare_exchange_strong(expected, -pid)) {  // claimed, not yet visible
        slot.start_time.store(start);
        for (auto& u : slot.used_bytes) u.store(0);
        for (auto& b : slot.busy_ns) b.store(0);
        for (auto& e : slot.last_end_ns) e.store(0);
        for (auto& n : slot.util_next) n.store(0);
        for (auto& ring : slot.util) {
          for (auto& u : ring) u.wall_ns.store(0), u.busy_ns.store(0);
        }
        slot.context_mask.store(0);
        slot.checkpoint.state.store(0);  // CU_PROCESS_STATE_RUNNING
        slot.checkpoint.restore_tid.store(0);
        slot.checkpoint.owner.store(0);
        slot.checkpoint.done.store(slot.checkpoint.request.load());
        slot.image_id.store(ProcessImageId());
        slot.pid_ns.store(PidNamespaceId());
        slot.pid.store(pid, std::memory_order_release);
        *out = &slot;
        ReleasePreviousImages(h, &slot, pid, start);
        return true;
      }
    }
  }
  return false;
}

// Appends (kernel start, busy before it) to the slot's ring for device d
// unless the newest sample is under kProcUtilSpacingNs old. Called under the
// engine mutex, so one writer per (slot, device). The wall time is cleared
// first and set last, so a reader that sees the same non-zero wall time
// before and after reading busy has a consistent pair.
void RecordProcessSample(ProcessSlot* slot, int d, uint64_t start_ns, uint64_t busy_before) {
  uint32_t next = slot->util_next[d].load();
  if (next > 0) {
    uint64_t prev = slot->util[d][(next - 1) % kProcUtilSamples].wall_ns.load();
    if (prev != 0 && start_ns - prev < kProcUtilSpacingNs) return;
  }
  UtilSample& s = slot->util[d][next % kProcUtilSamples];
  s.wall_ns.store(0);
  s.busy_ns.store(busy_before);
  s.wall_ns.store(start_ns);
  slot->util_next[d].store(next + 1);
}

// The slot's busy count at the start of the window (since_ns, now]: the
// newest sample at or before since_ns; before the first sample the process
// had no engine time at all, so while the ring has not wrapped a window that
// starts earlier counts from since_ns with zero. since_ns 0 (or older than
// the ring) falls back to the oldest sample.
UtilSample::Value WindowBase(const ProcessSlot& slot, int d, uint64_t since_ns, uint64_t now) {
  UtilSample::Value best{0, 0}, oldest{UINT64_MAX, 0};
  for (const UtilSample& s : slot.util[d]) {
    uint64_t w = s.wall_ns.load();
    uint64_t b = s.busy_ns.load();
    if (w == 0 || w > now || s.wall_ns.load() != w) continue;
    if (w <= since_ns && w > best.wall_ns) best = {w, b};
    if (w < oldest.wall_ns) oldest = {w, b};
  }
  if (best.wall_ns != 0) return best;
  bool wrapped = slot.util_next[d].load() > kProcUtilSamples;
  if (since_ns != 0 && !wrapped) return {since_ns, 0};
  return oldest.wall_ns == UINT64_MAX ? UtilSample::Value{now, 0} : oldest;
}

}  // namespace

uint64_t NowNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

std::string NodeRegion::ShmName(const std::string& node_name) { return "/vgpu-sim-" + node_name; }

NodeRegion* NodeRegion::Open(const SimConfig& config, std::string* error) {
  bool created = false;
  int lock_fd = -1;  // held open (with its shared flock) for the process's life
  NodeHeader* h = OpenOrCreate(config, &created, &lock_fd, error);
  if (h == nullptr) return nullptr;
  if (std::strncmp(h->devices_spec, config.devices_spec.c_str(), sizeof h->devices_spec) != 0) {
    *error = "VGPU_SIM_DEVICES='" + config.devices_spec + "' differs from '" + h->devices_spec +
             "' of the running simulated node '" + config.node_name + "'";
    munmap(h, sizeof(NodeHeader));
    return nullptr;
  }
  auto* region = new NodeRegion();
  region->header_ = h;
  ProcessSlot* slot = nullptr;
  if (!RegisterSelf(h, &slot)) {
    region->ReapDead();
    if (!RegisterSelf(h, &slot)) {
      *error = "simulated node '" + config.node_name + "' has no free process slot (max " +
               std::to_string(kMaxProcesses) + ")";
      munmap(h, sizeof(NodeHeader));
      delete region;
      return nullptr;
    }
  }
  region->registered_once_ = true;
  region->fd_ = lock_fd;
  region->self_.store(slot, std::memory_order_release);
  // Who we are to callers in any pid namespace (PidHere). Process-owned, so
  // not inherited by fork() and gone at exit; the descriptor is close-on-exec.
  struct flock fl {};
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  fl.l_start = static_cast<off_t>(sizeof(NodeHeader) + (slot - h->processes));
  fl.l_len = 1;
  fcntl(lock_fd, F_SETLK, &fl);
  return region;
}

NodeRegion* NodeRegion::Attach(const std::string& node_name, std::string* error) {
  std::string shm = ShmName(node_name);
  int fd = shm_open(shm.c_str(), O_RDWR, 0);
  if (fd < 0) {
    *error = "no simulated node '" + node_name + "' is running";
    return nullptr;
  }
  flock(fd, LOCK_SH);  // kept: a monitor is a user too
  NodeHeader* h = MapExisting(fd, shm, error);
  if (h == nullptr) {
    close(fd);
    return nullptr;
  }
  auto* region = new NodeRegion();
  region->header_ = h;
  region->fd_ = fd;
  return region;
}

pid_t NodeRegion::PidHere(const ProcessSlot& slot) const {
  if (fd_ < 0 || slot.pid.load() <= 0) return 0;
  struct flock fl {};
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  fl.l_start = static_cast<off_t>(sizeof(NodeHeader) + (&slot - header_->processes));
  fl.l_len = 1;
  if (fcntl(fd_, F_GETLK, &fl) != 0 || fl.l_type == F_UNLCK) return 0;
  return fl.l_pid > 0 ? fl.l_pid : 0;
}

NodeRegion::NodeRegion() {
  for (int d = 0; d < kMaxDevices; ++d) phys_[d].store(d);
}

bool NodeRegion::Reserve(int d, uint64_t bytes) { return ReservePhysical(Phys(d), bytes); }

void NodeRegion::Unreserve(int d, uint64_t bytes) { UnreservePhysical(Phys(d), bytes); }

bool NodeRegion::ReservePhysical(int d, uint64_t bytes) {
  DeviceState& dev = physical(d);
  for (int attempt = 0; attempt < 2; ++attempt) {
    uint64_t used = dev.used_bytes.load(std::memory_order_relaxed);
    while (used <= dev.total_bytes && bytes <= dev.total_bytes - used) {
      if (dev.used_bytes.compare_exchange_weak(used, used + bytes)) {
        if (ProcessSlot* self = self_.load(); self != nullptr) self->used_bytes[d].fetch_add(bytes);
        return true;
      }
    }
    if (attempt == 0 && ReapDead() == 0) break;
  }
  return false;
}

// The device gets back only what this process's slot still holds: after
// Unregister (which returned the slot's bytes at exit) a late free from
// another thread of the exiting process must not subtract them again. A
// double subtraction wrapped the device counter, and NVML then showed the
// device full for ever (vgpud waited on it: a job never resumed).
void NodeRegion::UnreservePhysical(int d, uint64_t bytes) {
  ProcessSlot* self = self_.load();
  if (self == nullptr) {
    if (registered_once_) return;  // everything was returned at Unregister
    physical(d).used_bytes.fetch_sub(bytes);  // an Attach-only user's own reservation
    return;
  }
  physical(d).used_bytes.fetch_sub(SubtractAtMost(self->used_bytes[d], bytes));
}

uint64_t NodeRegion::EngineAcquire(int d, uint64_t ready_ns) {
  DeviceState& dev = device(d);
  int rc = pthread_mutex_lock(&dev.engine);
  uint64_t now = NowNs();
  // Queued work starts when the engine frees up, not when this process's
  // worker thread gets to run: host wake-ups are not device idle time.
  uint64_t start = std::min(now, std::max(ready_ns, dev.last_release_ns.load()));
  if (rc == EOWNERDEAD) {
    // The previous holder died mid-kernel; its kernel is over.
    dev.running_since_ns.store(0);
    pthread_mutex_consistent(&dev.engine);
    start = now;
  }
  ProcessSlot* self = self_.load();
  int32_t pid = self != nullptr ? self->pid.load(std::memory_order_relaxed) : 0;
  dev.running_pid.store(pid, std::memory_order_relaxed);
  dev.running_since_ns.store(start, std::memory_order_relaxed);
  return start;
}

uint64_t NodeRegion::EngineRelease(int ordinal, uint64_t started_ns, uint64_t end_ns) {
  const int d = Phys(ordinal);  // the per-process history is kept per node device
  DeviceState& dev = physical(d);
  uint64_t ran = end_ns - started_ns;
  uint64_t busy = dev.busy_ns.fetch_add(ran) + ran;
  dev.running_since_ns.store(0, std::memory_order_relaxed);
  dev.running_pid.store(0, std::memory_order_relaxed);
  dev.last_release_ns.store(end_ns, std::memory_order_relaxed);
  dev.kernels_run.fetch_add(1, std::memory_order_relaxed);
  if (ProcessSlot* self = self_.load(); self != nullptr) {
    uint64_t before = self->busy_ns[d].fetch_add(ran, std::memory_order_relaxed);
    RecordProcessSample(self, d, started_ns, before);
    self->last_end_ns[d].store(end_ns, std::memory_order_relaxed);
  }
  uint32_t last = dev.util_next.load() % kUtilSamples;
  uint32_t prev = (last + kUtilSamples - 1) % kUtilSamples;
  // Sampled at the modelled end, where `busy` is exact.
  if (end_ns - dev.util[prev].wall_ns.load(std::memory_order_relaxed) >= kUtilSampleSpacingNs) {
    dev.util[last].wall_ns.store(end_ns, std::memory_order_relaxed);
    dev.util[last].busy_ns.store(busy, std::memory_order_relaxed);
    dev.util_next.fetch_add(1);
  }
  pthread_mutex_unlock(&dev.engine);
  return end_ns;
}

double NodeRegion::Utilization(int d, uint64_t window_ns) const {
  const DeviceState& dev = device(d);
  uint64_t now = NowNs();
  uint64_t running = dev.running_since_ns.load();
  uint64_t busy_now = dev.busy_ns.load() + (running != 0 && running < now ? now - running : 0);
  // Newest sample at least window_ns old; else the oldest one we have.
  uint64_t best_wall = 0, best_busy = 0, oldest_wall = UINT64_MAX, oldest_busy = 0;
  for (const auto& s : dev.util) {
    uint64_t w = s.wall_ns.load(std::memory_order_relaxed);
    if (w == 0 || w > now) continue;
    uint64_t b = s.busy_ns.load(std::memory_order_relaxed);
    if (now - w >= window_ns && w > best_wall) best_wall = w, best_busy = b;
    if (w < oldest_wall) oldest_wall = w, oldest_busy = b;
  }
  if (best_wall == 0) {
    // No sample is old enough. A node younger than the window counts from its
    // creation (zero busy then); an older one from its oldest sample.
    uint64_t created = header_->created_ns;
    bool young = now - created <= window_ns || oldest_wall == UINT64_MAX;
    best_wall = young ? created : oldest_wall;
    best_busy = young ? 0 : oldest_busy;
  }
  if (now <= best_wall || busy_now < best_busy) return 0.0;
  return std::min(1.0, static_cast<double>(busy_now - best_busy) / (now - best_wall));
}

int NodeRegion::ProcessUtilization(int d, uint64_t since_ns, uint64_t now, ProcessBusy* out,
                                   int max) const {
  const DeviceState& dev = device(d);
  int32_t running_pid = dev.running_pid.load();
  uint64_t running_since = dev.running_since_ns.load();
  int n = 0;
  for (const ProcessSlot& slot : header_->processes) {
    int32_t pid = slot.pid.load(std::memory_order_acquire);
    if (pid <= 0) continue;
    uint64_t busy = slot.busy_ns[d].load();
    uint64_t last = slot.last_end_ns[d].load();
    if (pid == running_pid && running_since != 0 && running_since < now) {
      busy += now - running_since;  // its kernel on the engine counts so far
      last = now;
    }
    if (last == 0 || last <= since_ns) continue;
    UtilSample::Value base = WindowBase(slot, d, since_ns, now);
    uint64_t in_window = busy > base.busy_ns ? busy - base.busy_ns : 0;
    // Never busier than the window: a first kernel still running has no
    // sample yet, so its window is its run so far.
    ProcessBusy use{pid, in_window, std::max(now - base.wall_ns, in_window), last};
    if (use.window_ns == 0) continue;
    int i = 0;
    while (i < n && out[i].pid != pid) ++i;  // one pid may hold several slots (exec)
    if (i == n) {
      if (n == max) break;
      out[n++] = use;
      continue;
    }
    out[i].busy_ns += use.busy_ns;
    out[i].window_ns = std::max(out[i].window_ns, use.window_ns);
    out[i].last_active_ns = std::max(out[i].last_active_ns, use.last_active_ns);
  }
  return n;
}

uint64_t NodeRegion::ReapDead() {
  uint64_t freed = 0;
  const uint64_t ns = PidNamespaceId();
  for (auto& slot : header_->processes) {
    int32_t pid = slot.pid.load();
    if (pid <= 0 || (self_.load() == &slot)) continue;
    if (slot.pid_ns.load() != ns) continue;  // not ours to judge
    if (ProcessAlive(pid, slot.start_time.load())) continue;
    if (!slot.pid.compare_exchange_strong(pid, -pid)) continue;  // someone else reaps it
    for (int d = 0; d < kMaxDevices && d < device_count(); ++d) {
      uint64_t u = slot.used_bytes[d].exchange(0);
      header_->devices[d].used_bytes.fetch_sub(u);
      freed += u;
    }
    slot.context_mask.store(0);
    slot.pid.store(0, std::memory_order_release);
  }
  return freed;
}

void NodeRegion::Unregister() {
  ProcessSlot* self = self_.exchange(nullptr);
  if (self == nullptr) return;
  for (int d = 0; d < device_count(); ++d) {
    uint64_t u = self->used_bytes[d].exchange(0);
    header_->devices[d].used_bytes.fetch_sub(u);
  }
  self->context_mask.store(0);
  self->pid.store(0, std::memory_order_release);
}

}  // namespace vgpu::sim
