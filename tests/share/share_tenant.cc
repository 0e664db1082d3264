// A tenant for the compute-share tests: launches vgpu_sim_sleep kernels back
// to back on one stream for the given seconds (kernel length in µs), or, with
// --latency, short kernels with gaps, printing the median and p99 latency in µs.
#include <cuda.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#define CHECK(x)                                                        \
  do {                                                                  \
    if (CUresult r_ = (x); r_ != CUDA_SUCCESS) {                        \
      std::fprintf(stderr, "%s failed: %d\n", #x, static_cast<int>(r_)); \
      return 1;                                                         \
    }                                                                   \
  } while (0)

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  double seconds = std::atof(argv[1]);
  unsigned long long ns = std::strtoull(argv[2], nullptr, 10) * 1000ull;
  bool latency = argc > 3 && std::strcmp(argv[3], "--latency") == 0;
  CHECK(cuInit(0));
  CUcontext ctx;
  CHECK(cuDevicePrimaryCtxRetain(&ctx, 0));
  CHECK(cuCtxSetCurrent(ctx));
  CUmodule m;
  CHECK(cuModuleLoad(&m, "@builtin"));
  CUfunction f;
  CHECK(cuModuleGetFunction(&f, m, "vgpu_sim_sleep"));
  CUstream s;
  CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  void* args[] = {&ns};
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  std::vector<double> lat;
  std::printf("ready\n");
  std::fflush(stdout);
  while (std::chrono::steady_clock::now() < end) {
    auto t0 = std::chrono::steady_clock::now();
    CHECK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, args, nullptr));
    if (latency) {
      CHECK(cuStreamSynchronize(s));
      lat.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
      std::this_thread::sleep_for(std::chrono::milliseconds(3));
    }
  }
  CHECK(cuStreamSynchronize(s));
  if (latency && !lat.empty()) {
    std::sort(lat.begin(), lat.end());
    std::printf("p50_us=%.0f\n", lat[lat.size() / 2]);
    std::printf("p99_us=%.0f\n", lat[lat.size() * 99 / 100]);
  }
  return 0;
}
