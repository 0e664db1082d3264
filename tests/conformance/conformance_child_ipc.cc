// IPC commands of conformance_child (see conformance_child.cc for the rest):
//   ipcopen HEX           opens the memory handle HEX (cuIpcGetMemHandle's 64
//                         bytes), reads it ("value <first> <bad>"), adds one to
//                         every u32 ("write <code>"), opens it again ("again
//                         <code> <same pointer>") and closes three times
//                         ("close <c1> <c2> <c3>")
//   ipcevent HEX          opens the event handle HEX: "query <code>", queues a
//                         wait for it and a memset ("blocked <stream query>"),
//                         then on "sync": "done <stream sync> <event sync> <query>"
//   ipcproduce BYTES      allocates and fills BYTES with 0x1234, prints "handle HEX",
//                         then serves lines: "check V" ("check <values != V>"),
//                         "free" ("freed <code>"), "quit"
//   ipcconsume HEX BYTES  opens the handle ("open <code>"), then serves lines:
//                         "write V" ("wrote <code>"), "close" ("closed <code>"), "quit"
//   ipcrank R MODE STEPS COUNT CUBIN
//                         rank R of a two-process ring all-reduce of COUNT u32
//                         with its peer on the socket at fd 3; MODE "legacy"
//                         (cuMemAlloc + cuIpcGetMemHandle) or "fd" (cuMemCreate
//                         + POSIX fd). Prints "result <first error> <wrong
//                         values> <ns per step> <ns to open the peer's buffer>
//                         <device bytes in use after sharing (cuMemGetInfo)>"
//   ipcring MODE STEPS COUNT CUBIN
//                         both ranks of that ring, spawned with a socketpair:
//                         "rank <r> <its result line>" each; exit 0 if both passed
#include <cuda.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "conformance_common.h"

