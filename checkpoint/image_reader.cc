#include "checkpoint/image_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>

#include "checkpoint/file_util.h"
#include "checkpoint/xxh64.h"

namespace vgpu::checkpoint {
namespace {

// Random access to the image bytes: a file (pread, so concurrent reads need no
// lock) or a caller's buffer.
class Source {
 public:
  virtual ~Source() = default;
  // 0, an errno value, or -1 when [offset, offset + n) is past the end.
  virtual int ReadAt(uint64_t offset, void* dst, size_t n) const = 0;
  // Frame bytes [offset, offset + n): points *out at them, at `dst` when the
  // source read them there, else into *buf or the source's own memory.
  // Same return values as ReadAt.
  virtual int Fetch(uint64_t offset, size_t n, uint8_t* dst, AlignedBuffer* buf,
                    const uint8_t** out) const = 0;
  virtual bool direct() const { return false; }
  uint64_t size = 0;
};

// Header and tables through the page cache (small, read once at Open); frame
// data through `frames`, with O_DIRECT when it has it.
class FileSource : public Source {
 public:
  explicit FileSource(int fd) : fd_(fd) {}
  ~FileSource() override {
    frames_.reset();
    ::close(fd_);
  }
  void SetFrameReader(int direct_fd, const std::string& name, LogFn log) {
    frames_ = std::make_unique<RangeReader>(fd_, direct_fd, name, std::move(log));
  }
  int ReadAt(uint64_t offset, void* dst, size_t n) const override {
    return PreadAll(fd_, dst, n, offset);
  }
  int Fetch(uint64_t offset, size_t n, uint8_t* dst, AlignedBuffer* buf,
            const uint8_t** out) const override {
    if (frames_) return frames_->Read(offset, n, dst, buf, out);
    if (dst == nullptr) {
      if (!buf->Reserve(n)) return ENOMEM;
      dst = buf->data();
    }
    *out = dst;
    return PreadAll(fd_, dst, n, offset);
  }
  bool direct() const override { return frames_ && frames_->direct(); }

 private:
  int fd_;
  std::unique_ptr<RangeReader> frames_;
};

class MemorySource : public Source {
 public:
  MemorySource(const void* data, size_t n) : data_(static_cast<const uint8_t*>(data)) { size = n; }
  int ReadAt(uint64_t offset, void* dst, size_t n) const override {
    if (offset > size || n > size - offset) return -1;
    if (n) std::memcpy(dst, data_ + offset, n);
    return 0;
  }
  // No copy: the bytes are already in memory.
  int Fetch(uint64_t offset, size_t n, uint8_t*, AlignedBuffer*,
            const uint8_t** out) const override {
    if (offset > size || n > size - offset) return -1;
    *out = data_ + offset;
    return 0;
  }

 private:
  const uint8_t* data_;
};

std::string Num(uint64_t v) { return std::to_string(v); }

// Fuzzing builds (the OSS-Fuzz convention) let mismatching digests and
// checksums through, so that the fuzzer reaches the table validation and the
// decompressor instead of stopping at a hash it cannot forge.
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
constexpr bool kEnforceHashes = false;
#else
constexpr bool kEnforceHashes = true;
#endif

// One unit of parallel work: frame `k` of record `record` (image frame
// `frame`), decoded into dst (nullptr: verify only).
struct Item {
  uint64_t frame;
  uint64_t record;
  uint64_t k;
  uint8_t* dst;
};

}  // namespace

struct ImageReader::Impl {
  std::string name;
  ReaderOptions opt;
  std::unique_ptr<Source> src;
  ImageInfo info;
  std::vector<RecordEntry> records;
  std::vector<FrameEntry> frames;

