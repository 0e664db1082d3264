// Tests of the O_DIRECT read path of checkpoint images (checkpoint/direct_io.*
// and its use by ImageReader): unaligned ranges, a last frame that ends off a
// block boundary, truncation and corruption seen through direct reads, and
// the fallback to buffered reads when a file system refuses O_DIRECT.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/direct_io.h"
#include "checkpoint/image_reader.h"
#include "checkpoint/image_writer.h"

namespace vgpu::checkpoint {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

Bytes Random(size_t n, uint64_t seed) {
  Bytes b(n);
  std::mt19937_64 rng(seed);
  for (uint8_t& x : b) x = static_cast<uint8_t>(rng());
  return b;
}

// Compressible: zstd frames.
Bytes Text(size_t n) {
  Bytes b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>("direct io "[i % 10] + i / 5000);
  return b;
}

void WriteFile(const std::string& path, const Bytes& b) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

class DirectIoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // /tmp rather than /dev/shm: a disk file system is the usual home of an
    // image and the one O_DIRECT is for.
    char tmpl[] = "/tmp/vgpu-direct-io-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

  // Opens `path` buffered and, where the file system allows it, O_DIRECT.
  void OpenPair(const std::string& path, int* fd, int* direct) {
    *fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(*fd, 0);
    int err = 0;
    *direct = OpenDirectTwin(path, *fd, &err);
  }

  // Records of sizes that leave each record's last frame partial, so frames
  // (and the last one) start and end off block boundaries.
  std::vector<Bytes> WriteImage(const std::string& path) {
    std::vector<Bytes> recs = {Random(3 * kMinFrameSize + 123, 1), Text(2 * kMinFrameSize + 77),
                               Bytes(kMinFrameSize + 5, 0), Random(1001, 2)};
    WriterOptions o;
    o.frame_size = kMinFrameSize;
    o.threads = 2;
    o.sync = false;
    ImageMetadata m;  // fixed: the frames' offsets do not depend on the host
    m.hostname = "host";
    m.writer_version = "vgpu test";
    std::unique_ptr<ImageWriter> w;
    EXPECT_TRUE(ImageWriter::Create(path, m, o, &w).ok());
    uint64_t va = 0x7f0000000000;
    for (const Bytes& r : recs) {
      EXPECT_TRUE(w->BeginRecord(va, r.size(), 0, 0).ok());
      EXPECT_TRUE(w->Append(r.data(), r.size()).ok());
      EXPECT_TRUE(w->EndRecord().ok());
      va += r.size() + kMinFrameSize;
    }
    EXPECT_TRUE(w->Finish().ok());
    return recs;
  }

  std::string dir_;
};

// Unaligned ranges of a file whose size is not a block multiple, the last
// range ending exactly at the end of the file.
TEST_F(DirectIoTest, RangeReaderReadsUnalignedRanges) {
  const Bytes data = Random(5 * kDirectAlign + 321, 7);
  WriteFile(Path("f"), data);
  int fd = -1, direct = -1;
  OpenPair(Path("f"), &fd, &direct);
  if (direct < 0) GTEST_SKIP() << "no O_DIRECT on " << dir_;
  RangeReader rr(fd, direct, "f", nullptr);
  ASSERT_TRUE(rr.direct());
  AlignedBuffer buf;
  const std::pair<uint64_t, size_t> ranges[] = {{0, 1},
                                                {1, kDirectAlign},
                                                {kDirectAlign - 1, 2},
                                                {kDirectAlign, kDirectAlign},
                                                {100, 3 * kDirectAlign + 17},
                                                {data.size() - 1, 1},
                                                {data.size() - 5000, 5000},
                                                {0, data.size()}};
  for (const auto& [off, n] : ranges) {
    const uint8_t* out = nullptr;
    ASSERT_EQ(rr.Read(off, n, nullptr, &buf, &out), 0) << off << "+" << n;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(buf.data()) % kDirectAlign, 0u);
    EXPECT_EQ(static_cast<size_t>(out - buf.data()), off % kDirectAlign);
    EXPECT_EQ(std::memcmp(out, data.data() + off, n), 0) << off << "+" << n;
  }
  const uint8_t* out = nullptr;
  EXPECT_EQ(rr.Read(data.size() - 10, 11, nullptr, &buf, &out), -1);  // past the end
  EXPECT_EQ(rr.Read(data.size() + 4096, 1, nullptr, &buf, &out), -1);
  EXPECT_TRUE(rr.direct());
  ::close(fd);
}

