// Reading and writing inside a container's root file system without leaving
// it. A container image is untrusted input: its /etc may be a symlink to
// /etc of the host, or its ld.so.preload a symlink to a host file, and the
// hook runs as root on the host. So paths are walked one component at a time
// from a descriptor of the rootfs with O_NOFOLLOW, and a symlink anywhere on
// the way is refused rather than resolved; files are replaced by a temporary
// file in the same directory and a rename, so a reader never sees half a file.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "common/status.h"

namespace vgpu::oci_hook {

// An owned file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd();
  Fd(Fd&& other) noexcept : fd_(other.release()) {}
  Fd& operator=(Fd&& other) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int release();

 private:
  int fd_ = -1;
};

// Reads the regular file `path` (a host path), at most `max_bytes`.
Status ReadRegularFile(const std::string& path, size_t max_bytes, std::string* out);

// Opens the container's root directory (a host path from config.json).
Status OpenRootfs(const std::string& rootfs, Fd* out);

// Whether `container_path` (absolute) is a regular file in the rootfs,
// reached without a symlink. kNoEnt if it is not there.
Status CheckRegularFile(int rootfs_fd, std::string_view container_path);

// Adds `line` as a line of /etc/ld.so.preload unless one of its entries (split
// on white space and ':', as the dynamic loader does) is already `line`.
// Creates /etc and the file (0644) if missing; keeps an existing file's mode.
Status AddPreloadLine(int rootfs_fd, std::string_view line);

// Writes `content` to `container_path` (absolute), mode 0644, creating the
// missing directories (0755).
Status WriteContainerFile(int rootfs_fd, std::string_view container_path, std::string_view content);

// Opens directory `container_path` (absolute) of the rootfs, creating the
// missing directories (0755) when `create`; a symlink on the way is refused.
Status OpenContainerDir(int rootfs_fd, std::string_view container_path, bool create, Fd* out);

}  // namespace vgpu::oci_hook
