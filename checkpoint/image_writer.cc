#include "checkpoint/image_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "checkpoint/file_util.h"
#include "checkpoint/frame_pipeline.h"

#ifndef VGPU_VERSION_STRING
#define VGPU_VERSION_STRING "unknown"
#endif

namespace vgpu::checkpoint {

struct ImageWriter::Impl {
  std::string path, temp;
  int fd = -1;
  WriterOptions opt;
  std::unique_ptr<AlignedAppender> out;  // writes to fd
  std::vector<uint8_t> header_bytes;
  std::unique_ptr<FramePipeline> pipe;
  std::vector<RecordEntry> records;
  std::map<uint64_t, uint64_t> ranges;  // va -> end, non-empty records
  bool record_open = false;
  uint64_t record_done = 0;
  uint8_t* frame = nullptr;  // the frame being filled, from pipe->Acquire()
  size_t frame_len = 0;
  uint64_t frames_submitted = 0;
  std::deque<size_t> open_frames;  // lengths of frames handed out by NextFrame
  std::atomic<uint64_t> declared{0}, written{0};
  std::mutex progress_mu;
  std::string error;
  ErrorCode error_code = ErrorCode::kOk;
  bool done = false;  // finished or aborted

  // Fails the image for good: later calls return the same error.
  Status Fail(const std::string& what, ErrorCode code = ErrorCode::kIo);
  void Cleanup();
  void Progress(uint64_t raw);
  Status Open(const ImageMetadata& m);
  void OpenAppender();
  Status CheckUsable() const;
  void SubmitFrame();
  Status WriteTablesAndTrailer();
  Status Commit();
};

Status ImageWriter::Impl::Fail(const std::string& what, ErrorCode code) {
  if (error.empty()) {
    error = "checkpoint image " + path + ": " + what;
    error_code = code;
  }
  Cleanup();
  return Status::Error(error_code, error);
}

void ImageWriter::Impl::Cleanup() {
  // The pipeline (and its frame buffers) lives on until the writer is
  // destroyed: a caller's DMA into a frame from NextFrame may still be
  // running when an error surfaces.
  if (pipe) pipe->Stop();
  if (fd >= 0) ::close(fd);
  if (fd >= 0 || !temp.empty()) ::unlink(temp.c_str());
  fd = -1;
  temp.clear();
  done = true;
}

void ImageWriter::Impl::Progress(uint64_t raw) {
  const uint64_t now = written += raw;
  if (!opt.progress) return;
  std::lock_guard lock(progress_mu);
  opt.progress(now, std::max(now, opt.total_bytes ? opt.total_bytes : declared.load()));
}

Status ImageWriter::Impl::CheckUsable() const {
  if (!error.empty()) return Status::Error(error_code, error);
  if (done) return Status::Error(ErrorCode::kInval, "checkpoint image " + path + ": writer already finished");
  return Status::Ok();
}

namespace {

std::string ValidateOptions(const WriterOptions& o, const ImageMetadata& m) {
  if (o.frame_size < kMinFrameSize || o.frame_size > kMaxFrameSize ||
      (o.frame_size & (o.frame_size - 1)) != 0)
    return "frame size " + std::to_string(o.frame_size) +
           " is not a power of two in [4 KiB, 64 MiB]";
  if (o.threads < 0 || o.threads > 256) return "invalid thread count";
  if (o.frames_in_flight < 0 || o.frames_in_flight > 1024) return "invalid frames in flight";
  if (o.min_saving_pct < 0 || o.min_saving_pct > 100) return "min_saving_pct not in [0, 100]";
  if (o.compression_level < ZSTD_minCLevel() || o.compression_level > ZSTD_maxCLevel())
    return "compression level " + std::to_string(o.compression_level) + " out of range";
  if (m.hostname.size() > kMaxHostnameBytes) return "hostname too long";
  if (m.writer_version.size() > kMaxWriterVersionBytes) return "writer version too long";
  if (m.device_metadata.size() > kMaxDeviceMetadataBytes) return "device metadata over 16 MiB";
  return "";
}

Header MakeHeader(const ImageMetadata& m, uint32_t frame_size) {
  Header h;
  h.frame_size = frame_size;
  h.pid = m.pid ? m.pid : static_cast<uint32_t>(getpid());
  h.hostname = m.hostname;
  if (h.hostname.empty()) {
    char buf[256] = {};
    if (gethostname(buf, sizeof buf - 1) == 0) h.hostname = buf;
  }
  h.writer_version = m.writer_version.empty() ? "vgpu " VGPU_VERSION_STRING : m.writer_version;
  h.device_metadata = m.device_metadata;
  h.creation_time_ns = m.creation_time_ns;
  if (h.creation_time_ns == 0) {
    h.creation_time_ns =
        static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count());
  }
  h.header_bytes = static_cast<uint32_t>(kHeaderFixedBytes + h.hostname.size() +
                                         h.writer_version.size() + h.device_metadata.size());
  return h;
}

}  // namespace