  // The image is not what it should be (foreign, corrupt, truncated).
  Status Error(const std::string& what) const {
    return Status::Error(ErrorCode::kInval, "checkpoint image " + name + ": " + what);
  }
  std::string Read(uint64_t offset, void* dst, size_t n, const char* what) const;
  std::string FetchFrame(const FrameEntry& f, uint8_t* dst, AlignedBuffer* buf,
                         const uint8_t** stored) const;
  Status Load();
  std::string LoadHeader(std::vector<uint8_t>* header_bytes);
  std::string LoadTables(const std::vector<uint8_t>& header_bytes);
  // view: nullptr, or where a raw frame's checked bytes are pointed at
  // instead of being copied to item.dst.
  std::string DecodeItem(const Item& item, ZSTD_DCtx* dctx, AlignedBuffer* in,
                         std::vector<uint8_t>* scratch, const uint8_t** view = nullptr) const;
  Status Run(const std::vector<Item>& items, uint64_t total) const;
};

std::string ImageReader::Impl::Read(uint64_t offset, void* dst, size_t n, const char* what) const {
  const int rc = src->ReadAt(offset, dst, n);
  if (rc == 0) return "";
  if (rc < 0) return std::string("file ends inside the ") + what + " (truncated)";
  return std::string("cannot read the ") + what + ": " + ErrnoText(rc);
}

std::string ImageReader::Impl::FetchFrame(const FrameEntry& f, uint8_t* dst, AlignedBuffer* buf,
                                          const uint8_t** stored) const {
  const int rc = src->Fetch(f.offset, f.stored_size, dst, buf, stored);
  if (rc == 0) return "";
  if (rc < 0) return "file ends inside the frame data (truncated)";
  return "cannot read the frame data: " + ErrnoText(rc);
}

std::string ImageReader::Impl::LoadHeader(std::vector<uint8_t>* bytes) {
  const uint64_t size = src->size;
  if (size == 0) return "is empty (0 bytes)";
  bytes->resize(static_cast<size_t>(std::min<uint64_t>(size, kHeaderFixedBytes)));
  if (std::string e = Read(0, bytes->data(), bytes->size(), "header"); !e.empty()) return e;
  const size_t m = std::min<size_t>(bytes->size(), sizeof kMagic);
  if (std::memcmp(bytes->data(), kMagic, m) != 0) {
    const std::string what = DescribeForeign(*bytes);
    return "not a vgpu checkpoint image (bad magic" + (what.empty() ? "" : "; " + what) + ")";
  }
  if (size < kHeaderFixedBytes + kTrailerBytes)
    return "truncated: " + Num(size) + " bytes, smaller than any image (" +
           Num(kHeaderFixedBytes + kTrailerBytes) + ")";
  uint32_t lengths[3];
  if (std::string e = DecodeHeaderFixed(*bytes, &info.header, lengths); !e.empty()) return e;
  if (info.header.header_bytes > size - kTrailerBytes)
    return "truncated: header of " + Num(info.header.header_bytes) + " bytes in a " + Num(size) +
           "-byte file";
  bytes->resize(info.header.header_bytes);
  if (std::string e = Read(0, bytes->data(), bytes->size(), "header"); !e.empty()) return e;
  return DecodeHeaderStrings(*bytes, lengths, &info.header);
}

std::string ImageReader::Impl::LoadTables(const std::vector<uint8_t>& header_bytes) {
  const uint64_t size = src->size;
  uint8_t trailer_bytes[kTrailerBytes];
  Trailer t;
  if (std::string e = Read(size - kTrailerBytes, trailer_bytes, kTrailerBytes, "trailer");
      !e.empty())
    return e;
  if (std::string e = DecodeTrailer(trailer_bytes, &t); !e.empty()) return e;
  if (std::string e = ValidateLayout(info.header, t, size); !e.empty()) return e;
  // Bounded by the file size (ValidateLayout), so a lying trailer cannot make
  // this allocation larger than the input.
  std::vector<uint8_t> tables(size - kTrailerBytes - t.record_table_offset);
  if (std::string e = Read(t.record_table_offset, tables.data(), tables.size(), "tables");
      !e.empty())
    return e;
  if (ComputeDigest(header_bytes, tables, std::span(trailer_bytes, kTrailerDigestOffset)) !=
          t.digest &&
      kEnforceHashes)
    return "digest mismatch: header, tables or trailer are corrupt";
  records.resize(t.record_count);
  frames.resize(t.frame_count);
  for (uint64_t i = 0; i < t.record_count; ++i)
    records[i] = DecodeRecord(tables.data() + i * kRecordBytes);
  const uint8_t* ft = tables.data() + t.record_count * kRecordBytes;
  for (uint64_t i = 0; i < t.frame_count; ++i) frames[i] = DecodeFrame(ft + i * kFrameEntryBytes);
  if (std::string e = ValidateTables(info.header, t, records, frames); !e.empty())
    return "inconsistent tables: " + e;
  info.file_bytes = size;
  info.data_bytes = t.data_bytes;
  info.stored_bytes = t.record_table_offset - info.header.header_bytes;
  return "";
}

Status ImageReader::Impl::Load() {
  if (opt.threads <= 0)
    opt.threads = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 4u));
  opt.threads = std::min(opt.threads, 256);
  std::vector<uint8_t> header_bytes;
  if (std::string e = LoadHeader(&header_bytes); !e.empty()) return Error(e);
  if (std::string e = LoadTables(header_bytes); !e.empty()) return Error(e);
  return Status::Ok();
}

