// Built-in kernels (through the host kernel ABI), kernel libraries and the LZ4
// block decoder used for compressed fatbins.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "sim/modules/builtin_kernels.h"
#include "sim/modules/kernel_libraries.h"
#include "sim/modules/lz4_block.h"

namespace vgpu::sim {
namespace {

// Device memory for these tests is plain host memory: a device address is the
// host address, and the translation fails outside one registered buffer.
struct FakeDevice {
  std::vector<uint8_t> memory = std::vector<uint8_t>(4096);
  uint64_t base() const { return reinterpret_cast<uint64_t>(memory.data()); }
};

void* FakeTranslate(const vgpu_sim_launch* l, uint64_t p, uint64_t bytes) {
  const auto* dev = static_cast<const FakeDevice*>(l->sim_private);
  if (p < dev->base() || bytes > dev->memory.size() ||
      p - dev->base() > dev->memory.size() - bytes) {
    return nullptr;
  }
  return reinterpret_cast<void*>(p);
}

// Runs a built-in kernel with arguments packed at their natural alignment.
class BuiltinRunner {
 public:
  explicit BuiltinRunner(FakeDevice* dev) : dev_(dev) {}

  template <typename... Args>
  int Run(const char* name, Args... args) {
    vgpu_sim_kernel_fn fn = FindBuiltinKernel(name);
    EXPECT_NE(fn, nullptr) << name;
    if (fn == nullptr) return -1;
    storage_.clear();
    (Add(args), ...);
    std::vector<void*> ptrs;
    for (auto& s : storage_) ptrs.push_back(s.data());
    launch_ = vgpu_sim_launch{};
    launch_.abi_version = VGPU_SIM_KERNEL_ABI_VERSION;
    launch_.num_params = static_cast<uint32_t>(ptrs.size());
    launch_.params = ptrs.data();
    sizes_.clear();
    for (auto& s : storage_) sizes_.push_back(static_cast<uint32_t>(s.size()));
    launch_.param_sizes = sizes_.data();
    launch_.translate = FakeTranslate;
    launch_.sim_private = dev_;
    return fn(&launch_);
  }
  const vgpu_sim_launch& launch() const { return launch_; }

