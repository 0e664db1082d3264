#include "ctl/control/run_dir.h"

#include <dirent.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "common/config/config.h"
#include "common/process_info.h"

namespace vgpu::ctl {
namespace {

constexpr std::string_view kPrefix = "agent-";
constexpr std::string_view kSuffix = ".sock";

const char* NonEmptyEnv(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && v[0] != '\0' ? v : nullptr;
}

Status CheckExisting(const std::string& dir, const struct stat& st, uid_t owner) {
  if (S_ISLNK(st.st_mode)) {
    return Status::Error(ErrorCode::kPerm, "run directory " + dir + " is a symbolic link");
  }
  if (!S_ISDIR(st.st_mode)) {
    return Status::Error(ErrorCode::kPerm, "run directory " + dir + " is not a directory");
  }
  if (st.st_uid != owner && st.st_uid != 0) {
    return Status::Error(ErrorCode::kPerm, "run directory " + dir + " is owned by uid " +
                                               std::to_string(st.st_uid) + ", not by uid " +
                                               std::to_string(owner) + " or root");
  }
  // A directory others can write could hold a planted socket of ours.
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (st.st_mode & S_ISVTX) == 0) {
    return Status::Error(ErrorCode::kPerm,
                         "run directory " + dir + " is writable by others and not sticky");
  }
  return Status::Ok();
}

}  // namespace

std::string RunDir() {
  // VGPU_RUN_DIR alone, through the option table: a malformed libvgpu option
  // elsewhere in the environment must not hide the agents. A malformed value
  // of this one (control characters) falls back to the default, where the
  // agent, which refuses to start on it, is not listening either.
  Config cfg;
  if (LoadEnvOption("VGPU_RUN_DIR", std::getenv, &cfg).ok() && !cfg.run_dir.empty()) {
    return cfg.run_dir;
  }
  if (const char* x = NonEmptyEnv("XDG_RUNTIME_DIR")) return std::string(x) + "/vgpu";
  if (geteuid() == 0) return "/run/vgpu";
  return "/tmp/vgpu-" + std::to_string(geteuid());
}

Status CheckRunDir(const std::string& dir, uid_t owner) {
  struct stat st {};
  if (lstat(dir.c_str(), &st) == 0) return CheckExisting(dir, st, owner);
  int err = errno;
  return Status::Error(err == ENOENT ? ErrorCode::kNoEnt : ErrorCode::kIo,
                       "run directory " + dir + ": " + std::strerror(err));
}

Status EnsureRunDir(const std::string& dir) {
  struct stat st {};
  if (lstat(dir.c_str(), &st) == 0) return CheckExisting(dir, st, geteuid());
  if (errno != ENOENT || mkdir(dir.c_str(), 0700) != 0) {
    if (errno == EEXIST && lstat(dir.c_str(), &st) == 0) return CheckExisting(dir, st, geteuid());
    return Status::Error(ErrorCode::kIo,
                         "cannot create run directory " + dir + ": " + std::strerror(errno));
  }
  // mkdir honours the umask, which can only narrow 0700; make sure anyway.
  chmod(dir.c_str(), 0700);
  return Status::Ok();
}

std::string ContainersDir(const std::string& run_dir) {
  return run_dir + "/" + kContainersSubdir;
}

Status SocketPath(const std::string& dir, pid_t pid, std::string* out) {
  std::string path = dir + "/agent-" + std::to_string(pid) + ".sock";
  // Leave room for the temporary name used while binding ("<path>.<tid>.tmp").
  constexpr size_t kMax = sizeof(sockaddr_un{}.sun_path) - 1;
  if (path.size() + 16 > kMax) {
    return Status::Error(ErrorCode::kInval, "socket path too long (" + std::to_string(path.size()) +
                                                " bytes; " + "the limit is " +
                                                std::to_string(kMax - 16) + "): " + path +
                                                "; set VGPU_RUN_DIR to a shorter directory");
  }
  *out = std::move(path);
  return Status::Ok();
}

std::optional<pid_t> PidFromSocketName(std::string_view name) {
  if (name.size() <= kPrefix.size() + kSuffix.size() || !name.starts_with(kPrefix) ||
      !name.ends_with(kSuffix)) {
    return std::nullopt;
  }
  std::string_view digits =
      name.substr(kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size());
  if (digits.size() > 9) return std::nullopt;
  pid_t pid = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    pid = pid * 10 + (c - '0');
  }
  if (pid <= 0) return std::nullopt;
  return pid;
}

bool ProcessIsDead(pid_t pid) { return !ProcessAlive(pid, 0); }

int RemoveStaleSockets(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return 0;
  int removed = 0;
  while (dirent* e = readdir(d)) {
    std::optional<pid_t> pid = PidFromSocketName(e->d_name);
    if (pid && ProcessIsDead(*pid) && unlinkat(dirfd(d), e->d_name, 0) == 0) ++removed;
  }
  closedir(d);
  return removed;
}

}  // namespace vgpu::ctl
