// Helper of the residency tests (tests/residency/residency_test.sh).
//   meminfo            prints "free=<bytes> total=<bytes>" of device 0 (run it
//                      without LD_PRELOAD: another process's view of the node)
//   hold THREADS FILE [MiB]  allocates buffers (small and big), fills them with a
//                      pattern of its own (seeded by its pid, so that another
//                      process's image restored into it shows up as wrong
//                      data), prints "ready", then THREADS threads copy,
//                      memset and verify them until FILE exists; prints
//                      "iterations=<n> errors=<m>" and exits 0 iff no errors.
//   pitch FILE         holds one cuMemAllocPitch buffer until FILE exists
//                      (prints "ready" once it has it), then frees it.
//   graphmem FILE      launches a graph whose allocation node (8 MiB) it does
//                      not free: prints "ready held", waits for FILE.1, frees
//                      the allocation (the graph pool keeps it cached), prints
//                      "freed", waits for FILE.2; exits 0 iff every call worked.
//   overquota FILE     allocates 40 MiB, then 40 MiB more, which a 64 MiB
//                      quota refuses; prints "ready refused=1" and waits for
//                      FILE; exits 0 iff the second allocation was refused.
//   ctxwork FILE       a buffer of the primary context is filled by a kernel
//                      queued (behind a 400 ms sleep) in a second context that
//                      allocates nothing; prints "ready" right after queueing,
//                      waits for FILE, exits 0 iff the buffer holds the fill.
//   greenwork FILE     the same with the kernels on a stream of a green
//                      context (cuGreenCtxCreate) instead of a second context.
//   twodev FILE        64 MiB on device 0 and on device 1 (one primary context
//                      each), filled with different patterns; prints "ready",
//                      waits for FILE, checks both and prints "errors=<n>"
//                      (exit 0 iff none)
//   bigfill MiB FILE   one buffer of MiB filled with a pseudo-random pattern;
//                      prints "ready", waits for FILE, copies it back and
//                      prints "checksum ok" (exit 0) or "checksum bad" (exit 3).
//                      With TEST_TSTP_HANDLER=1 it first installs a SIGTSTP
//                      handler of its own and prints "program_tstp=<n>" at
//                      the end (the calls it got).
//   bandwidth MiB      the node's bulk copy bandwidth into page-locked memory
//                      (the residency bench's reference; run it without
//                      LD_PRELOAD): MiB bytes each way in cuMemcpyDtoH /
//                      cuMemcpyHtoD calls of up to 256 MiB between a device
//                      buffer and a cuMemHostAlloc buffer, both touched
//                      first; prints "d2h=<GB/s> h2d=<GB/s>
//                      h2d_fresh=<GB/s>", best of 3 each. h2d_fresh is what
//                      a resume does: cuMemCreate + cuMemMap of fresh
//                      physical memory, then the same copy into it (on the
//                      simulator, fresh device memory is host pages faulted
//                      in by the copy).
#include <cuda.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

void Check(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return;
  std::fprintf(stderr, "residency_client: %s failed: %d\n", what, static_cast<int>(r));
  std::exit(2);
}
#define CU(x) Check((x), #x)

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int TwoDevices(const char* stop_file) {
  constexpr size_t kWords = 16u << 20;  // 64 MiB
  CUdeviceptr buf[2] = {};
  CUcontext ctx[2] = {};
  for (int d = 0; d < 2; ++d) {
    CU(cuDevicePrimaryCtxRetain(&ctx[d], d));
    CU(cuCtxSetCurrent(ctx[d]));
    CU(cuMemAlloc(&buf[d], kWords * 4));
    CU(cuMemsetD32(buf[d], 0xA0000000u + static_cast<uint32_t>(d), kWords));
    CU(cuCtxSynchronize());
  }
  std::printf("ready\n");
  std::fflush(stdout);
  while (access(stop_file, F_OK) != 0) usleep(2000);
  std::vector<uint32_t> host(kWords);
  size_t errors = 0;
  for (int d = 0; d < 2; ++d) {
    CU(cuCtxSetCurrent(ctx[d]));
    CU(cuMemcpyDtoH(host.data(), buf[d], kWords * 4));
    for (uint32_t w : host) errors += w != 0xA0000000u + static_cast<uint32_t>(d);
  }
  std::printf("errors=%zu\n", errors);
  return errors == 0 ? 0 : 1;
}