namespace vgpu::conformance {
namespace {

void Out(const std::string& s) {
  std::fputs((s + "\n").c_str(), stdout);
  std::fflush(stdout);
}

std::string S(long long v) { return std::to_string(v); }

bool FromHex(const std::string& hex, void* out, size_t n) {
  if (hex.size() != 2 * n) return false;
  auto* b = static_cast<unsigned char*>(out);
  for (size_t i = 0; i < n; ++i)
    b[i] = static_cast<unsigned char>(std::stoul(hex.substr(2 * i, 2), nullptr, 16));
  return true;
}

CUresult Setup(int device, CUcontext* ctx) {
  CUresult r = cuInit(0);
  CUdevice d;
  if (r == CUDA_SUCCESS) r = cuDeviceGet(&d, device);
  if (r == CUDA_SUCCESS) r = cuDevicePrimaryCtxRetain(ctx, d);
  if (r == CUDA_SUCCESS) r = cuCtxSetCurrent(*ctx);
  return r;
}

int OpenMem(const std::string& hex, size_t bytes) {
  CUipcMemHandle h;
  CUcontext ctx;
  if (!FromHex(hex, &h, sizeof(h)) || Setup(0, &ctx) != CUDA_SUCCESS) return 2;
  CUdeviceptr p = 0, q = 0;
  CUresult r = cuIpcOpenMemHandle(&p, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
  Out("open " + S(r));
  if (r != CUDA_SUCCESS) return 0;
  std::vector<uint32_t> v(bytes / 4);
  r = cuMemcpyDtoH(v.data(), p, bytes);
  size_t bad = 0;
  for (uint32_t x : v) bad += x != v[0];
  Out("value " + S(r == CUDA_SUCCESS ? v[0] : -1) + " " + S(static_cast<long long>(bad)));
  r = cuMemsetD32(p, v[0] + 1, bytes / 4);
  if (r == CUDA_SUCCESS) r = cuCtxSynchronize();
  Out("write " + S(r));
  r = cuIpcOpenMemHandle(&q, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
  Out("again " + S(r) + " " + S(p == q));
  CUresult c1 = cuIpcCloseMemHandle(p);
  CUresult c2 = r == CUDA_SUCCESS ? cuIpcCloseMemHandle(q) : CUDA_SUCCESS;
  Out("close " + S(c1) + " " + S(c2) + " " + S(cuIpcCloseMemHandle(p)));
  return 0;
}

int OpenEvent(const std::string& hex) {
  CUipcEventHandle h;
  CUcontext ctx;
  if (!FromHex(hex, &h, sizeof(h)) || Setup(0, &ctx) != CUDA_SUCCESS) return 2;
  CUevent e = nullptr;
  CUresult r = cuIpcOpenEventHandle(&e, h);
  Out("open " + S(r));
  if (r != CUDA_SUCCESS) return 0;
  Out("query " + S(cuEventQuery(e)));
  CUstream s = nullptr;
  CUdeviceptr p = 0;
  r = cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
  if (r == CUDA_SUCCESS) r = cuMemAlloc(&p, 4096);
  if (r == CUDA_SUCCESS) r = cuStreamWaitEvent(s, e, 0);
  if (r == CUDA_SUCCESS) r = cuMemsetD32Async(p, 7, 1024, s);
  Out("blocked " + S(r == CUDA_SUCCESS ? cuStreamQuery(s) : r));
  std::string line;
  std::getline(std::cin, line);
  CUresult rs = cuStreamSynchronize(s);
  CUresult re = cuEventSynchronize(e);
  Out("done " + S(rs) + " " + S(re) + " " + S(cuEventQuery(e)));
  cuEventDestroy(e);
  return 0;
}

std::string Hex(const void* p, size_t n) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    const unsigned b = static_cast<const unsigned char*>(p)[i];
    out += kDigits[b >> 4];
    out += kDigits[b & 15];
  }
  return out;
}

int Produce(size_t bytes) {
  CUcontext ctx;
  CUdeviceptr p = 0;
  CUipcMemHandle h;
  CUresult r = Setup(0, &ctx);
  if (r == CUDA_SUCCESS) r = cuMemAlloc(&p, bytes);
  if (r == CUDA_SUCCESS) r = cuMemsetD32(p, 0x1234, bytes / 4);
  if (r == CUDA_SUCCESS) r = cuIpcGetMemHandle(&h, p);
  if (r != CUDA_SUCCESS) {
    Out("setup " + S(r));
    return 1;
  }
  Out("handle " + Hex(&h, sizeof h));
  for (std::string line; std::getline(std::cin, line) && line != "quit";) {
    if (line.rfind("check ", 0) == 0) {
      const uint32_t want = static_cast<uint32_t>(strtoul(line.c_str() + 6, nullptr, 0));
      std::vector<uint32_t> v(bytes / 4);
      r = cuMemcpyDtoH(v.data(), p, bytes);
      size_t bad = 0;
      for (uint32_t x : v) bad += x != want;
      Out("check " + S(r == CUDA_SUCCESS ? static_cast<long long>(bad) : -1));
    } else if (line == "free") {
      Out("freed " + S(cuMemFree(p)));
    }
  }
  return 0;
}

int Consume(const std::string& hex, size_t bytes) {
  CUipcMemHandle h;
  CUcontext ctx;
  if (!FromHex(hex, &h, sizeof(h)) || Setup(0, &ctx) != CUDA_SUCCESS) return 2;
  CUdeviceptr p = 0;
  Out("open " + S(cuIpcOpenMemHandle(&p, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)));
  for (std::string line; std::getline(std::cin, line) && line != "quit";) {
    if (line.rfind("write ", 0) == 0) {
      const uint32_t v = static_cast<uint32_t>(strtoul(line.c_str() + 6, nullptr, 0));
      CUresult r = cuMemsetD32(p, v, bytes / 4);
      if (r == CUDA_SUCCESS) r = cuCtxSynchronize();
      Out("wrote " + S(r));
    } else if (line == "close") {
      Out("closed " + S(cuIpcCloseMemHandle(p)));
    }
  }
  return 0;
}

// ---- ring all-reduce ----

bool SendAll(int fd, const void* p, size_t n) {
  auto* b = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t w = write(fd, b, n);
    if (w <= 0) return false;
    b += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool RecvAll(int fd, void* p, size_t n) {
  auto* b = static_cast<char*>(p);
  while (n > 0) {
    ssize_t r = read(fd, b, n);
    if (r <= 0) return false;
    b += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

constexpr int kSock = 3;

// A buffer the peer writes into, and this rank's view of the peer's.
struct Shared {
  CUdeviceptr mine = 0;
  CUdeviceptr peers = 0;
  CUmemGenericAllocationHandle handle = 0;  // of `mine` (fd mode), held like NCCL does
  CUmemGenericAllocationHandle peer_handle = 0;
  size_t size = 0;
};

CUresult MapFd(int device, int fd, size_t size, Shared* sh) {
  CUresult r = cuMemImportFromShareableHandle(&sh->peer_handle,
                                              reinterpret_cast<void*>(static_cast<intptr_t>(fd)),
                                              CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  close(fd);
  if (r == CUDA_SUCCESS) r = cuMemAddressReserve(&sh->peers, size, 0, 0, 0);
  if (r == CUDA_SUCCESS) r = cuMemMap(sh->peers, size, 0, sh->peer_handle, 0);
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = device;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  if (r == CUDA_SUCCESS) r = cuMemSetAccess(sh->peers, size, &access, 1);
  return r;
}

// NCCL's way: cuMemCreate with a POSIX fd handle type, the fd sent over the socket.
CUresult ShareFd(int device, size_t bytes, Shared* sh, uint64_t* open_ns) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  size_t gran = 0;
  CUresult r = cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  if (r != CUDA_SUCCESS) return r;
  sh->size = (bytes + gran - 1) / gran * gran;
  CUmemGenericAllocationHandle& h = sh->handle;
  if ((r = cuMemCreate(&h, sh->size, &prop, 0)) != CUDA_SUCCESS) return r;
  if ((r = cuMemAddressReserve(&sh->mine, sh->size, 0, 0, 0)) != CUDA_SUCCESS) return r;
  if ((r = cuMemMap(sh->mine, sh->size, 0, h, 0)) != CUDA_SUCCESS) return r;
  CUmemAccessDesc access{};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  if ((r = cuMemSetAccess(sh->mine, sh->size, &access, 1)) != CUDA_SUCCESS) return r;
  int fd = -1;
  r = cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
  if (r != CUDA_SUCCESS) return r;
  uint64_t size = sh->size;
  bool sent = SendAll(kSock, &size, sizeof(size)) && SendFd(kSock, fd);
  close(fd);
  uint64_t peer_size = 0;
  int peer_fd = -1;
  if (!sent || !RecvAll(kSock, &peer_size, sizeof(peer_size)) || (peer_fd = ReceiveFd(kSock)) < 0) {
    return CUDA_ERROR_UNKNOWN;
  }
  const uint64_t t0 = MonotonicNs();
  r = MapFd(device, peer_fd, peer_size, sh);
  *open_ns = MonotonicNs() - t0;
  return r;
}

CUresult ShareLegacy(size_t bytes, Shared* sh, uint64_t* open_ns) {
  sh->size = bytes;
  CUipcMemHandle mine, peers;
  CUresult r = cuMemAlloc(&sh->mine, bytes);
  if (r == CUDA_SUCCESS) r = cuIpcGetMemHandle(&mine, sh->mine);
  if (r != CUDA_SUCCESS) return r;
  if (!SendAll(kSock, &mine, sizeof(mine)) || !RecvAll(kSock, &peers, sizeof(peers))) {
    return CUDA_ERROR_UNKNOWN;
  }
  const uint64_t t0 = MonotonicNs();
  r = cuIpcOpenMemHandle(&sh->peers, peers, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
  *open_ns = MonotonicNs() - t0;
  return r;
}

// Two interprocess events: "sent" (my copy into the peer's buffer is done)
// and "consumed" (I have read what the peer sent).
struct Events {
  CUevent sent = nullptr, consumed = nullptr;
  CUevent peer_sent = nullptr, peer_consumed = nullptr;
};

CUresult ShareEvents(Events* ev) {
  const unsigned flags = CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING;
  CUipcEventHandle mine[2], peers[2];
  CUresult r = cuEventCreate(&ev->sent, flags);
  if (r == CUDA_SUCCESS) r = cuEventCreate(&ev->consumed, flags);
  if (r == CUDA_SUCCESS) r = cuIpcGetEventHandle(&mine[0], ev->sent);
  if (r == CUDA_SUCCESS) r = cuIpcGetEventHandle(&mine[1], ev->consumed);
  if (r != CUDA_SUCCESS) return r;
  if (!SendAll(kSock, mine, sizeof(mine)) || !RecvAll(kSock, peers, sizeof(peers))) {
    return CUDA_ERROR_UNKNOWN;
  }
  r = cuIpcOpenEventHandle(&ev->peer_sent, peers[0]);
  if (r == CUDA_SUCCESS) r = cuIpcOpenEventHandle(&ev->peer_consumed, peers[1]);
  return r;
}

CUresult LaunchAdd(CUfunction f, CUstream s, CUdeviceptr dst, CUdeviceptr src, uint64_t count) {
  void* params[] = {&dst, &src, &count};
  unsigned blocks = static_cast<unsigned>(std::min<uint64_t>((count + 255) / 256, 1024));
  return cuLaunchKernel(f, blocks, 1, 1, 256, 1, 1, 0, s, params, nullptr);
}

enum Tag : uint32_t { kSent = 1, kConsumed = 2 };

bool Notify(Tag tag, uint32_t step) {
  uint32_t msg[2] = {tag, step};
  return SendAll(kSock, msg, sizeof(msg));
}
bool Expect(Tag tag, uint32_t step) {
  uint32_t msg[2];
  return RecvAll(kSock, msg, sizeof(msg)) && msg[0] == tag && msg[1] == step;
}

// One step: send my data into the peer's buffer, then add what the peer sent.
CUresult Step(uint32_t s, CUfunction add, CUstream st, CUdeviceptr data, const Shared& sh,
              const Events& ev, uint64_t count) {
  CUresult r = CUDA_SUCCESS;
  if (s > 0) {
    if (!Expect(kConsumed, s - 1)) return CUDA_ERROR_UNKNOWN;
    r = cuStreamWaitEvent(st, ev.peer_consumed, 0);  // the peer has read my last send
  }
  if (r == CUDA_SUCCESS) r = cuMemcpyDtoDAsync(sh.peers, data, count * 4, st);
  if (r == CUDA_SUCCESS) r = cuEventRecord(ev.sent, st);
  if (r != CUDA_SUCCESS) return r;
  if (!Notify(kSent, s) || !Expect(kSent, s)) return CUDA_ERROR_UNKNOWN;
  r = cuStreamWaitEvent(st, ev.peer_sent, 0);
  if (r == CUDA_SUCCESS) r = LaunchAdd(add, st, data, sh.mine, count);
  if (r == CUDA_SUCCESS) r = cuEventRecord(ev.consumed, st);
  if (r == CUDA_SUCCESS && !Notify(kConsumed, s)) r = CUDA_ERROR_UNKNOWN;
  return r;
}

int Rank(int rank, const std::string& mode, uint32_t steps, uint64_t count, const char* cubin) {
  int ndev = 0;
  CUcontext ctx;
  CUresult r = cuInit(0);
  if (r == CUDA_SUCCESS) r = cuDeviceGetCount(&ndev);
  if (r == CUDA_SUCCESS) r = Setup(rank % ndev, &ctx);
  CUmodule m = nullptr;
  CUfunction add = nullptr;
  CUstream st = nullptr;
  CUdeviceptr data = 0;
  if (r == CUDA_SUCCESS) r = cuModuleLoad(&m, cubin);
  if (r == CUDA_SUCCESS) r = cuModuleGetFunction(&add, m, "conf_addv_u32");
  if (r == CUDA_SUCCESS) r = cuStreamCreate(&st, CU_STREAM_NON_BLOCKING);
  if (r == CUDA_SUCCESS) r = cuMemAlloc(&data, count * 4);
  std::vector<uint32_t> host(count);
  for (uint64_t i = 0; i < count; ++i) host[i] = static_cast<uint32_t>((rank + 1) * (i + 1));
  if (r == CUDA_SUCCESS) r = cuMemcpyHtoD(data, host.data(), count * 4);
  Shared sh;
  Events ev;
  uint64_t open_ns = 0;
  if (r == CUDA_SUCCESS) {
    r = mode == "fd" ? ShareFd(rank % ndev, count * 4, &sh, &open_ns)
                     : ShareLegacy(count * 4, &sh, &open_ns);
  }
  if (r == CUDA_SUCCESS) r = ShareEvents(&ev);
  size_t free_b = 0, total_b = 0;
  if (r == CUDA_SUCCESS) r = cuMemGetInfo(&free_b, &total_b);
  uint64_t t0 = MonotonicNs();
  for (uint32_t s = 0; r == CUDA_SUCCESS && s < steps; ++s)
    r = Step(s, add, st, data, sh, ev, count);
  if (r == CUDA_SUCCESS) r = cuStreamSynchronize(st);
  uint64_t per_step = steps > 0 ? (MonotonicNs() - t0) / steps : 0;
  if (r == CUDA_SUCCESS) r = cuMemcpyDtoH(host.data(), data, count * 4);
  size_t wrong = 0;
  for (uint64_t i = 0; i < count; ++i) {
    uint32_t want = static_cast<uint32_t>(3 * (i + 1));
    for (uint32_t s = 1; s < steps; ++s) want *= 2;
    wrong += host[i] != want;
  }
  // The peer may still read my buffer until it is done: wait for its word.
  if (r == CUDA_SUCCESS && steps > 0 && !Expect(kConsumed, steps - 1)) r = CUDA_ERROR_UNKNOWN;
  Notify(kSent, UINT32_MAX);
  Expect(kSent, UINT32_MAX);
  Out("result " + S(r) + " " + S(static_cast<long long>(wrong)) + " " +
      S(static_cast<long long>(per_step)) + " " + S(static_cast<long long>(open_ns)) + " " +
      S(static_cast<long long>(total_b - free_b)));
  if (mode == "fd") {
    cuMemUnmap(sh.peers, sh.size);
    cuMemRelease(sh.peer_handle);
    cuMemUnmap(sh.mine, sh.size);
    cuMemRelease(sh.handle);
  } else if (sh.peers != 0) {
    cuIpcCloseMemHandle(sh.peers);
  }
  return r == CUDA_SUCCESS && wrong == 0 ? 0 : 1;
}

// Both ranks, spawned from this executable with a socketpair between them.
int Ring(const std::string& mode, const std::string& steps, const std::string& count,
         const std::string& cubin) {
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  int sv[2];
  if (n <= 0 || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return 2;
  self[n] = 0;
  Child ranks[2];
  for (int r = 0; r < 2; ++r) {
    if (!SpawnChild(self, {"ipcrank", S(r), mode, steps, count, cubin}, {}, &ranks[r], sv[r])) {
      return 2;
    }
    close(sv[r]);
  }
  bool ok = true;
  for (int r = 0; r < 2; ++r) {
    std::string line, result = "none";
    while (ReadLine(&ranks[r], &line, 60000)) {
      if (line.rfind("result ", 0) == 0) result = line;
    }
    Out("rank " + S(r) + " " + result);
    const int status = WaitChild(&ranks[r]);
    ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  return ok ? 0 : 1;
}

}  // namespace

int IpcChildMain(int argc, char** argv) {
  const std::string cmd = argv[1];
  if (cmd == "ipcopen" && argc == 4) return OpenMem(argv[2], strtoull(argv[3], nullptr, 0));
  if (cmd == "ipcevent" && argc == 3) return OpenEvent(argv[2]);
  if (cmd == "ipcproduce" && argc == 3) return Produce(strtoull(argv[2], nullptr, 0));
  if (cmd == "ipcconsume" && argc == 4) return Consume(argv[2], strtoull(argv[3], nullptr, 0));
  if (cmd == "ipcring" && argc == 6) return Ring(argv[2], argv[3], argv[4], argv[5]);
  if (cmd == "ipcrank" && argc == 7) {
    return Rank(atoi(argv[2]), argv[3], static_cast<uint32_t>(strtoul(argv[4], nullptr, 0)),
                strtoull(argv[5], nullptr, 0), argv[6]);
  }
  return 64;
}

}  // namespace vgpu::conformance
