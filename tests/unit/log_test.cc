// common/log.h: off by default, one line per message to the target, levels.
#include "common/log.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

namespace vgpu {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(LogTest, OffByDefaultThenLinesAtOrAboveTheLevel) {
  EXPECT_FALSE(LogEnabled(LogLevel::kError));
  VGPU_LOG(kError, "dropped {}", 1);  // no target: nothing, anywhere

  char path[] = "/tmp/vgpu-log-test-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  ASSERT_TRUE(InitLog("vgpu", LogLevel::kWarn, path));
  EXPECT_TRUE(LogEnabled(LogLevel::kWarn));
  EXPECT_FALSE(LogEnabled(LogLevel::kInfo));
  VGPU_LOG(kWarn, "quota {} on device {}", "1 GiB", 0);
  VGPU_LOG(kInfo, "not at this level");
  VGPU_LOG(kError, "second");
  const std::string want_prefix = "vgpu[" + std::to_string(getpid()) + "] ";
  EXPECT_EQ(ReadAll(path), want_prefix + "warn: quota 1 GiB on device 0\n" + want_prefix +
                               "error: second\n");
  unlink(path);
  EXPECT_FALSE(InitLog("vgpu", LogLevel::kWarn, "/nonexistent-dir/x.log"));
}

}  // namespace
}  // namespace vgpu
