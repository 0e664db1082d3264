// Helper process of the conformance suite, started by tests with posix_spawn.
// Reports results as "key value..." lines on stdout.
//   noinit              calls made before cuInit
//   init                cuInit and the device list
//   alloc BYTES         allocates, prints "alloc <code>", waits for a line on stdin
//   allocs BYTES N      N allocations, one "alloc <i> <code>" line each
//   sleep NS            prints "ready", waits for "go", runs @builtin vgpu_sim_sleep
//   deref               host-dereferences a device pointer (expected to die by SIGSEGV)
//   fdimport BYTES      receives a POSIX fd over the socket on fd 3, imports and reads it
//   tensormap           encodes a valid tiled and a valid im2col-wide tensor map on
//                       device 0: "tiled <code>", "wide <code>" (the device's compute
//                       capability decides)
//   ipcopen, ipcevent, ipcrank: conformance_child_ipc.cc
//   ckptjob BYTES CUBIN a job for the checkpoint API tests: allocates BYTES, fills
//                       them, prints "ready", then serves lines: "check" (reads
//                       everything back through a stream and an event), "call"
//                       (one synchronizing call), "sleep NS" (queues a kernel of
//                       NS ns, no wait), "uuid", "quit"
#include <cuda.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "conformance_common.h"

using vgpu::conformance::MonotonicNs;

namespace vgpu::conformance {
int IpcChildMain(int argc, char** argv);
}

namespace {

void Out(const std::string& s) {
  std::fputs((s + "\n").c_str(), stdout);
  std::fflush(stdout);
}

std::string WaitLine() {
  std::string line;
  std::getline(std::cin, line);
  return line;
}

CUresult SetupContext(CUcontext* ctx) {
  CUresult r = cuInit(0);
  if (r != CUDA_SUCCESS) return r;
  CUdevice d;
  if ((r = cuDeviceGet(&d, 0)) != CUDA_SUCCESS) return r;
  if ((r = cuDevicePrimaryCtxRetain(ctx, d)) != CUDA_SUCCESS) return r;
  return cuCtxSetCurrent(*ctx);
}

int NoInit() {
  int n = -1;
  Out("count " + std::to_string(cuDeviceGetCount(&n)));
  CUdevice d;
  Out("get " + std::to_string(cuDeviceGet(&d, 0)));
  CUdeviceptr p;
  Out("alloc " + std::to_string(cuMemAlloc(&p, 1024)));
  CUcontext c;
  Out("ctxget " + std::to_string(cuCtxGetCurrent(&c)));
  int v = 0;
  CUresult r = cuDriverGetVersion(&v);
  Out("version " + std::to_string(r) + " " + std::to_string(v));
  CUprocessState st;
  Out("ckptstate " + std::to_string(cuCheckpointProcessGetState(getpid(), &st)));
  Out("init " + std::to_string(cuInit(0)));
  Out("count2 " + std::to_string(cuDeviceGetCount(&n)));
  return 0;
}

int Init() {
  CUresult r = cuInit(0);
  Out("init " + std::to_string(r));
  int n = -1;
  CUresult rc = cuDeviceGetCount(&n);
  Out("count " + std::to_string(rc) + " " + std::to_string(n));
  for (int i = 0; r == CUDA_SUCCESS && i < n; ++i) {
    CUdevice d;
    size_t bytes = 0;
    cuDeviceGet(&d, i);
    cuDeviceTotalMem(&bytes, d);
    Out("mem " + std::to_string(i) + " " + std::to_string(bytes));
  }
  return 0;
}

int Alloc(size_t bytes) {
  CUcontext ctx;
  CUresult r = SetupContext(&ctx);
  CUdeviceptr p = 0;
  if (r == CUDA_SUCCESS) r = cuMemAlloc(&p, bytes);
  Out("alloc " + std::to_string(r));
  WaitLine();
  if (p != 0) cuMemFree(p);
  Out("freed");
  return 0;
}

int Allocs(size_t bytes, int n) {
  CUcontext ctx;
  CUresult r = SetupContext(&ctx);
  Out("setup " + std::to_string(r));
  for (int i = 1; i <= n; ++i) {
    CUdeviceptr p = 0;
    r = cuMemAlloc(&p, bytes);
    Out("alloc " + std::to_string(i) + " " + std::to_string(r));
  }
  return 0;
}

int SleepKernel(uint64_t ns) {
  CUcontext ctx;
  CUmodule m;
  CUfunction f;
  CUresult r = SetupContext(&ctx);
  if (r == CUDA_SUCCESS) r = cuModuleLoad(&m, "@builtin");
  if (r == CUDA_SUCCESS) r = cuModuleGetFunction(&f, m, "vgpu_sim_sleep");
  if (r != CUDA_SUCCESS) {
    Out("setup " + std::to_string(r));
    return 1;
  }
  Out("ready");
  if (WaitLine() != "go") return 2;
  void* params[] = {&ns};
  uint64_t t0 = MonotonicNs();
  CUresult rl = cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr);
  CUresult rs = cuCtxSynchronize();
  uint64_t t1 = MonotonicNs();
  Out("times " + std::to_string(t0) + " " + std::to_string(t1) + " " + std::to_string(rl) + " " +
      std::to_string(rs));
  return 0;
}

