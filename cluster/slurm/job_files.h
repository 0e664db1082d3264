// The Slurm plugin's file-system side (docs/slurm.md): the job's admin file
// written atomically into a root-owned directory, the job's files and quota
// ledger removed at its end, and the LD_PRELOAD the job's tasks get. No Slurm
// headers: spank_vgpu.cc calls these with the fixed paths
// (common/container_paths.h), the tests with temporary ones.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace vgpu::slurm {

// Creates `dir` (and its parent) 0755 if missing; an error if it, or its
// parent, is a symlink, not a directory, not owned by this process's euid or
// writable by group or others (a tenant must not be able to replace a job's
// file), or not searchable by others (the job's tasks read the file).
Status PrepareJobDir(const std::string& dir);

// Writes `text` to `path` (in a directory PrepareJobDir accepted) through a
// temporary file in the same directory and rename: mode 0644, so that
// libvgpu never reads half a file.
Status WriteFileAtomic(const std::string& path, const std::string& text);

// Removes `dir`/job-<job_id>.<uid>.json for every uid, and the job's quota
// ledger `shm_dir`/vgpu-ledger-<uid>-slurm-<job_id> (quota/quota_ledger.cc's
// name for group slurm-<job_id>). What does not exist is no error; the
// number of files removed in *removed.
Status RemoveJobFiles(const std::string& dir, const std::string& shm_dir, uint32_t job_id,
                      uint32_t uid, int* removed);

// LD_PRELOAD with `lib` first: `current` unchanged if it already lists it
// (separated by ':' or spaces, as ld.so reads it).
std::string PrependPreload(const std::string& current, const std::string& lib);

}  // namespace vgpu::slurm
