// cuGraphLaunch enqueue cost (ns per launch) of two graphs on the simulated
// node: "plain", one empty node; "memnode", an allocation node (1 MiB), an
// empty node and a free node (the graph-memory accounting's slow path under
// libvgpu: a lock, the pool's attributes read before and after, a charge
// settled). Launches are timed in batches, the stream drained between batches
// outside the timed region; prints the median batch's ns per launch as
// `plain_ns=... memnode_ns=...`. bench/graph_launch_bench.sh runs it directly
// and under LD_PRELOAD=libvgpu.so in alternation and reports the differences
// (docs/performance.md, "Graph launches"). No timing assertions.
#include <cuda.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

void Check(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return;
  std::fprintf(stderr, "%s failed: %d\n", what, static_cast<int>(r));
  std::exit(1);
}

CUgraph EmptyGraph() {
  CUgraph g = nullptr;
  CUgraphNode n = nullptr;
  Check(cuGraphCreate(&g, 0), "cuGraphCreate");
  Check(cuGraphAddEmptyNode(&n, g, nullptr, 0), "cuGraphAddEmptyNode");
  return g;
}

CUgraph MemNodeGraph(CUdevice dev) {
  CUgraph g = nullptr;
  Check(cuGraphCreate(&g, 0), "cuGraphCreate");
  CUDA_MEM_ALLOC_NODE_PARAMS p{};
  p.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.poolProps.location = {CU_MEM_LOCATION_TYPE_DEVICE, dev};
  p.bytesize = 1 << 20;
  CUgraphNode a = nullptr, e = nullptr, f = nullptr;
  Check(cuGraphAddMemAllocNode(&a, g, nullptr, 0, &p), "cuGraphAddMemAllocNode");
  Check(cuGraphAddEmptyNode(&e, g, &a, 1), "cuGraphAddEmptyNode");
  Check(cuGraphAddMemFreeNode(&f, g, &e, 1, p.dptr), "cuGraphAddMemFreeNode");
  return g;
}

// Median over batches of the ns per launch.
double Measure(CUgraphExec exec, CUstream s, int batches, int batch) {
  std::vector<double> per;
  for (int b = 0; b < batches; ++b) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < batch; ++i) Check(cuGraphLaunch(exec, s), "cuGraphLaunch");
    auto t1 = std::chrono::steady_clock::now();
    Check(cuStreamSynchronize(s), "cuStreamSynchronize");
    per.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / batch);
  }
  std::sort(per.begin(), per.end());
  return per[per.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int batches = 31, batch = 200;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--batches") == 0) batches = std::max(1, std::atoi(argv[i + 1]));
    if (std::strcmp(argv[i], "--batch") == 0) batch = std::max(1, std::atoi(argv[i + 1]));
  }
  Check(cuInit(0), "cuInit");
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  Check(cuDeviceGet(&dev, 0), "cuDeviceGet");
  Check(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  Check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  CUstream s = nullptr;
  Check(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  CUgraphExec plain = nullptr, mem = nullptr;
  Check(cuGraphInstantiate(&plain, EmptyGraph(), 0), "cuGraphInstantiate");
  Check(cuGraphInstantiate(&mem, MemNodeGraph(dev), 0), "cuGraphInstantiate");
  Measure(plain, s, 2, batch);  // warm up
  Measure(mem, s, 2, batch);
  const double plain_ns = Measure(plain, s, batches, batch);
  const double mem_ns = Measure(mem, s, batches, batch);
  std::printf("plain_ns=%.1f memnode_ns=%.1f\n", plain_ns, mem_ns);
  return 0;
}