int Deref() {
  CUcontext ctx;
  CUdeviceptr p = 0;
  CUresult r = SetupContext(&ctx);
  if (r == CUDA_SUCCESS) r = cuMemAlloc(&p, 4096);
  if (r == CUDA_SUCCESS) r = cuMemsetD32(p, 0x12345678u, 1024);
  Out("setup " + std::to_string(r));
  if (r != CUDA_SUCCESS) return 1;
  volatile const uint32_t* host_view = reinterpret_cast<volatile const uint32_t*>(p);
  uint32_t v = *host_view;
  Out("survived " + std::to_string(v));
  return 3;
}

int FdImport(size_t bytes) {
  int fd = vgpu::conformance::ReceiveFd(3);
  Out("fd " + std::to_string(fd >= 0 ? 0 : -1));
  if (fd < 0) return 1;
  CUcontext ctx;
  CUresult r = SetupContext(&ctx);
  CUmemGenericAllocationHandle h = 0;
  if (r == CUDA_SUCCESS)
    r = cuMemImportFromShareableHandle(&h, reinterpret_cast<void*>(static_cast<uintptr_t>(fd)),
                                       CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  Out("import " + std::to_string(r));
  if (r != CUDA_SUCCESS) return 1;
  close(fd);
  CUdeviceptr va = 0;
  r = cuMemAddressReserve(&va, bytes, 0, 0, 0);
  if (r == CUDA_SUCCESS) r = cuMemMap(va, bytes, 0, h, 0);
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = 0;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  if (r == CUDA_SUCCESS) r = cuMemSetAccess(va, bytes, &access, 1);
  std::vector<uint32_t> data(bytes / 4);
  if (r == CUDA_SUCCESS) r = cuMemcpyDtoH(data.data(), va, bytes);
  Out("map " + std::to_string(r));
  if (r != CUDA_SUCCESS) return 1;
  uint64_t sum = 0;
  for (uint32_t x : data) sum += x;
  Out("data " + std::to_string(data[0]) + " " + std::to_string(data.back()) + " " +
      std::to_string(sum));
  // Write back a marker the parent can see through its own mapping.
  r = cuMemsetD32(va, 0xC0FFEEu, 1);
  if (r == CUDA_SUCCESS) r = cuCtxSynchronize();
  Out("write " + std::to_string(r));
  cuMemUnmap(va, bytes);
  cuMemAddressFree(va, bytes);
  cuMemRelease(h);
  return 0;
}

// Imports the parent's exported memory (first fd) as external memory and a
// timeline semaphore (second fd); reads the buffer's first word, writes
// 0xFEED to the second and signals the semaphore to 5 after the write.
int ExtImport(size_t bytes) {
  int mem_fd = vgpu::conformance::ReceiveFd(3);
  int sem_fd = vgpu::conformance::ReceiveFd(3);
  if (mem_fd < 0 || sem_fd < 0) return 1;
  CUcontext ctx;
  CUresult r = SetupContext(&ctx);
  CUexternalMemory mem = nullptr;
  CUDA_EXTERNAL_MEMORY_HANDLE_DESC md{};
  md.type = CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD;
  md.handle.fd = mem_fd;
  md.size = bytes;
  if (r == CUDA_SUCCESS) r = cuImportExternalMemory(&mem, &md);
  CUDA_EXTERNAL_MEMORY_BUFFER_DESC bd{};
  bd.size = bytes;
  CUdeviceptr p = 0;
  if (r == CUDA_SUCCESS) r = cuExternalMemoryGetMappedBuffer(&p, mem, &bd);
  uint32_t first = 0;
  if (r == CUDA_SUCCESS) r = cuMemcpyDtoH(&first, p, 4);
  Out("map " + std::to_string(r) + " " + std::to_string(first));
  if (r != CUDA_SUCCESS) return 1;
  CUexternalSemaphore sem = nullptr;
  CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC sd{};
  sd.type = CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD;
  sd.handle.fd = sem_fd;
  r = cuImportExternalSemaphore(&sem, &sd);
  CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS sp{};
  sp.params.fence.value = 5;
  if (r == CUDA_SUCCESS) r = cuMemsetD32Async(p + 4, 0xFEEDu, 1, nullptr);
  if (r == CUDA_SUCCESS) r = cuSignalExternalSemaphoresAsync(&sem, &sp, 1, nullptr);
  if (r == CUDA_SUCCESS) r = cuCtxSynchronize();
  Out("signal " + std::to_string(r));
  cuDestroyExternalSemaphore(sem);
  cuMemFree(p);
  cuDestroyExternalMemory(mem);
  return r == CUDA_SUCCESS ? 0 : 1;
}

std::string Hex(const unsigned char* b, size_t n) {
  static const char* kDigits = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) s += {kDigits[b[i] >> 4], kDigits[b[i] & 15]};
  return s;
}

