// Fuzz target for the checkpoint image reader (checkpoint/image_reader.h).
//
// With libFuzzer (clang, -DVGPU_FUZZ=ON, see scripts/fuzz.sh) this is a
// LLVMFuzzerTestOneInput target. Built without it (any compiler) it is a
// regression runner: `image_reader_fuzz_regression PATH...` runs every file
// (directories: every file inside) through the same function, and checks the
// expectation its name carries: "valid-*" must open and verify, "bad-*" must
// be refused. Any crash, sanitizer report or unmet expectation fails.
#include <dirent.h>
#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "checkpoint/image_reader.h"

namespace ckpt = vgpu::checkpoint;

namespace {

// Records larger than this are verified but not read into memory, so that a
// small input claiming huge zero-filled records cannot exhaust memory.
constexpr uint64_t kMaxReadBytes = 64ull << 20;

// Runs the reader fully; true when the image opened and every frame verified.
bool RunReader(const uint8_t* data, size_t size) {
  ckpt::ReaderOptions o;
  o.threads = 2;  // exercises the parallel path; cheap enough
  std::unique_ptr<ckpt::ImageReader> r;
  if (!ckpt::ImageReader::OpenMemory(data, size, o, &r).ok()) return false;
  bool ok = r->VerifyData().ok();
  uint64_t budget = kMaxReadBytes;
  std::vector<uint8_t> buf;
  for (size_t i = 0; i < r->records().size(); ++i) {
    const uint64_t n = r->records()[i].size;
    if (n > budget) continue;
    budget -= n;
    buf.assign(n, 0);
    ok &= r->ReadRecord(i, buf.data(), buf.size()).ok();
    if (n > 0) ok &= !r->ReadRecord(i, buf.data(), buf.size() - 1).ok();  // wrong size
  }
  ok &= !r->ReadRecord(r->records().size(), nullptr, 0).ok();  // no such record
  return ok;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  RunReader(data, size);
  return 0;
}

#ifndef VGPU_LIBFUZZER

namespace {

bool HasPrefix(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

// Returns the number of failed expectations for one file.
int RunFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), {});
  const bool ok = RunReader(bytes.data(), bytes.size());
  const std::string name = path.substr(path.find_last_of('/') + 1);
  if ((HasPrefix(name, "valid-") && !ok) || (HasPrefix(name, "bad-") && ok)) {
    std::fprintf(stderr, "FAIL %s: %s\n", path.c_str(), ok ? "accepted" : "refused");
    return 1;
  }
  return 0;
}

std::vector<std::string> Expand(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return {path};
  std::vector<std::string> out;
  if (DIR* d = opendir(path.c_str())) {
    while (const dirent* e = readdir(d))
      if (e->d_name[0] != '.') out.push_back(path + "/" + e->d_name);
    closedir(d);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int files = 0, failures = 0;
  for (int i = 1; i < argc; ++i) {
    for (const std::string& f : Expand(argv[i])) {
      failures += RunFile(f);
      ++files;
    }
  }
  std::printf("%d inputs, %d failed expectations\n", files, failures);
  return failures == 0 && files > 0 ? 0 : 1;
}

#endif  // VGPU_LIBFUZZER
