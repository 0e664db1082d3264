#include "sim/engine/ipc.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "sim/engine/address_space.h"
#include "sim/engine/device_memory.h"

namespace vgpu::sim {
namespace {

// The 64 bytes of a CUipcMemHandle / CUipcEventHandle.
struct Wire {
  uint32_t magic;
  uint16_t kind;
  uint16_t version;
  int32_t pid;
  int32_t fd;
  uint64_t inode;
  uint64_t size;  // memory: bytes of the allocation; event: slot index
  uint64_t id;    // memory: buffer id; event: slot generation
  int32_t device;
  uint32_t reserved[5];
};
static_assert(sizeof(Wire) == CU_IPC_HANDLE_SIZE);

constexpr uint32_t kMagic = 0x50495356;  // "VSIP"
constexpr uint16_t kVersion = 1;
constexpr uint16_t kMemory = 1;
constexpr uint16_t kEvent = 2;
constexpr uint32_t kEventSlots = 4096;

template <typename Handle>
void Encode(const Wire& w, Handle* out) {
  std::memset(out, 0, sizeof(*out));
  std::memcpy(out->reserved, &w, sizeof(w));
}

template <typename Handle>
bool Decode(const Handle& h, uint16_t kind, Wire* w) {
  std::memcpy(w, h.reserved, sizeof(*w));
  return w->magic == kMagic && w->version == kVersion && w->kind == kind && w->pid > 0 &&
         w->fd >= 0;
}

Wire NewWire(uint16_t kind, int fd, uint64_t inode) {
  Wire w{};
  w.magic = kMagic;
  w.kind = kind;
  w.version = kVersion;
  w.pid = getpid();
  w.fd = fd;
  w.inode = inode;
  return w;
}

uint64_t InodeOf(int fd) {
  struct stat st {};
  return fstat(fd, &st) == 0 ? st.st_ino : 0;
}

// The exporter's descriptor, opened anew through /proc; -1 if the process or
// the descriptor is gone, belongs to another file, or is not ours to open.
int OpenPeerFile(const Wire& w, size_t min_size) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/fd/%d", w.pid, w.fd);
  int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) return -1;
  struct stat st {};
  if (fstat(fd, &st) != 0 || st.st_ino != w.inode || static_cast<size_t>(st.st_size) < min_size) {
    close(fd);
    return -1;
  }
  return fd;
}

// ---- memory ----

struct Import {
  CUcontext ctx;
  int pid;
  uint64_t inode;
  size_t size;  // mapped bytes
  int refs;
};

std::mutex g_mem_mu;  // exports and imports
auto* g_imports = new std::map<CUdeviceptr, Import>();

// Copies the pages of [src, src+size) that were ever touched: untouched ones
// read as zero in both places, and copying them would allocate them. Touched
// means present or swapped out (/proc/self/pagemap bits 63 and 62; mincore
// would miss swapped pages); without pagemap, everything is copied.
void CopyTouchedPages(const uint8_t* src, uint8_t* dst, size_t size) {
  const size_t pages = size / kPageSize;
  int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  constexpr size_t kBatch = 65536;
  std::vector<uint64_t> entries(std::min(pages, kBatch));
  for (size_t first = 0; fd >= 0 && first < pages; first += kBatch) {
    const size_t n = std::min(kBatch, pages - first);
    const off_t at = static_cast<off_t>((reinterpret_cast<uintptr_t>(src) / kPageSize + first) *
                                        sizeof(uint64_t));
    if (pread(fd, entries.data(), n * sizeof(uint64_t), at) !=
        static_cast<ssize_t>(n * sizeof(uint64_t))) {
      close(fd);
      fd = -1;
      break;
    }
    for (size_t i = 0; i < n; ++i) {
      if ((entries[i] >> 62) == 0) continue;
      const size_t off = (first + i) * kPageSize;
      std::memcpy(dst + off, src + off, kPageSize);
    }
  }
  if (fd < 0) {
    std::memcpy(dst, src, size);
    return;
  }
  close(fd);
}