ssize_t RefusingPread(int, void*, size_t, off_t) {
  errno = EINVAL;
  return -1;
}

// A file system that takes the O_DIRECT open but refuses the reads (EINVAL):
// one log line, then buffered reads, straight into the caller's buffer.
TEST_F(DirectIoTest, RangeReaderFallsBackWhenReadsAreRefused) {
  const Bytes data = Random(3 * kDirectAlign + 5, 8);
  WriteFile(Path("f"), data);
  const int fd = ::open(Path("f").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  const int second = ::open(Path("f").c_str(), O_RDONLY | O_CLOEXEC);
  std::vector<std::string> lines;
  RangeReader rr(fd, second, "img", [&](const std::string& l) { lines.push_back(l); },
                 RefusingPread);
  EXPECT_TRUE(rr.direct());
  AlignedBuffer buf;
  for (int i = 0; i < 3; ++i) {
    Bytes dst(100);
    const uint8_t* out = nullptr;
    ASSERT_EQ(rr.Read(4000 + i, dst.size(), dst.data(), &buf, &out), 0);
    EXPECT_EQ(out, dst.data());
    EXPECT_EQ(std::memcmp(dst.data(), data.data() + 4000 + i, dst.size()), 0);
    ASSERT_EQ(rr.Read(1, 10, nullptr, &buf, &out), 0);  // no destination: into buf
    EXPECT_EQ(std::memcmp(out, data.data() + 1, 10), 0);
  }
  EXPECT_FALSE(rr.direct());
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("checkpoint image img: direct reads refused"), std::string::npos)
      << lines[0];
  EXPECT_EQ(lines[0].find('\n'), std::string::npos);
  ::close(fd);
}

