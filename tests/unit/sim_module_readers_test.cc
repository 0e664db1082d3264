// Module image readers against images nvcc built from data/module_fixture.cu.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "sim/modules/cubin_reader.h"
#include "sim/modules/fatbin_reader.h"
#include "sim/modules/module_image.h"
#include "sim/modules/ptx_reader.h"

namespace vgpu::sim {
namespace {

constexpr ImageTarget kSm90{9, 0};

std::vector<uint8_t> ReadFixture(const std::string& name) {
  std::ifstream in(std::string(VGPU_FIXTURE_DIR) + "/" + name, std::ios::binary);
  EXPECT_TRUE(in) << name;
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

ModuleImage Parse(const std::vector<uint8_t>& bytes, ImageTarget target = kSm90) {
  ModuleImage image;
  std::string error;
  EXPECT_EQ(ParseModuleImage(bytes.data(), bytes.size(), target, &image, &error), CUDA_SUCCESS)
      << error;
  return image;
}

const KernelInfo* FindKernel(const ModuleImage& image, const std::string& name) {
  for (const KernelInfo& k : image.kernels) {
    if (k.name == name) return &k;
  }
  return nullptr;
}

const GlobalInfo* FindGlobal(const ModuleImage& image, const std::string& name) {
  for (const GlobalInfo& g : image.globals) {
    if (g.name == name) return &g;
  }
  return nullptr;
}

using Layout = std::vector<uint32_t>;

// The layout every form of the fixture must report (the CUDA parameter ABI).
void ExpectFixtureLayouts(const ModuleImage& image) {
  ASSERT_EQ(image.kernels.size(), 6u);
  const KernelInfo* grad = FindKernel(image, "grad");
  ASSERT_NE(grad, nullptr);
  EXPECT_EQ(grad->param_sizes, (Layout{8, 8, 4, 1}));
  EXPECT_EQ(grad->param_offsets, (Layout{0, 8, 16, 20}));
  EXPECT_EQ(grad->param_bytes, 21u);

  // struct Pair {int; double;} (16 bytes, 8-aligned), char, short, pointer.
  const KernelInfo* ws = FindKernel(image, "_Z11with_struct4PaircsPd");
  ASSERT_NE(ws, nullptr);
  EXPECT_EQ(ws->param_sizes, (Layout{16, 1, 2, 8}));
  EXPECT_EQ(ws->param_offsets, (Layout{0, 16, 18, 24}));
  EXPECT_EQ(ws->param_bytes, 32u);
  EXPECT_EQ(ws->static_shared_bytes, 256u);

  const KernelInfo* none = FindKernel(image, "noparams");
  ASSERT_NE(none, nullptr);
  EXPECT_TRUE(none->param_sizes.empty());
  EXPECT_EQ(none->param_bytes, 0u);

  const KernelInfo* big = FindKernel(image, "big_param");
  ASSERT_NE(big, nullptr);
  EXPECT_EQ(big->param_sizes, (Layout{20000, 8, 12}));
  EXPECT_EQ(big->param_offsets, (Layout{0, 20000, 20008}));
  EXPECT_EQ(big->param_bytes, 20020u);

  const KernelInfo* bounded = FindKernel(image, "bounded");
  ASSERT_NE(bounded, nullptr);
  EXPECT_EQ(bounded->launch_bound_threads, 256u);

  const KernelInfo* clustered = FindKernel(image, "clustered");
  ASSERT_NE(clustered, nullptr);
  EXPECT_EQ(clustered->required_cluster[0], 2u);
  EXPECT_EQ(clustered->required_cluster[1], 1u);
  EXPECT_EQ(clustered->required_cluster[2], 1u);
}

void ExpectFixtureGlobals(const ModuleImage& image) {
  const GlobalInfo* counter = FindGlobal(image, "g_counter");
  ASSERT_NE(counter, nullptr);
  EXPECT_EQ(counter->size, 4u);
  EXPECT_FALSE(counter->is_constant);
  for (uint8_t b : counter->init) EXPECT_EQ(b, 0);

  const GlobalInfo* table = FindGlobal(image, "g_table");
  ASSERT_NE(table, nullptr);
  ASSERT_EQ(table->size, 16u);
  ASSERT_EQ(table->init.size(), 16u);
  float values[4];
  memcpy(values, table->init.data(), sizeof values);
  EXPECT_EQ(values[0], 1.0f);
  EXPECT_EQ(values[3], 4.0f);

  const GlobalInfo* scale = FindGlobal(image, "c_scale");
  ASSERT_NE(scale, nullptr);
  EXPECT_TRUE(scale->is_constant);
  ASSERT_EQ(scale->init.size(), 4u);
  int32_t v;
  memcpy(&v, scale->init.data(), 4);
  EXPECT_EQ(v, 7);
}

TEST(CubinReader, KernelsAndParameterLayouts) {
  const ModuleImage image = Parse(ReadFixture("fixture_sm90.cubin"));
  EXPECT_EQ(image.format, ImageFormat::kCubin);
  EXPECT_EQ(image.arch, 90);
  ExpectFixtureLayouts(image);
}

TEST(CubinReader, ResourceUsage) {
  const ModuleImage image = Parse(ReadFixture("fixture_sm90.cubin"));
  for (const KernelInfo& k : image.kernels) EXPECT_GT(k.num_regs, 0) << k.name;
  EXPECT_EQ(FindKernel(image, "grad")->static_shared_bytes, 0u);
}

TEST(CubinReader, Globals) { ExpectFixtureGlobals(Parse(ReadFixture("fixture_sm90.cubin"))); }

TEST(CubinReader, ExtentFromHeaders) {
  const std::vector<uint8_t> bytes = ReadFixture("fixture_sm90.cubin");
  EXPECT_EQ(CubinExtent(bytes.data()), bytes.size());
  EXPECT_EQ(ImageExtent(bytes.data()), bytes.size());
}

TEST(CubinReader, ArchitectureMustMatchTheDevice) {
  const std::vector<uint8_t> sm80 = ReadFixture("fixture_sm80.cubin");
  ModuleImage image;
  std::string error;
  EXPECT_EQ(ParseModuleImage(sm80.data(), sm80.size(), kSm90, &image, &error),
            CUDA_ERROR_NO_BINARY_FOR_GPU);
  EXPECT_NE(error.find("sm_80"), std::string::npos) << error;
  // SASS runs on later minor versions of the same major.
  EXPECT_EQ(Parse(sm80, ImageTarget{8, 6}).arch, 80);
}

TEST(CubinReader, TruncatedImagesFailCleanly) {
  const std::vector<uint8_t> bytes = ReadFixture("fixture_sm90.cubin");
  for (size_t n = 0; n < bytes.size(); n += 61) {
    ModuleImage image;
    std::string error;
    // Every prefix either parses (the tail holds nothing needed) or is rejected.
    const CUresult r = ReadCubin(bytes.data(), n, &image, &error);
    if (r != CUDA_SUCCESS) {
      EXPECT_EQ(r, CUDA_ERROR_INVALID_IMAGE);
      EXPECT_FALSE(error.empty());
    }
  }
  ModuleImage image;
  std::string error;
  EXPECT_EQ(ReadCubin(bytes.data(), bytes.size() / 2, &image, &error), CUDA_ERROR_INVALID_IMAGE);
}

TEST(CubinReader, CorruptedBytesNeverCrash) {
  const std::vector<uint8_t> original = ReadFixture("fixture_sm90.cubin");
  std::mt19937 rng(1234);
  for (int round = 0; round < 300; ++round) {
    std::vector<uint8_t> bytes = original;
    for (int i = 0; i < 8; ++i) {
      bytes[64 + rng() % (bytes.size() - 64)] = static_cast<uint8_t>(rng());
    }
    ModuleImage image;
    std::string error;
    ReadCubin(bytes.data(), bytes.size(), &image, &error);  // any result but a crash
  }
}

TEST(ModuleImage, GarbageIsAnInvalidImage) {
  std::vector<uint8_t> garbage(4096);
  std::mt19937 rng(7);
  for (uint8_t& b : garbage) b = static_cast<uint8_t>(rng());
  garbage[0] = 0x13;  // not a magic number, not text
  ModuleImage image;
  std::string error;
  EXPECT_EQ(ParseModuleImage(garbage.data(), garbage.size(), kSm90, &image, &error),
            CUDA_ERROR_INVALID_IMAGE);
  EXPECT_EQ(ImageExtent(garbage.data()), 0u);
  EXPECT_EQ(ParseModuleImage(garbage.data(), 0, kSm90, &image, &error), CUDA_ERROR_INVALID_IMAGE);
}

TEST(ModuleImage, ElfMagicWithGarbageBody) {
  std::vector<uint8_t> bytes(256, 0xff);
  memcpy(bytes.data(),
         "\x7f"
         "ELF",
         4);
  ModuleImage image;
  std::string error;
  EXPECT_EQ(ParseModuleImage(bytes.data(), bytes.size(), kSm90, &image, &error),
            CUDA_ERROR_INVALID_IMAGE);
}

TEST(ModuleImage, BuiltinByName) {
  ModuleImage image;
  std::string error;
  ASSERT_EQ(ParseModuleImage(kBuiltinModuleName, sizeof kBuiltinModuleName, kSm90, &image, &error),
            CUDA_SUCCESS);
  EXPECT_EQ(image.format, ImageFormat::kBuiltin);
  const KernelInfo* fill = FindKernel(image, "vgpu_sim_fill_u32");
  ASSERT_NE(fill, nullptr);
  EXPECT_EQ(fill->param_offsets, (Layout{0, 8, 16}));
  const KernelInfo* saxpy = FindKernel(image, "vgpu_sim_saxpy");
  ASSERT_NE(saxpy, nullptr);
  EXPECT_EQ(saxpy->param_offsets, (Layout{0, 8, 16, 24}));
}

TEST(FatbinReader, UncompressedPicksTheCubin) {
  const std::vector<uint8_t> bytes = ReadFixture("fixture.fatbin");
  EXPECT_EQ(FatbinExtent(bytes.data()), bytes.size());
  std::vector<FatbinEntry> entries;
  std::string error;
  ASSERT_TRUE(ListFatbinEntries(bytes.data(), bytes.size(), &entries, &error)) << error;
  ASSERT_EQ(entries.size(), 2u);  // sm_90 SASS and compute_90 PTX
  const ModuleImage image = Parse(bytes);
  EXPECT_EQ(image.format, ImageFormat::kFatbin);
  EXPECT_EQ(image.arch, 90);
  ExpectFixtureLayouts(image);
  ExpectFixtureGlobals(image);
}

TEST(FatbinReader, Lz4Compressed) {
  const ModuleImage image = Parse(ReadFixture("fixture_lz4.fatbin"));
  ExpectFixtureLayouts(image);
  ExpectFixtureGlobals(image);
}

TEST(FatbinReader, ZstdCompressed) {
  const ModuleImage image = Parse(ReadFixture("fixture_zstd.fatbin"));
  ExpectFixtureLayouts(image);
  ExpectFixtureGlobals(image);
}

TEST(FatbinReader, FallsBackToPtxForANewerDevice) {
  // sm_90 SASS does not run on compute capability 10.0; compute_90 PTX does.
  const ModuleImage image = Parse(ReadFixture("fixture.fatbin"), ImageTarget{10, 0});
  EXPECT_EQ(image.arch, 90);
  ExpectFixtureLayouts(image);
}

TEST(FatbinReader, NothingForAnOlderDevice) {
  const std::vector<uint8_t> bytes = ReadFixture("fixture.fatbin");
  ModuleImage image;
  std::string error;
  EXPECT_EQ(ParseModuleImage(bytes.data(), bytes.size(), ImageTarget{8, 0}, &image, &error),
            CUDA_ERROR_NO_BINARY_FOR_GPU);
  EXPECT_NE(error.find("sm_90"), std::string::npos) << error;
}

TEST(FatbinReader, WrapperStruct) {
  const std::vector<uint8_t> bytes = ReadFixture("fixture.fatbin");
  struct {
    int32_t magic;
    int32_t version;
    const void* data;
    void* filename_or_fatbins;
  } wrapper = {static_cast<int32_t>(kFatbinWrapperMagic), 1, bytes.data(), nullptr};
  EXPECT_EQ(ImageExtent(&wrapper), sizeof wrapper);
  ModuleImage image;
  std::string error;
  ASSERT_EQ(ParseModuleImage(&wrapper, sizeof wrapper, kSm90, &image, &error), CUDA_SUCCESS)
      << error;
  ExpectFixtureLayouts(image);
}

TEST(FatbinReader, TruncatedOrCorruptFailsCleanly) {
  for (const char* name : {"fixture.fatbin", "fixture_lz4.fatbin", "fixture_zstd.fatbin"}) {
    const std::vector<uint8_t> bytes = ReadFixture(name);
    for (size_t n = 0; n < bytes.size(); n += 97) {
      ModuleImage image;
      std::string error;
      EXPECT_NE(ParseModuleImage(bytes.data(), n, kSm90, &image, &error), CUDA_SUCCESS) << name;
    }
    // Damage the payload of the first entry (header 16 + entry header 64).
    std::vector<uint8_t> corrupt = bytes;
    for (size_t i = 80 + 32; i < 80 + 96 && i < corrupt.size(); ++i) corrupt[i] ^= 0x5a;
    ModuleImage image;
    std::string error;
    ParseModuleImage(corrupt.data(), corrupt.size(), kSm90, &image, &error);  // no crash
  }
}

TEST(PtxReader, SameLayoutsAsTheCubin) {
  std::vector<uint8_t> ptx = ReadFixture("fixture.ptx");
  ptx.push_back(0);  // as cuModuleLoadData receives PTX: NUL-terminated text
  EXPECT_EQ(ImageExtent(ptx.data()), ptx.size());
  const ModuleImage image = Parse(ptx);
  EXPECT_EQ(image.format, ImageFormat::kPtx);
  EXPECT_EQ(image.arch, 90);
  ExpectFixtureLayouts(image);
  ExpectFixtureGlobals(image);
}

ModuleImage ParsePtxText(const std::string& text, CUresult expect, ImageTarget t = kSm90) {
  ModuleImage image;
  std::string error;
  EXPECT_EQ(ParseModuleImage(text.c_str(), text.size() + 1, t, &image, &error), expect) << error;
  return image;
}

TEST(PtxReader, HandWrittenDeclarations) {
  const ModuleImage image = ParsePtxText(R"(
    // comment
    .version 8.0
    .target sm_80, debug
    .address_size 64
    .extern .global .align 4 .u32 elsewhere;
    .visible .global .align 8 .f64 dbl = 0d3FF0000000000000;
    .global .align 4 .u32 arr[] = {1, -2, 0x10};
    .visible .func (.param .b32 r) helper(.param .b32 a) { ret; }
    .visible .entry k(
        .param .u64 .ptr .global .align 16 k_p0,   /* pointee alignment, not the param's */
        .param .align 16 .b8 k_p1[24],
        .param .f32 k_p2,
        .param .v2 .u32 k_p3
    )
    .reqntid 128, 2
    {
      .shared .align 8 .b8 s[100];
      .extern .shared .align 16 .b8 dyn[];
      .local .align 4 .b8 depot[40];
      ret;
    }
  )",
                                         CUDA_SUCCESS);
  EXPECT_EQ(image.arch, 80);
  ASSERT_EQ(image.kernels.size(), 1u);
  const KernelInfo& k = image.kernels[0];
  EXPECT_EQ(k.name, "k");
  EXPECT_EQ(k.param_sizes, (Layout{8, 24, 4, 8}));
  EXPECT_EQ(k.param_offsets, (Layout{0, 16, 40, 48}));
  EXPECT_EQ(k.launch_bound_threads, 256u);
  EXPECT_EQ(k.static_shared_bytes, 100u);
  EXPECT_EQ(k.local_bytes, 40u);
  ASSERT_EQ(image.globals.size(), 2u);  // the .extern one has no storage here
  EXPECT_EQ(FindGlobal(image, "dbl")->init.size(), 8u);
  const GlobalInfo* arr = FindGlobal(image, "arr");
  ASSERT_NE(arr, nullptr);
  ASSERT_EQ(arr->size, 12u);
  int32_t values[3];
  memcpy(values, arr->init.data(), sizeof values);
  EXPECT_EQ(values[0], 1);
  EXPECT_EQ(values[1], -2);
  EXPECT_EQ(values[2], 16);
}

TEST(PtxReader, Errors) {
  ParsePtxText(".version 9.9\n.target sm_90\n", CUDA_ERROR_UNSUPPORTED_PTX_VERSION);
  ParsePtxText("// no directives at all\n", CUDA_ERROR_INVALID_PTX);
  ParsePtxText(".version 9.0\n.target sm_90\n.entry k(.param .u64", CUDA_ERROR_INVALID_PTX);
  ParsePtxText(".version 9.0\n.target sm_100\n.entry k() { ret; }", CUDA_ERROR_INVALID_PTX);
}

TEST(PtxReader, TruncatedTextNeverCrashes) {
  const std::vector<uint8_t> ptx = ReadFixture("fixture.ptx");
  for (size_t n = 0; n < ptx.size(); n += 13) {
    ModuleImage image;
    std::string error;
    ReadPtx(reinterpret_cast<const char*>(ptx.data()), n, &image, &error);
  }
}

}  // namespace
}  // namespace vgpu::sim
