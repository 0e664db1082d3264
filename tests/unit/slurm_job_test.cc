// Which Slurm job a process belongs to, and which job file it may read
// (common/config/slurm_job.h).
#include "common/config/slurm_job.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "common/container_paths.h"

namespace vgpu {
namespace {

TEST(SlurmJobTest, JobIdComesFromTheCgroupPath) {
  EXPECT_EQ(SlurmJobIdFromCgroup("0::/system.slice/slurmstepd.scope/job_42/step_0/user/task_0\n"),
            42u);
  EXPECT_EQ(SlurmJobIdFromCgroup("5:cpuset:/\n4:memory:/slurm/uid_1000/job_7/step_batch\n"), 7u);
  EXPECT_EQ(SlurmJobIdFromCgroup("0::/system.slice/slurmstepd.scope/job_9\n"), 9u);
  EXPECT_EQ(SlurmJobIdFromCgroup("0::/user.slice/user-1000.slice/session-3.scope\n"), 0u);
  EXPECT_EQ(SlurmJobIdFromCgroup("0::/x/job_abc/job_12x/job_/y\n"), 0u) << "not a job id";
  EXPECT_EQ(SlurmJobIdFromCgroup("0::/x/job_0/\n"), 0u);
}

TEST(SlurmJobTest, TheCgroupWinsOverTheEnvironment) {
  // The job cannot leave its cgroup, but it can set SLURM_JOB_ID to anything.
  uint32_t id = 0;
  ASSERT_TRUE(SlurmJobIdOf("0::/slurmstepd.scope/job_42/step_0\n", "43", &id).ok());
  EXPECT_EQ(id, 42u);
  ASSERT_TRUE(SlurmJobIdOf("0::/\n", "43", &id).ok());
  EXPECT_EQ(id, 43u) << "without Slurm's cgroups the environment names the job";
  ASSERT_TRUE(SlurmJobIdOf("0::/\n", nullptr, &id).ok());
  EXPECT_EQ(id, 0u);
}

TEST(SlurmJobTest, MalformedJobIdIsAnError) {
  for (const char* bad : {"", "x", "-1", "4294967295", "12 ", "0x10", "99999999999"}) {
    uint32_t id = 1;
    const Status s = SlurmJobIdOf("0::/\n", bad, &id);
    EXPECT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.message.find("SLURM_JOB_ID"), std::string::npos) << s.message;
    EXPECT_EQ(id, 0u);
  }
}

TEST(SlurmJobTest, NoJobOrNoFileMeansNoAdminFile) {
  std::string path = "x";
  ASSERT_TRUE(SlurmJobAdminFile(0, 0, &path).ok());
  EXPECT_TRUE(path.empty());
  // A job id no plugin wrote a file for.
  ASSERT_TRUE(SlurmJobAdminFile(4000000001u, static_cast<uint32_t>(getuid()), &path).ok());
  EXPECT_TRUE(path.empty());
}

TEST(SlurmJobTest, FileNamesJobAndUid) {
  EXPECT_EQ(SlurmJobFile(42, 1000), std::string(kSlurmJobDir) + "/job-42.1000.json");
}

}  // namespace
}  // namespace vgpu
