// Tests of the checkpoint image format library (checkpoint/).
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zstd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/image_reader.h"
#include "checkpoint/image_writer.h"
#include "checkpoint/xxh64.h"

namespace vgpu::checkpoint {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

// Test data of the kinds device memory holds.
enum class Pattern { kZero, kText, kRandom, kFloat };

Bytes MakeData(size_t n, Pattern p, uint64_t seed) {
  Bytes b(n);
  std::mt19937_64 rng(seed);
  for (size_t i = 0; i < n; ++i) {
    switch (p) {
      case Pattern::kZero:
        b[i] = 0;
        break;
      case Pattern::kText:
        b[i] = static_cast<uint8_t>("checkpoint data "[i % 16] + seed);
        break;
      case Pattern::kRandom:
        b[i] = static_cast<uint8_t>(rng());
        break;
      case Pattern::kFloat: {  // slowly varying float32 values: partly compressible
        const float f = static_cast<float>(i / 4) * 0.001f + static_cast<float>(seed);
        uint8_t bytes[4];
        std::memcpy(bytes, &f, 4);
        b[i] = bytes[i % 4];
        break;
      }
    }
  }
  return b;
}

struct Rec {
  uint64_t va;
  uint32_t flags;
  int device;
  Bytes data;
};

Bytes ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), {});
}

void WriteFile(const std::string& path, const Bytes& b) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

class CheckpointImageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/vgpu-ckpt-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

  std::vector<std::string> TempFiles() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_))
      if (e.path().filename().string().find(".tmp.") != std::string::npos)
        out.push_back(e.path().string());
    return out;
  }

  static WriterOptions SmallFrames() {
    WriterOptions o;
    o.frame_size = kMinFrameSize;
    o.threads = 2;
    o.sync = false;
    return o;
  }

  // Writes recs with `chunk`-byte Append calls (0: one call per record).
  static Status Write(const std::string& path, const std::vector<Rec>& recs, const WriterOptions& o,
                      size_t chunk = 0, const std::string& meta = "{}") {
    ImageMetadata m;
    m.device_metadata = meta;
    std::unique_ptr<ImageWriter> w;
    if (Status s = ImageWriter::Create(path, m, o, &w); !s.ok()) return s;
    for (const Rec& r : recs) {
      if (Status s = w->BeginRecord(r.va, r.data.size(), r.flags, r.device); !s.ok()) return s;
      const size_t step = chunk ? chunk : std::max<size_t>(r.data.size(), 1);
      for (size_t off = 0; off < r.data.size(); off += step) {
        const size_t n = std::min(step, r.data.size() - off);
        if (Status s = w->Append(r.data.data() + off, n); !s.ok()) return s;
      }
      if (Status s = w->EndRecord(); !s.ok()) return s;
    }
    return w->Finish();
  }

  static std::vector<Rec> MixedRecords() {
    std::vector<Rec> recs;
    const size_t sizes[] = {5000, 0, 1, 8192, 700, 3 * 4096 + 5, 4096};
    uint64_t va = 0x7f0000000000;
    int i = 0;
    for (size_t size : sizes) {
      recs.push_back({va, static_cast<uint32_t>(i), i % 2,
                      MakeData(size, static_cast<Pattern>(i % 4), static_cast<uint64_t>(i))});
      va += size + 4096;
      ++i;
    }
    return recs;
  }

  static void ExpectContents(const ImageReader& r, const std::vector<Rec>& recs) {
    ASSERT_EQ(r.records().size(), recs.size());
    for (size_t i = 0; i < recs.size(); ++i) {
      const RecordEntry& e = r.records()[i];
      EXPECT_EQ(e.va, recs[i].va);
      EXPECT_EQ(e.size, recs[i].data.size());
      EXPECT_EQ(e.flags, recs[i].flags);
      EXPECT_EQ(e.device, recs[i].device);
      Bytes got(recs[i].data.size());
      Status s = r.ReadRecord(i, got.data(), got.size());
      ASSERT_TRUE(s.ok()) << s.message;
      EXPECT_TRUE(got == recs[i].data) << "record " << i;
    }
  }

  std::string dir_;
};

