// Enqueue cost of the simulated driver's hot paths: cuLaunchKernel,
// cuEventRecord, cuMemcpyHtoDAsync and cuStreamQuery. The interposer's
// overhead is measured on top of these figures, so they must stay well under
// a microsecond per call.
//
// Runs on its own simulated node (VGPU_SIM_NODE defaults to vgpu-bench-sim);
// finds the sim's libcuda.so.1 through its RUNPATH.
#include <benchmark/benchmark.h>
#include <cuda.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

// Work queued between synchronizations, so that the stream never fills up.
constexpr int kSyncEvery = 256;  // below the sim stream ring (512): the queue never fills

struct Env {
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  CUmodule builtin = nullptr;
  CUfunction sleep_fn = nullptr;
  CUstream stream = nullptr;
  CUdeviceptr dbuf = 0;
  void* pinned = nullptr;
};
Env g;

bool Ok(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return true;
  const char* name = "?";
  cuGetErrorName(r, &name);
  std::fprintf(stderr, "vgpu_bench_sim: %s failed: %s (%d)\n", what, name, r);
  return false;
}
#define CU_OK(call) Ok((call), #call)

bool SetUp() {
  return CU_OK(cuInit(0)) && CU_OK(cuDeviceGet(&g.dev, 0)) &&
         CU_OK(cuDevicePrimaryCtxRetain(&g.ctx, g.dev)) && CU_OK(cuCtxSetCurrent(g.ctx)) &&
         CU_OK(cuModuleLoad(&g.builtin, "@builtin")) &&
         CU_OK(cuModuleGetFunction(&g.sleep_fn, g.builtin, "vgpu_sim_sleep")) &&
         CU_OK(cuStreamCreate(&g.stream, CU_STREAM_NON_BLOCKING)) &&
         CU_OK(cuMemAlloc(&g.dbuf, 4096)) && CU_OK(cuMemAllocHost(&g.pinned, 4096));
}

void TearDown() {
  cuStreamSynchronize(g.stream);
  cuMemFreeHost(g.pinned);
  cuMemFree(g.dbuf);
  cuStreamDestroy(g.stream);
  cuModuleUnload(g.builtin);
  cuDevicePrimaryCtxRelease(g.dev);
}

// Drains the stream every kSyncEvery iterations, outside the timed region.
void MaybeSync(benchmark::State& state, int* n) {
  if (++*n < kSyncEvery) return;
  *n = 0;
  state.PauseTiming();
  if (!CU_OK(cuStreamSynchronize(g.stream))) state.SkipWithError("cuStreamSynchronize failed");
  state.ResumeTiming();
}

void Finish(benchmark::State& state) {
  if (!CU_OK(cuStreamSynchronize(g.stream))) state.SkipWithError("cuStreamSynchronize failed");
}

void BM_LaunchKernelSleep0(benchmark::State& state) {
  uint64_t ns = 0;
  void* params[] = {&ns};
  int n = 0;
  for (auto _ : state) {
    if (cuLaunchKernel(g.sleep_fn, 1, 1, 1, 1, 1, 1, 0, g.stream, params, nullptr) !=
        CUDA_SUCCESS) {
      state.SkipWithError("cuLaunchKernel failed");
      break;
    }
    MaybeSync(state, &n);
  }
  Finish(state);
}
BENCHMARK(BM_LaunchKernelSleep0);

void EventRecord(benchmark::State& state, unsigned flags) {
  CUevent ev;
  if (!CU_OK(cuEventCreate(&ev, flags))) {
    state.SkipWithError("cuEventCreate failed");
    return;
  }
  int n = 0;
  for (auto _ : state) {
    if (cuEventRecord(ev, g.stream) != CUDA_SUCCESS) {
      state.SkipWithError("cuEventRecord failed");
      break;
    }
    MaybeSync(state, &n);
  }
  Finish(state);
  cuEventDestroy(ev);
}
void BM_EventRecord(benchmark::State& state) { EventRecord(state, CU_EVENT_DEFAULT); }
void BM_EventRecordDisableTiming(benchmark::State& state) {
  EventRecord(state, CU_EVENT_DISABLE_TIMING);
}
BENCHMARK(BM_EventRecord);
BENCHMARK(BM_EventRecordDisableTiming);

void MemcpyHtoDAsync4(benchmark::State& state, const void* src) {
  int n = 0;
  for (auto _ : state) {
    if (cuMemcpyHtoDAsync(g.dbuf, src, 4, g.stream) != CUDA_SUCCESS) {
      state.SkipWithError("cuMemcpyHtoDAsync failed");
      break;
    }
    MaybeSync(state, &n);
  }
  Finish(state);
}
void BM_MemcpyHtoDAsync4Pinned(benchmark::State& state) { MemcpyHtoDAsync4(state, g.pinned); }
void BM_MemcpyHtoDAsync4Pageable(benchmark::State& state) {
  static uint32_t value = 42;
  MemcpyHtoDAsync4(state, &value);
}
BENCHMARK(BM_MemcpyHtoDAsync4Pinned);
BENCHMARK(BM_MemcpyHtoDAsync4Pageable);

void BM_StreamQueryIdle(benchmark::State& state) {
  Finish(state);
  for (auto _ : state) {
    if (cuStreamQuery(g.stream) != CUDA_SUCCESS) {
      state.SkipWithError("cuStreamQuery on an idle stream is not CUDA_SUCCESS");
      break;
    }
  }
}
BENCHMARK(BM_StreamQueryIdle);

}  // namespace

int main(int argc, char** argv) {
  // A fixed name: the sim keeps a node's region after its processes exit, so a
  // per-run name would leave one behind each run.
  setenv("VGPU_SIM_NODE", "vgpu-bench-sim", 0);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  if (!SetUp()) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  TearDown();
  return 0;
}
