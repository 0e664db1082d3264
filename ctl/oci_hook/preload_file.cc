#include "ctl/oci_hook/preload_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "ctl/oci_hook/oci_state.h"

namespace vgpu::oci_hook {
namespace {

constexpr size_t kMaxPreloadBytes = 1 << 20;
constexpr mode_t kFileMode = 0644;
constexpr mode_t kDirMode = 0755;

Status Errno(ErrorCode code, const std::string& what, int err) {
  return Status::Error(code, what + ": " + std::strerror(err));
}

ErrorCode CodeOf(int err) { return err == ENOENT ? ErrorCode::kNoEnt : ErrorCode::kIo; }

// "/usr/lib/x.so" -> {"usr", "lib", "x.so"}; false on "..", which could
// climb out of the rootfs, and on an empty path.
bool SplitPath(std::string_view path, std::vector<std::string>* parts) {
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    std::string_view part = path.substr(start, end - start);
    if (part == "..") return false;
    if (!part.empty() && part != ".") parts->emplace_back(part);
    start = end + 1;
  }
  return !parts->empty();
}

// Opens directory `name` under `dir` without following a symlink; creates it
// (0755) first when `create` and it is missing.
Status OpenDirAt(int dir, const std::string& name, const std::string& shown, bool create, Fd* out) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    int fd = ::openat(dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) {
      *out = Fd(fd);
      return Status::Ok();
    }
    int err = errno;
    if (err == ELOOP || err == ENOTDIR) {
      return Status::Error(ErrorCode::kPerm, shown +
                                                 " is a symlink or not a directory: refused, "
                                                 "it could lead out of the container");
    }
    if (err != ENOENT || !create) return Errno(CodeOf(err), shown, err);
    if (::mkdirat(dir, name.c_str(), kDirMode) != 0 && errno != EEXIST) {
      return Errno(ErrorCode::kIo, "cannot create " + shown, errno);
    }
  }
  return Status::Error(ErrorCode::kIo, shown + " vanished while being created");
}

// Walks the directories of `parts` but the last, from the rootfs.
Status OpenParent(int rootfs_fd, const std::vector<std::string>& parts, bool create, Fd* out,
                  std::string* shown) {
  Fd dir(::dup(rootfs_fd));
  if (dir.get() < 0) return Errno(ErrorCode::kIo, "dup", errno);
  shown->clear();
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    *shown += "/" + parts[i];
    Fd next;
    Status s = OpenDirAt(dir.get(), parts[i], "<rootfs>" + *shown, create, &next);
    if (!s.ok()) return s;
    dir = std::move(next);
  }
  *shown += "/" + parts.back();
  *out = std::move(dir);
  return Status::Ok();
}

// OpenParent for a container path: its components in *parts.
Status OpenParentOf(int rootfs_fd, std::string_view container_path, bool create,
                    std::vector<std::string>* parts, Fd* out, std::string* shown) {
  if (!SplitPath(container_path, parts)) {
    return Status::Error(ErrorCode::kInval, "'" + Printable(container_path) + "' is not a path");
  }
  return OpenParent(rootfs_fd, *parts, create, out, shown);
}

Status ReadFd(int fd, size_t max_bytes, const std::string& shown, std::string* out) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return Errno(ErrorCode::kIo, shown, errno);
  if (!S_ISREG(st.st_mode))
    return Status::Error(ErrorCode::kInval, shown + " is not a regular file");
  out->clear();
  char buf[8192];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Errno(ErrorCode::kIo, shown, errno);
    if (n == 0) return Status::Ok();
    if (out->size() + static_cast<size_t>(n) > max_bytes) {
      return Status::Error(ErrorCode::kTooBig,
                           shown + " is larger than " + std::to_string(max_bytes) + " bytes");
    }
    out->append(buf, static_cast<size_t>(n));
  }
}

Status WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Errno(ErrorCode::kIo, "write", errno);
    data.remove_prefix(static_cast<size_t>(n));
  }
  return Status::Ok();
}