// The O_DIRECT descriptor must be the same file as the buffered one.
TEST_F(DirectIoTest, DirectTwinRefusesAnotherFile) {
  WriteFile(Path("a"), Random(100, 1));
  WriteFile(Path("b"), Random(100, 2));
  const int fd = ::open(Path("a").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(std::rename(Path("b").c_str(), Path("a").c_str()), 0);  // a new image lands
  int err = -1;
  EXPECT_EQ(OpenDirectTwin(Path("a"), fd, &err), -1);
  EXPECT_EQ(err, 0);
  ::close(fd);
}

// Direct and buffered reads of a whole image give the same bytes, through
// ReadRecords, VerifyData and FrameDecoder.
TEST_F(DirectIoTest, ImageReadsMatchBufferedReads) {
  const std::vector<Bytes> recs = WriteImage(Path("i.img"));
  for (bool direct : {false, true}) {  // buffered first: a skip of the direct pass skips nothing else
    SCOPED_TRACE(direct ? "direct" : "buffered");
    ReaderOptions ro;
    ro.direct_io = direct;
    std::unique_ptr<ImageReader> r;
    ASSERT_TRUE(ImageReader::Open(Path("i.img"), ro, &r).ok());
    if (!direct) {
      EXPECT_FALSE(r->direct_io());
    } else if (!r->direct_io()) {
      GTEST_SKIP() << "no O_DIRECT on " << dir_;
    }
    EXPECT_NE(r->frames().back().offset % kDirectAlign, 0u);  // an unaligned last frame
    EXPECT_NE((r->frames().back().offset + r->frames().back().stored_size) % kDirectAlign, 0u);
    EXPECT_TRUE(r->VerifyData().ok());
    std::vector<Bytes> got(recs.size());
    std::vector<ReadTarget> targets;
    for (size_t i = 0; i < recs.size(); ++i) {
      got[i].assign(recs[i].size(), 0xee);
      targets.push_back({i, got[i].data(), got[i].size()});
    }
    ASSERT_TRUE(r->ReadRecords(targets).ok());
    for (size_t i = 0; i < recs.size(); ++i) EXPECT_EQ(got[i], recs[i]) << "record " << i;
    FrameDecoder dec(*r);
    Bytes frame(kMinFrameSize);
    size_t raw = 0;
    ASSERT_TRUE(dec.Decode(3, 0, frame.data(), frame.size(), &raw).ok());
    ASSERT_EQ(raw, recs[3].size());
    EXPECT_EQ(std::memcmp(frame.data(), recs[3].data(), raw), 0);
  }
}

// DecodeView: a stored frame read directly is checked in the caller's adopted
// read buffer and handed out from there (no copy to dst); compressed and zero
// frames are decoded into dst. Either way the bytes are the record's.
TEST_F(DirectIoTest, DecodeViewPointsIntoTheAdoptedReadBuffer) {
  const std::vector<Bytes> recs = WriteImage(Path("i.img"));
  std::unique_ptr<ImageReader> r;
  ASSERT_TRUE(ImageReader::Open(Path("i.img"), {}, &r).ok());
  FrameDecoder dec(*r);
  AlignedBuffer adopted;
  ASSERT_TRUE(adopted.Reserve(dec.ReadBufferBytes()));
  dec.AdoptReadBuffer(adopted.data(), adopted.capacity());
  Bytes dst(kMinFrameSize, 0xee);
  for (size_t rec = 0; rec < recs.size(); ++rec) {
    const RecordEntry& re = r->records()[rec];
    for (uint64_t k = 0; k < re.frame_count; ++k) {
      SCOPED_TRACE("record " + std::to_string(rec) + " frame " + std::to_string(k));
      const void* data = nullptr;
      size_t raw = 0;
      ASSERT_TRUE(dec.DecodeView(rec, k, dst.data(), dst.size(), &data, &raw).ok());
      ASSERT_EQ(std::memcmp(data, recs[rec].data() + k * kMinFrameSize, raw), 0);
      const auto codec = static_cast<Codec>(r->frames()[re.first_frame + k].codec);
      const auto* p = static_cast<const uint8_t*>(data);
      const bool in_adopted = p >= adopted.data() && p + raw <= adopted.data() + adopted.capacity();
      if (codec != Codec::kRaw) {
        EXPECT_EQ(data, dst.data());
      } else if (r->direct_io()) {
        EXPECT_TRUE(in_adopted) << "a direct read of a stored frame is not copied";
      } else {
        EXPECT_EQ(data, dst.data()) << "a buffered read goes straight into dst";
      }
    }
  }
}

// Damage seen through direct reads is refused with the usual messages.
TEST_F(DirectIoTest, DirectReadsRefuseCorruptAndTruncatedFrames) {
  WriteImage(Path("i.img"));
  std::unique_ptr<ImageReader> r;
  ASSERT_TRUE(ImageReader::Open(Path("i.img"), {}, &r).ok());
  if (!r->direct_io()) GTEST_SKIP() << "no O_DIRECT on " << dir_;
  const FrameEntry f = r->frames()[1];  // raw (random data)
  ASSERT_EQ(f.codec, static_cast<uint32_t>(Codec::kRaw));
  {
    std::fstream io(Path("i.img"), std::ios::binary | std::ios::in | std::ios::out);
    const auto at = static_cast<std::streamoff>(f.offset + f.stored_size - 1);
    io.seekg(at);
    const int c = io.get();
    io.seekp(at);
    io.put(static_cast<char>(c ^ 0xff));
  }
  Bytes dst(r->records()[0].size);
  Status s = r->ReadRecord(0, dst.data(), dst.size());
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message.find("frame 1 of record 0 fails its checksum (corrupt)"), std::string::npos)
      << s.message;
  EXPECT_FALSE(r->VerifyData().ok());
  // Cut inside the last frame after Open: the read sees the end of the file.
  const FrameEntry last = r->frames().back();
  ASSERT_EQ(::truncate(Path("i.img").c_str(), static_cast<off_t>(last.offset + 10)), 0);
  Bytes tail(r->records()[3].size);
  s = r->ReadRecord(3, tail.data(), tail.size());
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message.find("file ends inside the frame data (truncated)"), std::string::npos)
      << s.message;
}

Bytes ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), {});
}

// Appends of many sizes, across chunk boundaries, ending off a block
// boundary: the file holds exactly the bytes, no padding.
TEST_F(DirectIoTest, AppenderWritesExactBytes) {
  const Bytes data = Random(3 * 65536 + 4096 * 3 + 777, 9);
  for (bool direct : {false, true}) {  // buffered first: a skip of the direct pass skips nothing else
    SCOPED_TRACE(direct ? "direct" : "buffered");
    const std::string path = Path(direct ? "d" : "b");
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    ASSERT_GE(fd, 0);
    if (direct && EnableDirect(fd) != 0) {
      ::close(fd);
      GTEST_SKIP() << "no O_DIRECT on " << dir_;
    }
    AlignedAppender out(fd, direct, 65536, path, nullptr);
    size_t off = 0;
    for (size_t step = 1; off < data.size(); step = step * 3 + 1) {
      const size_t n = std::min(step % 70000, data.size() - off);
      ASSERT_EQ(out.Append(data.data() + off, n), 0);
      off += n;
    }
    EXPECT_EQ(out.size(), data.size());
    EXPECT_EQ(out.written() % 65536, 0u);  // whole chunks so far
    ASSERT_EQ(out.Flush(), 0);
    EXPECT_EQ(out.written(), data.size());
    EXPECT_EQ(out.direct(), direct);
    ::close(fd);
    EXPECT_EQ(ReadAll(path), data);
  }
}