// --- XXH64 ---------------------------------------------------------------
// libxxhash's XXH64 is the format's hash (checkpoint_legacy_image_test reads
// an image hashed by the earlier hand-written one).

TEST(Xxh64Test, KnownVectors) {
  EXPECT_EQ(XXH64("", 0, 0), 0xEF46DB3751D8E999ull);
  EXPECT_EQ(XXH64("a", 1, 0), 0xD24EC4F1A98C6E5Bull);
  EXPECT_EQ(XXH64("abc", 3, 0), 0x44BC2CF5AD770999ull);
}

// zstd stores the low 32 bits of XXH64(content) at the end of a frame with
// checksums on: an independent reference for every length class.
TEST(Xxh64Test, MatchesZstdContentChecksum) {
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
  for (size_t n : {0, 1, 3, 4, 7, 8, 15, 31, 32, 33, 63, 64, 100, 1000, 4096, 100003}) {
    const Bytes data = MakeData(n, Pattern::kRandom, n);
    Bytes out(ZSTD_compressBound(n));
    const size_t r = ZSTD_compress2(cctx, out.data(), out.size(), data.data(), n);
    ASSERT_FALSE(ZSTD_isError(r));
    uint32_t stored;
    std::memcpy(&stored, out.data() + r - 4, 4);
    EXPECT_EQ(static_cast<uint32_t>(XXH64(data.data(), n, 0)), stored) << "n=" << n;
  }
  ZSTD_freeCCtx(cctx);
}

// --- Round trips -----------------------------------------------------------

TEST_F(CheckpointImageTest, RoundTripMixedRecordsAndMetadata) {
  const std::vector<Rec> recs = MixedRecords();
  const std::string meta = R"({"devices":[{"index":0,"uuid":"GPU-1"}]})";
  ASSERT_TRUE(Write(Path("a.img"), recs, SmallFrames(), 0, meta).ok());
  EXPECT_TRUE(TempFiles().empty());
  std::unique_ptr<ImageReader> r;
  Status s = ImageReader::Open(Path("a.img"), {}, &r);
  ASSERT_TRUE(s.ok()) << s.message;
  const Header& h = r->info().header;
  EXPECT_EQ(h.version, kFormatVersion);
  EXPECT_EQ(h.pid, static_cast<uint32_t>(getpid()));
  EXPECT_EQ(h.device_metadata, meta);
  EXPECT_FALSE(h.hostname.empty());
  EXPECT_EQ(h.writer_version.rfind("vgpu ", 0), 0u);
  EXPECT_GT(h.creation_time_ns, 0u);
  ExpectContents(*r, recs);
  s = r->VerifyData();
  EXPECT_TRUE(s.ok()) << s.message;
  // All three codecs occur in this data set.
  bool seen[3] = {};
  for (const FrameEntry& f : r->frames()) seen[f.codec] = true;
  EXPECT_TRUE(seen[0] && seen[1] && seen[2]);
}

TEST_F(CheckpointImageTest, RoundTripOddChunkingAndThreadCounts) {
  const std::vector<Rec> recs = MixedRecords();
  for (size_t chunk : {1, 7, 4095, 4097, 100000}) {
    for (int threads : {1, 3}) {
      WriterOptions o = SmallFrames();
      o.threads = threads;
      o.frames_in_flight = 2;
      ASSERT_TRUE(Write(Path("c.img"), recs, o, chunk).ok());
      std::unique_ptr<ImageReader> r;
      ReaderOptions ro;
      ro.threads = threads;
      ASSERT_TRUE(ImageReader::Open(Path("c.img"), ro, &r).ok());
      ExpectContents(*r, recs);
    }
  }
}

