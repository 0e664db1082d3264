// vgpu_ckpt_tool: look inside a checkpoint image.
//   vgpu_ckpt_tool info IMAGE [--records]   header, sizes and (optionally) records
//   vgpu_ckpt_tool verify IMAGE             full check of every frame; exit 0 if intact
//   vgpu_ckpt_tool make-seeds DIR           small valid images (fuzz seed corpus; creates DIR)
// Exit codes: 0 ok, 1 the image is damaged or unreadable, 2 usage.
#include <sys/stat.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "checkpoint/image_reader.h"
#include "checkpoint/image_writer.h"

namespace ckpt = vgpu::checkpoint;

namespace {

int Info(const std::string& path, bool with_records) {
  std::unique_ptr<ckpt::ImageReader> r;
  if (ckpt::Status s = ckpt::ImageReader::Open(path, {}, &r); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.message().c_str());
    return 1;
  }
  const ckpt::ImageInfo& i = r->info();
  const ckpt::Header& h = i.header;
  const time_t secs = static_cast<time_t>(h.creation_time_ns / 1000000000);
  char when[64];
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&secs));
  std::printf("format version  %u\nwriter          %s\ncreated         %s\n", h.version,
              h.writer_version.c_str(), when);
  std::printf("process         pid %u on %s\nframe size      %u\n", h.pid, h.hostname.c_str(),
              h.frame_size);
  std::printf("records         %zu\nframes          %zu\n", r->records().size(),
              r->frames().size());
  std::printf("data            %" PRIu64 " bytes (stored %" PRIu64 ", file %" PRIu64 ")\n",
              i.data_bytes, i.stored_bytes, i.file_bytes);
  std::printf("device metadata %s\n", h.device_metadata.c_str());
  if (with_records) {
    std::printf("%6s %18s %14s %6s %10s %8s\n", "record", "va", "size", "device", "flags",
                "frames");
    for (size_t k = 0; k < r->records().size(); ++k) {
      const ckpt::RecordEntry& e = r->records()[k];
      std::printf("%6zu 0x%016" PRIx64 " %14" PRIu64 " %6d 0x%08x %8u\n", k, e.va, e.size, e.device,
                  e.flags, e.frame_count);
    }
  }
  return 0;
}

int Verify(const std::string& path) {
  std::unique_ptr<ckpt::ImageReader> r;
  ckpt::Status s = ckpt::ImageReader::Open(path, {}, &r);
  if (s.ok()) s = r->VerifyData();
  std::printf("%s\n", s.ok() ? (path + ": intact").c_str() : s.message().c_str());
  return s.ok() ? 0 : 1;
}

// Each seed: a list of record sizes with a data pattern (0 zero, 1 text, 2 random).
struct Seed {
  const char* name;
  std::vector<std::pair<size_t, int>> records;
};

bool WriteSeed(const std::string& path, const Seed& seed) {
  ckpt::WriterOptions o;
  o.frame_size = ckpt::kMinFrameSize;  // small frames: many frames in few bytes
  o.threads = 1;
  o.sync = false;
  ckpt::ImageMetadata m;
  m.hostname = "seed";
  m.device_metadata = R"({"devices":[{"index":0,"uuid":"GPU-seed"}]})";
  m.creation_time_ns = 1;
  m.pid = 1;  // deterministic seeds
  std::unique_ptr<ckpt::ImageWriter> w;
  ckpt::Status s = ckpt::ImageWriter::Create(path, m, o, &w);
  std::mt19937_64 rng(42);
  uint64_t va = 0x7f0000000000;
  for (const auto& [size, pattern] : seed.records) {
    std::vector<uint8_t> data(size);
    for (size_t i = 0; i < size; ++i)
      data[i] = pattern == 0 ? 0 : pattern == 1 ? "vgpu checkpoint "[i % 16] : rng() & 0xff;
    if (s.ok()) s = w->BeginRecord(va, size, 1, 0);
    if (s.ok()) s = w->Append(data.data(), data.size());
    if (s.ok()) s = w->EndRecord();
    va += (size + 4095) & ~size_t{4095};
    va += 4096;
  }
  if (s.ok()) s = w->Finish();
  if (!s.ok()) std::fprintf(stderr, "%s\n", s.message().c_str());
  return s.ok();
}

int MakeSeeds(const std::string& dir) {
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    std::perror(dir.c_str());
    return 1;
  }
  // "valid-": the fuzz regression asserts that each opens and verifies.
  const Seed seeds[] = {
      {"valid-empty.img", {}},
      {"valid-zero-size.img", {{0, 1}}},
      {"valid-one-byte.img", {{1, 1}}},
      {"valid-mixed.img", {{5000, 1}, {0, 0}, {8192, 0}, {700, 2}, {9000, 1}}},
      {"valid-random.img", {{4096 * 2 + 17, 2}}},
  };
  for (const Seed& s : seeds)
    if (!WriteSeed(dir + "/" + s.name, s)) return 1;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string cmd = argc > 1 ? argv[1] : "";
  if (argc >= 3 && cmd == "info")
    return Info(argv[2], argc > 3 && std::strcmp(argv[3], "--records") == 0);
  if (argc == 3 && cmd == "verify") return Verify(argv[2]);
  if (argc == 3 && cmd == "make-seeds") return MakeSeeds(argv[2]);
  std::fprintf(stderr,
               "usage: vgpu_ckpt_tool info IMAGE [--records] | verify IMAGE | make-seeds DIR\n");
  return 2;
}