std::string ImageReader::Impl::DecodeItem(const Item& it, ZSTD_DCtx* dctx, AlignedBuffer* in,
                                          std::vector<uint8_t>* scratch,
                                          const uint8_t** view) const {
  const FrameEntry& f = frames[it.frame];
  const auto codec = static_cast<Codec>(f.codec);
  const std::string where = "frame " + Num(it.k) + " of record " + Num(it.record);
  const uint8_t* stored = nullptr;
  if (codec == Codec::kZero) {
    if (it.dst) std::memset(it.dst, 0, f.raw_size);
  } else {
    // A buffered read of a raw frame goes straight into the destination; a
    // direct read lands in the aligned buffer and is copied out once checked.
    uint8_t* dst = codec == Codec::kRaw ? it.dst : nullptr;
    if (std::string e = FetchFrame(f, dst, in, &stored); !e.empty()) return where + ": " + e;
  }
  if (XXH64(stored, f.stored_size, 0) != f.checksum && kEnforceHashes)
    return where + " fails its checksum (corrupt)";
  if (view != nullptr) *view = codec == Codec::kRaw ? stored : it.dst;
  if (codec == Codec::kRaw && it.dst && stored != it.dst && view == nullptr)
    std::memcpy(it.dst, stored, f.stored_size);  // stored_size == raw_size (ValidateTables)
  if (codec != Codec::kZstd) return "";
  uint8_t* out = it.dst;
  if (out == nullptr) {
    if (scratch->size() < f.raw_size) scratch->resize(f.raw_size);
    out = scratch->data();
  }
  if (dctx == nullptr) return where + ": cannot create a zstd decompression context";
  const size_t r = ZSTD_decompressDCtx(dctx, out, f.raw_size, stored, f.stored_size);
  if (ZSTD_isError(r))
    return where + " does not decompress: " + ZSTD_getErrorName(r) + " (corrupt)";
  if (r != f.raw_size)
    return where + " decompresses to " + Num(r) + " bytes, expected " + Num(f.raw_size) +
           " (corrupt)";
  return "";
}