TEST_F(CheckpointImageTest, ManyRecordsAndLargeRecordsInOnePass) {
  std::vector<Rec> recs;
  std::mt19937_64 rng(7);
  uint64_t va = 1ull << 40;
  for (int i = 0; i < 300; ++i) {
    const size_t size = rng() % 20000;
    recs.push_back({va, 0, 0, MakeData(size, static_cast<Pattern>(i % 4), i)});
    va += size;  // adjacent ranges are not overlaps
  }
  recs.push_back({va, 0, 1, MakeData((3 << 20) + 123, Pattern::kFloat, 1)});  // many frames
  WriterOptions o = SmallFrames();
  o.frame_size = 64 << 10;
  ASSERT_TRUE(Write(Path("m.img"), recs, o, 50000).ok());
  std::unique_ptr<ImageReader> r;
  ASSERT_TRUE(ImageReader::Open(Path("m.img"), {}, &r).ok());
  std::vector<Bytes> out(recs.size());
  std::vector<ReadTarget> targets;
  for (size_t i = 0; i < recs.size(); ++i) {
    out[i].resize(recs[i].data.size());
    targets.push_back({i, out[i].data(), out[i].size()});
  }
  Status s = r->ReadRecords(targets);
  ASSERT_TRUE(s.ok()) << s.message;
  for (size_t i = 0; i < recs.size(); ++i) EXPECT_TRUE(out[i] == recs[i].data) << i;
  EXPECT_EQ(r->records().back().frame_count, 49u);
}

// Frames whose samples barely shrink are stored raw without compressing the
// whole frame; min_saving_pct 100 forces that path, 0 disables it.
TEST_F(CheckpointImageTest, SampledIncompressibleFramesAreStoredRaw) {
  const std::vector<Rec> recs = {{0, 0, 0, MakeData((1 << 20) + 3, Pattern::kText, 1)}};
  for (int pct : {0, 10, 100}) {
    WriterOptions o = SmallFrames();
    o.frame_size = 1 << 20;
    o.min_saving_pct = pct;
    ASSERT_TRUE(Write(Path("s.img"), recs, o).ok());
    std::unique_ptr<ImageReader> r;
    ASSERT_TRUE(ImageReader::Open(Path("s.img"), {}, &r).ok());
    ExpectContents(*r, recs);
    const uint32_t want = static_cast<uint32_t>(pct == 100 ? Codec::kRaw : Codec::kZstd);
    EXPECT_EQ(r->frames()[0].codec, want) << pct;
    EXPECT_EQ(r->frames()[1].codec, static_cast<uint32_t>(Codec::kRaw)) << "3 bytes do not shrink";
  }
}

TEST_F(CheckpointImageTest, EmptyImageAndMemoryOpen) {
  ASSERT_TRUE(Write(Path("e.img"), {}, SmallFrames()).ok());
  const Bytes bytes = ReadFile(Path("e.img"));
  std::unique_ptr<ImageReader> r;
  Status s = ImageReader::OpenMemory(bytes.data(), bytes.size(), {}, &r);
  ASSERT_TRUE(s.ok()) << s.message;
  EXPECT_TRUE(r->records().empty());
  EXPECT_TRUE(r->VerifyData().ok());
}

TEST_F(CheckpointImageTest, ProgressReachesTotalMonotonically) {
  const std::vector<Rec> recs = MixedRecords();
  uint64_t total = 0;
  for (const Rec& rec : recs) total += rec.data.size();
  uint64_t last = 0, calls = 0;
  bool monotone = true;
  WriterOptions o = SmallFrames();
  o.total_bytes = total;
  o.progress = [&](uint64_t done, uint64_t t) {
    monotone &= done >= last && t == total;
    last = done;
    ++calls;
  };
  ASSERT_TRUE(Write(Path("p.img"), recs, o).ok());
  EXPECT_TRUE(monotone);
  EXPECT_EQ(last, total);
  EXPECT_GT(calls, 3u);
  last = 0;
  ReaderOptions ro;
  ro.progress = o.progress;
  std::unique_ptr<ImageReader> r;
  ASSERT_TRUE(ImageReader::Open(Path("p.img"), ro, &r).ok());
  ASSERT_TRUE(r->VerifyData().ok());
  EXPECT_TRUE(monotone);
  EXPECT_EQ(last, total);
}

// --- Writer misuse: refused, nothing left behind ---------------------------