Status ImageWriter::Impl::Open(const ImageMetadata& m) {
  if (std::string e = ValidateOptions(opt, m); !e.empty()) return Fail(e, ErrorCode::kInval);
  if (opt.threads == 0)
    opt.threads = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 4u));
  if (opt.frames_in_flight == 0) opt.frames_in_flight = opt.threads + 2;
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    return Fail("exists and is not a regular file", ErrorCode::kExist);
  RemoveStaleTemps(path);
  temp = MakeTempPath(path);
  // 0600: an image holds a process's memory.
  fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    const int err = errno;
    temp.clear();
    return Fail("cannot create temp file in " + DirName(path) + ": " + ErrnoText(err));
  }
  OpenAppender();
  EncodeHeader(MakeHeader(m, opt.frame_size), &header_bytes);
  if (int err = out->Append(header_bytes.data(), header_bytes.size()); err != 0)
    return Fail("cannot write " + temp + ": " + ErrnoText(err));
  // One slot more than NextFrame may hold open, so that handing out frames
  // never waits for a frame only the caller can commit.
  PipelineOptions po{opt.threads,
                     std::max(opt.frames_in_flight, kMaxOpenFrames + 1),
                     opt.compression_level,
                     opt.frame_size,
                     opt.sync,
                     opt.min_saving_pct,
                     opt.frame_buffers};
  pipe = std::make_unique<FramePipeline>(fd, out.get(), header_bytes.size(), po,
                                         [this](uint64_t raw) { Progress(raw); });
  if (std::string e = pipe->Start(); !e.empty()) return Fail(e);
  return Status::Ok();
}

// Bytes go out in chunks of this size: large enough that a direct write
// keeps the disk busy, small next to the frames in flight.
constexpr size_t kWriteChunk = 8 << 20;

void ImageWriter::Impl::OpenAppender() {
  int err = 0;
  const bool direct = opt.direct_io && (err = EnableDirect(fd)) == 0;
  if (opt.direct_io && !direct && opt.log)
    opt.log("checkpoint image " + path + ": cannot write with O_DIRECT (" + ErrnoText(err) +
            "), writing through the page cache");
  out = std::make_unique<AlignedAppender>(fd, direct, kWriteChunk, path, opt.log);
}

void ImageWriter::Impl::SubmitFrame() {
  pipe->Submit(frame_len);
  frame = nullptr;
  frame_len = 0;
  ++frames_submitted;
}