Status ImageReader::Impl::Run(const std::vector<Item>& items, uint64_t total) const {
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::atomic<uint64_t> done{0};
  std::mutex mu;
  std::string first_error;
  auto work = [&] {
    try {
      ZSTD_DCtx* dctx = ZSTD_createDCtx();
      AlignedBuffer in;
      std::vector<uint8_t> scratch;
      for (size_t i; !failed && (i = next++) < items.size();) {
        std::string e = DecodeItem(items[i], dctx, &in, &scratch);
        std::lock_guard lock(mu);
        if (!e.empty()) {
          if (first_error.empty()) first_error = e;
          failed = true;
          break;
        }
        const uint64_t now = done += frames[items[i].frame].raw_size;
        if (opt.progress) opt.progress(now, total);
      }
      ZSTD_freeDCtx(dctx);
    } catch (const std::exception& ex) {
      std::lock_guard lock(mu);
      if (first_error.empty()) first_error = std::string("internal error: ") + ex.what();
      failed = true;
    }
  };
  std::vector<std::thread> threads;
  const size_t want = std::min<size_t>(static_cast<size_t>(opt.threads), items.size());
  try {
    for (size_t t = 1; t < want; ++t) threads.emplace_back(work);
  } catch (const std::exception&) {
    // Fewer threads than asked for: the ones running (and this one) finish the job.
  }
  work();
  for (std::thread& t : threads) t.join();
  return first_error.empty() ? Status::Ok() : Error(first_error);
}

namespace {

// The O_DIRECT descriptor for the frame data, or -1 (buffered reads).
int OpenFrameFd(const std::string& path, int fd, const ReaderOptions& options) {
  if (!options.direct_io) return -1;
  int err = 0;
  const int direct = OpenDirectTwin(path, fd, &err);
  if (direct < 0 && err != 0 && options.log)
    options.log("checkpoint image " + path + ": cannot open with O_DIRECT (" + ErrnoText(err) +
                "), reading through the page cache");
  return direct;
}

}  // namespace

ImageReader::ImageReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ImageReader::~ImageReader() = default;

Status ImageReader::Open(const std::string& path, const ReaderOptions& options,
                         std::unique_ptr<ImageReader>* out) {
  out->reset();
  const std::string prefix = "checkpoint image " + path + ": ";
  try {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      const ErrorCode code = errno == ENOENT ? ErrorCode::kNoEnt : ErrorCode::kIo;
      return Status::Error(code, prefix + "cannot open: " + ErrnoText(errno));
    }
    auto src = std::make_unique<FileSource>(fd);
    struct stat st;
    if (::fstat(fd, &st) != 0) return Status::Error(ErrorCode::kIo, prefix + "cannot stat: " + ErrnoText(errno));
    if (S_ISDIR(st.st_mode)) return Status::Error(ErrorCode::kInval, prefix + "is a directory, not an image");
    if (!S_ISREG(st.st_mode)) return Status::Error(ErrorCode::kInval, prefix + "is not a regular file");
    src->size = static_cast<uint64_t>(st.st_size);
    src->SetFrameReader(OpenFrameFd(path, fd, options), path, options.log);
    auto impl = std::make_unique<Impl>();
    impl->name = path;
    impl->opt = options;
    impl->src = std::move(src);
    if (Status s = impl->Load(); !s.ok()) return s;
    out->reset(new ImageReader(std::move(impl)));
    return Status::Ok();
  } catch (const std::exception& e) {
    return Status::Error(ErrorCode::kIo, prefix + "internal error: " + e.what());
  }
}

Status ImageReader::OpenMemory(const void* data, size_t size, const ReaderOptions& options,
                               std::unique_ptr<ImageReader>* out, const std::string& name) {
  out->reset();
  try {
    auto impl = std::make_unique<Impl>();
    impl->name = name;
    impl->opt = options;
    impl->src = std::make_unique<MemorySource>(data, size);
    if (Status s = impl->Load(); !s.ok()) return s;
    out->reset(new ImageReader(std::move(impl)));
    return Status::Ok();
  } catch (const std::exception& e) {
    return Status::Error(ErrorCode::kIo, "checkpoint image " + name + ": internal error: " + e.what());
  }
}

const ImageInfo& ImageReader::info() const { return impl_->info; }
std::span<const RecordEntry> ImageReader::records() const { return impl_->records; }
std::span<const FrameEntry> ImageReader::frames() const { return impl_->frames; }
bool ImageReader::direct_io() const { return impl_->src->direct(); }

Status ImageReader::ReadRecord(size_t i, void* dst, size_t n) const {
  const ReadTarget t{i, dst, n};
  return ReadRecords(std::span(&t, 1));
}

