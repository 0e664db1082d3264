#include "checkpoint/direct_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "checkpoint/file_util.h"

namespace vgpu::checkpoint {
namespace {

constexpr uint64_t AlignDown(uint64_t v) { return v & ~uint64_t{kDirectAlign - 1}; }
constexpr uint64_t AlignUp(uint64_t v) { return AlignDown(v + kDirectAlign - 1); }

}  // namespace

AlignedBuffer::~AlignedBuffer() { Drop(); }

void AlignedBuffer::Drop() {
  if (owned_) std::free(data_);
  data_ = nullptr;
  capacity_ = 0;
  owned_ = true;
}

void AlignedBuffer::Adopt(uint8_t* data, size_t capacity) {
  Drop();
  data_ = data;
  capacity_ = data != nullptr ? capacity : 0;
  owned_ = data == nullptr;
}

bool AlignedBuffer::Reserve(size_t n) {
  if (n <= capacity_) return true;
  Drop();
  void* p = nullptr;
  if (posix_memalign(&p, kDirectAlign, AlignUp(n)) != 0) return false;
  data_ = static_cast<uint8_t*>(p);
  capacity_ = AlignUp(n);
  return true;
}

RangeReader::RangeReader(int buffered_fd, int direct_fd, std::string name, LogFn log,
                         PreadFn pread_fn)
    : buffered_fd_(buffered_fd),
      direct_fd_(direct_fd),
      name_(std::move(name)),
      log_(std::move(log)),
      pread_(pread_fn != nullptr ? pread_fn : ::pread),
      direct_(direct_fd >= 0) {}

RangeReader::~RangeReader() {
  if (direct_fd_ >= 0) ::close(direct_fd_);
}

void RangeReader::FallBack(int err) const {
  // Several threads may hit the refusal at once: one of them logs it.
  if (direct_.exchange(false) && log_)
    log_("checkpoint image " + name_ + ": direct reads refused (" + ErrnoText(err) +
         "), reading through the page cache");
}

int RangeReader::ReadDirect(uint64_t offset, size_t n, AlignedBuffer* buf,
                            const uint8_t** out) const {
  const uint64_t start = AlignDown(offset);
  const uint64_t end = offset + n;
  const size_t len = static_cast<size_t>(AlignUp(end) - start);
  if (!buf->Reserve(len)) return ENOMEM;
  size_t got = 0;
  while (start + got < end) {
    const ssize_t r =
        pread_(direct_fd_, buf->data() + got, len - got, static_cast<off_t>(start + got));
    if (r < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (r == 0) return -1;
    got += static_cast<size_t>(r);
    // A read that stops off a block boundary hit the end of the file; the
    // next one would be unaligned (EINVAL), not an end-of-file 0.
    if (got % kDirectAlign != 0) break;
  }
  if (start + got < end) return -1;
  *out = buf->data() + (offset - start);
  return 0;
}

int RangeReader::Read(uint64_t offset, size_t n, uint8_t* dst, AlignedBuffer* buf,
                      const uint8_t** out) const {
  *out = dst;
  if (n == 0) return 0;
  if (direct()) {
    const int rc = ReadDirect(offset, n, buf, out);
    if (rc != EINVAL) return rc;
    FallBack(rc);
  }
  if (dst == nullptr) {
    if (!buf->Reserve(n)) return ENOMEM;
    dst = buf->data();
  }
  if (const int rc = PreadAll(buffered_fd_, dst, n, offset); rc != 0) return rc;
  *out = dst;
  return 0;
}

AlignedAppender::AlignedAppender(int fd, bool direct, size_t chunk_bytes, std::string name,
                                 LogFn log, PwriteFn pwrite_fn)
    : fd_(fd),
      direct_(direct),
      chunk_(static_cast<size_t>(AlignUp(std::max<size_t>(chunk_bytes, kDirectAlign)))),
      name_(std::move(name)),
      log_(std::move(log)),
      pwrite_(pwrite_fn != nullptr ? pwrite_fn : ::pwrite) {}

int AlignedAppender::WriteOut(size_t n) {
  size_t done = 0;
  while (done < n) {
    const ssize_t w =
        pwrite_(fd_, buf_.data() + done, n - done, static_cast<off_t>(written_ + done));
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno == EINVAL && direct_) {
      // Only alignment is checked before any byte moves: nothing was written.
      const int flags = ::fcntl(fd_, F_GETFL);
      if (flags < 0 || ::fcntl(fd_, F_SETFL, flags & ~O_DIRECT) != 0) return EINVAL;
      direct_ = false;
      if (log_)
        log_("checkpoint image " + name_ + ": direct writes refused (" + ErrnoText(EINVAL) +
             "), writing through the page cache");
      continue;
    }
    if (w < 0) return errno;
    if (w == 0) return EIO;
    done += static_cast<size_t>(w);
  }
  written_ += n;
  return 0;
}

int AlignedAppender::Append(const void* data, size_t n) {
  if (!buf_.Reserve(chunk_)) return ENOMEM;
  const auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    const size_t take = std::min(n, chunk_ - fill_);
    std::memcpy(buf_.data() + fill_, p, take);
    fill_ += take;
    p += take;
    n -= take;
    if (fill_ == chunk_) {
      if (const int err = WriteOut(chunk_); err != 0) return err;
      fill_ = 0;
    }
  }
  return 0;
}

int AlignedAppender::Flush() {
  if (fill_ > 0) {
    if (!buf_.Reserve(chunk_)) return ENOMEM;
    // O_DIRECT writes whole blocks: pad the last one, then cut the file back.
    const size_t n = direct_ ? static_cast<size_t>(AlignUp(fill_)) : fill_;
    std::memset(buf_.data() + fill_, 0, n - fill_);
    const uint64_t end = written_ + fill_;
    if (const int err = WriteOut(n); err != 0) return err;
    written_ = end;
    fill_ = 0;
  }
  if (::ftruncate(fd_, static_cast<off_t>(written_)) != 0) return errno;
  return 0;
}

int EnableDirect(int fd) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_DIRECT) != 0) return errno;
  return 0;
}

int OpenDirectTwin(const std::string& path, int fd, int* err) {
  *err = 0;
  const int direct = ::open(path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
  if (direct < 0) {
    *err = errno;
    return -1;
  }
  struct stat a, b;
  if (::fstat(fd, &a) != 0 || ::fstat(direct, &b) != 0 || a.st_dev != b.st_dev ||
      a.st_ino != b.st_ino) {
    ::close(direct);
    return -1;
  }
  return direct;
}

}  // namespace vgpu::checkpoint