constexpr uint32_t kJobPattern = 0xC0FFEE01u;

// Reads the job's buffer back on its own stream and checks every word.
std::string CheckJob(CUdeviceptr p, size_t bytes, CUstream s, CUevent e) {
  std::vector<uint32_t> data(bytes / 4);
  CUresult r1 = cuMemcpyDtoHAsync(data.data(), p, bytes, s);
  CUresult r2 = cuEventRecord(e, s);
  CUresult r3 = cuEventSynchronize(e);
  size_t bad = 0;
  for (uint32_t x : data) bad += x != kJobPattern;
  return "check " + std::to_string(r1) + " " + std::to_string(r2) + " " + std::to_string(r3) +
         " " + std::to_string(bad);
}

int CheckpointJob(size_t bytes, const char* cubin) {
  CUcontext ctx;
  CUmodule m = nullptr;
  CUfunction sleep_fn = nullptr;
  CUstream s = nullptr;
  CUevent e = nullptr;
  CUdeviceptr p = 0;
  CUresult r = SetupContext(&ctx);
  if (r == CUDA_SUCCESS) r = cuModuleLoad(&m, cubin);
  if (r == CUDA_SUCCESS) r = cuModuleGetFunction(&sleep_fn, m, "conf_sleep_ns");
  if (r == CUDA_SUCCESS) r = cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
  if (r == CUDA_SUCCESS) r = cuEventCreate(&e, 0);
  if (r == CUDA_SUCCESS) r = cuMemAlloc(&p, bytes);
  if (r == CUDA_SUCCESS) r = cuMemsetD32(p, kJobPattern, bytes / 4);
  if (r == CUDA_SUCCESS) r = cuCtxSynchronize();
  Out((r == CUDA_SUCCESS ? "ready " : "setup ") + std::to_string(r));
  if (r != CUDA_SUCCESS) return 1;
  for (std::string line = WaitLine(); !line.empty() && line != "quit"; line = WaitLine()) {
    if (line == "check") {
      Out(CheckJob(p, bytes, s, e));
    } else if (line == "call") {
      Out("call " + std::to_string(cuCtxSynchronize()));
    } else if (line == "memset") {
      Out("memset " + std::to_string(cuMemsetD32Async(p, kJobPattern, 1, s)));
    } else if (line == "alloc") {
      CUdeviceptr q = 0;
      CUresult ra = cuMemAlloc(&q, 1 << 20);
      if (ra == CUDA_SUCCESS) ra = cuMemFree(q);
      Out("alloc " + std::to_string(ra));
    } else if (line == "query") {
      Out("query " + std::to_string(cuStreamQuery(s)));
    } else if (line == "attr") {
      int v = 0;
      Out("attr " + std::to_string(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 0)));
    } else if (line.rfind("sleep ", 0) == 0) {
      uint64_t ns = strtoull(line.c_str() + 6, nullptr, 0);
      void* params[] = {&ns};
      Out("launched " +
          std::to_string(cuLaunchKernel(sleep_fn, 1, 1, 1, 1, 1, 1, 0, s, params, nullptr)));
    } else if (line == "uuid") {
      CUuuid u{};
      CUdevice d = 0;
      CUresult ru = cuCtxGetDevice(&d);
      if (ru == CUDA_SUCCESS) ru = cuDeviceGetUuid_v2(&u, d);
      Out("uuid " + std::to_string(ru) + " " +
          Hex(reinterpret_cast<const unsigned char*>(u.bytes), 16));
    }
  }
  cuMemFree(p);
  return 0;
}