Status ImageReader::ReadRecords(std::span<const ReadTarget> targets) const {
  const Impl& m = *impl_;
  try {
    std::vector<Item> items;
    uint64_t total = 0;
    for (const ReadTarget& t : targets) {
      if (t.record >= m.records.size())
        return m.Error("no record " + Num(t.record) + " (the image has " + Num(m.records.size()) +
                       ")");
      const RecordEntry& r = m.records[t.record];
      if (t.size != r.size)
        return m.Error("record " + Num(t.record) + " holds " + Num(r.size) +
                       " bytes, destination has " + Num(t.size));
      if (t.dst == nullptr && r.size != 0)
        return m.Error("record " + Num(t.record) + ": null destination");
      auto* dst = static_cast<uint8_t*>(t.dst);
      for (uint64_t k = 0; k < r.frame_count; ++k)
        items.push_back({r.first_frame + k, t.record, k, dst + k * m.info.header.frame_size});
      total += r.size;
    }
    return m.Run(items, total);
  } catch (const std::exception& e) {
    return m.Error(std::string("internal error: ") + e.what());
  }
}

Status ImageReader::VerifyData() const {
  const Impl& m = *impl_;
  try {
    std::vector<Item> items;
    items.reserve(m.frames.size());
    for (size_t i = 0; i < m.records.size(); ++i)
      for (uint64_t k = 0; k < m.records[i].frame_count; ++k)
        items.push_back({m.records[i].first_frame + k, i, k, nullptr});
    return m.Run(items, m.info.data_bytes);
  } catch (const std::exception& e) {
    return m.Error(std::string("internal error: ") + e.what());
  }
}

FrameDecoder::FrameDecoder(const ImageReader& reader)
    : reader_(reader), dctx_(ZSTD_createDCtx()) {}

FrameDecoder::~FrameDecoder() { ZSTD_freeDCtx(static_cast<ZSTD_DCtx*>(dctx_)); }

Status FrameDecoder::Decode(size_t record, uint64_t k, void* dst, size_t capacity,
                            size_t* raw_size) {
  return DecodeImpl(record, k, dst, capacity, nullptr, raw_size);
}

Status FrameDecoder::DecodeView(size_t record, uint64_t k, void* dst, size_t capacity,
                                const void** data, size_t* raw_size) {
  *data = nullptr;
  const uint8_t* view = nullptr;
  Status s = DecodeImpl(record, k, dst, capacity, &view, raw_size);
  if (s.ok()) *data = view;
  return s;
}

size_t FrameDecoder::ReadBufferBytes() const {
  // A direct read covers the frame's aligned range: up to one block more at
  // each end.
  return reader_.impl_->info.header.frame_size + 2 * kDirectAlign;
}

Status FrameDecoder::DecodeImpl(size_t record, uint64_t k, void* dst, size_t capacity,
                                const uint8_t** view, size_t* raw_size) {
  const ImageReader::Impl& m = *reader_.impl_;
  *raw_size = 0;
  try {
    if (record >= m.records.size()) return m.Error("no record " + Num(record));
    const RecordEntry& r = m.records[record];
    if (k >= r.frame_count) return m.Error("record " + Num(record) + " has no frame " + Num(k));
    const FrameEntry& f = m.frames[r.first_frame + k];
    if (dst == nullptr || capacity < f.raw_size)
      return m.Error("frame " + Num(k) + " of record " + Num(record) + ": destination too small");
    const Item item{r.first_frame + k, record, k, static_cast<uint8_t*>(dst)};
    if (std::string e = m.DecodeItem(item, static_cast<ZSTD_DCtx*>(dctx_), &in_, &scratch_, view);
        !e.empty())
      return m.Error(e);
    *raw_size = f.raw_size;
    return Status::Ok();
  } catch (const std::exception& e) {
    return m.Error(std::string("internal error: ") + e.what());
  }
}

}  // namespace vgpu::checkpoint
