// Creating or attaching a named POSIX shared-memory region that several
// processes of one user share (the quota ledger, the scheduler region).
//
// /dev/shm is world-writable, so what is found there is checked before it is
// trusted: it must be owned by our euid with no group/other permission bits,
// exactly the expected size, initialized by its creator within a bounded
// wait, and carry the expected magic, version and size in its header. Any
// other region is refused with a one-line message that names the file (the
// caller fails closed): a denial of service at worst, never a raised quota or
// a share taken from another user.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/status.h"

namespace vgpu {

// The first fields of every region, in this order. A region's own layout
// repeats them (static_assert(ShmRegionHeaderMatches<Layout>())) so that its
// code can keep naming them directly.
struct ShmRegionHeader {
  uint64_t magic;
  uint32_t version;
  uint32_t region_bytes;        // sizeof the layout, as its creator saw it
  std::atomic<uint32_t> ready;  // set (release) once the creator initialized it
};

template <typename Layout>
constexpr bool ShmRegionHeaderMatches() {
  return offsetof(Layout, magic) == offsetof(ShmRegionHeader, magic) &&
         offsetof(Layout, version) == offsetof(ShmRegionHeader, version) &&
         offsetof(Layout, region_bytes) == offsetof(ShmRegionHeader, region_bytes) &&
         offsetof(Layout, ready) == offsetof(ShmRegionHeader, ready) &&
         sizeof(Layout) >= sizeof(ShmRegionHeader);
}

struct ShmRegionSpec {
  std::string name;  // shm_open name: "/vgpu-..."
  const char* what;  // names the region in messages: "quota ledger"
  uint64_t magic;
  uint32_t version;
  size_t bytes;  // sizeof the layout
  // Shared by every user of the node (the compute scheduler's region): created
  // mode 0666 and accepted from any owner if it is exactly 0666 (its readers
  // and writers are every tenant; docs/security.md says what that allows).
  // Otherwise private: mode 0600, our euid only.
  bool node_wide = false;
  // Keep the region's descriptor open and return it (SchedRegion locks bytes
  // of the file to show which clients are alive).
  bool keep_fd = false;
};

struct ShmRegionMapping {
  void* addr = nullptr;  // `bytes` long; munmap it when done
  // This call created the region: its memory is zero and the caller must
  // initialize it, then store ready = 1 (release). Others wait for that.
  bool created = false;
  int fd = -1;  // with spec.keep_fd: the region's descriptor (close-on-exec)
};

// Creates the region (mode 0600, or 0666 node-wide, whatever the umask, zero-filled, close-on-exec
// descriptor) or attaches to the existing one, checked as described above;
// retries if it is removed between the two steps. kIo with a one-line message
// on failure.
Result<ShmRegionMapping> OpenShmRegion(const ShmRegionSpec& spec);

// An anonymous MAP_SHARED mapping of `bytes` zero bytes: a region shared with
// fork()ed children only. nullptr (errno set) on failure.
void* MapPrivateRegion(size_t bytes);

}  // namespace vgpu