Status ImageWriter::Impl::WriteTablesAndTrailer() {
  std::vector<FrameEntry> frames = pipe->TakeFrames();
  const uint64_t data_end = pipe->data_end();
  pipe.reset();
  if (frames.size() != frames_submitted) return Fail("internal error: frame count mismatch");
  std::vector<uint8_t> tables;
  Trailer t;
  for (RecordEntry& r : records) {
    r.data_offset = r.first_frame < frames.size() ? frames[r.first_frame].offset : data_end;
    EncodeRecord(r, &tables);
    t.data_bytes += r.size;
  }
  for (const FrameEntry& f : frames) EncodeFrame(f, &tables);
  t.record_table_offset = data_end;
  t.record_count = records.size();
  t.frame_table_offset = data_end + records.size() * kRecordBytes;
  t.frame_count = frames.size();
  std::vector<uint8_t> trailer;
  EncodeTrailer(t, &trailer);
  t.digest = ComputeDigest(header_bytes, tables, std::span(trailer.data(), kTrailerDigestOffset));
  trailer.clear();
  EncodeTrailer(t, &trailer);
  tables.insert(tables.end(), trailer.begin(), trailer.end());
  int err = out->Append(tables.data(), tables.size());
  if (err == 0) err = out->Flush();
  if (err != 0) return Fail("cannot write " + temp + ": " + ErrnoText(err));
  return Status::Ok();
}

Status ImageWriter::Impl::Commit() {
  if (opt.sync && ::fsync(fd) != 0) return Fail("fsync of " + temp + ": " + ErrnoText(errno));
  const int rc = ::close(fd);
  fd = -1;
  if (rc != 0) return Fail("close of " + temp + ": " + ErrnoText(errno));
  const int err = opt.replace ? (::rename(temp.c_str(), path.c_str()) == 0 ? 0 : errno)
                              : RenameNoReplace(temp, path);
  if (err == EEXIST && !opt.replace) return Fail("exists; refusing to replace it", ErrorCode::kExist);
  if (err != 0) return Fail("cannot rename " + temp + " into place: " + ErrnoText(err));
  temp.clear();
  done = true;
  // The new image is complete and in place; only its durability is in doubt.
  if (opt.sync) {
    if (int err = FsyncDir(DirName(path)); err != 0)
      return Fail("written, but fsync of its directory failed: " + ErrnoText(err));
  }
  return Status::Ok();
}

ImageWriter::ImageWriter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

ImageWriter::~ImageWriter() { Abort(); }

Status ImageWriter::Create(const std::string& path, const ImageMetadata& metadata,
                           const WriterOptions& options, std::unique_ptr<ImageWriter>* out) {
  out->reset();
  try {
    auto impl = std::make_unique<Impl>();
    impl->path = path;
    impl->opt = options;
    if (Status s = impl->Open(metadata); !s.ok()) return s;
    out->reset(new ImageWriter(std::move(impl)));
    return Status::Ok();
  } catch (const std::exception& e) {
    return Status::Error(ErrorCode::kIo, "checkpoint image " + path + ": " + e.what());
  }
}

Status ImageWriter::BeginRecord(uint64_t va, uint64_t size, uint32_t flags, int device) {
  Impl& m = *impl_;
  if (Status s = m.CheckUsable(); !s.ok()) return s;
  const std::string rec = "record " + std::to_string(m.records.size()) + ": ";
  if (m.record_open) return m.Fail(rec + "BeginRecord while the previous record is open", ErrorCode::kInval);
  if (device < 0) return m.Fail(rec + "negative device", ErrorCode::kInval);
  if (va + size < va) return m.Fail(rec + "VA range wraps around", ErrorCode::kInval);
  const uint64_t frames = FramesFor(size, m.opt.frame_size);
  if (frames > UINT32_MAX) return m.Fail(rec + "too large", ErrorCode::kInval);
  try {
    if (size != 0) {
      auto next = m.ranges.upper_bound(va);
      const bool hits_next = next != m.ranges.end() && next->first < va + size;
      const bool hits_prev = next != m.ranges.begin() && std::prev(next)->second > va;
      if (hits_next || hits_prev) return m.Fail(rec + "VA range overlaps an earlier record", ErrorCode::kInval);
      m.ranges.emplace(va, va + size);
    }
    const uint64_t first_frame = m.frames_submitted + m.open_frames.size();
    m.records.push_back(
        {va, size, 0, first_frame, flags, device, static_cast<uint32_t>(frames), 0});
  } catch (const std::exception& e) {
    return m.Fail(std::string("internal error: ") + e.what());
  }
  m.declared += size;
  m.record_open = true;
  m.record_done = 0;
  return Status::Ok();
}

