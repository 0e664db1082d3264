// vgpuctl slurm gres, spawned on the simulated node (its NVML through
// LD_LIBRARY_PATH) with fake device nodes: the gres.conf, Gres= and
// plugstack.conf lines. Label integration.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/ctl/test_util.h"

namespace vgpu::ctl {
namespace {

using testing::RunResult;
using testing::Vgpuctl;

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

class SlurmGresTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directory(tmp_.path() + "/dev");
    node_ = "slurm-gres-test-" + std::to_string(getpid());
  }
  void TearDown() override { std::filesystem::remove("/dev/shm/vgpu-sim-" + node_); }
  RunResult Gres(const std::string& devices, std::vector<std::string> more) {
    std::vector<std::string> args = {"slurm",     "gres",
                                     "--dev-dir", tmp_.path() + "/dev",
                                     "--libvgpu", "/opt/vgpu/lib/libvgpu.so",
                                     "--plugin",  "/opt/vgpu/lib/spank_vgpu.so"};
    args.insert(args.end(), more.begin(), more.end());
    setenv("LD_LIBRARY_PATH", VGPU_SIM_LIB_DIR, 1);
    setenv("VGPU_SIM_NODE", node_.c_str(), 1);
    setenv("VGPU_SIM_DEVICES", devices.c_str(), 1);
    RunResult r = Vgpuctl(args);
    unsetenv("LD_LIBRARY_PATH");
    unsetenv("VGPU_SIM_NODE");
    unsetenv("VGPU_SIM_DEVICES");
    return r;
  }
  void Devices(int n) {
    for (int i = 0; i < n; ++i) std::ofstream(tmp_.path() + "/dev/nvidia" + std::to_string(i));
  }
  testing::TempDir tmp_;
  std::string node_;
};

TEST_F(SlurmGresTest, GpuAndShardLinesPerGpu) {
  Devices(2);
  RunResult r = Gres("2x4GiB", {"--shard-mem", "1GiB", "--shard-compute", "25"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string dev = tmp_.path() + "/dev/nvidia";
  std::vector<std::string> lines = Lines(r.out);
  ASSERT_GE(lines.size(), 9u) << r.out;
  EXPECT_TRUE(lines[0].starts_with("# gres.conf for ")) << lines[0];
  EXPECT_EQ(lines[1], "Name=gpu File=" + dev + "0");
  EXPECT_EQ(lines[2], "Name=gpu File=" + dev + "1");
  EXPECT_EQ(lines[3], "Name=shard Count=4 File=" + dev + "0");
  EXPECT_EQ(lines[4], "Name=shard Count=4 File=" + dev + "1");
  EXPECT_EQ(lines[5], "# slurm.conf: GresTypes=gpu,shard");
  EXPECT_TRUE(lines[6].starts_with("# slurm.conf: NodeName=")) << lines[6];
  EXPECT_TRUE(lines[6].ends_with(" Gres=gpu:2,shard:8")) << lines[6];
  EXPECT_EQ(lines[7], "# plugstack.conf:");
  const std::string prefix =
      "# required /opt/vgpu/lib/spank_vgpu.so lib=/opt/vgpu/lib/libvgpu.so "
      "shard_mem=1073741824 shard_compute=25 devices=GPU-";
  EXPECT_TRUE(lines[8].starts_with(prefix)) << lines[8];
  EXPECT_EQ(std::count(lines[8].begin(), lines[8].end(), ','), 1) << "two UUIDs: " << lines[8];
  EXPECT_EQ(r.out.find("overcommit"), std::string::npos);
  // Plain files stand in for the device nodes: slurmd would ignore them.
  EXPECT_NE(r.err.find("warning: " + dev + "0 is not a device node: slurmd ignores it"),
            std::string::npos)
      << r.err;
}

TEST_F(SlurmGresTest, OvercommitSaysVgpudMustRun) {
  Devices(1);
  RunResult r = Gres("1x3GiB", {"--shard-mem", "1g", "--overcommit", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\n# --overcommit 2: more shards than device memory; the node needs vgpud"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("\nName=shard Count=6 File="), std::string::npos) << r.out;
  // Rounded down: 3GiB / 2GiB per shard is one shard.
  r = Gres("1x3GiB", {"--shard-mem", "2GiB"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\nName=shard Count=1 File="), std::string::npos) << r.out;
}

TEST_F(SlurmGresTest, Errors) {
  RunResult r = Gres("1x1GiB", {});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("/dev/nvidia0 does not exist"), std::string::npos) << r.err;
  Devices(1);
  r = Gres("1x1GiB", {"--shard-mem", "2GiB"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("less than one shard of 2 GiB"), std::string::npos) << r.err;
  r = Gres("1x1GiB", {"--shard-mem", "lots"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--shard-mem"), std::string::npos) << r.err;
  r = Gres("1x1GiB", {"--overcommit", "0"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--overcommit"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace vgpu::ctl