int Bandwidth(size_t total) {
  const size_t n = std::min<size_t>(total, 256u << 20);
  const size_t reps = std::max<size_t>(1, total / n);
  CUdeviceptr d = 0;
  void* h = nullptr;
  CU(cuMemAlloc(&d, n));
  CU(cuMemHostAlloc(&h, n, CU_MEMHOSTALLOC_PORTABLE));
  std::memset(h, 0x5a, n);
  CU(cuMemcpyHtoD(d, h, n));  // device pages touched
  double d2h = 0, h2d = 0;
  for (int round = 0; round < 3; ++round) {
    double t0 = Now();
    for (size_t i = 0; i < reps; ++i) CU(cuMemcpyDtoH(h, d, n));
    d2h = std::max(d2h, static_cast<double>(n * reps) / (Now() - t0) / 1e9);
    t0 = Now();
    for (size_t i = 0; i < reps; ++i) CU(cuMemcpyHtoD(d, h, n));
    h2d = std::max(h2d, static_cast<double>(n * reps) / (Now() - t0) / 1e9);
  }
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  size_t gran = 0;
  CU(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  const size_t vn = (n + gran - 1) / gran * gran;
  CUdeviceptr va = 0;
  CU(cuMemAddressReserve(&va, vn, 0, 0, 0));
  CUmemAccessDesc access{};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  double fresh = 0;
  for (int round = 0; round < 3; ++round) {
    CUmemGenericAllocationHandle mem = 0;
    double t0 = Now();
    CU(cuMemCreate(&mem, vn, &prop, 0));
    CU(cuMemMap(va, vn, 0, mem, 0));
    CU(cuMemSetAccess(va, vn, &access, 1));
    CU(cuMemcpyHtoD(va, h, n));
    fresh = std::max(fresh, static_cast<double>(n) / (Now() - t0) / 1e9);
    CU(cuMemUnmap(va, vn));
    CU(cuMemRelease(mem));
  }
  CU(cuMemAddressFree(va, vn));
  std::printf("d2h=%.3f h2d=%.3f h2d_fresh=%.3f\n", d2h, h2d, fresh);
  CU(cuMemFreeHost(h));
  CU(cuMemFree(d));
  return 0;
}

std::atomic<int> g_program_tstp{0};

void ProgramTstp(int) {
  g_program_tstp.fetch_add(1);
  const char line[] = "program tstp handler\n";
  ssize_t w = write(STDOUT_FILENO, line, sizeof line - 1);
  (void)w;
}

uint64_t Checksum(const std::vector<uint64_t>& h) {
  uint64_t sum = 0;
  for (size_t i = 0; i < h.size(); ++i) sum = sum * 1099511628211ull + (h[i] ^ i);
  return sum;
}

int BigFill(size_t bytes, const char* stop_file) {
  std::vector<uint64_t> h(bytes / 8);
  uint64_t x = 88172645463325252ull ^ static_cast<uint64_t>(getpid());
  for (auto& v : h) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    v = x;
  }
  const uint64_t want = Checksum(h);
  CUdeviceptr p = 0;
  CU(cuMemAlloc(&p, bytes));
  CU(cuMemcpyHtoD(p, h.data(), bytes));
  std::fill(h.begin(), h.end(), 0);
  std::printf("ready\n");
  std::fflush(stdout);
  while (access(stop_file, F_OK) != 0) usleep(2000);
  CU(cuMemcpyDtoH(h.data(), p, bytes));
  const bool ok = Checksum(h) == want;
  std::printf("checksum %s program_tstp=%d\n", ok ? "ok" : "bad", g_program_tstp.load());
  CU(cuMemFree(p));
  return ok ? 0 : 3;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  std::string mode = argv[1];
  if (const char* e = std::getenv("TEST_TSTP_HANDLER"); e != nullptr && e[0] == '1') {
    signal(SIGTSTP, ProgramTstp);  // before cuInit: libvgpu chains it
  }
  CU(cuInit(0));
  CUdevice dev = 0;
  CU(cuDeviceGet(&dev, 0));
  CUcontext ctx = nullptr;
  CU(cuDevicePrimaryCtxRetain(&ctx, dev));
  CU(cuCtxSetCurrent(ctx));
  if (mode == "twodev" && argc >= 3) return TwoDevices(argv[2]);
  if (mode == "bigfill" && argc >= 4) {
    return BigFill(std::strtoull(argv[2], nullptr, 10) << 20, argv[3]);
  }
  if (mode == "bandwidth" && argc >= 3) return Bandwidth(std::strtoull(argv[2], nullptr, 10) << 20);
  if (mode == "meminfo") {
    size_t free = 0, total = 0;
    CU(cuMemGetInfo(&free, &total));
    std::printf("free=%zu total=%zu\n", free, total);
    return 0;
  }
  if (mode == "pitch" && argc >= 3) {
    CUdeviceptr p = 0;
    size_t pitch = 0;
    CU(cuMemAllocPitch(&p, &pitch, 1000, 300, 4));
    std::printf("ready pitch=%zu\n", pitch);
    std::fflush(stdout);
    while (access(argv[2], F_OK) != 0) usleep(2000);
    CU(cuMemFree(p));
    return 0;
  }
  if (mode == "graphmem" && argc >= 3) {
    CUgraph g = nullptr;
    CUgraphExec e = nullptr;
    CUgraphNode n = nullptr;
    CU(cuGraphCreate(&g, 0));
    CUDA_MEM_ALLOC_NODE_PARAMS p{};
    p.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.poolProps.location = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
    p.bytesize = 8 << 20;
    CU(cuGraphAddMemAllocNode(&n, g, nullptr, 0, &p));
    CU(cuGraphInstantiate(&e, g, 0));
    CU(cuGraphLaunch(e, nullptr));
    CU(cuCtxSynchronize());
    std::printf("ready held\n");
    std::fflush(stdout);
    const std::string stop = argv[2];
    while (access((stop + ".1").c_str(), F_OK) != 0) usleep(2000);
    CU(cuMemFree(p.dptr));
    std::printf("freed\n");
    std::fflush(stdout);
    while (access((stop + ".2").c_str(), F_OK) != 0) usleep(2000);
    CU(cuGraphExecDestroy(e));
    CU(cuGraphDestroy(g));
    return 0;
  }
  if ((mode == "ctxwork" || mode == "greenwork") && argc >= 3) {
    constexpr size_t kCount = 1u << 20;
    constexpr uint32_t kValue = 0xC0FFEEu;
    CUdeviceptr p = 0;
    CU(cuMemAlloc(&p, kCount * 4));
    CU(cuMemsetD32(p, 0, kCount));
    CUstream stream = nullptr;
    if (mode == "greenwork") {
      CUdevResource sms{};
      CU(cuDeviceGetDevResource(dev, &sms, CU_DEV_RESOURCE_TYPE_SM));
      CUdevResourceDesc desc = nullptr;
      CU(cuDevResourceGenerateDesc(&desc, &sms, 1));
      CUgreenCtx green = nullptr;
      CU(cuGreenCtxCreate(&green, desc, dev, CU_GREEN_CTX_DEFAULT_STREAM));
      CU(cuGreenCtxStreamCreate(&stream, green, CU_STREAM_NON_BLOCKING, 0));
    } else {
      CUcontext other = nullptr;
      CU(cuCtxCreate(&other, nullptr, 0, dev));  // current from here on
    }
    CUmodule m = nullptr;
    CUfunction sleep_fn = nullptr, fill_fn = nullptr;
    CU(cuModuleLoad(&m, "@builtin"));
    CU(cuModuleGetFunction(&sleep_fn, m, "vgpu_sim_sleep"));
    CU(cuModuleGetFunction(&fill_fn, m, "vgpu_sim_fill_u32"));
    unsigned long long ns = 400'000'000ull;
    void* sleep_args[] = {&ns};
    unsigned long long ptr = p, count = kCount;
    uint32_t value = kValue;
    void* fill_args[] = {&ptr, &value, &count};
    CU(cuLaunchKernel(sleep_fn, 1, 1, 1, 1, 1, 1, 0, stream, sleep_args, nullptr));
    CU(cuLaunchKernel(fill_fn, 1, 1, 1, 1, 1, 1, 0, stream, fill_args, nullptr));
    std::printf("ready\n");
    std::fflush(stdout);
    while (access(argv[2], F_OK) != 0) usleep(2000);
    CU(stream != nullptr ? cuStreamSynchronize(stream) : cuCtxSynchronize());
    std::vector<uint32_t> h(kCount);
    CU(cuMemcpyDtoH(h.data(), p, kCount * 4));
    size_t wrong = 0;
    for (uint32_t v : h) wrong += v != kValue;
    std::printf("wrong=%zu\n", wrong);
    return wrong == 0 ? 0 : 3;
  }
  if (mode == "overquota" && argc >= 3) {  // under a 64 MiB limit: one refusal
    CUdeviceptr a = 0, b = 0;
    CU(cuMemAlloc(&a, 40u << 20));
    CUresult r = cuMemAlloc(&b, 40u << 20);
    std::printf("ready refused=%d\n", r == CUDA_ERROR_OUT_OF_MEMORY ? 1 : 0);
    std::fflush(stdout);
    while (access(argv[2], F_OK) != 0) usleep(2000);
    CU(cuMemFree(a));
    return r == CUDA_ERROR_OUT_OF_MEMORY ? 0 : 3;
  }
  if (mode != "hold" || argc < 4) return 2;
  int threads = std::atoi(argv[2]);
  std::string stop = argv[3];
  // Fixed buffers (verified) and one per thread (scratch). residency_test.sh
  // resume_retry counts on one cuMemcpyHtoD per fixed buffer and none later.
  const size_t sizes[] = {1000, 4096, 300000, 3u << 20, 8u << 20};
  const uint32_t seed = static_cast<uint32_t>(getpid()) * 0x9E3779B9u;
  auto pattern = [seed](size_t k, size_t i) {
    return static_cast<uint32_t>(k * 2654435761u + i) ^ seed;
  };
  std::vector<CUdeviceptr> bufs;
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; ++i) {
    CUdeviceptr p = 0;
    CU(cuMemAlloc(&p, sizes[i]));
    std::vector<uint32_t> h(sizes[i] / 4);
    for (size_t k = 0; k < h.size(); ++k) h[k] = pattern(k, i);
    CU(cuMemcpyHtoD(p, h.data(), h.size() * 4));
    bufs.push_back(p);
  }
  if (argc > 4) {  // an extra buffer of N MiB with incompressible-ish contents (bench)
    size_t n = std::strtoull(argv[4], nullptr, 10) << 20;
    CUdeviceptr p = 0;
    CU(cuMemAlloc(&p, n));
    std::vector<uint32_t> h(n / 4);
    uint64_t x = 88172645463325252ull;
    for (auto& v : h) { x ^= x << 13; x ^= x >> 7; x ^= x << 17; v = static_cast<uint32_t>(x); }
    CU(cuMemcpyHtoD(p, h.data(), n));
  }
  {  // a freed buffer: under VGPU_VMM its chunk stays cached, and suspend must release it too
    CUdeviceptr p = 0;
    CU(cuMemAlloc(&p, 4u << 20));
    CU(cuMemFree(p));
  }
  std::printf("ready\n");
  std::fflush(stdout);
  std::atomic<long> iterations{0}, errors{0};
  std::atomic<bool> done{false};
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      if (cuCtxSetCurrent(ctx) != CUDA_SUCCESS) {
        errors++;
        return;
      }
      CUdeviceptr scratch = 0;
      if (cuMemAlloc(&scratch, 64 << 10) != CUDA_SUCCESS) {
        errors++;
        return;
      }
      std::vector<uint32_t> h;
      while (!done.load()) {
        size_t i = static_cast<size_t>(iterations.load() + t) % bufs.size();
        h.assign(sizes[i] / 4, 0);
        if (cuMemcpyDtoH(h.data(), bufs[i], h.size() * 4) != CUDA_SUCCESS) errors++;
        for (size_t k = 0; k < h.size(); ++k) {
          if (h[k] != pattern(k, i)) {
            errors++;
            break;
          }
        }
        uint32_t v = 0;
        if (cuMemsetD32(scratch, 0xabc00000u + t, (64 << 10) / 4) != CUDA_SUCCESS ||
            cuMemcpyDtoH(&v, scratch + 4096, 4) != CUDA_SUCCESS || v != 0xabc00000u + t) {
          errors++;
        }
        iterations++;
      }
      cuMemFree(scratch);
    });
  }
  while (access(stop.c_str(), F_OK) != 0) usleep(2000);
  done = true;
  for (auto& t : ts) t.join();
  std::printf("iterations=%ld errors=%ld\n", iterations.load(), errors.load());
  return errors.load() == 0 ? 0 : 1;
}
