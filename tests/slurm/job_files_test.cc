// The Slurm plugin's file-system side (cluster/slurm/job_files.h) in a
// temporary directory. Label unit.
#include "cluster/slurm/job_files.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/container_paths.h"

namespace vgpu::slurm {
namespace {

namespace fs = std::filesystem;

class SlurmJobFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/vgpu-slurm-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    chmod(root_.c_str(), 0755);
  }
  void TearDown() override { fs::remove_all(root_); }
  static std::string Read(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  static void Touch(const std::string& path) { std::ofstream(path) << "x"; }
  std::string root_;
};

TEST(SlurmJobFile, Path) {
  EXPECT_EQ(SlurmJobFile(123, 1000), "/run/vgpu-slurm/job-123.1000.json");
  EXPECT_STREQ(kSlurmJobDir, "/run/vgpu-slurm");
}

TEST_F(SlurmJobFilesTest, WritesAtomicallyWithMode0644) {
  const std::string dir = root_ + "/vgpu/slurm";
  ::umask(077);  // slurmstepd's may be narrow: the directories are still 0755
  Status st = PrepareJobDir(dir);
  ::umask(022);
  ASSERT_TRUE(st.ok()) << st.message;
  struct stat s {};
  ASSERT_EQ(stat(dir.c_str(), &s), 0);
  EXPECT_EQ(s.st_mode & 0777, 0755u);
  ASSERT_EQ(stat((root_ + "/vgpu").c_str(), &s), 0);
  EXPECT_EQ(s.st_mode & 0777, 0755u);
  const std::string file = dir + "/job-5.1000.json";
  ASSERT_TRUE(WriteFileAtomic(file, "{\"group\": \"slurm-5\"}\n").ok());
  ASSERT_TRUE(WriteFileAtomic(file, "{\"group\": \"slurm-5\", \"priority\": \"low\"}\n").ok());
  ASSERT_EQ(stat(file.c_str(), &s), 0);
  EXPECT_EQ(s.st_mode & 0777, 0644u);
  EXPECT_EQ(Read(file), "{\"group\": \"slurm-5\", \"priority\": \"low\"}\n");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1)
      << "no temporary file left";
  // Again, on the existing directory.
  EXPECT_TRUE(PrepareJobDir(dir).ok());
}

TEST_F(SlurmJobFilesTest, RefusesADirectoryOthersCanWriteOrNotSearch) {
  const std::string dir = root_ + "/open";
  ASSERT_EQ(mkdir(dir.c_str(), 0777), 0);
  chmod(dir.c_str(), 0777);
  Status st = PrepareJobDir(dir);
  EXPECT_NE(st.message.find("writable by others"), std::string::npos) << st.message;
  chmod(dir.c_str(), 0700);
  st = PrepareJobDir(dir);
  EXPECT_NE(st.message.find("not searchable by others (mode 0700)"), std::string::npos)
      << st.message;
  const std::string link = root_ + "/link";
  chmod(dir.c_str(), 0755);
  ASSERT_EQ(symlink(dir.c_str(), link.c_str()), 0);
  st = PrepareJobDir(link);
  EXPECT_NE(st.message.find("is not a directory"), std::string::npos) << st.message;
}

TEST_F(SlurmJobFilesTest, RemovesTheJobsFilesAndLedgerOnly) {
  const std::string dir = root_ + "/slurm", shm = root_ + "/shm";
  fs::create_directories(dir);
  fs::create_directories(shm);
  for (const char* f : {"job-12.1000.json", "job-12.0.json", "job-12.1000.json.tmp.abc123",
                        "job-123.1000.json", "job-1.1000.json", "job-12.x.json", "other.json"}) {
    Touch(dir + "/" + f);
  }
  for (const char* f :
       {"vgpu-ledger-1000-slurm-12", "vgpu-ledger-1000-slurm-123", "vgpu-ledger-1001-slurm-12"}) {
    Touch(shm + "/" + f);
  }
  int removed = 0;
  Status st = RemoveJobFiles(dir, shm, 12, 1000, &removed);
  ASSERT_TRUE(st.ok()) << st.message;
  EXPECT_EQ(removed, 4);
  for (const char* f : {"job-12.1000.json", "job-12.0.json", "job-12.1000.json.tmp.abc123"}) {
    EXPECT_FALSE(fs::exists(dir + "/" + f)) << f;
  }
  for (const char* f : {"job-123.1000.json", "job-1.1000.json", "job-12.x.json", "other.json"}) {
    EXPECT_TRUE(fs::exists(dir + "/" + f)) << f;
  }
  EXPECT_FALSE(fs::exists(shm + "/vgpu-ledger-1000-slurm-12"));
  EXPECT_TRUE(fs::exists(shm + "/vgpu-ledger-1000-slurm-123"));
  EXPECT_TRUE(fs::exists(shm + "/vgpu-ledger-1001-slurm-12")) << "another uid's group";
  // Nothing left, or no directory at all: no error.
  EXPECT_TRUE(RemoveJobFiles(dir, shm, 12, 1000, &removed).ok());
  EXPECT_EQ(removed, 0);
  EXPECT_TRUE(RemoveJobFiles(root_ + "/none", shm, 12, 1000, &removed).ok());
}

TEST(SlurmPreload, PrependsOnce) {
  const std::string lib = "/usr/lib/libvgpu.so";
  EXPECT_EQ(PrependPreload("", lib), lib);
  EXPECT_EQ(PrependPreload("/a.so", lib), lib + ":/a.so");
  EXPECT_EQ(PrependPreload("/a.so " + lib, lib), "/a.so " + lib);
  EXPECT_EQ(PrependPreload(lib + ":/a.so", lib), lib + ":/a.so");
  EXPECT_EQ(PrependPreload("/usr/lib/libvgpu.so.1", lib), lib + ":/usr/lib/libvgpu.so.1");
}

}  // namespace
}  // namespace vgpu::slurm
