// A training-like job for vgpud's tests and benchmarks (tests/vgpud,
// bench/vgpud_bench.cc): allocates MiB of device memory in 64 MiB buffers,
// fills them, then runs STEPS steps, each adding a step-dependent value to
// every word (the simulator's builtin kernels) and occupying the engine for
// STEP_MS of device time. At the end it checks every word against the value
// it must hold and prints a checksum of the memory, so that a run under
// time-slicing can be compared with a solo run bit for bit.
//   vgpu_timeslice_job MiB STEPS STEP_MS
// Prints "allocated", then "done checksum=<hex> errors=<n> seconds=<s>";
// exits 0 iff no word was wrong, 3 if an allocation failed.
#include <cuda.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

void Check(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return;
  std::fprintf(stderr, "timeslice_job: %s failed: %d\n", what, static_cast<int>(r));
  std::exit(r == CUDA_ERROR_OUT_OF_MEMORY ? 3 : 2);
}
#define CU(x) Check((x), #x)

constexpr uint64_t kBuffer = 64ull << 20;

uint32_t Seed(size_t b) { return 0x9e3779b9u * static_cast<uint32_t>(b + 1); }
uint32_t Delta(int step, size_t b) { return static_cast<uint32_t>(step) * 7u + static_cast<uint32_t>(b); }

void Launch(CUfunction f, void** args) {
  CU(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: vgpu_timeslice_job MiB STEPS STEP_MS\n");
    return 2;
  }
  const uint64_t bytes = std::strtoull(argv[1], nullptr, 10) << 20;
  const int steps = std::atoi(argv[2]);
  const uint64_t step_ns = std::strtoull(argv[3], nullptr, 10) * 1000000ull;
  const auto t0 = std::chrono::steady_clock::now();
  CU(cuInit(0));
  CUdevice dev = 0;
  CU(cuDeviceGet(&dev, 0));
  CUcontext ctx = nullptr;
  CU(cuDevicePrimaryCtxRetain(&ctx, dev));
  CU(cuCtxSetCurrent(ctx));
  CUmodule mod = nullptr;
  CU(cuModuleLoad(&mod, "@builtin"));
  CUfunction fill = nullptr, add = nullptr, sleep = nullptr, sum = nullptr;
  CU(cuModuleGetFunction(&fill, mod, "vgpu_sim_fill_u32"));
  CU(cuModuleGetFunction(&add, mod, "vgpu_sim_add_u32"));
  CU(cuModuleGetFunction(&sleep, mod, "vgpu_sim_sleep"));
  CU(cuModuleGetFunction(&sum, mod, "vgpu_sim_checksum"));
  std::vector<CUdeviceptr> bufs;
  std::vector<uint64_t> sizes;
  for (uint64_t done = 0; done < bytes; done += kBuffer) {
    const uint64_t n = bytes - done < kBuffer ? bytes - done : kBuffer;
    CUdeviceptr p = 0;
    CU(cuMemAlloc(&p, n));
    uint32_t v = Seed(bufs.size());
    uint64_t words = n / 4;
    void* args[] = {&p, &v, &words};
    Launch(fill, args);
    bufs.push_back(p);
    sizes.push_back(n);
  }
  CU(cuCtxSynchronize());
  std::printf("allocated\n");
  std::fflush(stdout);
  for (int s = 0; s < steps; ++s) {
    for (size_t b = 0; b < bufs.size(); ++b) {
      uint32_t v = Delta(s, b);
      uint64_t words = sizes[b] / 4;
      void* args[] = {&bufs[b], &v, &words};
      Launch(add, args);
    }
    uint64_t ns = step_ns;
    void* sargs[] = {&ns};
    Launch(sleep, sargs);
    CU(cuCtxSynchronize());
  }
  // Every word of buffer b holds Seed(b) + the sum of its deltas.
  uint64_t errors = 0, checksum = 0;
  CUdeviceptr out = 0;
  CU(cuMemAlloc(&out, 8));
  std::vector<uint32_t> host(kBuffer / 4);
  for (size_t b = 0; b < bufs.size(); ++b) {
    uint32_t expect = Seed(b);
    for (int s = 0; s < steps; ++s) expect += Delta(s, b);
    CU(cuMemcpyDtoH(host.data(), bufs[b], sizes[b]));
    for (uint64_t i = 0; i < sizes[b] / 4; ++i) errors += host[i] != expect;
    uint64_t words = sizes[b] / 4;
    void* args[] = {&bufs[b], &words, &out};
    Launch(sum, args);
    uint64_t h = 0;
    CU(cuMemcpyDtoH(&h, out, 8));
    checksum = checksum * 0x100000001b3ull ^ h;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("done checksum=%016llx errors=%llu seconds=%.3f\n",
              static_cast<unsigned long long>(checksum), static_cast<unsigned long long>(errors), secs);
  return errors == 0 ? 0 : 1;
}
