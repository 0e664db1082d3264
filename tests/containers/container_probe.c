/* A CUDA driver API client in C for the container test (podman_test.sh): it
 * needs nothing but glibc and libcuda.so.1, as a real image would.
 *   container_probe quota OK_MIB OVER_MIB
 *       prints the device's total memory as the process sees it, allocates
 *       OK_MIB (must succeed), then OVER_MIB more (must fail with
 *       CUDA_ERROR_OUT_OF_MEMORY); exit 0 when both hold.
 *   container_probe clearenv OK_MIB OVER_MIB
 *       the same in a re-executed copy of itself whose environment holds only
 *       the simulated node's VGPU_SIM_* variables (a program that resets its
 *       environment: libvgpu must still be loaded and limited).
 *   container_probe list DIR
 *       prints the names in DIR, one a line (what the container sees).
 *   container_probe spin SECONDS KERNEL_US [PROCESSES]
 *       launches simulated kernels of KERNEL_US back to back on device 0 for
 *       SECONDS (a tenant that saturates the GPU); prints "ready" first. With
 *       PROCESSES, that many processes do so (forked before cuInit).
 *   container_probe latency SECONDS KERNEL_US
 *       one kernel of KERNEL_US, waited for, then 3 ms idle, for SECONDS (an
 *       inference server's requests); prints "ready", then the median
 *       latency: "p50_us=N". */
#include <cuda.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char** environ;

static double Now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int Fail(const char* what, CUresult r) {
  const char* name = NULL;
  cuGetErrorName(r, &name);
  printf("probe: %s: %s\n", what, name ? name : "?");
  return 1;
}

static int Quota(size_t ok_mib, size_t over_mib) {
  CUresult r = cuInit(0);
  if (r != CUDA_SUCCESS) return Fail("cuInit", r);
  CUdevice dev;
  CUcontext ctx;
  if ((r = cuDeviceGet(&dev, 0)) != CUDA_SUCCESS) return Fail("cuDeviceGet", r);
  if ((r = cuDevicePrimaryCtxRetain(&ctx, dev)) != CUDA_SUCCESS) return Fail("retain", r);
  if ((r = cuCtxSetCurrent(ctx)) != CUDA_SUCCESS) return Fail("cuCtxSetCurrent", r);
  size_t free_bytes = 0, total = 0;
  if ((r = cuMemGetInfo(&free_bytes, &total)) != CUDA_SUCCESS) return Fail("cuMemGetInfo", r);
  printf("probe: total=%zu preload=%s\n", total, getenv("LD_PRELOAD") ? "env" : "none");
  CUdeviceptr a = 0, b = 0;
  if ((r = cuMemAlloc(&a, ok_mib << 20)) != CUDA_SUCCESS) return Fail("allocation within", r);
  r = cuMemAlloc(&b, over_mib << 20);
  printf("probe: allocation past the quota: %s\n",
         r == CUDA_ERROR_OUT_OF_MEMORY ? "refused" : "NOT refused");
  if (r == CUDA_SUCCESS) cuMemFree(b);
  cuMemFree(a);
  return r == CUDA_ERROR_OUT_OF_MEMORY ? 0 : 1;
}

static int CompareDoubles(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

static int Spin(double seconds, unsigned long long kernel_us, int latency) {
  CUresult r;
  CUcontext ctx;
  CUmodule m;
  CUfunction f;
  CUstream s;
  if ((r = cuInit(0)) != CUDA_SUCCESS) return Fail("cuInit", r);
  if ((r = cuDevicePrimaryCtxRetain(&ctx, 0)) != CUDA_SUCCESS) return Fail("retain", r);
  if ((r = cuCtxSetCurrent(ctx)) != CUDA_SUCCESS) return Fail("cuCtxSetCurrent", r);
  if ((r = cuModuleLoad(&m, "@builtin")) != CUDA_SUCCESS) return Fail("cuModuleLoad", r);
  if ((r = cuModuleGetFunction(&f, m, "vgpu_sim_sleep")) != CUDA_SUCCESS) return Fail("kernel", r);
  if ((r = cuStreamCreate(&s, CU_STREAM_NON_BLOCKING)) != CUDA_SUCCESS) return Fail("stream", r);
  unsigned long long ns = kernel_us * 1000ull;
  void* args[] = {&ns};
  printf("ready\n");
  fflush(stdout);
  unsigned long launched = 0;
  static double lat[100000];
  for (double end = Now() + seconds; Now() < end; ++launched) {
    double t0 = Now();
    if ((r = cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, args, NULL)) != CUDA_SUCCESS) {
      return Fail("cuLaunchKernel", r);
    }
    if (!latency) continue;
    if ((r = cuStreamSynchronize(s)) != CUDA_SUCCESS) return Fail("cuStreamSynchronize", r);
    if (launched < sizeof lat / sizeof lat[0]) lat[launched] = (Now() - t0) * 1e6;
    struct timespec idle = {0, 3000000};
    nanosleep(&idle, NULL);
  }
  if (latency && launched > 0) {
    size_t n = launched < sizeof lat / sizeof lat[0] ? launched : sizeof lat / sizeof lat[0];
    qsort(lat, n, sizeof lat[0], CompareDoubles);
    printf("p50_us=%.0f\n", lat[n / 2]);
  }
  if ((r = cuStreamSynchronize(s)) != CUDA_SUCCESS) return Fail("cuStreamSynchronize", r);
  printf("launched=%lu\n", launched);
  return 0;
}

int main(int argc, char** argv) {
  if ((argc == 4 || argc == 5) && strcmp(argv[1], "spin") == 0) {
    int processes = argc == 5 ? atoi(argv[4]) : 1, failed = 0;
    for (int i = 1; i < processes; ++i) {
      if (fork() == 0) return Spin(strtod(argv[2], NULL), strtoull(argv[3], NULL, 10), 0);
    }
    failed = Spin(strtod(argv[2], NULL), strtoull(argv[3], NULL, 10), 0);
    for (int status; wait(&status) > 0;) failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    return failed;
  }
  if (argc == 4 && strcmp(argv[1], "latency") == 0) {
    return Spin(strtod(argv[2], NULL), strtoull(argv[3], NULL, 10), 1);
  }
  if (argc != 4 && !(argc == 3 && strcmp(argv[1], "list") == 0)) {
    fprintf(stderr,
            "usage: container_probe quota|clearenv OK_MIB OVER_MIB | list DIR | "
            "spin SECONDS KERNEL_US [PROCESSES] | latency SECONDS KERNEL_US\n");
    return 2;
  }
  if (argc == 3 && strcmp(argv[1], "list") == 0) {
    DIR* d = opendir(argv[2]);
    if (d == NULL) return perror(argv[2]), 1;
    for (struct dirent* e; (e = readdir(d)) != NULL;) {
      if (e->d_name[0] != '.') printf("%s\n", e->d_name);
    }
    closedir(d);
    return 0;
  }
  if (strcmp(argv[1], "clearenv") == 0) {
    char* env[16];
    int n = 0;
    for (char** e = environ; *e && n < 15; ++e) {
      if (strncmp(*e, "VGPU_SIM_", 9) == 0) env[n++] = *e;
    }
    env[n] = NULL;
    char* args[] = {argv[0], "quota", argv[2], argv[3], NULL};
    execve("/proc/self/exe", args, env);
    perror("execve");
    return 1;
  }
  return Quota(strtoull(argv[2], NULL, 10), strtoull(argv[3], NULL, 10));
}
