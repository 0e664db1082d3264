// O_DIRECT reads of unaligned byte ranges, for the image reader's frames.
//
// A restore reads each frame once, so the page cache only costs: on a
// 2-core VM the buffered 4 MiB preads of an 8 GiB image kept both cores
// 77-97% in the kernel (cache insertion, copies, reclaim) at 0.35-0.54 GB/s,
// where the same disk reads 2.3 GB/s with O_DIRECT. Frames lie back to back
// at arbitrary offsets (the format has no padding), so each read covers the
// frame with the smallest block-aligned range and lands in an aligned buffer;
// the caller checksums and decompresses from there, or copies a raw frame out.
//
// File systems that refuse O_DIRECT (EINVAL on open or on the first read:
// tmpfs before Linux 6.6, some FUSE and network file systems) get buffered
// reads, announced once through a log callback.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace vgpu::checkpoint {

// Alignment of O_DIRECT offsets, lengths and buffers: 4 KiB covers the
// logical block size of common disks (512 or 4096 bytes) and the page size.
inline constexpr size_t kDirectAlign = 4096;

// A growable buffer aligned to kDirectAlign; its contents are not kept when
// it grows.
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  ~AlignedBuffer();
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;

  // Room for at least n bytes. False when out of memory (the buffer is then
  // empty).
  bool Reserve(size_t n);
  // Uses the caller's memory (kDirectAlign-aligned, `capacity` bytes; e.g.
  // pinned host memory a device copy can read from) until a Reserve needs
  // more; the caller keeps ownership and must keep it alive meanwhile.
  void Adopt(uint8_t* data, size_t capacity);
  uint8_t* data() const { return data_; }
  size_t capacity() const { return capacity_; }

 private:
  void Drop();
  uint8_t* data_ = nullptr;
  size_t capacity_ = 0;
  bool owned_ = true;
};

// One-line notes for a debug log; may be empty.
using LogFn = std::function<void(const std::string& line)>;

// Reads byte ranges of one file, through an O_DIRECT descriptor when there is
// one and the file system takes direct reads, else through the page cache.
// Read() may be called from several threads at once.
class RangeReader {
 public:
  using PreadFn = ssize_t (*)(int fd, void* buf, size_t n, off_t offset);

  // `buffered_fd` stays the caller's. `direct_fd` is the same file opened
  // with O_DIRECT (-1: none); this object closes it. `name` is used in the
  // log line. `pread_fn` is for tests that simulate a refusing file system.
  RangeReader(int buffered_fd, int direct_fd, std::string name, LogFn log,
              PreadFn pread_fn = nullptr);
  ~RangeReader();
  RangeReader(const RangeReader&) = delete;
  RangeReader& operator=(const RangeReader&) = delete;

  // Reads [offset, offset + n) and points *out at the bytes: at `dst` when
  // it is given and the read went there (buffered reads), else into *buf.
  // Returns 0, an errno value, or -1 when the file ends first.
  int Read(uint64_t offset, size_t n, uint8_t* dst, AlignedBuffer* buf,
           const uint8_t** out) const;

  // Whether reads currently bypass the page cache.
  bool direct() const { return direct_.load(std::memory_order_relaxed); }

 private:
  int ReadDirect(uint64_t offset, size_t n, AlignedBuffer* buf, const uint8_t** out) const;
  void FallBack(int err) const;

  const int buffered_fd_;
  const int direct_fd_;
  const std::string name_;
  const LogFn log_;
  const PreadFn pread_;
  mutable std::atomic<bool> direct_;
};

// Writes a file sequentially in aligned chunks, with O_DIRECT where the file
// system takes it: an image is written once and read back rarely, so going
// around the page cache saves the kernel's copy, its dirty-page accounting and
// the reclaim of many GiB. Bytes are gathered in an aligned chunk buffer and
// written whole; Flush() writes the last partial block padded with zeros and
// cuts the file back to its exact size. A refused direct write (EINVAL) turns
// O_DIRECT off on the descriptor, logs one line and writes through the cache.
// One thread at a time.
class AlignedAppender {
 public:
  using PwriteFn = ssize_t (*)(int fd, const void* buf, size_t n, off_t offset);

  // `fd` (the caller's) is written from offset 0; `direct`: O_DIRECT is set
  // on it. `chunk_bytes` is rounded up to kDirectAlign. `pwrite_fn` is for
  // tests that simulate a refusing file system.
  AlignedAppender(int fd, bool direct, size_t chunk_bytes, std::string name, LogFn log,
                  PwriteFn pwrite_fn = nullptr);

  // Copies n bytes in, writing each chunk as it fills. 0 or an errno value.
  int Append(const void* data, size_t n);
  // Writes what is buffered and sets the file size to size(). 0 or errno.
  int Flush();
  uint64_t size() const { return written_ + fill_; }  // bytes appended
  uint64_t written() const { return written_; }        // bytes in the file
  bool direct() const { return direct_; }

 private:
  int WriteOut(size_t n);  // buf_[0, n) at written_

  const int fd_;
  bool direct_;
  const size_t chunk_;
  const std::string name_;
  const LogFn log_;
  const PwriteFn pwrite_;
  AlignedBuffer buf_;
  size_t fill_ = 0;
  uint64_t written_ = 0;
};

// Sets O_DIRECT on an open descriptor. 0 or errno (EINVAL: the file system
// does not support it). Setting it after a plain open, rather than opening
// with it, keeps an O_CREAT | O_EXCL open from leaving a file behind when the
// file system refuses the flag.
int EnableDirect(int fd);

// Opens `path` read-only with O_DIRECT and checks that it is the file behind
// `fd` (a rename over the path between the two opens must not mix images).
// Returns the descriptor, or -1 with *err set (0 when the path now names
// another file or the two cannot be compared).
int OpenDirectTwin(const std::string& path, int fd, int* err);

}  // namespace vgpu::checkpoint