Status ImageWriter::Append(const void* data, size_t n) {
  Impl& m = *impl_;
  if (Status s = m.CheckUsable(); !s.ok()) return s;
  if (!m.record_open) return m.Fail("Append without an open record");
  if (!m.open_frames.empty()) return m.Fail("Append while frames from NextFrame are not committed");
  const uint64_t size = m.records.back().size;
  if (n > size - m.record_done)
    return m.Fail("record " + std::to_string(m.records.size() - 1) + ": Append past its size " +
                  std::to_string(size));
  const auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    if (m.frame == nullptr && (m.frame = m.pipe->Acquire()) == nullptr)
      return m.Fail(m.pipe->error());
    const size_t take = std::min<size_t>(n, m.opt.frame_size - m.frame_len);
    std::memcpy(m.frame + m.frame_len, p, take);
    m.frame_len += take;
    m.record_done += take;
    p += take;
    n -= take;
    if (m.frame_len == m.opt.frame_size || m.record_done == size) m.SubmitFrame();
  }
  return Status::Ok();
}

Status ImageWriter::NextFrame(uint8_t** data, size_t* n) {
  Impl& m = *impl_;
  *data = nullptr;
  *n = 0;
  if (Status s = m.CheckUsable(); !s.ok()) return s;
  if (!m.record_open) return m.Fail("NextFrame without an open record");
  if (m.frame != nullptr) return m.Fail("NextFrame inside a frame begun by Append");
  if (m.open_frames.size() >= static_cast<size_t>(kMaxOpenFrames))
    return m.Fail("NextFrame with " + std::to_string(kMaxOpenFrames) + " frames not committed");
  const uint64_t size = m.records.back().size;
  if (m.record_done == size)
    return m.Fail("record " + std::to_string(m.records.size() - 1) + ": NextFrame past its size");
  uint8_t* buf = m.pipe->Acquire();
  if (buf == nullptr) return m.Fail(m.pipe->error());
  const size_t take =
      static_cast<size_t>(std::min<uint64_t>(m.opt.frame_size, size - m.record_done));
  m.open_frames.push_back(take);
  m.record_done += take;
  *data = buf;
  *n = take;
  return Status::Ok();
}

Status ImageWriter::CommitFrame() {
  Impl& m = *impl_;
  if (Status s = m.CheckUsable(); !s.ok()) return s;
  if (m.open_frames.empty()) return m.Fail("CommitFrame without a frame from NextFrame");
  m.frame_len = m.open_frames.front();
  m.open_frames.pop_front();
  m.SubmitFrame();
  return Status::Ok();
}

Status ImageWriter::EndRecord() {
  Impl& m = *impl_;
  if (Status s = m.CheckUsable(); !s.ok()) return s;
  if (!m.record_open) return m.Fail("EndRecord without an open record");
  const RecordEntry& r = m.records.back();
  if (m.record_done != r.size)
    return m.Fail("record " + std::to_string(m.records.size() - 1) + " ended after " +
                  std::to_string(m.record_done) + " of " + std::to_string(r.size) + " bytes");
  m.record_open = false;
  return Status::Ok();
}

Status ImageWriter::Finish() {
  Impl& m = *impl_;
  if (Status s = m.CheckUsable(); !s.ok()) return s;
  if (m.record_open) return m.Fail("Finish while a record is open");
  if (!m.open_frames.empty()) return m.Fail("Finish while frames are not committed");
  try {
    if (std::string e = m.pipe->Drain(); !e.empty()) return m.Fail(e);
    if (Status s = m.WriteTablesAndTrailer(); !s.ok()) return s;
    return m.Commit();
  } catch (const std::exception& e) {
    return m.Fail(std::string("internal error: ") + e.what());
  }
}

void ImageWriter::Abort() {
  if (impl_ && !impl_->done) impl_->Cleanup();
}

const std::string& ImageWriter::path() const { return impl_->path; }
const std::string& ImageWriter::temp_path() const { return impl_->temp; }

}  // namespace vgpu::checkpoint
