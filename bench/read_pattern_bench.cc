// How fast a file reads with O_DIRECT at a given parallelism and request
// size, the question behind the restore's read pattern (docs/performance.md,
// "Checkpoint and residency"). Rounds interleave the settings so that the
// disk's drift spreads over all of them.
//
//   vgpu_bench_read_pattern FILE [--rounds R] [--set THREADSxMIB]...
//   default sets: 1x4 2x4 2x16 2x32 1x32 1x64 4x16
//
// FILE should be larger than the disk's caches and not in the page cache.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Setting {
  int threads;
  size_t mib;
};

[[noreturn]] void Usage() {
  std::fprintf(stderr, "usage: vgpu_bench_read_pattern FILE [--rounds R] [--set THREADSxMIB]...\n");
  std::exit(2);
}

// Reads the whole file once; GB/s, or a negative value on an error.
double ReadOnce(const char* path, const Setting& s) {
  int fd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
  if (fd < 0) return -1;
  const off_t size = lseek(fd, 0, SEEK_END);
  const size_t req = s.mib << 20;
  std::atomic<off_t> next{0};
  std::atomic<bool> failed{false};
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < s.threads; ++t) {
    pool.emplace_back([&] {
      void* buf = nullptr;
      if (posix_memalign(&buf, 4096, req) != 0) {
        failed = true;
        return;
      }
      for (off_t o; (o = next.fetch_add(static_cast<off_t>(req))) < size;) {
        if (pread(fd, buf, req, o) < 0) failed = true;
      }
      std::free(buf);
    });
  }
  for (auto& t : pool) t.join();
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  close(fd);
  return failed ? -1 : static_cast<double>(size) / secs / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) Usage();
  const char* path = argv[1];
  int rounds = 3;
  std::vector<Setting> sets;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--rounds" && i + 1 < argc) {
      rounds = std::atoi(argv[++i]);
    } else if (a == "--set" && i + 1 < argc) {
      Setting s{};
      if (std::sscanf(argv[++i], "%dx%zu", &s.threads, &s.mib) != 2 || s.threads < 1 || s.mib < 1) Usage();
      sets.push_back(s);
    } else {
      Usage();
    }
  }
  if (sets.empty()) sets = {{1, 4}, {2, 4}, {2, 16}, {2, 32}, {1, 32}, {1, 64}, {4, 16}};
  std::printf("%-8s %-9s %s\n", "threads", "req MiB", "GB/s per round");
  std::vector<std::vector<double>> gbs(sets.size());
  for (int r = 0; r < rounds; ++r) {
    for (size_t i = 0; i < sets.size(); ++i) gbs[i].push_back(ReadOnce(path, sets[i]));
  }
  int rc = 0;
  for (size_t i = 0; i < sets.size(); ++i) {
    std::printf("%-8d %-9zu", sets[i].threads, sets[i].mib);
    for (double g : gbs[i]) {
      std::printf(" %6.2f", g);
      if (g < 0) rc = 1;
    }
    std::printf("\n");
  }
  if (rc != 0) std::fprintf(stderr, "vgpu_bench_read_pattern: a read failed (O_DIRECT refused?)\n");
  return rc;
}
