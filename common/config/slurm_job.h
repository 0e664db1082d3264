// Which Slurm job a process runs in, and the admin file of ceilings the Slurm
// plugin (cluster/slurm) wrote for it (docs/slurm.md). Part of vgpu_config.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace vgpu {

// The job id from the text of /proc/self/cgroup: Slurm's cgroup plugins put
// every task of a job under a `job_<id>` directory that the job's own uid
// cannot leave, so this one is not the tenant's to choose. 0: none.
uint32_t SlurmJobIdFromCgroup(std::string_view cgroup_text);

// The calling process's Slurm job: the cgroup's id when it has one, else
// SLURM_JOB_ID (`env_job_id`, null when unset). *job_id = 0 when neither
// names one. kInval with a message naming SLURM_JOB_ID when that is set but
// is not a job id (a decimal number 1..4294967294).
Status SlurmJobIdOf(std::string_view cgroup_text, const char* env_job_id, uint32_t* job_id);

// The admin file that applies to a process of `uid` in job `job_id`
// (SlurmJobFile), or "" when it does not exist. An error when it exists but
// is not a regular file owned by root and writable by root alone: only the
// plugin, as root, may set a job's ceilings, so such a file fails closed.
Status SlurmJobAdminFile(uint32_t job_id, uint32_t uid, std::string* path);

}  // namespace vgpu
