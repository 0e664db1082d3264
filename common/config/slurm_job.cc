#include "common/config/slurm_job.h"

#include <sys/stat.h>

#include <cerrno>
#include <charconv>
#include <cstring>

#include "common/container_paths.h"

namespace vgpu {
namespace {

// A decimal job id, 1..0xfffffffe (Slurm's NO_VAL is 0xfffffffe + 1).
bool ParseJobId(std::string_view s, uint32_t* out) {
  if (s.empty() || s.size() > 10) return false;
  uint64_t v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v == 0 || v >= 0xffffffffULL) return false;
  *out = static_cast<uint32_t>(v);
  return true;
}

}  // namespace

uint32_t SlurmJobIdFromCgroup(std::string_view text) {
  // cgroup v2: "0::/system.slice/slurmstepd.scope/job_42/step_0/user/task_0";
  // v1: one line per hierarchy, "4:memory:/slurm/uid_1000/job_42/step_0".
  for (size_t at = text.find("/job_"); at != std::string_view::npos;
       at = text.find("/job_", at + 1)) {
    const size_t begin = at + 5;
    size_t end = begin;
    while (end < text.size() && text[end] >= '0' && text[end] <= '9') ++end;
    if (end < text.size() && text[end] != '/' && text[end] != '\n') continue;
    uint32_t id = 0;
    if (ParseJobId(text.substr(begin, end - begin), &id)) return id;
  }
  return 0;
}

Status SlurmJobIdOf(std::string_view cgroup_text, const char* env_job_id, uint32_t* job_id) {
  *job_id = SlurmJobIdFromCgroup(cgroup_text);
  if (*job_id != 0 || env_job_id == nullptr) return Status::Ok();
  if (!ParseJobId(env_job_id, job_id)) {
    *job_id = 0;
    return Status::Error(ErrorCode::kInval,
                         std::string("SLURM_JOB_ID='") + std::string(env_job_id).substr(0, 32) +
                             "' is not a Slurm job id (expected a decimal number)");
  }
  return Status::Ok();
}

Status SlurmJobAdminFile(uint32_t job_id, uint32_t uid, std::string* path) {
  path->clear();
  if (job_id == 0) return Status::Ok();
  const std::string file = SlurmJobFile(job_id, uid);
  struct stat st {};
  if (lstat(file.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return Status::Ok();
    return Status::Error(ErrorCode::kIo,
                         "Slurm job file '" + file + "' cannot be read: " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode) || st.st_uid != 0 || (st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return Status::Error(ErrorCode::kPerm, "Slurm job file '" + file +
                                               "' is refused: it must be a regular file owned "
                                               "by root and writable by root alone");
  }
  *path = file;
  return Status::Ok();
}

}  // namespace vgpu
