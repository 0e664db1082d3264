// Client program of the libvgpu integration tests. It runs a sequence of
// driver-API operations given on the command line and prints what happened as
// `key=value` lines (one per line, flushed), so that the tests can start it
// with chosen environments (with or without LD_PRELOAD=libvgpu.so) and assert
// on its output and exit status.
//
// It reaches the driver in one of three ways, chosen by the first argument:
//   --path=link      calls the exported symbols directly (this binary is then
//                    built as intercept_client_linked, linked with -lcuda
//                    against the simulated driver);
//   --path=dlsym     dlopen("libcuda.so.1") + dlsym of every symbol;
//   --path=procaddr  the cudart pattern: dlopen + ONE dlsym of
//                    "cuGetProcAddress_v2", everything else through it with
//                    (name, version, flags), per-thread variants with
//                    CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM.
//   --version=12000  the cudaVersion passed to cuGetProcAddress (default 13000).
//
// Operations (argv after the options, run in order); each prints `<op>=<CUresult>`
// unless said otherwise. Pointers/handles made by an op are pushed on a stack
// that the matching free op pops.
//   maps                 libcuda_loaded=0|1 threads=N (from /proc/self)
//   init                 cuInit(0)
//   ctx[:V]              retain the primary context of device V, make it current
//   ctxnew[:V]           cuCtxCreate_v4 on device V, current (ctxdestroy pops)
//   ctxdestroy           cuCtxDestroy_v2 of the last ctxnew
//   push1 / pop1 / ctxdestroy1  push (the last ctxnew), pop, destroy (the last
//                        ctxnew) through the CUDA 3.x entry points without _v2
//   reset[:V]            release our primary-ctx reference and cuDevicePrimaryCtxReset_v2
//   alloc:SIZE           cuMemAlloc_v2      | free      cuMemFree_v2 (pops; prints freed=)
//   pitch:W:H            cuMemAllocPitch_v2 (pitch= printed)
//   managed:SIZE         cuMemAllocManaged (global)
//   async:SIZE           cuMemAllocAsync on the op stream | async_ptsz:SIZE the _ptsz entry
//   pool:SIZE            cuMemAllocFromPoolAsync from a created pool
//   freeasync / freeasync_ptsz   cuMemFreeAsync (pops)
//   sync                 cuStreamSynchronize of the op stream
//   create:SIZE          cuMemCreate on the current device | release  cuMemRelease (pops)
//   map                  reserves, maps and grants access to the last handle | unmap (pops)
//   array:W:H            cuArrayCreate_v2 (UINT8, 1 ch) | array3d:W:H:D | arrdestroy (pops)
//   mipmap:W:H:L         cuMipmappedArrayCreate if the driver has it (else mipmap=unavailable)
//   meminfo              meminfo=rc free=.. total=..
//   fill:TOTAL:PIECE     allocates TOTAL in PIECE-sized cuMemAlloc pieces (fill=rc of the
//                        first failure or 0, fill_bytes= allocated), keeps them
//   freeall              frees every pointer on the stack (cuMemFree)
//   loop:N:SIZE          N x (cuMemAlloc + cuMemFree); loop=first failing rc or 0
//   devices              count=, dev<i>.uuid=, dev<i>.pci=, dev<i>.total= for every device
//   getdev:ORD           cuDeviceGet(ORD)
//   peer:A:B             cuDeviceCanAccessPeer(A, B) and the ACCESS_SUPPORTED P2P attribute:
//                        peer= rc, peer.can=, p2p= rc, p2p.value=
//   bypci:ID             cuDeviceGetByPCIBusId; bypci.dev=
//   ctxdev               cuCtxGetDevice; ctxdev.dev=
//   ptrdev               DEVICE_ORDINAL of the last pointer; ptrdev.ord=
//   nvml                 NVML (dlopen libnvidia-ml.so.1): nvml.count, nvml<i>.uuid/.index/
//                        .total/.used/.free/.total2/.used2/.free2
//   nvmlbyuuid:UUID      nvmlDeviceGetHandleByUUID -> nvmlbyuuid=<nvmlReturn>
//   nvmlbypci:ID         nvmlDeviceGetHandleByPciBusId_v2 -> nvmlbypci=<nvmlReturn>
//   wait                 prints waiting=1, reads one line from stdin (a barrier)
//   sleep:MS
//   fork                 fork(); the child does cuMemAlloc 1 MiB + cuMemGetInfo, prints
//                        child.alloc= child.meminfo=, exits; parent prints fork.status=
//   exec:ARGS            execv()s this program with ARGS (comma separated) keeping the
//                        environment (the child output replaces ours)
//   threads:N:SIZE       N threads, each its own cuCtxCreate_v4 context, alloc/free SIZE
//                        20 times; threads=number of failed threads
//   churn:SIZE           prints ready=1 then alloc/free SIZE forever (killed by the test)
//   race:T:ITERS:MAXMIB:SEED  T threads x ITERS random page-multiple allocations of
//                        1..MAXMIB MiB, freed at random; race.ok= race.oom= race.other=
//                        race.maxheld= (this process's largest concurrent holding)
//   watch:MS:DEV         samples the node's usage of DEV through NVML for MS ms or until
//                        stdin has a line or EOF:
//                        watch.max= watch.samples=
//   legacy               the CUDA 3.x names libvgpu refuses: legacy.same.<sym>= legacy.meminfo=
//   graphmem             graph memory allocation nodes and their launches' charge (rcs):
//                        graphmem.alloc= (cuGraphAddMemAllocNode, 64 MiB), graphmem.alloc_lib=
//                        / graphmem.add_lib= (the library defining what dlsym gives),
//                        graphmem.generic= (cuGraphAddNode_v2 of a 128 MiB MEM_ALLOC node),
//                        graphmem.empty= (of an EMPTY node), graphmem.launch=, then 48 MiB
//                        cuMemAlloc tries: held_alloc= (launch holds 64), free= (cuMemFree of
//                        the graph allocation), cached_alloc=, trim=, trimmed_alloc=;
//                        graphmem.big_launch= (the 128 MiB graph); a graph captured from
//                        cuMemAllocAsync/FreeAsync of 64 MiB: captured_alloc=,
//                        capturing_alloc=, captured_launch=, captured_cached_alloc=,
//                        captured_trimmed_alloc=
//   exit:N               _exit(N) immediately
#include <cuda.h>
#include <dlfcn.h>
#include <poll.h>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "driver/nvml_abi.h"

