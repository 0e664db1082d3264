// External resource interoperability (cuda.h CUDA_EXTRES_INTEROP) as a Linux
// driver offers it: memory and semaphores imported from file descriptors.
//
// Memory: an OPAQUE_FD must be a memory object of this node, i.e. a memfd the
// sim exports (cuMemExportToShareableHandle, api_vmm.cc). A mapped buffer maps
// the memfd's pages at a new device address, so it aliases the exporter's
// memory in every process that maps it; the mapping itself references the
// file, so a buffer outlives its external memory object until cuMemFree.
//
// Semaphores: the sim has no Vulkan, so a semaphore fd of the simulated node is
// any mmap-able file (a memfd) of at least 8 bytes whose first 8 bytes are the
// semaphore's 64-bit payload, shared with every process that maps it. Binary
// (OPAQUE_FD): nonzero is signaled. Timeline (TIMELINE_SEMAPHORE_FD): the
// payload is the counter. A waiting stream polls the payload the way a GPU's
// front end polls a semaphore (and cuStreamWaitValue64 does, stream.cc): a
// futex could not see a host that signals by writing the file.
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>

#include "sim/engine/address_space.h"
#include "sim/api/api_common.h"
#include "sim/engine/context.h"
#include "sim/engine/external.h"
#include "sim/engine/graph.h"
#include "sim/api/graph_api.h"
#include "sim/engine/sim_state.h"
#include "sim/engine/stream.h"

namespace vgpu::sim {

struct ExtSema {
  int fd = -1;  // owned until cuDestroyExternalSemaphore
  bool timeline = false;
  uint64_t* payload = nullptr;  // the shared mapping of the file's first 8 bytes
  ~ExtSema() {
    if (payload != nullptr) munmap(payload, sizeof(uint64_t));
    if (fd >= 0) close(fd);
  }
};

}  // namespace vgpu::sim

using namespace vgpu::sim;  // NOLINT: entry points below are the C ABI