int g_pwrite_calls = 0;
ssize_t RefuseFirstPwrite(int fd, const void* buf, size_t n, off_t offset) {
  if (g_pwrite_calls++ == 0) {
    errno = EINVAL;
    return -1;
  }
  return ::pwrite(fd, buf, n, offset);
}

// A file system that refuses direct writes: one log line, then buffered
// writes of the same bytes, O_DIRECT cleared on the descriptor.
TEST_F(DirectIoTest, AppenderFallsBackWhenWritesAreRefused) {
  const Bytes data = Random(5 * 4096 + 99, 10);
  const int fd = ::open(Path("f").c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  EnableDirect(fd);  // where it is supported; the fake refuses either way
  std::vector<std::string> lines;
  g_pwrite_calls = 0;
  AlignedAppender out(fd, true, 8192, "img", [&](const std::string& l) { lines.push_back(l); },
                      RefuseFirstPwrite);
  ASSERT_EQ(out.Append(data.data(), data.size()), 0);
  ASSERT_EQ(out.Flush(), 0);
  EXPECT_FALSE(out.direct());
  EXPECT_EQ(::fcntl(fd, F_GETFL) & O_DIRECT, 0);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("checkpoint image img: direct writes refused"), std::string::npos)
      << lines[0];
  ::close(fd);
  EXPECT_EQ(ReadAll(Path("f")), data);
}

// Direct and buffered writers produce the same image, byte for byte, and
// the direct one reads back; the size is exact (the last block is not padded).
TEST_F(DirectIoTest, DirectAndBufferedWritersProduceTheSameImage) {
  const Bytes big = Random((9 << 20) + 4321, 11);  // crosses the writer's 8 MiB chunks
  const Bytes text = Text((1 << 20) + 3);
  {  // otherwise the writer silently writes buffered and both images are alike
    const int probe = ::open(Path("probe").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    ASSERT_GE(probe, 0);
    const bool direct_ok = EnableDirect(probe) == 0;
    ::close(probe);
    if (!direct_ok) GTEST_SKIP() << "no O_DIRECT on " << dir_;
  }
  for (bool direct : {true, false}) {
    WriterOptions o;
    o.frame_size = 1 << 20;
    o.threads = 2;
    o.direct_io = direct;
    ImageMetadata m;
    m.pid = 42;
    m.hostname = "host";
    m.creation_time_ns = 1;
    std::unique_ptr<ImageWriter> w;
    ASSERT_TRUE(ImageWriter::Create(Path(direct ? "d.img" : "b.img"), m, o, &w).ok());
    ASSERT_TRUE(w->BeginRecord(0x1000000, big.size(), 0, 0).ok());
    ASSERT_TRUE(w->Append(big.data(), big.size()).ok());
    ASSERT_TRUE(w->EndRecord().ok());
    ASSERT_TRUE(w->BeginRecord(0x9000000, text.size(), 0, 0).ok());
    ASSERT_TRUE(w->Append(text.data(), text.size()).ok());
    ASSERT_TRUE(w->EndRecord().ok());
    ASSERT_TRUE(w->Finish().ok());
  }
  const Bytes d = ReadAll(Path("d.img")), b = ReadAll(Path("b.img"));
  EXPECT_EQ(d.size(), b.size());
  EXPECT_TRUE(d == b);
  EXPECT_NE(d.size() % kDirectAlign, 0u);
  std::unique_ptr<ImageReader> r;
  ASSERT_TRUE(ImageReader::Open(Path("d.img"), {}, &r).ok());
  EXPECT_TRUE(r->VerifyData().ok());
  Bytes got(big.size());
  ASSERT_TRUE(r->ReadRecord(0, got.data(), got.size()).ok());
  EXPECT_TRUE(got == big);
}

}  // namespace
}  // namespace vgpu::checkpoint