TEST_F(CheckpointImageTest, WriterRefusesMisuseAndCleansUp) {
  const Bytes d(100, 1);
  auto expect_refused = [&](auto&& steps, const char* needle) {
    std::unique_ptr<ImageWriter> w;
    ASSERT_TRUE(ImageWriter::Create(Path("w.img"), {}, SmallFrames(), &w).ok());
    Status s = steps(*w);
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message.find(needle), std::string::npos) << s.message;
    EXPECT_FALSE(w->Finish().ok());  // sticky
    EXPECT_TRUE(TempFiles().empty());
    EXPECT_FALSE(fs::exists(Path("w.img")));
  };
  expect_refused([&](ImageWriter& w) { return w.Append(d.data(), 1); }, "without an open");
  expect_refused([&](ImageWriter& w) { return w.EndRecord(); }, "without an open");
  expect_refused([&](ImageWriter& w) { return w.BeginRecord(0, 1, 0, -1); }, "negative");
  expect_refused([&](ImageWriter& w) { return w.BeginRecord(~0ull - 5, 10, 0, 0); }, "wraps");
  expect_refused(
      [&](ImageWriter& w) {
        Status s = w.BeginRecord(0, 10, 0, 0);
        return s.ok() ? w.Append(d.data(), 11) : s;
      },
      "past its size");
  expect_refused(
      [&](ImageWriter& w) {
        Status s = w.BeginRecord(0, 10, 0, 0);
        if (s.ok()) s = w.Append(d.data(), 9);
        return s.ok() ? w.EndRecord() : s;
      },
      "ended after 9 of 10");
  expect_refused(
      [&](ImageWriter& w) {
        Status s = w.BeginRecord(1000, 100, 0, 0);
        if (s.ok()) s = w.Append(d.data(), 100);
        if (s.ok()) s = w.EndRecord();
        return s.ok() ? w.BeginRecord(1099, 10, 0, 0) : s;
      },
      "overlaps");
  expect_refused(
      [&](ImageWriter& w) {
        Status s = w.BeginRecord(0, 10, 0, 0);
        return s.ok() ? w.Finish() : s;
      },
      "record is open");
  WriterOptions bad = SmallFrames();
  bad.frame_size = 5000;
  std::unique_ptr<ImageWriter> w;
  EXPECT_FALSE(ImageWriter::Create(Path("w.img"), {}, bad, &w).ok());
  EXPECT_EQ(w, nullptr);
  EXPECT_FALSE(ImageWriter::Create(Path("nodir/w.img"), {}, SmallFrames(), &w).ok());
  EXPECT_FALSE(ImageWriter::Create(dir_, {}, SmallFrames(), &w).ok());  // a directory
  EXPECT_FALSE(ImageWriter::Create("/dev/full", {}, SmallFrames(), &w).ok());
  EXPECT_TRUE(TempFiles().empty());
}

// --- Damaged and foreign images --------------------------------------------

// Open then VerifyData; "" when both succeed, else the message.
std::string OpenAndVerify(const Bytes& b) {
  std::unique_ptr<ImageReader> r;
  ReaderOptions o;
  o.threads = 1;
  Status s = ImageReader::OpenMemory(b.data(), b.size(), o, &r, "mem");
  if (s.ok()) s = r->VerifyData();
  return s.ok() ? "" : s.message;
}

class CorruptionTest : public CheckpointImageTest {
 protected:
  void SetUp() override {
    CheckpointImageTest::SetUp();
    ASSERT_TRUE(Write(Path("good.img"), MixedRecords(), SmallFrames()).ok());
    good_ = ReadFile(Path("good.img"));
    std::unique_ptr<ImageReader> r;
    ASSERT_TRUE(ImageReader::OpenMemory(good_.data(), good_.size(), {}, &r).ok());
    // Region boundaries: header end, every frame start, tables, trailer.
    bounds_ = {0, kHeaderFixedBytes, r->info().header.header_bytes};
    for (const FrameEntry& f : r->frames()) bounds_.push_back(f.offset);
    const uint64_t tables = r->info().header.header_bytes + r->info().stored_bytes;
    bounds_.push_back(tables);
    bounds_.push_back(tables + r->records().size() * kRecordBytes);
    bounds_.push_back(good_.size() - kTrailerBytes);
    bounds_.push_back(good_.size() - 8);
    bounds_.push_back(good_.size() - 1);
  }
  Bytes good_;
  std::vector<uint64_t> bounds_;
};