// Moves an allocation's pages into a memfd mapped at the same place.
CUresult MakeShareable(AllocInfo* info) {
  AddressSpace& as = AddressSpace::Get();
  const size_t size = RoundUp(info->size, kPageSize);
  int fd = memfd_create("vgpu-sim-ipc", MFD_CLOEXEC);
  if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
  void* tmp = MAP_FAILED;
  if (ftruncate(fd, static_cast<off_t>(size)) == 0) {
    tmp = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  }
  if (tmp == MAP_FAILED) {
    close(fd);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  CopyTouchedPages(static_cast<const uint8_t*>(as.Shadow(info->base)), static_cast<uint8_t*>(tmp),
                   size);
  munmap(tmp, size);
  if (!as.BackFile(info->base, size, fd, 0)) {
    close(fd);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  info->ipc_fd = fd;
  info->ipc_inode = InodeOf(fd);
  as.SetIpcExport(info->base, info->ipc_fd, info->ipc_inode);
  return CUDA_SUCCESS;
}

void Unmap(CUdeviceptr va, size_t size) {
  AddressSpace& as = AddressSpace::Get();
  as.RemoveAllocation(va, nullptr);
  as.RemoveMapping(va);
  as.Unback(va, size);
  as.FreeVa(va, size);
}

// ---- events ----

struct EventPage {
  int fd = -1;
  uint64_t inode = 0;
  IpcEventSlot* slots = nullptr;
  std::vector<uint32_t> free;
};

std::mutex g_event_mu;
EventPage* g_page = nullptr;
// Other processes' event pages by (pid, inode), mapped for good.
auto* g_peer_pages = new std::map<std::pair<int, uint64_t>, IpcEventSlot*>();

constexpr size_t kEventPageBytes = kEventSlots * sizeof(IpcEventSlot);

EventPage* OwnPage() {
  if (g_page != nullptr) return g_page;
  int fd = memfd_create("vgpu-sim-ipc-events", MFD_CLOEXEC);
  if (fd < 0) return nullptr;
  void* p = MAP_FAILED;
  if (ftruncate(fd, kEventPageBytes) == 0) {
    p = mmap(nullptr, kEventPageBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  }
  if (p == MAP_FAILED) {
    close(fd);
    return nullptr;
  }
  auto* page = new EventPage();
  page->fd = fd;
  page->inode = InodeOf(fd);
  page->slots = static_cast<IpcEventSlot*>(p);
  for (uint32_t i = kEventSlots; i > 0; --i) page->free.push_back(i - 1);
  g_page = page;
  return page;
}

}  // namespace

bool LegacyIpcCapable(const AllocInfo& info) {
  return info.kind == AllocKind::kDevice && info.pool == nullptr && info.ctx != nullptr;
}

CUresult ExportIpcMemory(CUdeviceptr base, CUipcMemHandle* out) {
  std::lock_guard<std::mutex> lock(g_mem_mu);
  AllocInfo info;
  if (!LookupAllocation(base, &info) || info.base != base || !LegacyIpcCapable(info)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (info.ipc_fd < 0) {
    if (CUresult r = MakeShareable(&info); r != CUDA_SUCCESS) return r;
  }
  Wire w = NewWire(kMemory, info.ipc_fd, info.ipc_inode);
  w.size = info.size;
  w.id = info.buffer_id;
  w.device = info.device;
  Encode(w, out);
  return CUDA_SUCCESS;
}

CUresult OpenIpcMemory(CUcontext ctx, const CUipcMemHandle& handle, CUdeviceptr* out) {
  Wire w;
  if (!Decode(handle, kMemory, &w) || w.size == 0) return CUDA_ERROR_INVALID_HANDLE;
  // cuda.h: a handle is opened in other processes; the exporter's own context
  // is not one that may open it.
  if (w.pid == getpid()) return CUDA_ERROR_INVALID_CONTEXT;
  std::lock_guard<std::mutex> lock(g_mem_mu);
  for (auto& [va, imp] : *g_imports) {
    if (imp.ctx == ctx && imp.pid == w.pid && imp.inode == w.inode) {
      ++imp.refs;
      *out = va;
      return CUDA_SUCCESS;
    }
  }
  const size_t size = RoundUp(w.size, kPageSize);
  int fd = OpenPeerFile(w, size);
  if (fd < 0) return CUDA_ERROR_INVALID_HANDLE;
  AddressSpace& as = AddressSpace::Get();
  CUdeviceptr va = 0;
  size_t align = size >= kVmmGranularity ? kVmmGranularity : kPageSize;
  bool ok = as.AllocVa(size, align, 0, &va);
  if (ok && !as.BackFile(va, size, fd, 0)) {
    as.FreeVa(va, size);
    ok = false;
  }
  close(fd);  // the mapping keeps the file
  if (!ok) return CUDA_ERROR_MAP_FAILED;
  AllocInfo info;
  info.base = va;
  info.size = w.size;
  info.kind = AllocKind::kIpcImported;
  info.device = w.device;
  info.ctx = ctx;
  as.AddAllocation(info);
  as.AddMapping(va, size, as.Shadow(va), w.device, true);
  (*g_imports)[va] = Import{ctx, w.pid, w.inode, size, 1};
  *out = va;
  return CUDA_SUCCESS;
}

CUresult CloseIpcMemory(CUdeviceptr ptr) {
  std::lock_guard<std::mutex> lock(g_mem_mu);
  auto it = g_imports->find(ptr);
  if (it == g_imports->end()) return CUDA_ERROR_INVALID_VALUE;
  if (--it->second.refs > 0) return CUDA_SUCCESS;
  Unmap(ptr, it->second.size);
  g_imports->erase(it);
  return CUDA_SUCCESS;
}

void CloseIpcMemoryOfContext(CUcontext ctx) {
  std::lock_guard<std::mutex> lock(g_mem_mu);
  for (auto it = g_imports->begin(); it != g_imports->end();) {
    if (it->second.ctx != ctx) {
      ++it;
      continue;
    }
    Unmap(it->first, it->second.size);
    it = g_imports->erase(it);
  }
}

IpcEventSlot* NewIpcEventSlot() {
  std::lock_guard<std::mutex> lock(g_event_mu);
  EventPage* page = OwnPage();
  if (page == nullptr || page->free.empty()) return nullptr;
  IpcEventSlot* slot = &page->slots[page->free.back()];
  page->free.pop_back();
  slot->generation.fetch_add(1);  // odd: in use
  return slot;
}

void FreeIpcEventSlot(IpcEventSlot* slot) {
  std::lock_guard<std::mutex> lock(g_event_mu);
  if (g_page == nullptr || slot < g_page->slots || slot >= g_page->slots + kEventSlots) return;
  slot->generation.fetch_add(1);  // even: free; handles of the old event stop opening
  g_page->free.push_back(static_cast<uint32_t>(slot - g_page->slots));
}

CUresult ExportIpcEvent(const IpcEventSlot* slot, CUipcEventHandle* out) {
  std::lock_guard<std::mutex> lock(g_event_mu);
  if (g_page == nullptr || slot < g_page->slots || slot >= g_page->slots + kEventSlots) {
    return CUDA_ERROR_INVALID_VALUE;  // an event opened from another process's handle
  }
  Wire w = NewWire(kEvent, g_page->fd, g_page->inode);
  w.size = static_cast<uint64_t>(slot - g_page->slots);
  w.id = slot->generation.load();
  Encode(w, out);
  return CUDA_SUCCESS;
}

CUresult ImportIpcEvent(const CUipcEventHandle& handle, IpcEventSlot** out) {
  Wire w;
  if (!Decode(handle, kEvent, &w) || w.size >= kEventSlots) return CUDA_ERROR_INVALID_HANDLE;
  if (w.pid == getpid()) return CUDA_ERROR_INVALID_CONTEXT;
  std::lock_guard<std::mutex> lock(g_event_mu);
  const std::pair<int, uint64_t> key{w.pid, w.inode};
  auto it = g_peer_pages->find(key);
  if (it == g_peer_pages->end()) {
    int fd = OpenPeerFile(w, kEventPageBytes);
    if (fd < 0) return CUDA_ERROR_INVALID_HANDLE;
    void* p = mmap(nullptr, kEventPageBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return CUDA_ERROR_MAP_FAILED;
    it = g_peer_pages->emplace(key, static_cast<IpcEventSlot*>(p)).first;
  }
  IpcEventSlot* slot = &it->second[w.size];
  if (slot->generation.load() != w.id) return CUDA_ERROR_INVALID_HANDLE;  // destroyed since
  *out = slot;
  return CUDA_SUCCESS;
}

void IpcEventReached(IpcEventSlot* slot, uint64_t ticket) {
  uint64_t cur = slot->reached.load(std::memory_order_relaxed);
  while (cur < ticket && !slot->reached.compare_exchange_weak(
                             cur, ticket, std::memory_order_release, std::memory_order_relaxed)) {
  }
}

}  // namespace vgpu::sim
