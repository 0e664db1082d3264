// Helper of the runtime-settings tests (tests/set/set_test.sh): a CUDA
// process driven line by line on stdin, so the test can change its limits
// with vgpuctl between two of its allocations. Answers each command with one
// line on stdout, "<n> <answer>" for the n-th command (from 1):
//   alloc MiB   cuMemAlloc: "alloc ok", "alloc oom" (CUDA_ERROR_OUT_OF_MEMORY)
//               or "alloc err=<code>"
//   free        frees the most recent allocation still held: "free ok"
//   meminfo     cuMemGetInfo of device 0: "meminfo free=<bytes> total=<bytes>"
// Prints "ready" first, once cuInit has run (the agent is then up), and
// exits 0 at end of input.
#include <cuda.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace {

void Check(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return;
  std::fprintf(stderr, "set_client: %s failed: %d\n", what, static_cast<int>(r));
  std::exit(2);
}
#define CU(x) Check((x), #x)

std::string Alloc(std::vector<CUdeviceptr>* held, size_t mib) {
  CUdeviceptr p = 0;
  CUresult r = cuMemAlloc(&p, mib << 20);
  if (r == CUDA_SUCCESS) {
    held->push_back(p);
    return "alloc ok";
  }
  if (r == CUDA_ERROR_OUT_OF_MEMORY) return "alloc oom";
  return "alloc err=" + std::to_string(static_cast<int>(r));
}

}  // namespace

int main() {
  CU(cuInit(0));
  CUdevice dev = 0;
  CU(cuDeviceGet(&dev, 0));
  CUcontext ctx = nullptr;
  CU(cuDevicePrimaryCtxRetain(&ctx, dev));
  CU(cuCtxSetCurrent(ctx));
  std::printf("ready\n");
  std::fflush(stdout);
  std::vector<CUdeviceptr> held;
  std::string line;
  for (int n = 1; std::getline(std::cin, line); ++n) {
    std::istringstream in(line);
    std::string cmd, answer = "unknown command";
    in >> cmd;
    if (cmd == "alloc") {
      size_t mib = 0;
      in >> mib;
      answer = Alloc(&held, mib);
    } else if (cmd == "free" && !held.empty()) {
      CU(cuMemFree(held.back()));
      held.pop_back();
      answer = "free ok";
    } else if (cmd == "meminfo") {
      size_t free = 0, total = 0;
      CU(cuMemGetInfo(&free, &total));
      answer = "meminfo free=" + std::to_string(free) + " total=" + std::to_string(total);
    }
    std::printf("%d %s\n", n, answer.c_str());
    std::fflush(stdout);
  }
  for (CUdeviceptr p : held) CU(cuMemFree(p));
  return 0;
}