TEST_F(CorruptionTest, TruncationAtEveryBoundaryAndRandomOffsetsIsRefused) {
  std::vector<uint64_t> cuts = bounds_;
  std::mt19937_64 rng(3);
  for (int i = 0; i < 200; ++i) cuts.push_back(rng() % good_.size());
  for (uint64_t cut : cuts) {
    for (uint64_t at : {cut, cut + 1, cut > 0 ? cut - 1 : 0}) {
      if (at >= good_.size()) continue;
      const Bytes b(good_.begin(), good_.begin() + static_cast<long>(at));
      std::unique_ptr<ImageReader> r;
      Status s = ImageReader::OpenMemory(b.data(), b.size(), {}, &r, "mem");
      EXPECT_FALSE(s.ok()) << "truncated at " << at;
      EXPECT_EQ(s.message.find('\n'), std::string::npos);
    }
  }
  // The same through a real file, at the region boundaries.
  for (uint64_t at : bounds_) {
    WriteFile(Path("t.img"), Bytes(good_.begin(), good_.begin() + static_cast<long>(at)));
    std::unique_ptr<ImageReader> r;
    Status s = ImageReader::Open(Path("t.img"), {}, &r);
    EXPECT_FALSE(s.ok()) << at;
    EXPECT_EQ(s.message.rfind("checkpoint image " + Path("t.img") + ": ", 0), 0u) << s.message;
  }
}

// Every byte of the image is covered by some check: the header, tables and
// trailer by the digest and structural checks in Open, frame bytes by their
// checksums. So flipping any single byte must be detected.
TEST_F(CorruptionTest, EveryFlippedByteIsDetected) {
  for (size_t i = 0; i < good_.size(); ++i) {
    for (uint8_t mask : {0x01, 0x80}) {
      Bytes b = good_;
      b[i] ^= mask;
      EXPECT_NE(OpenAndVerify(b), "") << "flip at " << i;
    }
  }
}

TEST_F(CorruptionTest, FlippedFrameByteIsNamedAtReadTime) {
  std::unique_ptr<ImageReader> r;
  ASSERT_TRUE(ImageReader::OpenMemory(good_.data(), good_.size(), {}, &r).ok());
  const RecordEntry& rec = r->records()[3];  // 8192 bytes of float-like data
  const FrameEntry& f = r->frames()[rec.first_frame];
  ASSERT_GT(f.stored_size, 0u);
  Bytes b = good_;
  b[f.offset + f.stored_size / 2] ^= 0x10;
  std::unique_ptr<ImageReader> bad;
  ASSERT_TRUE(ImageReader::OpenMemory(b.data(), b.size(), {}, &bad, "/x/y").ok());
  Bytes out(rec.size);
  Status s = bad->ReadRecord(3, out.data(), out.size());
  EXPECT_EQ(s.message, "checkpoint image /x/y: frame 0 of record 3 fails its checksum (corrupt)");
  EXPECT_FALSE(bad->VerifyData().ok());
  EXPECT_TRUE(bad->ReadRecord(0, out.data(), 0).message.find("holds 5000 bytes") !=
              std::string::npos);
  EXPECT_FALSE(bad->ReadRecord(99, out.data(), 0).ok());
}