 private:
  template <typename T>
  void Add(T v) {
    std::vector<uint8_t> bytes(sizeof v);
    memcpy(bytes.data(), &v, sizeof v);
    storage_.push_back(bytes);
  }
  FakeDevice* dev_;
  std::vector<std::vector<uint8_t>> storage_;
  std::vector<uint32_t> sizes_;
  vgpu_sim_launch launch_{};
};

TEST(BuiltinKernels, FillAddChecksum) {
  FakeDevice dev;
  BuiltinRunner run(&dev);
  const uint64_t p = dev.base();
  const uint64_t out = dev.base() + 1024;
  ASSERT_EQ(run.Run("vgpu_sim_fill_u32", p, uint32_t{5}, uint64_t{100}), 0);
  EXPECT_EQ(run.launch().bytes_touched, 400u);
  EXPECT_EQ(run.launch().device_time_ns, 0u);
  ASSERT_EQ(run.Run("vgpu_sim_add_u32", p, uint32_t{2}, uint64_t{100}), 0);
  EXPECT_EQ(run.launch().bytes_touched, 800u);
  ASSERT_EQ(run.Run("vgpu_sim_checksum", p, uint64_t{100}, out), 0);
  std::vector<uint32_t> expect(100, 7);
  uint64_t sum;
  memcpy(&sum, dev.memory.data() + 1024, 8);
  EXPECT_EQ(sum, ChecksumU32Words(expect.data(), expect.size()));
  // Documented formula: FNV-1a over 32-bit words.
  uint64_t h = 0xcbf29ce484222325ull;
  for (uint32_t w : expect) h = (h ^ w) * 0x100000001b3ull;
  EXPECT_EQ(sum, h);
}

TEST(BuiltinKernels, CopyFillU8Saxpy) {
  FakeDevice dev;
  BuiltinRunner run(&dev);
  const uint64_t p = dev.base();
  ASSERT_EQ(run.Run("vgpu_sim_fill_u8", p, uint8_t{0xab}, uint64_t{16}), 0);
  ASSERT_EQ(run.Run("vgpu_sim_copy", p + 16, p, uint64_t{16}), 0);
  EXPECT_EQ(dev.memory[31], 0xab);
  EXPECT_EQ(run.launch().bytes_touched, 32u);

  float x[4] = {1, 2, 3, 4}, y[4] = {10, 20, 30, 40};
  memcpy(dev.memory.data() + 256, x, sizeof x);
  memcpy(dev.memory.data() + 512, y, sizeof y);
  ASSERT_EQ(run.Run("vgpu_sim_saxpy", 2.0f, p + 256, p + 512, uint64_t{4}), 0);
  memcpy(y, dev.memory.data() + 512, sizeof y);
  EXPECT_EQ(y[0], 12.0f);
  EXPECT_EQ(y[3], 48.0f);
}

TEST(BuiltinKernels, SleepSetsDeviceTimeOnly) {
  FakeDevice dev;
  BuiltinRunner run(&dev);
  ASSERT_EQ(run.Run("vgpu_sim_sleep", uint64_t{5'000'000}), 0);
  EXPECT_EQ(run.launch().device_time_ns, 5'000'000u);
  EXPECT_EQ(run.launch().bytes_touched, 0u);
}

TEST(BuiltinKernels, BadAddressesFault) {
  FakeDevice dev;
  BuiltinRunner run(&dev);
  EXPECT_NE(run.Run("vgpu_sim_fill_u32", uint64_t{16}, uint32_t{1}, uint64_t{4}), 0);
  EXPECT_NE(run.Run("vgpu_sim_fill_u32", dev.base() + 2, uint32_t{1}, uint64_t{4}),
            0);  // misaligned
  EXPECT_NE(run.Run("vgpu_sim_fill_u32", dev.base(), uint32_t{1}, uint64_t{1} << 62), 0);
  EXPECT_NE(run.Run("vgpu_sim_trap"), 0);
  EXPECT_EQ(run.Run("vgpu_sim_fill_u32", uint64_t{0}, uint32_t{1}, uint64_t{0}),
            0);  // nothing to do
}

TEST(BuiltinKernels, UnknownName) { EXPECT_EQ(FindBuiltinKernel("vgpu_sim_nope"), nullptr); }

TEST(KernelLibraries, FindsKernelsInTheirOwnHandle) {
  std::vector<std::string> errors;
  KernelLibraries libs({"/nonexistent/libnothing.so", VGPU_TEST_KERNEL_LIB}, &errors);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("/nonexistent/libnothing.so"), std::string::npos);
  EXPECT_EQ(libs.size(), 1u);
  EXPECT_NE(libs.Find("grad"), nullptr);
  vgpu_sim_kernel_fn fn = libs.Find("noparams");
  ASSERT_NE(fn, nullptr);
  vgpu_sim_launch l{};
  EXPECT_EQ(fn(&l), 0);
  EXPECT_EQ(l.device_time_ns, 42u);
  EXPECT_EQ(libs.Find("_Z11with_struct4PaircsPd"), nullptr);
  EXPECT_EQ(KernelSymbol("grad"), "vgpu_sim_kernel_grad");
}

TEST(Lz4Block, DecodesLiteralsAndOverlappingMatches) {
  // "abc", then a 9-byte match at offset 3, then the literal-only last sequence "x".
  const uint8_t block[] = {0x35, 'a', 'b', 'c', 3, 0, 0x10, 'x'};
  char out[13];
  ASSERT_TRUE(Lz4DecompressBlock(block, sizeof block, reinterpret_cast<uint8_t*>(out), sizeof out));
  EXPECT_EQ(std::string(out, sizeof out), "abcabcabcabcx");
}

TEST(Lz4Block, LongLengths) {
  // 15 + 5 = 20 literals, then a match of 4 + 15 + 1 = 20 bytes at offset 1.
  std::vector<uint8_t> block = {0xff, 5};
  for (int i = 0; i < 20; ++i) block.push_back('a' + i);
  block.insert(block.end(), {1, 0, 1});
  std::vector<uint8_t> out(40);
  ASSERT_TRUE(Lz4DecompressBlock(block.data(), block.size(), out.data(), out.size()));
  EXPECT_EQ(out[19], 't');
  EXPECT_EQ(out[39], 't');
}

TEST(Lz4Block, RejectsMalformedBlocks) {
  uint8_t out[16];
  const uint8_t zero_offset[] = {0x10, 'a', 0, 0};
  EXPECT_FALSE(Lz4DecompressBlock(zero_offset, sizeof zero_offset, out, sizeof out));
  const uint8_t far_offset[] = {0x10, 'a', 9, 0};
  EXPECT_FALSE(Lz4DecompressBlock(far_offset, sizeof far_offset, out, sizeof out));
  const uint8_t too_long[] = {0xf0, 200};
  EXPECT_FALSE(Lz4DecompressBlock(too_long, sizeof too_long, out, sizeof out));
  const uint8_t overflow[] = {0x1f, 'a', 1, 0, 100};  // match longer than the output
  EXPECT_FALSE(Lz4DecompressBlock(overflow, sizeof overflow, out, sizeof out));
  const uint8_t short_output[] = {0x20, 'a', 'b'};
  EXPECT_FALSE(Lz4DecompressBlock(short_output, sizeof short_output, out, sizeof out));
}

}  // namespace
}  // namespace vgpu::sim
