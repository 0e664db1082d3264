// vgpu_bench_checkpoint: checkpoint image throughput against the two limits a
// checkpoint cannot beat, measured in the same run on the same disk:
//   memcpy            host memory bandwidth (one thread)
//   raw write+fsync   plain write() of the same bytes + fsync
//   image write       ImageWriter, 4 MiB Append chunks, Finish() incl. fsync + rename
//   image read        ImageReader::ReadRecords of every record, page cache dropped first
//                     (posix_fadvise DONTNEED), checksums verified
// Data: a realistic mix in 16 MiB segments: zeros (fresh/padding memory),
// fp32 weights ~ N(0, 0.02), int32 indices, and random bytes (incompressible).
//
//   vgpu_bench_checkpoint [--size 1G] [--dir DIR] [--threads N] [--level L]
//                         [--frame-size 4M] [--records N] [--min-saving PCT] [--json FILE]
// All MB/s figures are uncompressed bytes / wall time (MB = 10^6 bytes).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "checkpoint/image_reader.h"
#include "checkpoint/image_writer.h"

namespace ckpt = vgpu::checkpoint;
using Clock = std::chrono::steady_clock;

namespace {

struct Args {
  uint64_t size = 1ull << 30;
  std::string dir = ".";
  int threads = 0;
  int level = 1;
  uint64_t frame_size = ckpt::kDefaultFrameSize;
  int records = 16;
  int min_saving = 10;
  std::string json;
};

uint64_t ParseSize(const char* s) {
  char* end = nullptr;
  double v = std::strtod(s, &end);
  switch (end && *end ? *end : ' ') {
    case 'G':
    case 'g':
      v *= 1 << 30;
      break;
    case 'M':
    case 'm':
      v *= 1 << 20;
      break;
    case 'K':
    case 'k':
      v *= 1 << 10;
      break;
    default:
      break;
  }
  return static_cast<uint64_t>(v);
}

bool ParseArgs(int argc, char** argv, Args* a) {
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (i + 1 >= argc) return false;
    const char* v = argv[++i];
    if (k == "--size")
      a->size = ParseSize(v);
    else if (k == "--dir")
      a->dir = v;
    else if (k == "--threads")
      a->threads = std::atoi(v);
    else if (k == "--level")
      a->level = std::atoi(v);
    else if (k == "--frame-size")
      a->frame_size = ParseSize(v);
    else if (k == "--records")
      a->records = std::max(1, std::atoi(v));
    else if (k == "--min-saving")
      a->min_saving = std::atoi(v);
    else if (k == "--json")
      a->json = v;
    else
      return false;
  }
  return a->size > 0;
}

void FillRealistic(uint8_t* p, uint64_t n) {
  // 16 MiB segments; smaller for small sizes so that every kind occurs.
  const uint64_t kSeg = std::clamp<uint64_t>(n / 16, 64 << 10, 16 << 20);
  std::mt19937_64 rng(1234);
  std::normal_distribution<float> weight(0.0f, 0.02f);
  for (uint64_t off = 0, seg = 0; off < n; off += kSeg, ++seg) {
    const uint64_t len = std::min(kSeg, n - off);
    uint8_t* s = p + off;
    switch (seg % 4) {
      case 0:
        std::memset(s, 0, len);
        break;
      case 1:
        for (uint64_t i = 0; i + 4 <= len; i += 4) {
          const float f = weight(rng);
          std::memcpy(s + i, &f, 4);
        }
        break;
      case 2:
        for (uint64_t i = 0; i + 4 <= len; i += 4) {
          const uint32_t v = static_cast<uint32_t>(i / 4 + rng() % 16);
          std::memcpy(s + i, &v, 4);
        }
        break;
      case 3:
        for (uint64_t i = 0; i + 8 <= len; i += 8) {
          const uint64_t v = rng();
          std::memcpy(s + i, &v, 8);
        }
        break;
    }
  }
}

