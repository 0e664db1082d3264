// Fuzz target for the simulator's module readers: what cuModuleLoadData and
// friends parse from a client's bytes (sim/modules/module_image.h: cubin, fatbin and
// PTX readers, and the LZ4 and zstd payloads of fatbin entries).
//
// With libFuzzer (clang, -DVGPU_FUZZ=ON, see scripts/fuzz.sh) this is a
// LLVMFuzzerTestOneInput target. Built without it it is a regression runner
// (`module_image_fuzz_regression PATH...`): every file goes through the same
// function, and a name's prefix says what ParseModuleImage must answer for a
// compute capability 9.0 device: valid-* success, bad-* an error; other names
// (the nvcc-built fixtures of tests/unit) only must not crash. Results that
// contradict themselves (a parameter outside the parameter buffer that the
// launch path packs arguments into) fail in both modes.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "sim/modules/cubin_reader.h"
#include "sim/modules/fatbin_reader.h"
#include "sim/modules/lz4_block.h"
#include "sim/modules/module_image.h"
#include "sim/modules/ptx_reader.h"
#include "tests/fuzz/fuzz_regression.h"

namespace sim = vgpu::sim;

namespace {

// Bounds what one input may make the LZ4 decoder write.
constexpr size_t kMaxLz4Output = 1 << 20;
constexpr uint32_t kElfMagic = 0x464c457f;  // "\x7f" "ELF"

// What a successful parse promises its users (the launch path packs
// arguments at param_offsets into a buffer of param_bytes).
std::string CheckImage(const sim::ModuleImage& m) {
  for (const sim::KernelInfo& k : m.kernels) {
    if (k.param_offsets.size() != k.param_sizes.size())
      return "kernel " + k.name + ": offsets and sizes differ in number";
    for (size_t i = 0; i < k.param_sizes.size(); ++i)
      if (uint64_t{k.param_offsets[i]} + k.param_sizes[i] > k.param_bytes)
        return "kernel " + k.name + ": parameter " + std::to_string(i) +
               " lies outside the parameter buffer";
  }
  // Not checked: an initializer longer than its variable (PTX with more
  // elements than the array has): module_registry.cc copies at most the
  // variable's size.
  return "";
}

// Runs one reader; returns a self-contradiction, or "".
template <typename Fn>
std::string Parse(Fn&& fn, CUresult* result = nullptr) {
  sim::ModuleImage m;
  std::string error;
  const CUresult r = fn(&m, &error);
  if (result) *result = r;
  return r == CUDA_SUCCESS ? CheckImage(m) : "";
}

// Every entry, not just the one a device would pick.
std::string ReadFatbinEntries(const uint8_t* data, size_t size) {
  std::vector<sim::FatbinEntry> entries;
  std::string error;
  if (!sim::ListFatbinEntries(data, size, &entries, &error)) return "";
  for (const sim::FatbinEntry& e : entries) {
    std::vector<uint8_t> payload;
    if (sim::FatbinEntryPayload(e, &payload, &error) != CUDA_SUCCESS) continue;
    const auto* text = reinterpret_cast<const char*>(payload.data());
    std::string v = Parse([&](sim::ModuleImage* m, std::string* err) {
      return e.kind == static_cast<uint16_t>(sim::FatbinKind::kPtx)
                 ? sim::ReadPtx(text, payload.size(), m, err)
                 : sim::ReadCubin(payload.data(), payload.size(), m, err);
    });
    if (!v.empty()) return "fatbin entry: " + v;
  }
  return "";
}

// Runs every reader on the input; returns a self-contradiction, or "".
// *result: what ParseModuleImage answers for a compute capability 9.0 device.
std::string RunReaders(const uint8_t* data, size_t size, CUresult* result) {
  *result = CUDA_ERROR_INVALID_IMAGE;
  uint32_t magic = 0;
  if (size >= 4) std::memcpy(&magic, data, 4);
  // A fatbin wrapper holds a pointer into the client's memory, not bytes.
  if (magic == sim::kFatbinWrapperMagic) return "";
  for (const sim::ImageTarget target : {sim::ImageTarget{9, 0}, {8, 0}, {10, 0}}) {
    CUresult r;
    std::string v =
        Parse([&](sim::ModuleImage* m,
                  std::string* e) { return sim::ParseModuleImage(data, size, target, m, e); },
              &r);
    if (!v.empty()) return v;
    if (target.cc_major == 9) *result = r;
  }
  std::string v = Parse([&](sim::ModuleImage* m, std::string* e) {
    return sim::ReadPtx(reinterpret_cast<const char*>(data), size, m, e);
  });
  if (v.empty() && magic == kElfMagic)
    v = Parse(
        [&](sim::ModuleImage* m, std::string* e) { return sim::ReadCubin(data, size, m, e); });
  if (v.empty() && magic == sim::kFatbinMagic) v = ReadFatbinEntries(data, size);
  // The input as an LZ4 block, into a buffer of a size it implies.
  std::vector<uint8_t> out(std::min(size * 4, kMaxLz4Output));
  sim::Lz4DecompressBlock(data, size, out.data(), out.size());
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  CUresult r;
  if (const std::string v = RunReaders(data, size, &r); !v.empty()) {
    std::fprintf(stderr, "%s\n", v.c_str());
    std::abort();
  }
  return 0;
}

#ifndef VGPU_LIBFUZZER

namespace {

std::string CheckFile(const std::string& name, const std::vector<uint8_t>& bytes) {
  CUresult r;
  if (std::string v = RunReaders(bytes.data(), bytes.size(), &r); !v.empty()) return v;
  if (vgpu::fuzz::HasPrefix(name, "valid-") && r != CUDA_SUCCESS)
    return "refused (CUresult " + std::to_string(r) + ")";
  if (vgpu::fuzz::HasPrefix(name, "bad-") && r == CUDA_SUCCESS) return "accepted";
  return "";
}

}  // namespace

int main(int argc, char** argv) { return vgpu::fuzz::RunRegression(argc, argv, CheckFile); }

#endif  // VGPU_LIBFUZZER
