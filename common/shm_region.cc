#include "common/shm_region.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "common/clock.h"

namespace vgpu {
namespace {

// How long an opener waits for the region's creator to size and initialize
// it before deciding the creator died half-way.
constexpr uint64_t kReadyWaitMs = 5000;
// How often a region removed between our create and attach steps is retried.
constexpr int kOpenAttempts = 3;

void SleepMs(int ms) {
  timespec ts{ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, nullptr);
}

// "quota ledger /dev/shm/vgpu-ledger-1000-g": how every message starts.
std::string Named(const ShmRegionSpec& spec) {
  return std::string(spec.what) + " /dev/shm" + spec.name;
}

void* MapShared(int fd, size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  return p == MAP_FAILED ? nullptr : p;
}

// The region file must be ours and private. /dev/shm is world-writable, so
// another uid could plant a region under our name (a ledger with a huge
// limit, a scheduler region that hands it our turns) or read ours; a file not
// owned by our euid, or open to group/others, is refused.
bool CheckOwner(int fd, const ShmRegionSpec& spec, struct stat* st, std::string* error) {
  if (fstat(fd, st) != 0) {
    *error = Named(spec) + ": fstat: " + std::strerror(errno);
    return false;
  }
  if (spec.node_wide) {
    // Any owner (the first tenant, or root at boot), but open to every tenant:
    // a region narrowed by its owner would leave others out (they fail closed).
    if ((st->st_mode & 0777) == 0666) return true;
    char mode[8];
    std::snprintf(mode, sizeof mode, "%03o", static_cast<unsigned>(st->st_mode & 0777));
    *error = Named(spec) + " has mode " + mode + " (owner uid " + std::to_string(st->st_uid) +
             "), not 0666: the node's tenants cannot all share it; remove it";
    return false;
  }
  if (st->st_uid != geteuid()) {
    *error = Named(spec) + " is owned by uid " + std::to_string(st->st_uid) + ", not " +
             std::to_string(geteuid()) + "; refusing a region another user created";
    return false;
  }
  if ((st->st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%03o", static_cast<unsigned>(st->st_mode & 0777));
    *error = Named(spec) + " has mode " + mode + ", open to group or others; refusing it";
    return false;
  }
  return true;
}

// Checks what another process created; the message names the file to remove.
bool CheckHeader(const ShmRegionHeader* h, size_t size, const ShmRegionSpec& spec,
                 std::string* error) {
  if (h->magic != spec.magic) {
    *error = Named(spec) + " is not a vgpu " + spec.what + " (bad magic); remove it";
  } else if (h->version != spec.version) {
    *error = Named(spec) + " has version " + std::to_string(h->version) + ", this library speaks " +
             std::to_string(spec.version) + "; stop its users and remove it";
  } else if (h->region_bytes != spec.bytes || size != spec.bytes) {
    *error = Named(spec) + " has size " + std::to_string(size) + " (header says " +
             std::to_string(h->region_bytes) + "), expected " + std::to_string(spec.bytes) +
             "; damaged or truncated, remove it";
  } else {
    return true;
  }
  return false;
}

// Creates the region if absent. Returns the mapping, nullptr with *error set,
// or nullptr with *error empty when it already exists.
void* CreateRegion(const ShmRegionSpec& spec, int* kept_fd, std::string* error) {
  const mode_t mode = spec.node_wide ? 0666 : 0600;
  int fd = shm_open(spec.name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) {
    if (errno != EEXIST) *error = Named(spec) + ": shm_open: " + std::strerror(errno);
    return nullptr;
  }
  // Exactly that mode whatever the umask: the others reopen it O_RDWR.
  void* p = nullptr;
  if (fchmod(fd, mode) == 0 && ftruncate(fd, static_cast<off_t>(spec.bytes)) == 0) {
    p = MapShared(fd, spec.bytes);
  }
  int saved = errno;
  if (p != nullptr && spec.keep_fd) {
    *kept_fd = fd;
  } else {
    close(fd);
  }
  if (p == nullptr) {
    shm_unlink(spec.name.c_str());
    *error = Named(spec) + ": cannot size or map: " + std::strerror(saved);
  }
  return p;
}

// Opens an existing region, waiting (bounded) for its creator to finish.
// Returns nullptr with *error set, or with *error empty if it vanished.
void* AttachRegion(const ShmRegionSpec& spec, int* kept_fd, std::string* error) {
  int fd = shm_open(spec.name.c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) {
    if (errno != ENOENT) *error = Named(spec) + ": shm_open: " + std::strerror(errno);
    return nullptr;
  }
  // The creator sets the mode (its umask may have narrowed it) and then
  // sizes the file right after creating it: wait for the size, after which
  // the mode is final, before judging the owner and the mode.
  struct stat st;
  const uint64_t deadline = MonotonicMs() + kReadyWaitMs;
  while (fstat(fd, &st) == 0 && st.st_size == 0 && MonotonicMs() < deadline) SleepMs(1);
  if (!CheckOwner(fd, spec, &st, error)) {
    close(fd);
    return nullptr;
  }
  size_t size = static_cast<size_t>(st.st_size);
  if (size < sizeof(ShmRegionHeader)) {
    close(fd);
    *error = Named(spec) + " is truncated (" + std::to_string(size) +
             " bytes) or its creator died while creating it; remove it";
    return nullptr;
  }
  // Mapped at the size found, so that a foreign size is reported, not faulted on.
  void* p = MapShared(fd, size);
  if (p == nullptr) {
    *error = Named(spec) + ": mmap: " + std::strerror(errno);
    close(fd);
    return nullptr;
  }
  auto* h = static_cast<ShmRegionHeader*>(p);
  while (h->ready.load(std::memory_order_acquire) == 0 && MonotonicMs() < deadline) {
    SleepMs(1);
  }
  if (h->ready.load(std::memory_order_acquire) == 0) {
    *error = Named(spec) + " was never initialized (its creator died?); remove it";
  } else if (CheckHeader(h, size, spec, error)) {
    if (spec.keep_fd) {
      *kept_fd = fd;
    } else {
      close(fd);
    }
    return p;
  }
  close(fd);
  munmap(p, size);
  return nullptr;
}

}  // namespace

Result<ShmRegionMapping> OpenShmRegion(const ShmRegionSpec& spec) {
  std::string error;
  ShmRegionMapping m;
  for (int attempt = 0; attempt < kOpenAttempts; ++attempt) {
    m.addr = CreateRegion(spec, &m.fd, &error);
    if (m.addr != nullptr) {
      m.created = true;
      return m;
    }
    if (!error.empty()) return Status::Error(ErrorCode::kIo, std::move(error));
    m.addr = AttachRegion(spec, &m.fd, &error);
    if (m.addr != nullptr) return m;
    if (!error.empty()) return Status::Error(ErrorCode::kIo, std::move(error));
  }
  return Status::Error(ErrorCode::kIo, Named(spec) + ": keeps disappearing");
}

void* MapPrivateRegion(size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

}  // namespace vgpu