TEST_F(CorruptionTest, ForeignAndNewerImagesAreNamedClearly) {
  auto message = [](const Bytes& b) {
    std::unique_ptr<ImageReader> r;
    return ImageReader::OpenMemory(b.data(), b.size(), {}, &r, "m").message;
  };
  Bytes b = good_;
  b[0] = 'X';
  EXPECT_NE(message(b).find("not a vgpu checkpoint image (bad magic"), std::string::npos);
  b = good_;
  b[8] = 2;  // format version 2
  EXPECT_NE(message(b).find("format version 2 is newer"), std::string::npos) << message(b);
  b = good_;
  b[16] = 4;  // an unknown header flag
  EXPECT_NE(message(b).find("unsupported header flags 0x4"), std::string::npos) << message(b);
  b = good_;
  b.push_back(0);  // appended garbage
  EXPECT_NE(message(b).find("no end marker"), std::string::npos) << message(b);
  EXPECT_NE(message({}).find("is empty"), std::string::npos);
  EXPECT_NE(message(Bytes(good_.begin(), good_.begin() + 20)).find("truncated"), std::string::npos);
  const Bytes elf = ReadFile("/proc/self/exe");
  EXPECT_NE(message(elf).find("looks like an ELF file"), std::string::npos) << message(elf);
  std::unique_ptr<ImageReader> r;
  EXPECT_NE(ImageReader::Open(dir_, {}, &r).message.find("is a directory"), std::string::npos);
  EXPECT_NE(ImageReader::Open(Path("missing"), {}, &r).message.find("cannot open"),
            std::string::npos);
  WriteFile(Path("empty"), {});
  EXPECT_NE(ImageReader::Open(Path("empty"), {}, &r).message.find("is empty"), std::string::npos);
  EXPECT_NE(ImageReader::Open("/dev/null", {}, &r).message.find("not a regular file"),
            std::string::npos);
  // The codes say what kind of failure it is (they travel on the control socket).
  EXPECT_EQ(ImageReader::Open(Path("missing"), {}, &r).code, ErrorCode::kNoEnt);
  EXPECT_EQ(ImageReader::Open(dir_, {}, &r).code, ErrorCode::kInval);
  EXPECT_EQ(ImageReader::Open(Path("empty"), {}, &r).code, ErrorCode::kInval);
  EXPECT_EQ(ImageReader::OpenMemory(elf.data(), elf.size(), {}, &r, "elf").code, ErrorCode::kInval);
}

TEST_F(CorruptionTest, FileTruncatedAfterOpenFailsCleanly) {
  std::unique_ptr<ImageReader> r;
  ASSERT_TRUE(ImageReader::Open(Path("good.img"), {}, &r).ok());
  ASSERT_EQ(truncate(Path("good.img").c_str(), static_cast<off_t>(kHeaderFixedBytes)), 0);
  Bytes out(r->records()[5].size);  // text: a zstd frame
  Status s = r->ReadRecord(5, out.data(), out.size());
  EXPECT_NE(s.message.find("truncated"), std::string::npos) << s.message;
}

// --- Interrupted and failing writers ---------------------------------------

class AtomicWriteTest : public CheckpointImageTest {
 protected:
  void SetUp() override {
    CheckpointImageTest::SetUp();
    ASSERT_TRUE(Write(Path("job.img"), MixedRecords(), SmallFrames()).ok());
    before_ = ReadFile(Path("job.img"));
  }
  void ExpectPreviousImageIntact() {
    EXPECT_TRUE(ReadFile(Path("job.img")) == before_);
    std::unique_ptr<ImageReader> r;
    ASSERT_TRUE(ImageReader::Open(Path("job.img"), {}, &r).ok());
    ExpectContents(*r, MixedRecords());
  }
  // A big image of random data, so that the writer is mid-way for a while.
  static std::vector<Rec> Big() { return {{0, 0, 0, MakeData(8 << 20, Pattern::kRandom, 9)}}; }
  Bytes before_;
};

TEST_F(AtomicWriteTest, WriterDestroyedBeforeFinishLeavesPreviousImage) {
  const Bytes d = MakeData(1 << 20, Pattern::kText, 1);
  {
    std::unique_ptr<ImageWriter> w;
    ASSERT_TRUE(ImageWriter::Create(Path("job.img"), {}, SmallFrames(), &w).ok());
    ASSERT_TRUE(w->BeginRecord(0, d.size() * 2, 0, 0).ok());
    ASSERT_TRUE(w->Append(d.data(), d.size()).ok());
    EXPECT_TRUE(fs::exists(w->temp_path()));
  }
  EXPECT_TRUE(TempFiles().empty());
  ExpectPreviousImageIntact();
}

// replace = false: an image that appears at the path while the writer runs
// (another job's) is never overwritten; a free path is written as usual.
TEST_F(AtomicWriteTest, NoReplaceWriterLeavesAnExistingImage) {
  WriterOptions o = SmallFrames();
  o.replace = false;
  Status s = Write(Path("job.img"), Big(), o);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message.find("refusing to replace"), std::string::npos) << s.message;
  EXPECT_EQ(s.code, ErrorCode::kExist);
  EXPECT_TRUE(TempFiles().empty());
  ExpectPreviousImageIntact();
  ASSERT_TRUE(Write(Path("other.img"), MixedRecords(), o).ok());
  std::unique_ptr<ImageReader> r;
  ASSERT_TRUE(ImageReader::Open(Path("other.img"), {}, &r).ok());
  ExpectContents(*r, MixedRecords());
}

