// CUDA IPC between processes of the simulated node (cuIpc* in
// sim/api/api_ipc.cc; the wire format is in docs/sim.md "CUDA IPC").
//
// Memory: a cuMemAlloc allocation is private anonymous memory until it is
// first exported; then its pages move into a memfd that the exporter keeps
// open, and the 64-byte handle names the exporter's pid, that descriptor and
// its inode. An importer of the same user opens /proc/<pid>/fd/<fd>, checks the
// inode, and maps the file at an address of its own.
//
// Events: an interprocess event owns a slot in its process's event page (a
// memfd mapped by every process that opened one of its events). A record takes
// a ticket from the slot's `recorded` counter; the stream raises `reached` to
// the ticket when it gets there. Query, synchronize and stream waits compare
// the two, in any process.
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstdint>

namespace vgpu::sim {

struct AllocInfo;

// cuda.h: an event handle can be taken of an event created with both.
inline constexpr unsigned kIpcEventFlags = CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING;

struct IpcEventSlot {
  std::atomic<uint64_t> recorded;    // newest ticket handed out by a record
  std::atomic<uint64_t> reached;     // highest ticket a stream has reached
  std::atomic<uint64_t> generation;  // odd while the slot is in use; bumped on reuse
  uint64_t reserved;
};
static_assert(std::atomic<uint64_t>::is_always_lock_free);

// A free slot of this process's event page; nullptr when it is full.
IpcEventSlot* NewIpcEventSlot();
void FreeIpcEventSlot(IpcEventSlot* slot);
CUresult ExportIpcEvent(const IpcEventSlot* slot, CUipcEventHandle* out);
// The slot another process's handle names (mapped into this process).
CUresult ImportIpcEvent(const CUipcEventHandle& handle, IpcEventSlot** out);
// Stream-side completion of a record with `ticket`.
void IpcEventReached(IpcEventSlot* slot, uint64_t ticket);

// cuMemAlloc memory (not pool, graph or VMM memory): what cuIpcGetMemHandle exports.
bool LegacyIpcCapable(const AllocInfo& info);
// cuIpcGetMemHandle on the base of a cuMemAlloc allocation. The caller has
// synchronized the allocation's context: the pages move on the first export.
CUresult ExportIpcMemory(CUdeviceptr base, CUipcMemHandle* out);
// cuIpcOpenMemHandle / cuIpcCloseMemHandle for context `ctx` (reference counted).
CUresult OpenIpcMemory(CUcontext ctx, const CUipcMemHandle& handle, CUdeviceptr* out);
CUresult CloseIpcMemory(CUdeviceptr ptr);
// Every mapping of `ctx` (context teardown). An exporter's free closes the
// allocation's memfd (address_space.cc); importers keep their mappings, so
// the pages live until the last one closes.
void CloseIpcMemoryOfContext(CUcontext ctx);

}  // namespace vgpu::sim
