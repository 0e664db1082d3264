// Fuzz target for the checkpoint image reader (checkpoint/image_reader.h).
//
// With libFuzzer (clang, -DVGPU_FUZZ=ON, see scripts/fuzz.sh) this is a
// LLVMFuzzerTestOneInput target. Built without it (any compiler) it is a
// regression runner: `image_reader_fuzz_regression PATH...` runs every file
// (directories: every file inside) through the same function and checks the
// expectation its name carries:
//   valid-*                     must open and verify;
//   bad-only-<check>[.variant]  must be refused by that check, recognised by
//                               its message (kChecks); every check must have
//                               a seed (vgpu_ckpt_tool make-seeds writes them);
//   bad-*                       must be refused.
// Any crash, sanitizer report or unmet expectation fails.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "checkpoint/image_reader.h"
#include "tests/fuzz/fuzz_regression.h"

namespace ckpt = vgpu::checkpoint;

namespace {

// Records larger than this are verified but not read into memory, so that a
// small input claiming huge zero-filled records cannot exhaust memory.
constexpr uint64_t kMaxReadBytes = 64ull << 20;
// Guard bytes (a seed frame's size) after each destination: a reader writing past a record's end
// fails here even without ASan.
constexpr size_t kCanaryBytes = 4096;
constexpr uint8_t kCanary = 0xa5;

// Harness violations are bugs in the reader whatever the input.
constexpr char kViolation[] = "HARNESS: ";
std::string Violation(const std::string& what) { return kViolation + what; }
bool IsViolation(const std::string& e) { return e.rfind(kViolation, 0) == 0; }

std::string ReadAll(const ckpt::ImageReader& r) {
  uint64_t budget = kMaxReadBytes;
  std::vector<uint8_t> buf;
  for (size_t i = 0; i < r.records().size(); ++i) {
    const uint64_t n = r.records()[i].size;
    if (n > budget) continue;
    budget -= n;
    buf.assign(n + kCanaryBytes, kCanary);
    if (vgpu::Status s = r.ReadRecord(i, buf.data(), n); !s.ok()) return s.message;
    for (size_t k = n; k < buf.size(); ++k)
      if (buf[k] != kCanary) return Violation("record " + std::to_string(i) + " written past end");
    if (n > 0 && r.ReadRecord(i, buf.data(), n - 1).ok())
      return Violation("ReadRecord accepted a wrong size");
  }
  if (r.ReadRecord(r.records().size(), nullptr, 0).ok())
    return Violation("ReadRecord accepted a record that does not exist");
  return "";
}

// Runs the reader fully: "" when the image opened and every frame verified
// and read back, else the first error message.
std::string RunReader(const uint8_t* data, size_t size) {
  ckpt::ReaderOptions o;
  o.threads = 2;  // exercises the parallel path; cheap enough
  std::unique_ptr<ckpt::ImageReader> r;
  if (vgpu::Status s = ckpt::ImageReader::OpenMemory(data, size, o, &r); !s.ok())
    return s.message;
  const vgpu::Status verified = r->VerifyData();
  const std::string read = ReadAll(*r);  // also after a failed verify: damaged data
  if (IsViolation(read) || verified.ok()) return read;
  return verified.message;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string e = RunReader(data, size);
  if (IsViolation(e)) {
    std::fprintf(stderr, "%s\n", e.c_str());
    std::abort();
  }
  return 0;
}

#ifndef VGPU_LIBFUZZER

namespace {

using vgpu::fuzz::HasPrefix;

// The message each integrity check refuses with ('*': any text), by the name
// of its seeds: bad-only-<check>[.variant].img.
const std::pair<const char*, const char*> kChecks[] = {
    {"empty", "is empty"},
    {"magic", "bad magic"},
    {"min-size", "smaller than any image"},
    {"version-zero", "invalid format version 0"},
    {"version-newer", "is newer than this vgpu supports"},
    {"header-flags", "unsupported header flags"},
    {"frame-size", "invalid frame size"},
    {"header-reserved", "reserved header bytes are not zero"},
    {"header-string-length", "header string too long"},
    {"header-size", "header size * does not match its contents"},
    {"header-truncated", "truncated: header of"},
    {"end-magic", "no end marker"},
    {"trailer-version", "differs from header version"},
    {"trailer-reserved", "reserved trailer field is not zero"},
    {"table-count", "table sizes exceed the file size"},
    {"record-table-offset", "record table offset * out of bounds"},
    {"frame-table-offset", "frame table offset * inconsistent with record table"},
    {"tables-end", "tables end at * but the trailer starts at"},
    {"digest", "digest mismatch"},
    {"frame-offset", "frame table entry *: offset * expected"},
    {"frame-raw-size", "frame table entry *: uncompressed size * out of range"},
    {"frame-reserved", "frame table entry *: reserved field is not zero"},
    {"raw-frame-size", "raw frame with stored != raw size"},
    {"zstd-frame-size", "frame table entry *: compressed size * out of range"},
    {"zero-frame-size", "zero frame with stored bytes"},
    {"codec", "unknown codec"},
    {"frames-end", "frames end at * but the record table starts at"},
    {"va-wrap", "VA range wraps around"},
    {"device", "negative device"},
    {"record-reserved", "record *: reserved field is not zero"},
    {"first-frame", "record *: first frame * expected"},
    {"frame-count", "record *: frame count * expected"},
    {"frames-past-end", "frames past the end of the frame table"},
    {"data-offset", "record *: data offset * expected"},
    {"frame-sizes", "record *: frame * holds * bytes, expected"},
    {"orphan-frame", "frames belong to no record"},
    {"data-bytes", "records hold * bytes, trailer says"},
    {"va-overlap", "overlap in VA"},
    {"frame-checksum", "fails its checksum"},
    {"zstd-checksum", "does not decompress"},
    {"zstd-size", "decompresses to * bytes, expected"},
};

std::set<std::string> seen_checks;

std::string CheckOnly(const std::string& name, const std::string& error) {
  const std::string check = name.substr(9, name.find('.') - 9);  // after "bad-only-"
  for (const auto& [c, pattern] : kChecks) {
    if (check != c) continue;
    seen_checks.insert(c);
    if (error.empty()) return "accepted; the " + check + " check must refuse it";
    if (!vgpu::fuzz::MatchesPattern(error, pattern))
      return "refused by another check than " + check + " (want \"" + pattern + "\"): " + error;
    return "";
  }
  return "no check named " + check + " in kChecks";
}

std::string CheckFile(const std::string& name, const std::vector<uint8_t>& bytes) {
  const std::string error = RunReader(bytes.data(), bytes.size());
  if (IsViolation(error)) {
    if (HasPrefix(name, "bad-only-")) CheckOnly(name, error);  // its seed was seen
    return error;
  }
  if (HasPrefix(name, "valid-") && !error.empty()) return "refused: " + error;
  if (HasPrefix(name, "bad-only-")) return CheckOnly(name, error);
  if (HasPrefix(name, "bad-") && error.empty()) return "accepted";
  return "";
}

// Every check must have been seen once a seed directory was given: a check
// without a seed is a check that can be disabled unnoticed.
std::string CheckAllSeen() {
  if (seen_checks.empty()) return "";
  std::string missing;
  for (const auto& [c, pattern] : kChecks)
    if (!seen_checks.count(c)) missing += std::string(missing.empty() ? "" : ", ") + c;
  return missing.empty() ? "" : "no bad-only-* seed for: " + missing;
}

}  // namespace

int main(int argc, char** argv) {
  return vgpu::fuzz::RunRegression(argc, argv, CheckFile, CheckAllSeen);
}

#endif  // VGPU_LIBFUZZER
