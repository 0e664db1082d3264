// Tests of the frame-level checkpoint APIs a residency pipeline uses:
// ImageWriter::NextFrame/CommitFrame (zero-copy, up to two frames open, frame
// buffers from a caller's allocator) and FrameDecoder (one frame at a time,
// verified as it is read).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "checkpoint/image_reader.h"
#include "checkpoint/image_writer.h"

namespace vgpu::checkpoint {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

Bytes Random(size_t n, uint64_t seed) {
  Bytes b(n);
  std::mt19937_64 rng(seed);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(i % 7 == 0 ? rng() : i / 4096);
  return b;
}

class FrameApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/vgpu-frames-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  WriterOptions Options() {
    WriterOptions o;
    o.frame_size = kMinFrameSize;
    o.threads = 2;
    o.sync = false;
    o.frame_buffers.alloc = [this](size_t n) -> void* {
      void* p = std::malloc(n);
      live_[p] = n;
      ++allocs_;
      return p;
    };
    o.frame_buffers.free = [this](void* p, size_t n) {
      EXPECT_EQ(live_[p], n);
      live_.erase(p);
      std::free(p);
    };
    return o;
  }

  // Writes `data` as records of the given sizes through NextFrame, keeping
  // two frames open the way an asynchronous copy does.
  Status WriteFrames(const std::string& path, const std::vector<Bytes>& recs) {
    std::unique_ptr<ImageWriter> w;
    if (Status s = ImageWriter::Create(path, {}, Options(), &w); !s.ok()) return s;
    uint64_t va = 0x7f0000000000;
    int open = 0;
    for (const Bytes& r : recs) {
      if (Status s = w->BeginRecord(va, r.size(), 0, 0); !s.ok()) return s;
      va += r.size() + 4096;
      for (size_t o = 0; o < r.size();) {
        uint8_t* buf = nullptr;
        size_t n = 0;
        if (Status s = w->NextFrame(&buf, &n); !s.ok()) return s;
        std::memcpy(buf, r.data() + o, n);
        o += n;
        if (++open == ImageWriter::kMaxOpenFrames) {
          if (Status s = w->CommitFrame(); !s.ok()) return s;
          --open;
        }
      }
      if (Status s = w->EndRecord(); !s.ok()) return s;  // frames may still be open
    }
    for (; open > 0; --open)
      if (Status s = w->CommitFrame(); !s.ok()) return s;
    return w->Finish();
  }

  std::string dir_;
  std::map<void*, size_t> live_;
  int allocs_ = 0;
};

TEST_F(FrameApiTest, NextFrameRoundTripWithCallerBuffers) {
  const std::vector<Bytes> recs = {Random(3 * kMinFrameSize + 100, 1), Bytes(5000, 0), Random(1, 2),
                                   Random(2 * kMinFrameSize, 3)};
  const std::string path = dir_ + "/a.img";
  Status s = WriteFrames(path, recs);
  ASSERT_TRUE(s.ok()) << s.message;
  EXPECT_GE(allocs_, ImageWriter::kMaxOpenFrames + 1);
  EXPECT_TRUE(live_.empty()) << "frame buffers leaked";
  std::unique_ptr<ImageReader> r;
  ASSERT_TRUE(ImageReader::Open(path, {}, &r).ok());
  ASSERT_EQ(r->records().size(), recs.size());
  for (size_t i = 0; i < recs.size(); ++i) {
    Bytes got(recs[i].size());
    ASSERT_TRUE(r->ReadRecord(i, got.data(), got.size()).ok());
    EXPECT_TRUE(got == recs[i]) << "record " << i;
  }
}

