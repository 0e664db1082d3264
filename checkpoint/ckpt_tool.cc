// vgpu_ckpt_tool: look inside a checkpoint image.
//   vgpu_ckpt_tool info IMAGE [--records]   header, sizes and (optionally) records
//   vgpu_ckpt_tool verify IMAGE             full check of every frame; exit 0 if intact
//   vgpu_ckpt_tool make-seeds DIR           the reader's fuzz seed corpus (creates DIR):
//                                           small valid images, and images damaged so
//                                           that one integrity check refuses each
// Exit codes: 0 ok, 1 the image is damaged or unreadable, 2 usage.
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>

#include "checkpoint/fuzz_seeds.h"
#include "checkpoint/image_reader.h"

namespace ckpt = vgpu::checkpoint;

namespace {

int Info(const std::string& path, bool with_records) {
  std::unique_ptr<ckpt::ImageReader> r;
  if (vgpu::Status s = ckpt::ImageReader::Open(path, {}, &r); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.message.c_str());
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
  vgpu::Status s = ckpt::ImageReader::Open(path, {}, &r);
  if (s.ok()) s = r->VerifyData();
  std::printf("%s\n", s.ok() ? (path + ": intact").c_str() : s.message.c_str());
  return s.ok() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string cmd = argc > 1 ? argv[1] : "";
  if (argc >= 3 && cmd == "info")
    return Info(argv[2], argc > 3 && std::strcmp(argv[3], "--records") == 0);
  if (argc == 3 && cmd == "verify") return Verify(argv[2]);
  if (argc == 3 && cmd == "make-seeds") return ckpt::WriteFuzzSeeds(argv[2]) ? 0 : 1;
  std::fprintf(stderr,
               "usage: vgpu_ckpt_tool info IMAGE [--records] | verify IMAGE | make-seeds DIR\n");
  return 2;
}
