// Images written by earlier builds stay readable. tests/unit/data/ holds an
// image written before the hand-written XXH64 (the former checkpoint/xxhash64.cc) gave way
// to Debian's libxxhash: its digest and frame checksums are those of the old
// code, so this test fails if the hash the reader computes ever differs.
//
// The image was written by the disabled test below, run on the old code
// (one command line):
//   VGPU_LEGACY_IMAGE_OUT=tests/unit/data/checkpoint_xxh64_v1.img
//     build/tests/unit/checkpoint_legacy_image_test --gtest_also_run_disabled_tests
//     --gtest_filter='*WriteLegacyImage'
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/image_reader.h"
#include "checkpoint/image_writer.h"

namespace vgpu::checkpoint {
namespace {

using Bytes = std::vector<uint8_t>;

// A small, fixed payload: text, a zero page, incompressible bytes and float
// values, in records that span several 4 KiB frames.
struct LegacyRecord {
  uint64_t va;
  uint32_t flags;
  int device;
  Bytes data;
};

Bytes Payload(size_t n, int kind) {
  Bytes b(n);
  uint64_t x = 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(kind + 1);
  for (size_t i = 0; i < n; ++i) {
    switch (kind) {
      case 0:
        b[i] = static_cast<uint8_t>("vgpu checkpoint "[i % 16]);
        break;
      case 1:
        b[i] = 0;
        break;
      case 2:  // xorshift64: incompressible, the same on every platform
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        b[i] = static_cast<uint8_t>(x >> 56);
        break;
      default: {
        const float f = static_cast<float>(i / 4) * 0.25f;
        uint8_t bytes[4];
        std::memcpy(bytes, &f, 4);
        b[i] = bytes[i % 4];
      }
    }
  }
  return b;
}

std::vector<LegacyRecord> LegacyRecords() {
  return {{0x7f0000000000, 0, 0, Payload(5000, 0)},
          {0x7f0000010000, 1, 0, Payload(8192, 1)},
          {0x7f0000020000, 2, 1, Payload(1500, 2)},
          {0x7f0000030000, 3, 1, Payload(4100, 3)},
          {0x7f0000040000, 4, 0, Payload(0, 0)}};
}

constexpr char kDeviceMetadata[] = R"({"devices":[{"index":0},{"index":1}]})";

TEST(LegacyImage, DISABLED_WriteLegacyImage) {
  const char* out = std::getenv("VGPU_LEGACY_IMAGE_OUT");
  ASSERT_NE(out, nullptr) << "set VGPU_LEGACY_IMAGE_OUT";
  ImageMetadata m;
  m.pid = 4242;
  m.hostname = "legacy-host";
  m.writer_version = "vgpu legacy-xxh64";
  m.device_metadata = kDeviceMetadata;
  m.creation_time_ns = 1'764'000'000'000'000'000ull;
  WriterOptions o;
  o.frame_size = kMinFrameSize;
  o.threads = 1;
  o.sync = false;
  o.direct_io = false;
  std::unique_ptr<ImageWriter> w;
  ASSERT_TRUE(ImageWriter::Create(out, m, o, &w).ok());
  for (const LegacyRecord& r : LegacyRecords()) {
    ASSERT_TRUE(w->BeginRecord(r.va, r.data.size(), r.flags, r.device).ok());
    if (!r.data.empty()) {
      ASSERT_TRUE(w->Append(r.data.data(), r.data.size()).ok());
    }
    ASSERT_TRUE(w->EndRecord().ok());
  }
  ASSERT_TRUE(w->Finish().ok());
}

TEST(LegacyImage, AnImageWrittenWithTheHandWrittenXxh64Restores) {
  ReaderOptions o;
  std::unique_ptr<ImageReader> r;
  Status s = ImageReader::Open(VGPU_TEST_DATA_DIR "/checkpoint_xxh64_v1.img", o, &r);
  ASSERT_TRUE(s.ok()) << s.message << " (a digest mismatch means the hash changed)";
  EXPECT_EQ(r->info().header.pid, 4242u);
  EXPECT_EQ(r->info().header.hostname, "legacy-host");
  EXPECT_EQ(r->info().header.creation_time_ns, 1'764'000'000'000'000'000ull);
  EXPECT_EQ(r->info().header.device_metadata, kDeviceMetadata);
  EXPECT_GT(r->frames().size(), 5u) << "records span several frames";
  s = r->VerifyData();
  EXPECT_TRUE(s.ok()) << s.message << " (frame checksums)";
  const std::vector<LegacyRecord> want = LegacyRecords();
  ASSERT_EQ(r->records().size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const RecordEntry& e = r->records()[i];
    EXPECT_EQ(e.va, want[i].va);
    EXPECT_EQ(e.flags, want[i].flags);
    EXPECT_EQ(e.device, want[i].device);
    ASSERT_EQ(e.size, want[i].data.size());
    Bytes got(want[i].data.size());
    s = r->ReadRecord(i, got.data(), got.size());
    ASSERT_TRUE(s.ok()) << "record " << i << ": " << s.message;
    EXPECT_TRUE(got == want[i].data) << "record " << i;
  }
}

}  // namespace
}  // namespace vgpu::checkpoint