TEST_F(FrameApiTest, NextFrameMisuseIsRefused) {
  std::unique_ptr<ImageWriter> w;
  ASSERT_TRUE(ImageWriter::Create(dir_ + "/b.img", {}, Options(), &w).ok());
  uint8_t* buf = nullptr;
  size_t n = 0;
  EXPECT_FALSE(w->NextFrame(&buf, &n).ok());  // no open record: the writer is now failed
  w.reset();
  EXPECT_TRUE(live_.empty());

  ASSERT_TRUE(ImageWriter::Create(dir_ + "/b.img", {}, Options(), &w).ok());
  ASSERT_TRUE(w->BeginRecord(0x1000, 4 * kMinFrameSize, 0, 0).ok());
  ASSERT_TRUE(w->NextFrame(&buf, &n).ok());
  EXPECT_EQ(n, kMinFrameSize);
  ASSERT_TRUE(w->NextFrame(&buf, &n).ok());
  Status s = w->NextFrame(&buf, &n);  // a third open frame
  EXPECT_NE(s.message.find("not committed"), std::string::npos) << s.message;
  EXPECT_FALSE(fs::exists(dir_ + "/b.img"));

  ASSERT_TRUE(ImageWriter::Create(dir_ + "/c.img", {}, Options(), &w).ok());
  ASSERT_TRUE(w->BeginRecord(0x1000, kMinFrameSize, 0, 0).ok());
  ASSERT_TRUE(w->NextFrame(&buf, &n).ok());
  EXPECT_FALSE(w->Append(buf, 1).ok());  // Append while a frame is open
  ASSERT_TRUE(ImageWriter::Create(dir_ + "/c.img", {}, Options(), &w).ok());
  ASSERT_TRUE(w->BeginRecord(0x1000, kMinFrameSize, 0, 0).ok());
  ASSERT_TRUE(w->NextFrame(&buf, &n).ok());
  ASSERT_TRUE(w->EndRecord().ok());
  EXPECT_FALSE(w->Finish().ok());  // the frame was never committed
  EXPECT_FALSE(fs::exists(dir_ + "/c.img"));
  w.reset();
  EXPECT_TRUE(live_.empty());
}

TEST_F(FrameApiTest, FrameDecoderVerifiesEachFrame) {
  const std::vector<Bytes> recs = {Random(2 * kMinFrameSize + 10, 4), Random(kMinFrameSize, 5)};
  const std::string path = dir_ + "/d.img";
  ASSERT_TRUE(WriteFrames(path, recs).ok());
  std::unique_ptr<ImageReader> r;
  ASSERT_TRUE(ImageReader::Open(path, {}, &r).ok());
  FrameDecoder dec(*r);
  Bytes buf(kMinFrameSize);
  size_t raw = 0;
  Bytes got;
  for (uint64_t k = 0; k < r->records()[0].frame_count; ++k) {
    Status s = dec.Decode(0, k, buf.data(), buf.size(), &raw);
    ASSERT_TRUE(s.ok()) << s.message;
    got.insert(got.end(), buf.begin(), buf.begin() + static_cast<long>(raw));
  }
  EXPECT_TRUE(got == recs[0]);
  EXPECT_FALSE(dec.Decode(0, 3, buf.data(), buf.size(), &raw).ok());  // no such frame
  EXPECT_FALSE(dec.Decode(2, 0, buf.data(), buf.size(), &raw).ok());  // no such record
  EXPECT_FALSE(dec.Decode(1, 0, buf.data(), 100, &raw).ok());         // too small

  // A damaged frame is named when it is decoded; the others still decode.
  const FrameEntry& f = r->frames()[r->records()[1].first_frame];
  ASSERT_GT(f.stored_size, 0u);
  {
    std::fstream io(path, std::ios::in | std::ios::out | std::ios::binary);
    const auto at = static_cast<std::streamoff>(f.offset + f.stored_size / 2);
    io.seekg(at);
    const char c = static_cast<char>(io.get());
    io.seekp(at);
    io.put(static_cast<char>(~c));
  }
  std::unique_ptr<ImageReader> bad;
  ASSERT_TRUE(ImageReader::Open(path, {}, &bad).ok());  // tables are intact
  FrameDecoder dec2(*bad);
  Status s = dec2.Decode(1, 0, buf.data(), buf.size(), &raw);
  EXPECT_NE(s.message.find("frame 0 of record 1 fails its checksum"), std::string::npos)
      << s.message;
  EXPECT_TRUE(dec2.Decode(0, 0, buf.data(), buf.size(), &raw).ok());
}

}  // namespace
}  // namespace vgpu::checkpoint