namespace {

struct ExtMem {
  int fd = -1;  // owned: closed by cuDestroyExternalMemory
  size_t size = 0;
  int device = 0;
};

// A mapped buffer: the page-aligned range behind the pointer cuMemFree frees.
struct MappedBuffer {
  CUdeviceptr va = 0;
  size_t len = 0;
};

std::mutex g_mu;
auto* g_mems = new std::unordered_set<ExtMem*>();
auto* g_buffers = new std::map<CUdeviceptr, MappedBuffer>();
auto* g_semas = new std::unordered_map<CUexternalSemaphore, std::shared_ptr<ExtSema>>();

template <typename T, size_t N>
bool AllZero(const T (&a)[N]) {
  return std::all_of(a, a + N, [](T v) { return v == 0; });
}

// The device of a memfd exported by this node (named "vgpu-sim-vmm-dev<N>" by
// cuMemCreate), or -1 for any other file.
int SimMemfdDevice(int fd) {
  char link[64], target[256] = {};
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  if (readlink(link, target, sizeof target - 1) <= 0) return -1;
  constexpr char kTag[] = "/memfd:vgpu-sim-vmm-dev";
  if (std::strncmp(target, kTag, sizeof kTag - 1) != 0) return -1;
  int device = std::atoi(target + sizeof kTag - 1);
  return device >= 0 && device < Node().device_count() ? device : -1;
}

// Handle types that name Windows, Direct3D or NvSciBuf objects, or (DMABUF)
// dma-bufs, which cuda.h supports only on Tegra (Jetson Thor): none can exist
// on the simulated discrete GPU under Linux.
bool UnsupportedMemoryType(int type) {
  return type >= CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_WIN32 &&
         type <= CU_EXTERNAL_MEMORY_HANDLE_TYPE_DMABUF_FD;
}

CUresult CheckMemoryDesc(const CUDA_EXTERNAL_MEMORY_HANDLE_DESC& d, size_t* object_size,
                         int* device) {
  int type = RawEnum(d.type);
  if (UnsupportedMemoryType(type)) return CUDA_ERROR_NOT_SUPPORTED;
  if (type != CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD || d.size == 0 ||
      (d.flags & ~CUDA_EXTERNAL_MEMORY_DEDICATED) != 0 || !AllZero(d.reserved)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  // A well-formed call whose fd names no memory object of this node (a
  // regular file, a pipe, a closed fd) has an invalid handle, not an
  // invalid value.
  struct stat st {};
  *device = d.handle.fd < 0 ? -1 : SimMemfdDevice(d.handle.fd);
  if (*device < 0 || fstat(d.handle.fd, &st) != 0) return CUDA_ERROR_INVALID_HANDLE;
  *object_size = static_cast<size_t>(st.st_size);
  return d.size > *object_size ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

ExtMem* LiveMem(CUexternalMemory h) {  // g_mu held
  auto* m = reinterpret_cast<ExtMem*>(h);
  return g_mems->count(m) != 0 ? m : nullptr;
}

CUresult CheckBufferDesc(const CUDA_EXTERNAL_MEMORY_BUFFER_DESC& d, size_t mem_size) {
  if (d.flags != 0 || !AllZero(d.reserved) || d.size == 0 || d.offset > mem_size ||
      d.size > mem_size - d.offset) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

// Maps [offset, offset+size) of fd at a new device address. The pages around
// an unaligned offset are mapped too; the pointer is the byte at offset.
CUresult MapBuffer(const ExtMem& m, size_t offset, size_t size, Context* ctx, CUdeviceptr* out) {
  AddressSpace& as = AddressSpace::Get();
  size_t lead = offset % kPageSize;
  size_t len = RoundUp(lead + size, kPageSize);
  CUdeviceptr va = 0;
  size_t align = len >= kVmmGranularity ? kVmmGranularity : kPageSize;
  if (!as.AllocVa(len, align, 0, &va)) return CUDA_ERROR_OUT_OF_MEMORY;
  if (!as.BackFile(va, len, m.fd, offset - lead)) {
    as.FreeVa(va, len);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  // Not charged to the device's capacity: the exporter's allocation is.
  AllocInfo info;
  info.base = va + lead;
  info.size = size;
  info.kind = AllocKind::kExternal;
  info.device = m.device;
  info.ctx = AsHandle(ctx);
  as.AddAllocation(info);
  as.AddMapping(va, len, as.Shadow(va), m.device, true);
  (*g_buffers)[info.base] = {va, len};
  *out = info.base;
  return CUDA_SUCCESS;
}

// Windows, Direct3D, NvSciSync and keyed-mutex objects cannot exist on Linux.
bool UnsupportedSemaphoreType(int type) {
  return type >= CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_WIN32 &&
         type <= CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_WIN32 &&
         type != CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD;
}

CUresult MapSemaphore(const CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC& d, ExtSema* s) {
  int type = RawEnum(d.type);
  if (UnsupportedSemaphoreType(type)) return CUDA_ERROR_NOT_SUPPORTED;
  if ((type != CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD &&
       type != CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD) ||
      d.flags != 0 || !AllZero(d.reserved)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  struct stat st {};
  if (d.handle.fd < 0 || fstat(d.handle.fd, &st) != 0 ||
      static_cast<size_t>(st.st_size) < sizeof(uint64_t)) {
    return CUDA_ERROR_INVALID_HANDLE;  // no synchronization object of this node
  }
  void* p = mmap(nullptr, sizeof(uint64_t), PROT_READ | PROT_WRITE, MAP_SHARED, d.handle.fd, 0);
  if (p == MAP_FAILED) return CUDA_ERROR_INVALID_HANDLE;
  s->payload = static_cast<uint64_t*>(p);
  s->timeline = type == CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD;
  return CUDA_SUCCESS;
}

std::shared_ptr<ExtSema> LiveSema(CUexternalSemaphore h) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_semas->find(h);
  return it == g_semas->end() ? nullptr : it->second;
}

// Flags are for NvSciSync objects only; the reserved words must be zero.
bool ValidParams(const CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS& p) {
  return p.flags == 0 && AllZero(p.reserved) && AllZero(p.params.reserved);
}
bool ValidParams(const CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS& p) {
  return p.flags == 0 && AllZero(p.reserved) && AllZero(p.params.reserved);
}

// Validates the arrays and resolves the handles into a batch. Everything is
// checked before anything is queued.
template <typename Params>
CUresult MakeBatch(const CUexternalSemaphore* sems, const Params* params, unsigned n,
                   std::vector<Params> ExtSemaBatch::*store, std::shared_ptr<ExtSemaBatch>* out) {
  if (n > 0 && (sems == nullptr || params == nullptr)) return CUDA_ERROR_INVALID_VALUE;
  auto b = std::make_shared<ExtSemaBatch>();
  for (unsigned i = 0; i < n; ++i) {
    std::shared_ptr<ExtSema> s = LiveSema(sems[i]);
    if (s == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    if (!ValidParams(params[i])) return CUDA_ERROR_INVALID_VALUE;
    b->semas.push_back(std::move(s));
  }
  b->handles.assign(sems, sems + n);
  ((*b).*store).assign(params, params + n);
  *out = std::move(b);
  return CUDA_SUCCESS;
}

CUresult SignalBatch(const CUexternalSemaphore* sems,
                     const CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS* p, unsigned n,
                     std::shared_ptr<ExtSemaBatch>* out) {
  CUresult r = MakeBatch(sems, p, n, &ExtSemaBatch::signal_params, out);
  if (r == CUDA_SUCCESS) (*out)->signal = true;
  return r;
}

CUresult WaitBatch(const CUexternalSemaphore* sems, const CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS* p,
                   unsigned n, std::shared_ptr<ExtSemaBatch>* out) {
  return MakeBatch(sems, p, n, &ExtSemaBatch::wait_params, out);
}

CUresult Enqueue(CUstream h, bool ptsz, OpKind kind, CUresult made,
                 std::shared_ptr<ExtSemaBatch> b) {
  if (made != CUDA_SUCCESS) return made;
  Stream* s = nullptr;
  if (CUresult r = ResolveStream(h, ptsz, &s); r != CUDA_SUCCESS) return r;
  Op* op = s->Begin();
  op->kind = kind;
  op->ext_semas = std::move(b);
  s->Commit();
  return CUDA_SUCCESS;
}

// A binary wait consumes the signal: of several waiters, one proceeds.
bool TryAcquire(const ExtSema& s, uint64_t value) {
  if (s.timeline) return __atomic_load_n(s.payload, __ATOMIC_ACQUIRE) >= value;
  uint64_t v = __atomic_load_n(s.payload, __ATOMIC_ACQUIRE);
  return v != 0 &&
         __atomic_compare_exchange_n(s.payload, &v, 0, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

// Polls like a GPU front end: a short spin, then sleeps growing to 50 us.
void WaitSema(const ExtSema& s, uint64_t value) {
  for (int i = 0; i < 2000; ++i) {
    if (TryAcquire(s, value)) return;
    __builtin_ia32_pause();
  }
  long sleep_ns = 1000;
  while (!TryAcquire(s, value)) {
    timespec ts{0, sleep_ns};
    nanosleep(&ts, nullptr);
    sleep_ns = std::min(sleep_ns * 2, 50'000L);
  }
}

CUresult MakeOp(bool signal, CUresult made, std::shared_ptr<ExtSemaBatch> b, Op* op) {
  if (made != CUDA_SUCCESS) return made;
  op->kind = signal ? OpKind::kExtSemaSignal : OpKind::kExtSemaWait;
  op->ext_semas = std::move(b);
  return CUDA_SUCCESS;
}

// A node's parameters as its GetParams returns them: the node's own arrays.
template <typename NodeParams>
CUresult GetNodeParams(CUgraphNode h, CUgraphNodeType type, NodeParams* out) {
  GraphNode* node = NodeOf(h);
  if (node == nullptr || out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(node->owner->mu);
  const ExtSemaBatch* b = node->op.ext_semas.get();
  if (node->type != type || b == nullptr) return CUDA_ERROR_INVALID_VALUE;
  out->extSemArray = const_cast<CUexternalSemaphore*>(b->handles.data());
  if constexpr (std::is_same_v<NodeParams, CUDA_EXT_SEM_SIGNAL_NODE_PARAMS>) {
    out->paramsArray = b->signal_params.data();
  } else {
    out->paramsArray = b->wait_params.data();
  }
  out->numExtSems = static_cast<unsigned>(b->handles.size());
  return CUDA_SUCCESS;
}

}  // namespace

namespace vgpu::sim {

CUresult FreeExternalBuffer(CUdeviceptr dptr) {
  MappedBuffer m;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = g_buffers->find(dptr);
    if (it == g_buffers->end()) return CUDA_ERROR_INVALID_VALUE;
    m = it->second;
    g_buffers->erase(it);
  }
  AddressSpace& as = AddressSpace::Get();
  as.RemoveAllocation(dptr, nullptr);
  as.RemoveMapping(m.va);
  as.Unback(m.va, m.len);
  as.FreeVa(m.va, m.len);
  return CUDA_SUCCESS;
}

void RunExtSemaBatch(const ExtSemaBatch& b) {
  for (size_t i = 0; i < b.semas.size(); ++i) {
    const ExtSema& s = *b.semas[i];
    if (b.signal) {
      uint64_t v = s.timeline ? b.signal_params[i].params.fence.value : 1;
      __atomic_store_n(s.payload, v, __ATOMIC_RELEASE);
    } else {
      WaitSema(s, b.wait_params[i].params.fence.value);
    }
  }
}

CUresult MakeExtSemaSignalOp(const CUDA_EXT_SEM_SIGNAL_NODE_PARAMS& p, Op* op) {
  std::shared_ptr<ExtSemaBatch> b;
  CUresult made = SignalBatch(p.extSemArray, p.paramsArray, p.numExtSems, &b);
  return MakeOp(true, made, std::move(b), op);
}

CUresult MakeExtSemaWaitOp(const CUDA_EXT_SEM_WAIT_NODE_PARAMS& p, Op* op) {
  std::shared_ptr<ExtSemaBatch> b;
  CUresult made = WaitBatch(p.extSemArray, p.paramsArray, p.numExtSems, &b);
  return MakeOp(false, made, std::move(b), op);
}

CUresult SetExtSemaNode(GraphNode* node, CUgraphNodeType type, const Op& op) {
  if (node == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(node->owner->mu);
  if (node->type != type) return CUDA_ERROR_INVALID_VALUE;
  node->op.kind = op.kind;
  node->op.ext_semas = op.ext_semas;
  return CUDA_SUCCESS;
}

}  // namespace vgpu::sim

// ---- external memory ----

SIM_EXPORT CUresult CUDAAPI cuImportExternalMemory(
    CUexternalMemory* extMem_out, const CUDA_EXTERNAL_MEMORY_HANDLE_DESC* memHandleDesc) {
  SIM_ENTER("cuImportExternalMemory");
  if (extMem_out == nullptr || memHandleDesc == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CurrentContextOrNull() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  size_t object_size = 0;
  int device = 0;
  // On failure the fd stays the caller's: it is neither closed nor kept.
  if (CUresult r = CheckMemoryDesc(*memHandleDesc, &object_size, &device); r != CUDA_SUCCESS) {
    return r;
  }
  auto* m = new ExtMem{memHandleDesc->handle.fd, static_cast<size_t>(memHandleDesc->size), device};
  std::lock_guard<std::mutex> lock(g_mu);
  g_mems->insert(m);
  *extMem_out = reinterpret_cast<CUexternalMemory>(m);
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuExternalMemoryGetMappedBuffer(
    CUdeviceptr* devPtr, CUexternalMemory extMem,
    const CUDA_EXTERNAL_MEMORY_BUFFER_DESC* bufferDesc) {
  SIM_ENTER("cuExternalMemoryGetMappedBuffer");
  if (devPtr == nullptr || bufferDesc == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Context* ctx = CurrentContextOrNull();
  if (ctx == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  std::lock_guard<std::mutex> lock(g_mu);
  ExtMem* m = LiveMem(extMem);
  if (m == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (CUresult r = CheckBufferDesc(*bufferDesc, m->size); r != CUDA_SUCCESS) return r;
  return MapBuffer(*m, bufferDesc->offset, bufferDesc->size, ctx, devPtr);
}

// A sim array owns linear memory it allocates itself (api_array.cc: created by
// AllocDeviceMemory, freed with the array), so no array can alias an imported
// object's pages; copying them would not alias either (writes through the
// array would never reach the exporter). Arguments are checked first, as for
// any handle type that a driver cannot map as an array.
SIM_EXPORT CUresult CUDAAPI cuExternalMemoryGetMappedMipmappedArray(
    CUmipmappedArray* mipmap, CUexternalMemory extMem,
    const CUDA_EXTERNAL_MEMORY_MIPMAPPED_ARRAY_DESC* mipmapDesc) {
  SIM_ENTER("cuExternalMemoryGetMappedMipmappedArray");
  if (mipmap == nullptr || mipmapDesc == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CurrentContextOrNull() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    ExtMem* m = LiveMem(extMem);
    if (m == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    // cuda.h: numLevels must be equal to 1.
    if (mipmapDesc->numLevels != 1 || !AllZero(mipmapDesc->reserved) ||
        mipmapDesc->offset >= m->size) {
      return CUDA_ERROR_INVALID_VALUE;
    }
  }
  return CUDA_ERROR_NOT_SUPPORTED;
}

SIM_EXPORT CUresult CUDAAPI cuDestroyExternalMemory(CUexternalMemory extMem) {
  SIM_ENTER("cuDestroyExternalMemory");
  ExtMem* m = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    m = LiveMem(extMem);
    if (m == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    g_mems->erase(m);
  }
  // Mapped buffers keep the pages: their mappings reference the file.
  close(m->fd);
  delete m;
  return CUDA_SUCCESS;
}

// ---- external semaphores ----

SIM_EXPORT CUresult CUDAAPI cuImportExternalSemaphore(
    CUexternalSemaphore* extSem_out, const CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC* semHandleDesc) {
  SIM_ENTER("cuImportExternalSemaphore");
  if (extSem_out == nullptr || semHandleDesc == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CurrentContextOrNull() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  auto s = std::make_shared<ExtSema>();
  // On failure the fd stays the caller's (s->fd is still -1).
  if (CUresult r = MapSemaphore(*semHandleDesc, s.get()); r != CUDA_SUCCESS) return r;
  s->fd = semHandleDesc->handle.fd;
  auto h = reinterpret_cast<CUexternalSemaphore>(s.get());
  std::lock_guard<std::mutex> lock(g_mu);
  (*g_semas)[h] = std::move(s);
  *extSem_out = h;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuDestroyExternalSemaphore(CUexternalSemaphore extSem) {
  SIM_ENTER("cuDestroyExternalSemaphore");
  std::shared_ptr<ExtSema> s;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = g_semas->find(extSem);
    if (it == g_semas->end()) return CUDA_ERROR_INVALID_HANDLE;
    s = std::move(it->second);
    g_semas->erase(it);
  }
  // The fd goes now; the payload mapping stays while queued work or a graph
  // node still holds the semaphore (cuda.h leaves such use undefined: here
  // it does not fault).
  close(s->fd);
  s->fd = -1;
  return CUDA_SUCCESS;
}

SIM_EXPORT CUresult CUDAAPI cuSignalExternalSemaphoresAsync(
    const CUexternalSemaphore* extSemArray,
    const CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS* paramsArray, unsigned int numExtSems,
    CUstream stream) {
  SIM_ENTER("cuSignalExternalSemaphoresAsync");
  std::shared_ptr<ExtSemaBatch> b;
  CUresult made = SignalBatch(extSemArray, paramsArray, numExtSems, &b);
  return Enqueue(stream, false, OpKind::kExtSemaSignal, made, std::move(b));
}

SIM_EXPORT CUresult CUDAAPI cuSignalExternalSemaphoresAsync_ptsz(
    const CUexternalSemaphore* extSemArray,
    const CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS* paramsArray, unsigned int numExtSems,
    CUstream stream) {
  SIM_ENTER("cuSignalExternalSemaphoresAsync_ptsz");
  std::shared_ptr<ExtSemaBatch> b;
  CUresult made = SignalBatch(extSemArray, paramsArray, numExtSems, &b);
  return Enqueue(stream, true, OpKind::kExtSemaSignal, made, std::move(b));
}

SIM_EXPORT CUresult CUDAAPI cuWaitExternalSemaphoresAsync(
    const CUexternalSemaphore* extSemArray, const CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS* paramsArray,
    unsigned int numExtSems, CUstream stream) {
  SIM_ENTER("cuWaitExternalSemaphoresAsync");
  std::shared_ptr<ExtSemaBatch> b;
  CUresult made = WaitBatch(extSemArray, paramsArray, numExtSems, &b);
  return Enqueue(stream, false, OpKind::kExtSemaWait, made, std::move(b));
}

SIM_EXPORT CUresult CUDAAPI cuWaitExternalSemaphoresAsync_ptsz(
    const CUexternalSemaphore* extSemArray, const CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS* paramsArray,
    unsigned int numExtSems, CUstream stream) {
  SIM_ENTER("cuWaitExternalSemaphoresAsync_ptsz");
  std::shared_ptr<ExtSemaBatch> b;
  CUresult made = WaitBatch(extSemArray, paramsArray, numExtSems, &b);
  return Enqueue(stream, true, OpKind::kExtSemaWait, made, std::move(b));
}

// ---- graph nodes ----

SIM_EXPORT CUresult CUDAAPI cuGraphAddExternalSemaphoresSignalNode(
    CUgraphNode* phGraphNode, CUgraph hGraph, const CUgraphNode* dependencies,
    size_t numDependencies, const CUDA_EXT_SEM_SIGNAL_NODE_PARAMS* nodeParams) {
  SIM_ENTER("cuGraphAddExternalSemaphoresSignalNode");
  if (nodeParams == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Op op;
  if (CUresult r = MakeExtSemaSignalOp(*nodeParams, &op); r != CUDA_SUCCESS) return r;
  return AddGraphNode(phGraphNode, hGraph, dependencies, numDependencies,
                      CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL, op);
}

SIM_EXPORT CUresult CUDAAPI cuGraphAddExternalSemaphoresWaitNode(
    CUgraphNode* phGraphNode, CUgraph hGraph, const CUgraphNode* dependencies,
    size_t numDependencies, const CUDA_EXT_SEM_WAIT_NODE_PARAMS* nodeParams) {
  SIM_ENTER("cuGraphAddExternalSemaphoresWaitNode");
  if (nodeParams == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Op op;
  if (CUresult r = MakeExtSemaWaitOp(*nodeParams, &op); r != CUDA_SUCCESS) return r;
  return AddGraphNode(phGraphNode, hGraph, dependencies, numDependencies,
                      CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT, op);
}

SIM_EXPORT CUresult CUDAAPI cuGraphExternalSemaphoresSignalNodeGetParams(
    CUgraphNode hNode, CUDA_EXT_SEM_SIGNAL_NODE_PARAMS* params_out) {
  SIM_ENTER("cuGraphExternalSemaphoresSignalNodeGetParams");
  return GetNodeParams(hNode, CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL, params_out);
}

SIM_EXPORT CUresult CUDAAPI cuGraphExternalSemaphoresWaitNodeGetParams(
    CUgraphNode hNode, CUDA_EXT_SEM_WAIT_NODE_PARAMS* params_out) {
  SIM_ENTER("cuGraphExternalSemaphoresWaitNodeGetParams");
  return GetNodeParams(hNode, CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT, params_out);
}

SIM_EXPORT CUresult CUDAAPI cuGraphExternalSemaphoresSignalNodeSetParams(
    CUgraphNode hNode, const CUDA_EXT_SEM_SIGNAL_NODE_PARAMS* nodeParams) {
  SIM_ENTER("cuGraphExternalSemaphoresSignalNodeSetParams");
  if (nodeParams == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Op op;
  if (CUresult r = MakeExtSemaSignalOp(*nodeParams, &op); r != CUDA_SUCCESS) return r;
  return SetExtSemaNode(NodeOf(hNode), CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL, op);
}

SIM_EXPORT CUresult CUDAAPI cuGraphExternalSemaphoresWaitNodeSetParams(
    CUgraphNode hNode, const CUDA_EXT_SEM_WAIT_NODE_PARAMS* nodeParams) {
  SIM_ENTER("cuGraphExternalSemaphoresWaitNodeSetParams");
  if (nodeParams == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Op op;
  if (CUresult r = MakeExtSemaWaitOp(*nodeParams, &op); r != CUDA_SUCCESS) return r;
  return SetExtSemaNode(NodeOf(hNode), CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT, op);
}

SIM_EXPORT CUresult CUDAAPI cuGraphExecExternalSemaphoresSignalNodeSetParams(
    CUgraphExec hGraphExec, CUgraphNode hNode, const CUDA_EXT_SEM_SIGNAL_NODE_PARAMS* nodeParams) {
  SIM_ENTER("cuGraphExecExternalSemaphoresSignalNodeSetParams");
  if (nodeParams == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Op op;
  if (CUresult r = MakeExtSemaSignalOp(*nodeParams, &op); r != CUDA_SUCCESS) return r;
  return ExecSetOp(hGraphExec, hNode, CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL, op);
}

SIM_EXPORT CUresult CUDAAPI cuGraphExecExternalSemaphoresWaitNodeSetParams(
    CUgraphExec hGraphExec, CUgraphNode hNode, const CUDA_EXT_SEM_WAIT_NODE_PARAMS* nodeParams) {
  SIM_ENTER("cuGraphExecExternalSemaphoresWaitNodeSetParams");
  if (nodeParams == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Op op;
  if (CUresult r = MakeExtSemaWaitOp(*nodeParams, &op); r != CUDA_SUCCESS) return r;
  return ExecSetOp(hGraphExec, hNode, CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT, op);
}