// Replaces `name` in `dir` by a file holding `content`: a temporary file of
// the same directory, synced, then renamed over it. rename() replaces a
// symlink itself, never what it points to.
Status ReplaceFile(int dir, const std::string& name, const std::string& shown,
                   std::string_view content, mode_t mode) {
  static std::atomic<int> counter{0};
  const std::string tmp =
      "." + name + ".vgpu-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
  int fd = ::openat(dir, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return Errno(ErrorCode::kIo, "cannot create a temporary file beside " + shown, errno);
  Fd file(fd);
  Status s = WriteAll(file.get(), content);
  if (s.ok() && ::fchmod(file.get(), mode) != 0) s = Errno(ErrorCode::kIo, "chmod " + shown, errno);
  if (s.ok() && ::fsync(file.get()) != 0) s = Errno(ErrorCode::kIo, "fsync " + shown, errno);
  if (s.ok() && ::renameat(dir, tmp.c_str(), dir, name.c_str()) != 0) {
    s = Errno(ErrorCode::kIo, "cannot replace " + shown, errno);
  }
  if (!s.ok()) ::unlinkat(dir, tmp.c_str(), 0);
  return s;
}

// Whether ld.so.preload's text lists `entry`: the loader splits it on white
// space and ':'.
bool ListsEntry(std::string_view text, std::string_view entry) {
  constexpr std::string_view kSeparators = " \t\n\r\f\v:";
  size_t pos = 0;
  while ((pos = text.find_first_not_of(kSeparators, pos)) != std::string_view::npos) {
    size_t end = text.find_first_of(kSeparators, pos);
    if (end == std::string_view::npos) end = text.size();
    if (text.substr(pos, end - pos) == entry) return true;
    pos = end;
  }
  return false;
}

}  // namespace

Fd::~Fd() {
  if (fd_ >= 0) ::close(fd_);
}

Fd& Fd::operator=(Fd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.release();
  }
  return *this;
}

int Fd::release() { return std::exchange(fd_, -1); }

Status ReadRegularFile(const std::string& path, size_t max_bytes, std::string* out) {
  // O_NONBLOCK: a FIFO put there must not hang the runtime; the type is
  // checked on the descriptor.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) return Errno(CodeOf(errno), Printable(path), errno);
  Fd file(fd);
  return ReadFd(file.get(), max_bytes, Printable(path), out);
}

Status OpenRootfs(const std::string& rootfs, Fd* out) {
  int fd = ::open(rootfs.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Errno(CodeOf(errno), "root file system " + Printable(rootfs), errno);
  *out = Fd(fd);
  return Status::Ok();
}

Status CheckRegularFile(int rootfs_fd, std::string_view container_path) {
  std::vector<std::string> parts;
  Fd dir;
  std::string shown;
  Status s = OpenParentOf(rootfs_fd, container_path, false, &parts, &dir, &shown);
  if (!s.ok()) return s;
  struct stat st {};
  if (::fstatat(dir.get(), parts.back().c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return Errno(CodeOf(errno), "<rootfs>" + shown, errno);
  }
  if (!S_ISREG(st.st_mode)) {
    return Status::Error(ErrorCode::kInval, "<rootfs>" + shown + " is not a regular file");
  }
  return Status::Ok();
}

Status AddPreloadLine(int rootfs_fd, std::string_view line) {
  Fd etc;
  Status s = OpenDirAt(rootfs_fd, "etc", "<rootfs>/etc", true, &etc);
  if (!s.ok()) return s;
  const std::string shown = "<rootfs>/etc/ld.so.preload";
  std::string text;
  mode_t mode = kFileMode;
  int fd = ::openat(etc.get(), "ld.so.preload",
                    O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd >= 0) {
    Fd file(fd);
    struct stat st {};
    if (::fstat(file.get(), &st) == 0) mode = st.st_mode & 07777;
    s = ReadFd(file.get(), kMaxPreloadBytes, shown, &text);
    if (!s.ok()) return s;
  } else if (errno == ELOOP) {
    return Status::Error(ErrorCode::kPerm, shown +
                                               " is a symlink: refused, it could lead out of "
                                               "the container");
  } else if (errno != ENOENT) {
    return Errno(ErrorCode::kIo, shown, errno);
  }
  if (ListsEntry(text, line)) return Status::Ok();
  if (!text.empty() && text.back() != '\n') text += '\n';
  text += std::string(line) + "\n";
  return ReplaceFile(etc.get(), "ld.so.preload", shown, text, mode);
}

Status WriteContainerFile(int rootfs_fd, std::string_view container_path,
                          std::string_view content) {
  std::vector<std::string> parts;
  Fd dir;
  std::string shown;
  Status s = OpenParentOf(rootfs_fd, container_path, true, &parts, &dir, &shown);
  if (!s.ok()) return s;
  return ReplaceFile(dir.get(), parts.back(), "<rootfs>" + shown, content, kFileMode);
}

Status OpenContainerDir(int rootfs_fd, std::string_view container_path, bool create, Fd* out) {
  std::vector<std::string> parts;
  Fd dir;
  std::string shown;
  Status s = OpenParentOf(rootfs_fd, container_path, create, &parts, &dir, &shown);
  if (!s.ok()) return s;
  return OpenDirAt(dir.get(), parts.back(), "<rootfs>" + shown, create, out);
}

}  // namespace vgpu::oci_hook