// A 2 x 32 x 32 x 64 NHWC half tensor: valid for both encoders on devices that have them.
int TensorMaps() {
  CUcontext ctx;
  CUdeviceptr p = 0;
  CUresult r = SetupContext(&ctx);
  if (r == CUDA_SUCCESS) r = cuMemAlloc(&p, 2 * 32 * 32 * 64 * 2);
  if (r != CUDA_SUCCESS) {
    Out("setup " + std::to_string(r));
    return 1;
  }
  alignas(64) CUtensorMap map;
  cuuint64_t dims[] = {64, 32, 32, 2};
  cuuint64_t strides[] = {128, 128 * 32, 128 * 32 * 32};
  cuuint32_t box[] = {64, 8, 1, 1};
  cuuint32_t ones[] = {1, 1, 1, 1};
  void* addr = reinterpret_cast<void*>(p);
  r = cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 4, addr, dims, strides, box,
                             ones, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                             CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  Out("tiled " + std::to_string(r));
  r = cuTensorMapEncodeIm2colWide(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 4, addr, dims, strides,
                                  -1, 1, 64, 32, ones, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                  CU_TENSOR_MAP_IM2COL_WIDE_MODE_W, CU_TENSOR_MAP_SWIZZLE_128B,
                                  CU_TENSOR_MAP_L2_PROMOTION_NONE,
                                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  Out("wide " + std::to_string(r));
  cuMemFree(p);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  vgpu::conformance::PrepareSimEnvironment(nullptr);
  if (argc < 2) return 64;
  std::string cmd = argv[1];
  if (cmd == "noinit") return NoInit();
  if (cmd == "init") return Init();
  if (cmd == "alloc" && argc == 3) return Alloc(strtoull(argv[2], nullptr, 0));
  if (cmd == "allocs" && argc == 4) return Allocs(strtoull(argv[2], nullptr, 0), atoi(argv[3]));
  if (cmd == "sleep" && argc == 3) return SleepKernel(strtoull(argv[2], nullptr, 0));
  if (cmd == "deref") return Deref();
  if (cmd == "fdimport" && argc == 3) return FdImport(strtoull(argv[2], nullptr, 0));
  if (cmd == "tensormap") return TensorMaps();
  if (cmd == "extimport" && argc == 3) return ExtImport(strtoull(argv[2], nullptr, 0));
  if (cmd == "ckptjob" && argc == 4) return CheckpointJob(strtoull(argv[2], nullptr, 0), argv[3]);
  if (cmd.rfind("ipc", 0) == 0) return vgpu::conformance::IpcChildMain(argc, argv);
  return 64;
}