double Seconds(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double MBps(uint64_t bytes, double s) { return s > 0 ? bytes / s / 1e6 : 0; }

bool Fail(const std::string& what) {
  std::fprintf(stderr, "vgpu_bench_checkpoint: %s\n", what.c_str());
  return false;
}

bool RawWrite(const std::string& path, const uint8_t* p, uint64_t n, double* secs) {
  const auto t0 = Clock::now();
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Fail("cannot create " + path);
  for (uint64_t off = 0; off < n;) {
    const ssize_t w = ::write(fd, p + off, std::min<uint64_t>(n - off, 4 << 20));
    if (w <= 0) return Fail("write failed");
    off += static_cast<uint64_t>(w);
  }
  const bool ok = ::fsync(fd) == 0;
  ::close(fd);
  *secs = Seconds(t0);
  ::unlink(path.c_str());
  return ok || Fail("fsync failed");
}

bool ImageWrite(const Args& a, const std::string& path, const uint8_t* p, double* secs) {
  ckpt::WriterOptions o;
  o.threads = a.threads;
  o.compression_level = a.level;
  o.frame_size = static_cast<uint32_t>(a.frame_size);
  o.total_bytes = a.size;
  o.min_saving_pct = a.min_saving;
  const auto t0 = Clock::now();
  std::unique_ptr<ckpt::ImageWriter> w;
  vgpu::Status s = ckpt::ImageWriter::Create(path, {}, o, &w);
  const uint64_t per = a.size / a.records;
  for (int r = 0; r < a.records && s.ok(); ++r) {
    const uint64_t off = r * per, len = r + 1 == a.records ? a.size - off : per;
    s = w->BeginRecord(0x7f0000000000 + off, len, 0, 0);
    for (uint64_t done = 0; done < len && s.ok(); done += 4 << 20)
      s = w->Append(p + off + done, std::min<uint64_t>(len - done, 4 << 20));
    if (s.ok()) s = w->EndRecord();
  }
  if (s.ok()) s = w->Finish();
  *secs = Seconds(t0);
  return s.ok() || Fail(s.message);
}

void DropCache(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

bool ImageRead(const Args& a, const std::string& path, uint8_t* dst, double* secs) {
  DropCache(path);
  ckpt::ReaderOptions o;
  o.threads = a.threads;
  const auto t0 = Clock::now();
  std::unique_ptr<ckpt::ImageReader> r;
  vgpu::Status s = ckpt::ImageReader::Open(path, o, &r);
  std::vector<ckpt::ReadTarget> targets;
  uint64_t off = 0;
  if (s.ok()) {
    for (size_t i = 0; i < r->records().size(); ++i) {
      targets.push_back({i, dst + off, r->records()[i].size});
      off += r->records()[i].size;
    }
    s = r->ReadRecords(targets);
  }
  *secs = Seconds(t0);
  return s.ok() || Fail(s.message);
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (!ParseArgs(argc, argv, &a)) {
    std::fprintf(stderr,
                 "usage: vgpu_bench_checkpoint [--size 1G] [--dir DIR] [--threads N] "
                 "[--level L] [--frame-size 4M] [--records N] [--min-saving PCT] [--json FILE]\n");
    return 2;
  }
  std::vector<uint8_t> src(a.size), dst(a.size, 1);
  FillRealistic(src.data(), a.size);
  const std::string raw = a.dir + "/vgpu-bench-raw.bin", img = a.dir + "/vgpu-bench.img";

  auto t0 = Clock::now();
  std::memcpy(dst.data(), src.data(), a.size);
  const double memcpy_s = Seconds(t0);
  double raw_s = 0, write_s = 0, read_s = 0;
  std::fill(dst.begin(), dst.end(), 0xAB);
  if (!RawWrite(raw, src.data(), a.size, &raw_s) || !ImageWrite(a, img, src.data(), &write_s) ||
      !ImageRead(a, img, dst.data(), &read_s))
    return 1;
  if (std::memcmp(src.data(), dst.data(), a.size) != 0) return Fail("read-back differs"), 1;
  std::unique_ptr<ckpt::ImageReader> r;
  const uint64_t file_bytes = ckpt::ImageReader::Open(img, {}, &r).ok() ? r->info().file_bytes : 0;
  ::unlink(img.c_str());

  const double mem = MBps(a.size, memcpy_s), disk = MBps(a.size, raw_s);
  const double floor = std::min(mem, disk), w = MBps(a.size, write_s), rd = MBps(a.size, read_s);
  std::printf("size %llu bytes, image %llu bytes (ratio %.2f), dir %s\n",
              static_cast<unsigned long long>(a.size), static_cast<unsigned long long>(file_bytes),
              file_bytes ? static_cast<double>(a.size) / file_bytes : 0.0, a.dir.c_str());
  std::printf("memcpy            %9.0f MB/s\n", mem);
  std::printf("raw write+fsync   %9.0f MB/s\n", disk);
  std::printf("image write       %9.0f MB/s  (%.0f%% of the slower baseline)\n", w,
              100 * w / floor);
  std::printf("image read        %9.0f MB/s  (%.0f%% of the slower baseline)\n", rd,
              100 * rd / floor);
  if (!a.json.empty()) {
    if (FILE* f = std::fopen(a.json.c_str(), "w")) {
      std::fprintf(f,
                   "{\"size\":%llu,\"image_bytes\":%llu,\"memcpy_mbps\":%.1f,"
                   "\"raw_write_mbps\":%.1f,\"image_write_mbps\":%.1f,\"image_read_mbps\":%.1f}\n",
                   static_cast<unsigned long long>(a.size),
                   static_cast<unsigned long long>(file_bytes), mem, disk, w, rd);
      std::fclose(f);
    }
  }
  return 0;
}