namespace {

// ---------------------------------------------------------------------------
// The driver table: one typed pointer per entry point.
// clang-format off
#define CLIENT_FUNCS(X)                                                \
  X(cuInit, "cuInit", 0)                                               \
  X(cuDeviceCanAccessPeer, "cuDeviceCanAccessPeer", 0)                 \
  X(cuDeviceGetP2PAttribute, "cuDeviceGetP2PAttribute", 0)             \
  X(cuDeviceGetCount, "cuDeviceGetCount", 0)                           \
  X(cuDeviceGet, "cuDeviceGet", 0)                                     \
  X(cuDeviceGetUuid_v2, "cuDeviceGetUuid", 0)                          \
  X(cuDeviceGetPCIBusId, "cuDeviceGetPCIBusId", 0)                     \
  X(cuDeviceGetByPCIBusId, "cuDeviceGetByPCIBusId", 0)                 \
  X(cuDeviceTotalMem_v2, "cuDeviceTotalMem", 0)                        \
  X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", 0)           \
  X(cuDevicePrimaryCtxRelease_v2, "cuDevicePrimaryCtxRelease", 0)      \
  X(cuDevicePrimaryCtxReset_v2, "cuDevicePrimaryCtxReset", 0)          \
  X(cuCtxCreate_v4, "cuCtxCreate", 0)                                  \
  X(cuCtxDestroy_v2, "cuCtxDestroy", 0)                                \
  X(cuCtxSetCurrent, "cuCtxSetCurrent", 0)                             \
  X(cuCtxGetDevice, "cuCtxGetDevice", 0)                               \
  X(cuCtxPushCurrent_v2, "cuCtxPushCurrent", 0)                        \
  X(cuCtxPopCurrent_v2, "cuCtxPopCurrent", 0)                          \
  X(cuCtxSynchronize, "cuCtxSynchronize", 0)                           \
  X(cuModuleLoad, "cuModuleLoad", 0)                                   \
  X(cuModuleGetFunction, "cuModuleGetFunction", 0)                     \
  X(cuLaunchKernel, "cuLaunchKernel", 0)                               \
  X(cuMemAlloc_v2, "cuMemAlloc", 0)                                    \
  X(cuMemFree_v2, "cuMemFree", 0)                                      \
  X(cuMemAllocPitch_v2, "cuMemAllocPitch", 0)                          \
  X(cuMemAllocManaged, "cuMemAllocManaged", 0)                         \
  X(cuMemAllocAsync, "cuMemAllocAsync", 0)                             \
  X(cuMemAllocAsync_ptsz, "cuMemAllocAsync", 1)                        \
  X(cuMemFreeAsync, "cuMemFreeAsync", 0)                               \
  X(cuMemFreeAsync_ptsz, "cuMemFreeAsync", 1)                          \
  X(cuMemAllocFromPoolAsync, "cuMemAllocFromPoolAsync", 0)             \
  X(cuMemPoolCreate, "cuMemPoolCreate", 0)                             \
  X(cuMemPoolDestroy, "cuMemPoolDestroy", 0)                           \
  X(cuStreamCreate, "cuStreamCreate", 0)                               \
  X(cuStreamSynchronize, "cuStreamSynchronize", 0)                     \
  X(cuStreamSynchronize_ptsz, "cuStreamSynchronize", 1)                \
  X(cuStreamDestroy_v2, "cuStreamDestroy", 0)                          \
  X(cuMemCreate, "cuMemCreate", 0)                                     \
  X(cuMemRelease, "cuMemRelease", 0)                                   \
  X(cuMemGetAllocationGranularity, "cuMemGetAllocationGranularity", 0) \
  X(cuArrayCreate_v2, "cuArrayCreate", 0)                              \
  X(cuArray3DCreate_v2, "cuArray3DCreate", 0)                          \
  X(cuArrayDestroy, "cuArrayDestroy", 0)                               \
  X(cuMemGetInfo_v2, "cuMemGetInfo", 0)                                \
  X(cuPointerGetAttribute, "cuPointerGetAttribute", 0)                 \
  X(cuMemAddressReserve, "cuMemAddressReserve", 0)                     \
  X(cuMemAddressFree, "cuMemAddressFree", 0)                           \
  X(cuMemMap, "cuMemMap", 0)                                           \
  X(cuMemUnmap, "cuMemUnmap", 0)                                       \
  X(cuMemSetAccess, "cuMemSetAccess", 0)
// clang-format on

// The CUDA 3.x context stack (before 4.0 added the _v2 entry points), as old
// binaries reach it: by symbol, or through cuGetProcAddress with version 3020.
#define CLIENT_LEGACY_FUNCS(X)               \
  X(cuCtxPushCurrent, "cuCtxPushCurrent", 0) \
  X(cuCtxPopCurrent, "cuCtxPopCurrent", 0) X(cuCtxDestroy, "cuCtxDestroy", 0)
constexpr int kLegacyVersion = 3020;

// Optional: the simulated driver may lack them.
#define CLIENT_OPTIONAL_FUNCS(X)                         \
  X(cuMipmappedArrayCreate, "cuMipmappedArrayCreate", 0) \
  X(cuMipmappedArrayDestroy, "cuMipmappedArrayDestroy", 0)

struct Api {
#define FIELD(sym, base, ptsz) decltype(&::sym) sym = nullptr;
  CLIENT_FUNCS(FIELD)
  CLIENT_LEGACY_FUNCS(FIELD)
  CLIENT_OPTIONAL_FUNCS(FIELD)
#undef FIELD
};

Api api;
std::mutex g_out_mu;

void Out(const char* fmt, ...) {
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  std::lock_guard<std::mutex> lock(g_out_mu);
  std::fputs(buf, stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

[[noreturn]] void Die(const char* what) {
  Out("fatal=%s", what);
  std::fflush(stdout);
  _exit(3);
}

#ifdef CLIENT_LINKED
// Weak: the simulated driver does not export the mipmapped-array API; under
// libvgpu the symbol resolves to libvgpu's hook instead.
#pragma weak cuMipmappedArrayCreate
#pragma weak cuMipmappedArrayDestroy

void LoadApi(const std::string&, int) {
#define LINKED(sym, base, ptsz) api.sym = &::sym;
  CLIENT_FUNCS(LINKED)
  CLIENT_LEGACY_FUNCS(LINKED)
#undef LINKED
  api.cuMipmappedArrayCreate = &::cuMipmappedArrayCreate;  // null if nobody defines it
  api.cuMipmappedArrayDestroy = &::cuMipmappedArrayDestroy;
}
#else
void LoadApi(const std::string& path, int version) {
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) Die("dlopen libcuda.so.1 failed");
  if (path == "dlsym") {
#define BYDLSYM(sym, base, ptsz)                                 \
  api.sym = reinterpret_cast<decltype(api.sym)>(dlsym(h, #sym)); \
  if (api.sym == nullptr) Die("dlsym " #sym);
    CLIENT_FUNCS(BYDLSYM)
    CLIENT_LEGACY_FUNCS(BYDLSYM)
#undef BYDLSYM
    api.cuMipmappedArrayCreate =
        reinterpret_cast<decltype(api.cuMipmappedArrayCreate)>(dlsym(h, "cuMipmappedArrayCreate"));
    api.cuMipmappedArrayDestroy = reinterpret_cast<decltype(api.cuMipmappedArrayDestroy)>(
        dlsym(h, "cuMipmappedArrayDestroy"));
    return;
  }
  if (path != "procaddr") Die("unknown --path");
  auto gpa = reinterpret_cast<decltype(&::cuGetProcAddress_v2)>(dlsym(h, "cuGetProcAddress_v2"));
  if (gpa == nullptr) Die("dlsym cuGetProcAddress_v2");
  auto get = [&](const char* base, bool ptsz, bool required, bool legacy = false) -> void* {
    void* fn = nullptr;
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    cuuint64_t flags =
        ptsz ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : CU_GET_PROC_ADDRESS_DEFAULT;
    // The table's typed pointers are cuda.h 13's: cuCtxCreate_v4 (12050+)
    // and the original cuCtxGetDevice and cuCtxSynchronize (their _v2 from
    // 13000 take a context). Ask for the version that has that signature.
    int v = version;
    if (std::strcmp(base, "cuCtxCreate") == 0 && v < 12050) v = 12050;
    if (std::strcmp(base, "cuCtxGetDevice") == 0 && v >= 13000) v = 12090;
    if (std::strcmp(base, "cuCtxSynchronize") == 0 && v >= 13000) v = 12090;  // _v2 takes a context
    if (legacy) v = kLegacyVersion;
    CUresult r = gpa(base, &fn, v, flags, &st);
    if ((r != CUDA_SUCCESS || fn == nullptr) && required) {
      Out("procaddr_fail=%s rc=%d status=%d", base, static_cast<int>(r), static_cast<int>(st));
      Die("cuGetProcAddress_v2");
    }
    return r == CUDA_SUCCESS ? fn : nullptr;
  };
#define BYGPA(sym, base, ptsz) api.sym = reinterpret_cast<decltype(api.sym)>(get(base, ptsz, true));
  CLIENT_FUNCS(BYGPA)
#undef BYGPA
#define BYGPA_LEGACY(sym, base, ptsz) \
  api.sym = reinterpret_cast<decltype(api.sym)>(get(base, ptsz, true, true));
  CLIENT_LEGACY_FUNCS(BYGPA_LEGACY)
#undef BYGPA_LEGACY
#define BYGPA_OPT(sym, base, ptsz) \
  api.sym = reinterpret_cast<decltype(api.sym)>(get(base, ptsz, false));
  CLIENT_OPTIONAL_FUNCS(BYGPA_OPT)
#undef BYGPA_OPT
}
#endif

// Where an entry point lives ("libvgpu.so", "libcuda.so.1"): for diagnostics.
const char* LibOf(const void* fn) {
  Dl_info info{};
  if (fn == nullptr || dladdr(fn, &info) == 0 || info.dli_fname == nullptr) return "?";
  const char* s = std::strrchr(info.dli_fname, '/');
  return s != nullptr ? s + 1 : info.dli_fname;
}

// ---------------------------------------------------------------------------
// NVML through dlopen (the sim's libnvidia-ml.so.1, or libvgpu's hooks).
struct Nvml {
  decltype(&::nvmlInit_v2) init = nullptr;
  decltype(&::nvmlDeviceGetCount_v2) count = nullptr;
  decltype(&::nvmlDeviceGetHandleByIndex_v2) by_index = nullptr;
  decltype(&::nvmlDeviceGetHandleByUUID) by_uuid = nullptr;
  decltype(&::nvmlDeviceGetHandleByPciBusId_v2) by_pci = nullptr;
  decltype(&::nvmlDeviceGetIndex) index = nullptr;
  decltype(&::nvmlDeviceGetUUID) uuid = nullptr;
  decltype(&::nvmlDeviceGetMemoryInfo) mem = nullptr;
  decltype(&::nvmlDeviceGetMemoryInfo_v2) mem2 = nullptr;
  bool ok = false;
};

Nvml& GetNvml() {
  static Nvml n = [] {
    Nvml v;
    void* h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) Die("dlopen libnvidia-ml.so.1");
#define NV(field, sym)                                           \
  v.field = reinterpret_cast<decltype(v.field)>(dlsym(h, #sym)); \
  if (v.field == nullptr) Die("dlsym " #sym);
    NV(init, nvmlInit_v2)
    NV(count, nvmlDeviceGetCount_v2) NV(by_index, nvmlDeviceGetHandleByIndex_v2)
        NV(by_uuid, nvmlDeviceGetHandleByUUID) NV(by_pci, nvmlDeviceGetHandleByPciBusId_v2)
            NV(index, nvmlDeviceGetIndex) NV(uuid, nvmlDeviceGetUUID)
                NV(mem, nvmlDeviceGetMemoryInfo) NV(mem2, nvmlDeviceGetMemoryInfo_v2)
#undef NV
                    nvmlReturn_t r = v.init();
    Out("nvmlinit=%d", static_cast<int>(r));
    v.ok = r == NVML_SUCCESS;
    return v;
  }();
  return n;
}

// ---------------------------------------------------------------------------
std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t p = s.find(sep, start);
    out.push_back(s.substr(start, p == std::string::npos ? std::string::npos : p - start));
    if (p == std::string::npos) break;
    start = p + 1;
  }
  return out;
}

// "65M" / "64MiB"-less: number with optional K/M/G suffix (powers of 1024).
uint64_t Size(const std::string& s) {
  char* end = nullptr;
  uint64_t v = std::strtoull(s.c_str(), &end, 10);
  switch (*end) {
    case 'K':
    case 'k':
      return v << 10;
    case 'M':
    case 'm':
      return v << 20;
    case 'G':
    case 'g':
      return v << 30;
    default:
      return v;
  }
}

std::string UuidString(const CUuuid& u) {
  const auto* b = reinterpret_cast<const unsigned char*>(u.bytes);
  char s[64];
  std::snprintf(s, sizeof s,
                "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                b[14], b[15]);
  return s;
}

int ThreadCount() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Threads:", 0) == 0) return std::atoi(line.c_str() + 8);
  }
  return -1;
}

bool LibcudaLoaded() {
  std::ifstream in("/proc/self/maps");
  std::string line;
  while (std::getline(in, line)) {
    if (line.find("libcuda") != std::string::npos) return true;
  }
  return false;
}

struct State {
  std::vector<CUdeviceptr> ptrs;
  std::vector<CUmemGenericAllocationHandle> handles;
  std::vector<uint64_t> handle_bytes;                // of each handle
  std::vector<std::pair<CUdeviceptr, size_t>> maps;  // map / unmap
  std::vector<CUarray> arrays;
  std::vector<CUmipmappedArray> mipmaps;
  std::vector<CUcontext> ctxs;
  CUstream stream = nullptr;
  CUmemoryPool pool = nullptr;
  int primary_dev = -1;
  int argc = 0;
  char** argv = nullptr;
  std::string self;
};

int Rc(CUresult r) { return static_cast<int>(r); }

CUstream Stream(State& s) {
  if (s.stream == nullptr) {
    CUresult r = api.cuStreamCreate(&s.stream, CU_STREAM_NON_BLOCKING);
    if (r != CUDA_SUCCESS) Out("stream_create=%d", Rc(r));
  }
  return s.stream;
}

void RaceThread(int iters, int max_mib, unsigned seed, std::atomic<int>* ok, std::atomic<int>* oom,
                std::atomic<int>* other, std::atomic<long long>* held,
                std::atomic<long long>* maxheld, CUcontext ctx) {
  api.cuCtxSetCurrent(ctx);
  std::mt19937 rng(seed);
  std::vector<std::pair<CUdeviceptr, size_t>> mine;
  for (int i = 0; i < iters; ++i) {
    if (!mine.empty() && (rng() % 2 == 0 || mine.size() > 4)) {
      size_t k = rng() % mine.size();
      if (api.cuMemFree_v2(mine[k].first) != CUDA_SUCCESS) other->fetch_add(1);
      held->fetch_sub(static_cast<long long>(mine[k].second));
      mine.erase(mine.begin() + static_cast<long>(k));
      continue;
    }
    // Page-multiple sizes: the simulated driver charges exactly what libvgpu does.
    size_t bytes = (1 + rng() % static_cast<unsigned>(max_mib * 256)) * 4096ull;
    CUdeviceptr p = 0;
    CUresult r = api.cuMemAlloc_v2(&p, bytes);
    if (r == CUDA_SUCCESS) {
      ok->fetch_add(1);
      long long h = held->fetch_add(static_cast<long long>(bytes)) + static_cast<long long>(bytes);
      long long m = maxheld->load();
      while (h > m && !maxheld->compare_exchange_weak(m, h)) {
      }
      mine.push_back({p, bytes});
    } else if (r == CUDA_ERROR_OUT_OF_MEMORY) {
      oom->fetch_add(1);
    } else {
      other->fetch_add(1);
    }
  }
  for (auto& [p, b] : mine) {
    if (api.cuMemFree_v2(p) != CUDA_SUCCESS) other->fetch_add(1);
    held->fetch_sub(static_cast<long long>(b));
  }
}

// The library that defines fn ("libvgpu", "libcuda", or "other").
const char* LibraryOf(void* fn) {
  Dl_info info{};
  if (fn == nullptr || dladdr(fn, &info) == 0 || info.dli_fname == nullptr) return "none";
  if (std::strstr(info.dli_fname, "libvgpu") != nullptr) return "libvgpu";
  if (std::strstr(info.dli_fname, "libcuda") != nullptr) return "libcuda";
  return "other";
}

// Graph memory allocation nodes, explicit and through the generic node API,
// and what their launches charge: a graph allocating 64 MiB is instantiated
// and launched, then 48 MiB allocations are tried while the launch holds its
// allocation, after it was freed (the pool keeps it) and after a trim; then a
// graph allocating 128 MiB is launched.
void GraphMemNodes() {
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
#define VGPU_SYM(name) auto name = reinterpret_cast<decltype(&::name)>(dlsym(h, #name))
  VGPU_SYM(cuGraphAddMemAllocNode);
  VGPU_SYM(cuGraphAddNode_v2);
  VGPU_SYM(cuGraphCreate);
  VGPU_SYM(cuGraphDestroy);
  VGPU_SYM(cuGraphInstantiateWithFlags);
  VGPU_SYM(cuGraphLaunch);
  VGPU_SYM(cuGraphExecDestroy);
  VGPU_SYM(cuDeviceGraphMemTrim);
  VGPU_SYM(cuStreamCreate);
  VGPU_SYM(cuStreamBeginCapture_v2);
  VGPU_SYM(cuStreamEndCapture);
#undef VGPU_SYM
  Out("graphmem.alloc_lib=%s", LibraryOf(reinterpret_cast<void*>(cuGraphAddMemAllocNode)));
  Out("graphmem.add_lib=%s", LibraryOf(reinterpret_cast<void*>(cuGraphAddNode_v2)));
  CUgraph g = nullptr, big = nullptr;
  if (cuGraphAddMemAllocNode == nullptr || cuGraphAddNode_v2 == nullptr || cuGraphCreate == nullptr ||
      cuGraphDestroy == nullptr || cuGraphInstantiateWithFlags == nullptr || cuGraphLaunch == nullptr ||
      cuGraphExecDestroy == nullptr || cuDeviceGraphMemTrim == nullptr || cuStreamCreate == nullptr ||
      cuStreamBeginCapture_v2 == nullptr || cuStreamEndCapture == nullptr ||
      cuGraphCreate(&g, 0) != CUDA_SUCCESS || cuGraphCreate(&big, 0) != CUDA_SUCCESS) {
    return;
  }
  CUDA_MEM_ALLOC_NODE_PARAMS p{};
  p.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.poolProps.location = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
  p.bytesize = 64 << 20;
  CUgraphNode n = nullptr;
  Out("graphmem.alloc=%d", static_cast<int>(cuGraphAddMemAllocNode(&n, g, nullptr, 0, &p)));
  CUgraphNodeParams np{};
  np.type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;
  np.alloc.poolProps = p.poolProps;
  np.alloc.bytesize = 128 << 20;
  Out("graphmem.generic=%d", static_cast<int>(cuGraphAddNode_v2(&n, big, nullptr, nullptr, 0, &np)));
  np = CUgraphNodeParams{};
  np.type = CU_GRAPH_NODE_TYPE_EMPTY;
  Out("graphmem.empty=%d", static_cast<int>(cuGraphAddNode_v2(&n, g, nullptr, nullptr, 0, &np)));
  auto try_alloc = [](const char* key) {
    CUdeviceptr d = 0;
    CUresult r = api.cuMemAlloc_v2(&d, 48 << 20);
    Out("graphmem.%s=%d", key, static_cast<int>(r));
    if (r == CUDA_SUCCESS) api.cuMemFree_v2(d);
  };
  CUgraphExec e = nullptr, be = nullptr;
  Out("graphmem.instantiate=%d", static_cast<int>(cuGraphInstantiateWithFlags(&e, g, 0)));
  Out("graphmem.launch=%d", static_cast<int>(cuGraphLaunch(e, nullptr)));
  api.cuCtxSynchronize();
  try_alloc("held_alloc");
  Out("graphmem.free=%d", static_cast<int>(api.cuMemFree_v2(p.dptr)));
  try_alloc("cached_alloc");
  Out("graphmem.trim=%d", static_cast<int>(cuDeviceGraphMemTrim(0)));
  try_alloc("trimmed_alloc");
  Out("graphmem.big_instantiate=%d", static_cast<int>(cuGraphInstantiateWithFlags(&be, big, 0)));
  Out("graphmem.big_launch=%d", static_cast<int>(cuGraphLaunch(be, nullptr)));
  api.cuCtxSynchronize();
  // Captured: cuMemAllocAsync and cuMemFreeAsync of 64 MiB in the graph.
  CUstream s = nullptr;
  CUgraph cap = nullptr;
  CUgraphExec ce = nullptr;
  CUdeviceptr d = 0;
  cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
  cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
  Out("graphmem.captured_alloc=%d", static_cast<int>(api.cuMemAllocAsync(&d, 64 << 20, s)));
  api.cuMemFreeAsync(d, s);
  cuStreamEndCapture(s, &cap);
  try_alloc("capturing_alloc");  // capture took nothing
  cuGraphInstantiateWithFlags(&ce, cap, 0);
  Out("graphmem.captured_launch=%d", static_cast<int>(cuGraphLaunch(ce, s)));
  api.cuCtxSynchronize();
  try_alloc("captured_cached_alloc");  // freed in the graph, kept by the pool
  cuDeviceGraphMemTrim(0);
  try_alloc("captured_trimmed_alloc");
  cuGraphExecDestroy(ce);
  cuGraphDestroy(cap);
  cuGraphExecDestroy(e);
  cuGraphExecDestroy(be);
  cuGraphDestroy(g);
  cuGraphDestroy(big);
}

void RunOp(State& s, const std::string& op) {
  std::vector<std::string> a = Split(op, ':');
  const std::string& name = a[0];
  auto arg = [&](size_t i, const char* def = "0") {
    return i < a.size() ? a[i] : std::string(def);
  };
  if (name == "maps") {
    Out("libcuda_loaded=%d", LibcudaLoaded() ? 1 : 0);
    Out("threads=%d", ThreadCount());
  } else if (name == "init") {
    Out("init=%d", Rc(api.cuInit(0)));
    Out("init.lib=%s", LibOf(reinterpret_cast<void*>(api.cuMemAlloc_v2)));
    Out("init.lib_ptsz=%s", LibOf(reinterpret_cast<void*>(api.cuMemAllocAsync_ptsz)));
    Out("init.lib_count=%s", LibOf(reinterpret_cast<void*>(api.cuDeviceGetCount)));
  } else if (name == "ctx") {
    int v = std::atoi(arg(1).c_str());
    CUdevice d = 0;
    CUresult r = api.cuDeviceGet(&d, v);
    CUcontext c = nullptr;
    if (r == CUDA_SUCCESS) r = api.cuDevicePrimaryCtxRetain(&c, d);
    if (r == CUDA_SUCCESS) r = api.cuCtxSetCurrent(c);
    if (r == CUDA_SUCCESS) s.primary_dev = v;
    Out("ctx=%d", Rc(r));
  } else if (name == "ctxnew") {
    CUdevice d = 0;
    CUresult r = api.cuDeviceGet(&d, std::atoi(arg(1).c_str()));
    CUcontext c = nullptr;
    if (r == CUDA_SUCCESS) r = api.cuCtxCreate_v4(&c, nullptr, 0, d);
    if (r == CUDA_SUCCESS) s.ctxs.push_back(c);
    Out("ctxnew=%d", Rc(r));
  } else if (name == "ctxdestroy") {
    if (s.ctxs.empty()) Die("ctxdestroy: no context");
    Out("ctxdestroy=%d", Rc(api.cuCtxDestroy_v2(s.ctxs.back())));
    s.ctxs.pop_back();
    s.ptrs.clear();  // they died with the context
  } else if (name == "reset") {
    int v = std::atoi(arg(1).c_str());
    api.cuCtxSetCurrent(nullptr);
    CUresult r = api.cuDevicePrimaryCtxRelease_v2(v);
    CUresult r2 = api.cuDevicePrimaryCtxReset_v2(v);
    Out("reset=%d", Rc(r != CUDA_SUCCESS ? r : r2));
    s.ptrs.clear();
    s.stream = nullptr;
    s.pool = nullptr;
  } else if (name == "alloc") {
    CUdeviceptr p = 0;
    CUresult r = api.cuMemAlloc_v2(&p, Size(arg(1)));
    if (r == CUDA_SUCCESS) s.ptrs.push_back(p);
    Out("alloc=%d", Rc(r));
  } else if (name == "free") {
    if (s.ptrs.empty()) Die("free: nothing allocated");
    Out("freed=%d", Rc(api.cuMemFree_v2(s.ptrs.back())));
    s.ptrs.pop_back();
  } else if (name == "freeall") {
    int bad = 0;
    while (!s.ptrs.empty()) {
      bad += api.cuMemFree_v2(s.ptrs.back()) != CUDA_SUCCESS;
      s.ptrs.pop_back();
    }
    Out("freeall=%d", bad);
  } else if (name == "pitch") {
    CUdeviceptr p = 0;
    size_t pitch = 0;
    CUresult r = api.cuMemAllocPitch_v2(&p, &pitch, Size(arg(1)), Size(arg(2)), 4);
    if (r == CUDA_SUCCESS) s.ptrs.push_back(p);
    Out("pitch=%d", Rc(r));
    Out("pitch.pitch=%zu", pitch);
  } else if (name == "managed") {
    CUdeviceptr p = 0;
    CUresult r = api.cuMemAllocManaged(&p, Size(arg(1)), CU_MEM_ATTACH_GLOBAL);
    if (r == CUDA_SUCCESS) s.ptrs.push_back(p);
    Out("managed=%d", Rc(r));
  } else if (name == "async" || name == "async_ptsz") {
    CUdeviceptr p = 0;
    CUstream st = Stream(s);
    CUresult r = name == "async" ? api.cuMemAllocAsync(&p, Size(arg(1)), st)
                                 : api.cuMemAllocAsync_ptsz(&p, Size(arg(1)), st);
    if (r == CUDA_SUCCESS) s.ptrs.push_back(p);
    Out("%s=%d", name.c_str(), Rc(r));
  } else if (name == "pool") {
    if (s.pool == nullptr) {
      CUdevice d = 0;
      api.cuCtxGetDevice(&d);
      CUmemPoolProps props{};
      props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
      props.handleTypes = CU_MEM_HANDLE_TYPE_NONE;
      props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      props.location.id = d;
      CUresult r = api.cuMemPoolCreate(&s.pool, &props);
      if (r != CUDA_SUCCESS) Out("poolcreate=%d", Rc(r));
    }
    CUdeviceptr p = 0;
    CUresult r = api.cuMemAllocFromPoolAsync(&p, Size(arg(1)), s.pool, Stream(s));
    if (r == CUDA_SUCCESS) s.ptrs.push_back(p);
    Out("pool=%d", Rc(r));
  } else if (name == "freeasync" || name == "freeasync_ptsz") {
    if (s.ptrs.empty()) Die("freeasync: nothing allocated");
    CUresult r = name == "freeasync" ? api.cuMemFreeAsync(s.ptrs.back(), Stream(s))
                                     : api.cuMemFreeAsync_ptsz(s.ptrs.back(), Stream(s));
    s.ptrs.pop_back();
    Out("%s=%d", name.c_str(), Rc(r));
  } else if (name == "sync") {
    Out("sync=%d", Rc(api.cuStreamSynchronize(Stream(s))));
  } else if (name == "create") {
    CUdevice d = 0;
    api.cuCtxGetDevice(&d);
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = d;
    size_t gran = 0;
    CUresult r = api.cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    uint64_t bytes = Size(arg(1));
    CUmemGenericAllocationHandle h = 0;
    if (r == CUDA_SUCCESS) r = api.cuMemCreate(&h, bytes, &prop, 0);
    if (r == CUDA_SUCCESS) {
      s.handles.push_back(h);
      s.handle_bytes.push_back(bytes);
    }
    Out("create=%d", Rc(r));
    Out("create.granularity=%zu", gran);
  } else if (name == "release") {
    if (s.handles.empty()) Die("release: no handle");
    Out("release=%d", Rc(api.cuMemRelease(s.handles.back())));
    s.handles.pop_back();
    s.handle_bytes.pop_back();
  } else if (name == "map") {
    if (s.handles.empty()) Die("map: no handle");
    CUdevice d = 0;
    api.cuCtxGetDevice(&d);
    const size_t bytes = s.handle_bytes.back();
    CUdeviceptr va = 0;
    CUresult r = api.cuMemAddressReserve(&va, bytes, 0, 0, 0);
    if (r == CUDA_SUCCESS) r = api.cuMemMap(va, bytes, 0, s.handles.back(), 0);
    CUmemAccessDesc access{};
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = d;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    if (r == CUDA_SUCCESS) r = api.cuMemSetAccess(va, bytes, &access, 1);
    if (r == CUDA_SUCCESS) s.maps.emplace_back(va, bytes);
    Out("map=%d", Rc(r));
  } else if (name == "unmap") {
    if (s.maps.empty()) Die("unmap: nothing mapped");
    auto [va, bytes] = s.maps.back();
    s.maps.pop_back();
    CUresult r = api.cuMemUnmap(va, bytes);
    if (r == CUDA_SUCCESS) r = api.cuMemAddressFree(va, bytes);
    Out("unmap=%d", Rc(r));
  } else if (name == "array" || name == "array3d") {
    CUarray h = nullptr;
    CUresult r;
    if (name == "array") {
      CUDA_ARRAY_DESCRIPTOR d{Size(arg(1)), Size(arg(2)), CU_AD_FORMAT_UNSIGNED_INT8, 1};
      r = api.cuArrayCreate_v2(&h, &d);
    } else {
      CUDA_ARRAY3D_DESCRIPTOR d{
          Size(arg(1)), Size(arg(2)), Size(arg(3)), CU_AD_FORMAT_UNSIGNED_INT8, 1, 0};
      r = api.cuArray3DCreate_v2(&h, &d);
    }
    if (r == CUDA_SUCCESS) s.arrays.push_back(h);
    Out("%s=%d", name.c_str(), Rc(r));
  } else if (name == "arrdestroy") {
    if (s.arrays.empty()) Die("arrdestroy: no array");
    Out("arrdestroy=%d", Rc(api.cuArrayDestroy(s.arrays.back())));
    s.arrays.pop_back();
  } else if (name == "mipmap") {
    if (api.cuMipmappedArrayCreate == nullptr) {
      Out("mipmap=unavailable");
      return;
    }
    CUDA_ARRAY3D_DESCRIPTOR d{Size(arg(1)), Size(arg(2)), 0, CU_AD_FORMAT_UNSIGNED_INT8, 1, 0};
    CUmipmappedArray h = nullptr;
    CUresult r =
        api.cuMipmappedArrayCreate(&h, &d, static_cast<unsigned>(std::atoi(arg(3).c_str())));
    if (r == CUDA_SUCCESS) s.mipmaps.push_back(h);
    Out("mipmap=%d", Rc(r));
  } else if (name == "meminfo") {
    size_t fr = 0, tot = 0;
    CUresult r = api.cuMemGetInfo_v2(&fr, &tot);
    Out("meminfo=%d", Rc(r));
    Out("free=%zu", fr);
    Out("total=%zu", tot);
  } else if (name == "fill") {
    uint64_t total = Size(arg(1)), piece = Size(arg(2)), done = 0;
    CUresult r = CUDA_SUCCESS;
    while (done < total) {
      uint64_t b = total - done < piece ? total - done : piece;
      CUdeviceptr p = 0;
      r = api.cuMemAlloc_v2(&p, b);
      if (r != CUDA_SUCCESS) break;
      s.ptrs.push_back(p);
      done += b;
    }
    Out("fill=%d", Rc(r));
    Out("fill_bytes=%llu", static_cast<unsigned long long>(done));
  } else if (name == "loop") {
    int n = std::atoi(arg(1).c_str());
    uint64_t b = Size(arg(2));
    CUresult first = CUDA_SUCCESS;
    for (int i = 0; i < n && first == CUDA_SUCCESS; ++i) {
      CUdeviceptr p = 0;
      first = api.cuMemAlloc_v2(&p, b);
      if (first == CUDA_SUCCESS) first = api.cuMemFree_v2(p);
    }
    Out("loop=%d", Rc(first));
  } else if (name == "devices") {
    int n = -1;
    CUresult r = api.cuDeviceGetCount(&n);
    Out("count=%d", r == CUDA_SUCCESS ? n : -Rc(r));
    for (int i = 0; i < n; ++i) {
      CUdevice d = 0;
      if (api.cuDeviceGet(&d, i) != CUDA_SUCCESS) {
        Out("dev%d.get=fail", i);
        continue;
      }
      CUuuid u{};
      char pci[64] = {};
      size_t total = 0;
      api.cuDeviceGetUuid_v2(&u, d);
      api.cuDeviceGetPCIBusId(pci, sizeof pci, d);
      api.cuDeviceTotalMem_v2(&total, d);
      Out("dev%d.uuid=%s", i, UuidString(u).c_str());
      Out("dev%d.pci=%s", i, pci);
      Out("dev%d.total=%zu", i, total);
    }
  } else if (name == "peer") {
    int can = -1, value = -1;
    CUdevice a = std::atoi(arg(1).c_str()), b = std::atoi(arg(2).c_str());
    Out("peer=%d", Rc(api.cuDeviceCanAccessPeer(&can, a, b)));
    Out("peer.can=%d", can);
    Out("p2p=%d", Rc(api.cuDeviceGetP2PAttribute(&value, CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED,
                                                 a, b)));
    Out("p2p.value=%d", value);
  } else if (name == "getdev") {
    CUdevice d = -1;
    CUresult r = api.cuDeviceGet(&d, std::atoi(arg(1).c_str()));
    Out("getdev=%d", Rc(r));
  } else if (name == "bypci") {
    CUdevice d = -1;
    std::string id = op.substr(name.size() + 1);  // PCI ids contain ':'
    CUresult r = api.cuDeviceGetByPCIBusId(&d, id.c_str());
    Out("bypci=%d", Rc(r));
    Out("bypci.dev=%d", static_cast<int>(d));
  } else if (name == "push") {  // the last context ctxnew created
    if (s.ctxs.empty()) Die("push: no context");
    Out("push=%d", Rc(api.cuCtxPushCurrent_v2(s.ctxs.back())));
  } else if (name == "pop") {
    CUcontext c = nullptr;
    Out("pop=%d", Rc(api.cuCtxPopCurrent_v2(&c)));
  } else if (name == "push1") {  // push and pop through the CUDA 3.x entry points
    if (s.ctxs.empty()) Die("push1: no context");
    Out("push1=%d", Rc(api.cuCtxPushCurrent(s.ctxs.back())));
  } else if (name == "pop1") {
    CUcontext c = nullptr;
    Out("pop1=%d", Rc(api.cuCtxPopCurrent(&c)));
  } else if (name == "ctxdestroy1") {
    if (s.ctxs.empty()) Die("ctxdestroy1: no context");
    Out("ctxdestroy1=%d", Rc(api.cuCtxDestroy(s.ctxs.back())));
    s.ctxs.pop_back();
    s.ptrs.clear();
  } else if (name == "launch") {  // launch:N:us — N sleep kernels in the current context, then sync
    CUmodule m = nullptr;
    CUfunction f = nullptr;
    CUresult r = api.cuModuleLoad(&m, "@builtin");  // per context: a function belongs to one
    if (r == CUDA_SUCCESS) r = api.cuModuleGetFunction(&f, m, "vgpu_sim_sleep");
    unsigned long long ns = std::strtoull(arg(2, "1000").c_str(), nullptr, 10) * 1000ull;
    void* args[] = {&ns};
    for (int i = 0, n = std::atoi(arg(1, "1").c_str()); i < n && r == CUDA_SUCCESS; ++i) {
      r = api.cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr);
    }
    if (r == CUDA_SUCCESS) r = api.cuCtxSynchronize();
    Out("launch=%d", Rc(r));
  } else if (name == "ctxdev") {
    CUdevice d = -1;
    CUresult r = api.cuCtxGetDevice(&d);
    Out("ctxdev=%d", Rc(r));
    Out("ctxdev.dev=%d", static_cast<int>(d));
  } else if (name == "ptrdev") {
    int ord = -1;
    CUresult r = s.ptrs.empty() ? CUDA_ERROR_INVALID_VALUE
                                : api.cuPointerGetAttribute(
                                      &ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, s.ptrs.back());
    Out("ptrdev=%d", Rc(r));
    Out("ptrdev.ord=%d", ord);
  } else if (name == "nvml") {
    Nvml& n = GetNvml();
    if (!n.ok) return;
    unsigned c = 0;
    nvmlReturn_t r = n.count(&c);
    Out("nvml.count=%d", r == NVML_SUCCESS ? static_cast<int>(c) : -static_cast<int>(r));
    for (unsigned i = 0; i < c; ++i) {
      nvmlDevice_t h = nullptr;
      if (n.by_index(i, &h) != NVML_SUCCESS) {
        Out("nvml%u.handle=fail", i);
        continue;
      }
      char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
      n.uuid(h, uuid, sizeof uuid);
      unsigned idx = 999;
      n.index(h, &idx);
      nvmlMemory_t m{};
      nvmlReturn_t r1 = n.mem(h, &m);
      nvmlMemory_v2_t m2{};
      m2.version = nvmlMemory_v2;
      nvmlReturn_t r2 = n.mem2(h, &m2);
      Out("nvml%u.uuid=%s", i, uuid);
      Out("nvml%u.index=%u", i, idx);
      Out("nvml%u.mem=%d", i, static_cast<int>(r1));
      Out("nvml%u.total=%llu", i, m.total);
      Out("nvml%u.used=%llu", i, m.used);
      Out("nvml%u.free=%llu", i, m.free);
      Out("nvml%u.mem2=%d", i, static_cast<int>(r2));
      Out("nvml%u.total2=%llu", i, m2.total);
      Out("nvml%u.used2=%llu", i, m2.used);
      Out("nvml%u.free2=%llu", i, m2.free);
    }
  } else if (name == "nvmlbyuuid" || name == "nvmlbypci") {
    Nvml& n = GetNvml();
    nvmlDevice_t h = nullptr;
    std::string id = op.substr(name.size() + 1);  // PCI ids contain ':'
    nvmlReturn_t r = name == "nvmlbyuuid" ? n.by_uuid(id.c_str(), &h) : n.by_pci(id.c_str(), &h);
    unsigned idx = 999;
    if (r == NVML_SUCCESS) n.index(h, &idx);
    Out("%s=%d", name.c_str(), static_cast<int>(r));
    Out("%s.index=%u", name.c_str(), idx);
  } else if (name == "wait") {
    Out("waiting=1");
    std::string line;
    std::getline(std::cin, line);
  } else if (name == "sleep") {
    std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(arg(1).c_str())));
  } else if (name == "fork") {
    std::fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
      // What the real driver does in a forked child: the parent's context and
      // CUDA state are unusable; calls fail (CUDA_ERROR_NOT_INITIALIZED or
      // similar), they never hang or crash. libvgpu must not make it worse.
      CUdeviceptr p = 0;
      CUresult r = api.cuMemAlloc_v2(&p, 1 << 20);
      Out("child.alloc=%d", Rc(r));
      size_t fr = 0, tot = 0;
      Out("child.meminfo=%d", Rc(api.cuMemGetInfo_v2(&fr, &tot)));
      int count = -1;
      Out("child.count=%d", Rc(api.cuDeviceGetCount(&count)));
      std::fflush(stdout);
      _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    Out("fork.status=%d", st);
  } else if (name == "exec") {
    std::vector<std::string> args = Split(op.substr(5), ',');
    std::vector<char*> argv{const_cast<char*>(s.self.c_str())};
    for (auto& x : args) argv.push_back(x.data());
    argv.push_back(nullptr);
    std::fflush(stdout);
    execv(s.self.c_str(), argv.data());
    Out("exec=failed errno=%d", errno);
  } else if (name == "threads") {
    int n = std::atoi(arg(1).c_str());
    uint64_t b = Size(arg(2));
    std::atomic<int> failed{0};
    std::vector<std::thread> ts;
    for (int i = 0; i < n; ++i) {
      ts.emplace_back([&, i] {
        CUdevice d = 0;
        CUcontext c = nullptr;
        if (api.cuDeviceGet(&d, 0) != CUDA_SUCCESS ||
            api.cuCtxCreate_v4(&c, nullptr, 0, d) != CUDA_SUCCESS) {
          failed.fetch_add(1);
          return;
        }
        bool ok = true;
        for (int k = 0; k < 20 && ok; ++k) {
          CUdeviceptr p = 0;
          ok = api.cuMemAlloc_v2(&p, b) == CUDA_SUCCESS && api.cuMemFree_v2(p) == CUDA_SUCCESS;
          CUdevice cd = -1;
          ok = ok && api.cuCtxGetDevice(&cd) == CUDA_SUCCESS && cd == 0;
        }
        // Keep one allocation alive in the context; destroying it returns it.
        CUdeviceptr keep = 0;
        ok = ok && api.cuMemAlloc_v2(&keep, b) == CUDA_SUCCESS;
        ok = ok && api.cuCtxDestroy_v2(c) == CUDA_SUCCESS;
        if (!ok) failed.fetch_add(1);
        (void)i;
      });
    }
    for (auto& t : ts) t.join();
    Out("threads=%d", failed.load());
  } else if (name == "churn") {
    uint64_t b = Size(arg(1));
    Out("ready=1");
    for (;;) {
      CUdeviceptr p = 0;
      if (api.cuMemAlloc_v2(&p, b) == CUDA_SUCCESS) api.cuMemFree_v2(p);
    }
  } else if (name == "race") {
    int t = std::atoi(arg(1).c_str()), iters = std::atoi(arg(2).c_str()),
        max_mib = std::atoi(arg(3).c_str());
    unsigned seed = static_cast<unsigned>(std::atoi(arg(4).c_str()));
    CUcontext ctx = nullptr;
    CUdevice d = 0;
    api.cuDeviceGet(&d, 0);
    if (api.cuDevicePrimaryCtxRetain(&ctx, d) != CUDA_SUCCESS) Die("race: no context");
    std::atomic<int> ok{0}, oom{0}, other{0};
    std::atomic<long long> held{0}, maxheld{0};
    std::vector<std::thread> ts;
    for (int i = 0; i < t; ++i) {
      ts.emplace_back(RaceThread, iters, max_mib, seed * 131 + static_cast<unsigned>(i), &ok, &oom,
                      &other, &held, &maxheld, ctx);
    }
    for (auto& th : ts) th.join();
    Out("race.ok=%d", ok.load());
    Out("race.oom=%d", oom.load());
    Out("race.other=%d", other.load());
    Out("race.maxheld=%lld", maxheld.load());
  } else if (name == "watch") {
    Nvml& n = GetNvml();
    if (!n.ok) return;
    nvmlDevice_t h = nullptr;
    if (n.by_index(static_cast<unsigned>(std::atoi(arg(2).c_str())), &h) != NVML_SUCCESS)
      Die("watch: handle");
    auto end =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(std::atoi(arg(1).c_str()));
    unsigned long long mx = 0;
    long samples = 0;
    Out("watching=1");
    while (std::chrono::steady_clock::now() < end) {
      // Version 2: its used memory leaves out what the driver reserves for itself.
      nvmlMemory_v2_t m{};
      m.version = nvmlMemory_v2;
      if (n.mem2(h, &m) == NVML_SUCCESS && m.used > mx) mx = m.used;
      ++samples;
      pollfd in{0, POLLIN, 0};
      if (samples % 256 == 0 && poll(&in, 1, 0) > 0) break;  // a line or EOF on stdin: stop
    }
    Out("watch.max=%llu", mx);
    Out("watch.samples=%ld", samples);
  } else if (name == "legacy") {
    // The CUDA 3.x names libvgpu refuses, by symbol and through
    // cuGetProcAddress at version 3000; cuMemGetInfo (v1) is called.
    void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    auto gpa = reinterpret_cast<decltype(&::cuGetProcAddress_v2)>(dlsym(h, "cuGetProcAddress_v2"));
    for (const char* sym : {"cuMemAlloc", "cuArrayCreate", "cuLaunchGrid", "cuMemGetInfo"}) {
      void* by_gpa = nullptr;
      CUdriverProcAddressQueryResult st{};
      gpa(sym, &by_gpa, 3000, CU_GET_PROC_ADDRESS_DEFAULT, &st);
      Out("legacy.same.%s=%d", sym, by_gpa != nullptr && by_gpa == dlsym(h, sym));
    }
    using MemGetInfoV1 = CUresult (*)(unsigned int*, unsigned int*);
    unsigned int free_mem = 0, total = 0;
    auto info = reinterpret_cast<MemGetInfoV1>(dlsym(h, "cuMemGetInfo"));
    Out("legacy.meminfo=%d", info != nullptr ? static_cast<int>(info(&free_mem, &total)) : -1);
  } else if (name == "graphmem") {
    GraphMemNodes();
  } else if (name == "exit") {
    std::fflush(stdout);
    _exit(std::atoi(arg(1).c_str()));
  } else {
    Out("unknown_op=%s", op.c_str());
    _exit(4);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string path = "link";
  int version = 13000;
  int i = 1;
  for (; i < argc && std::strncmp(argv[i], "--", 2) == 0; ++i) {
    std::string o = argv[i];
    if (o.rfind("--path=", 0) == 0) path = o.substr(7);
    if (o.rfind("--version=", 0) == 0) version = std::atoi(o.c_str() + 10);
  }
  State s;
  s.argc = argc;
  s.argv = argv;
  char self[4096] = {};
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  s.self = n > 0 ? std::string(self, static_cast<size_t>(n)) : std::string(argv[0]);
  bool loaded = false;
  for (; i < argc; ++i) {
    std::string op = argv[i];
    // "maps" must look before anything loads libcuda.
    const std::string name = op.substr(0, op.find(':'));
    if (!loaded && name != "maps" && name != "exit" && name != "sleep" && name != "exec" &&
        name.rfind("nvml", 0) != 0 && name != "watch") {
      LoadApi(path, version);
      loaded = true;
    }
    RunOp(s, op);
  }
  Out("done=1");
  return 0;
}