// A write error mid-way (EFBIG from RLIMIT_FSIZE, as a full disk would give
// ENOSPC) is reported, the temp file is removed and the old image stays.
TEST_F(AtomicWriteTest, WriteErrorLeavesPreviousImage) {
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    signal(SIGXFSZ, SIG_IGN);
    const rlimit lim{1 << 20, 1 << 20};
    setrlimit(RLIMIT_FSIZE, &lim);
    WriterOptions o = SmallFrames();
    o.frame_size = 64 << 10;
    Status s = Write(Path("job.img"), Big(), o);
    const bool ok = !s.ok() && s.message.find("File too large") != std::string::npos &&
                    s.message.find('\n') == std::string::npos;
    if (!ok) std::fprintf(stderr, "unexpected: %s\n", s.message.c_str());
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_TRUE(TempFiles().empty());
  ExpectPreviousImageIntact();
}

// A writer killed outright leaves its temp file; readers never see it, and the
// next writer for the same path removes it.
TEST_F(AtomicWriteTest, KilledWriterLeavesPreviousImageAndStaleTempIsRemoved) {
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::unique_ptr<ImageWriter> w;
    const Bytes d = MakeData(1 << 20, Pattern::kRandom, 2);
    if (!ImageWriter::Create(Path("job.img"), {}, SmallFrames(), &w).ok()) _exit(1);
    if (!w->BeginRecord(0, 4 << 20, 0, 0).ok() || !w->Append(d.data(), d.size()).ok()) _exit(1);
    kill(getpid(), SIGKILL);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status));
  ASSERT_EQ(TempFiles().size(), 1u);
  ExpectPreviousImageIntact();
  ASSERT_TRUE(Write(Path("job.img"), Big(), SmallFrames()).ok());
  EXPECT_TRUE(TempFiles().empty());
  std::unique_ptr<ImageReader> r;
  ASSERT_TRUE(ImageReader::Open(Path("job.img"), {}, &r).ok());
  ExpectContents(*r, Big());
}

// A live writer's temp file is not touched by another writer.
TEST_F(AtomicWriteTest, LiveWritersTempFileIsLeftAlone) {
  std::unique_ptr<ImageWriter> a;
  ASSERT_TRUE(ImageWriter::Create(Path("job.img"), {}, SmallFrames(), &a).ok());
  ASSERT_TRUE(Write(Path("job.img"), MixedRecords(), SmallFrames()).ok());
  EXPECT_TRUE(fs::exists(a->temp_path()));
  EXPECT_TRUE(a->Finish().ok());  // last rename wins; both are complete images
  std::unique_ptr<ImageReader> r;
  ASSERT_TRUE(ImageReader::Open(Path("job.img"), {}, &r).ok());
  EXPECT_TRUE(r->records().empty());
}

// --- Concurrency -----------------------------------------------------------

TEST_F(CheckpointImageTest, ConcurrentReaders) {
  const std::vector<Rec> recs = MixedRecords();
  ASSERT_TRUE(Write(Path("c.img"), recs, SmallFrames()).ok());
  std::unique_ptr<ImageReader> shared;
  ASSERT_TRUE(ImageReader::Open(Path("c.img"), {}, &shared).ok());
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::unique_ptr<ImageReader> own;
      if (t % 2 && !ImageReader::Open(Path("c.img"), {}, &own).ok()) ++failures;
      const ImageReader& r = t % 2 ? *own : *shared;
      for (int round = 0; round < 20; ++round) {
        for (size_t i = 0; i < recs.size(); ++i) {
          Bytes out(recs[i].data.size());
          if (!r.ReadRecord(i, out.data(), out.size()).ok() || out != recs[i].data) ++failures;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
}

}  // namespace
}  // namespace vgpu::checkpoint
