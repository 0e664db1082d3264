#include "cluster/slurm/job_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/parse.h"

namespace vgpu::slurm {
namespace {

Status Errno(const std::string& what) {
  const int e = errno;
  return Status::Error(e == ENOENT ? ErrorCode::kNoEnt : ErrorCode::kInval,
                       "vgpu: " + what + ": " + std::strerror(e));
}

Status CheckDir(const std::string& dir) {
  struct stat st {};
  if (lstat(dir.c_str(), &st) != 0) return Errno(dir);
  if (!S_ISDIR(st.st_mode)) {
    return Status::Error(ErrorCode::kInval, "vgpu: " + dir + " is not a directory");
  }
  if (st.st_uid != geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return Status::Error(ErrorCode::kPerm, "vgpu: " + dir + " is not owned by uid " +
                                               std::to_string(geteuid()) +
                                               " or is writable by others");
  }
  // The job's tasks (its uid) read the file through it.
  if ((st.st_mode & S_IXOTH) == 0) {
    return Status::Error(ErrorCode::kPerm, "vgpu: " + dir + " is not searchable by others (mode 0" +
                                               std::to_string((st.st_mode >> 6) & 7) +
                                               std::to_string((st.st_mode >> 3) & 7) +
                                               std::to_string(st.st_mode & 7) +
                                               "): the job's tasks could not read its file");
  }
  return Status::Ok();
}

Status MakeDir(const std::string& dir) {
  if (mkdir(dir.c_str(), 0755) == 0) {
    chmod(dir.c_str(), 0755);  // mkdir honours slurmstepd's umask
  } else if (errno != EEXIST) {
    return Errno("mkdir " + dir);
  }
  return CheckDir(dir);
}

std::string Parent(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos || slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

Status PrepareJobDir(const std::string& dir) {
  const std::string parent = Parent(dir);
  if (parent != "/" && parent != dir) {
    if (Status st = MakeDir(parent); !st.ok()) return st;
  }
  return MakeDir(dir);
}

Status WriteFileAtomic(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp.XXXXXX";
  const int fd = mkstemp(tmp.data());
  if (fd < 0) return Errno("create " + tmp);
  bool ok = fchmod(fd, 0644) == 0;
  for (size_t done = 0; ok && done < text.size();) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) done += static_cast<size_t>(n);
  }
  ok = ok && fsync(fd) == 0;
  Status st = ok ? Status::Ok() : Errno("write " + tmp);
  close(fd);
  if (st.ok() && rename(tmp.c_str(), path.c_str()) != 0) st = Errno("rename to " + path);
  if (!st.ok()) unlink(tmp.c_str());
  return st;
}

Status RemoveJobFiles(const std::string& dir, const std::string& shm_dir, uint32_t job_id,
                      uint32_t uid, int* removed) {
  *removed = 0;
  Status result = Status::Ok();
  const std::string prefix = "job-" + std::to_string(job_id) + ".";
  if (DIR* d = opendir(dir.c_str())) {
    while (const dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      // job-<id>.<uid>.json, and a temporary file a killed writer left.
      if (name.rfind(prefix, 0) != 0) continue;
      std::string rest = name.substr(prefix.size());
      const size_t dot = rest.find('.');
      int64_t file_uid = 0;
      if (dot == std::string::npos ||
          !ParseInteger(rest.substr(0, dot), 0, UINT32_MAX, &file_uid)) {
        continue;
      }
      rest = rest.substr(dot);
      if (rest != ".json" && rest.rfind(".json.tmp.", 0) != 0) continue;
      if (unlinkat(dirfd(d), name.c_str(), 0) == 0) {
        ++*removed;
      } else if (errno != ENOENT) {
        result = Errno("remove " + dir + "/" + name);
      }
    }
    closedir(d);
  } else if (errno != ENOENT) {
    result = Errno("open " + dir);
  }
  const std::string ledger =
      shm_dir + "/vgpu-ledger-" + std::to_string(uid) + "-slurm-" + std::to_string(job_id);
  if (unlink(ledger.c_str()) == 0) {
    ++*removed;
  } else if (errno != ENOENT) {
    result = Errno("remove " + ledger);
  }
  return result;
}

std::string PrependPreload(const std::string& current, const std::string& lib) {
  size_t start = 0;
  while (start <= current.size()) {
    size_t end = current.find_first_of(": ", start);
    if (end == std::string::npos) end = current.size();
    if (current.compare(start, end - start, lib) == 0 && end - start == lib.size()) return current;
    start = end + 1;
  }
  return current.empty() ? lib : lib + ":" + current;
}

}  // namespace vgpu::slurm
