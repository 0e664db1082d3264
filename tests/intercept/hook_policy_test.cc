// Every hook honours the gate its policy declares (intercept/hook_policy.h):
// hook_walk_client calls the whole hook list while the process is suspended
// (vgpuctl suspend: the quiesce gate is closed until resume). A hook declared
// kGate that returns, or an ungated one that blocks, is named in the failure.
#include <stdlib.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "driver/hook_list.h"
#include "intercept_fixture.h"
#include "intercept_test_util.h"

namespace vgpu::itest {
namespace {

class HookPolicyTest : public InterceptTest {
 protected:
  void SetUp() override {
    InterceptTest::SetUp();
    char tmpl[] = "/tmp/vgpu-hookwalk.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    run_dir_ = tmpl;
  }
  void TearDown() override {
    std::string rm = "rm -rf '" + run_dir_ + "'";
    if (std::system(rm.c_str()) != 0) ADD_FAILURE() << rm;
    InterceptTest::TearDown();
  }

  // vgpuctl CMD PID, once the agent's socket is there.
  RunResult Ctl(const std::string& cmd, pid_t pid) {
    std::string sock = run_dir_ + "/agent-" + std::to_string(pid) + ".sock";
    for (int i = 0; i < 200 && access(sock.c_str(), F_OK) != 0; ++i) usleep(20000);
    return RunToEnd({ITEST_VGPUCTL, cmd, std::to_string(pid)}, CleanEnv({"VGPU_RUN_DIR=" + run_dir_}), 20000);
  }

  std::string run_dir_;
};

TEST_F(HookPolicyTest, EveryHookHonoursItsDeclaredGate) {
  Proc c;
  ASSERT_TRUE(c.Start({ITEST_HOOK_WALK_CLIENT},
                      Env(true, {"VGPU_RUN_DIR=" + run_dir_})));
  ASSERT_TRUE(c.WaitKey("ready", nullptr, 20000)) << c.stdout_text() << c.StderrText();
  RunResult s = Ctl("suspend", c.pid());
  ASSERT_TRUE(s.ExitedZero()) << s.Describe();
  c.Send("go");
  ASSERT_TRUE(c.WaitKey("checked", nullptr, 30000)) << c.stdout_text() << c.StderrText();
  RunResult r = Ctl("resume", c.pid());
  c.Send("go");
  c.Finish(30000);
  EXPECT_TRUE(r.ExitedZero()) << r.Describe();
  const Output& o = c.out();
#define VGPU_COUNT_HOOK(sym) +1
  constexpr long long kHooks = 0 VGPU_CU_HOOKS(VGPU_COUNT_HOOK) VGPU_NVML_HOOKS(VGPU_COUNT_HOOK);
#undef VGPU_COUNT_HOOK
  EXPECT_EQ(o.Int("walked"), kHooks) << c.stdout_text();
  EXPECT_FALSE(o.Has("missing")) << "a hook is not exported: " << o.Get("missing");
  EXPECT_EQ(o.Get("gated_returned"), "") << "declared kGate, but ran while the process was suspended";
  EXPECT_EQ(o.Get("ungated_blocked"), "") << "declared ungated, but blocked while the process was suspended";
  EXPECT_FALSE(o.Has("stuck")) << "never returned after resume: " << o.Get("stuck");
  EXPECT_TRUE(o.Has("done")) << c.stdout_text() << c.StderrText();
}

}  // namespace
}  // namespace vgpu::itest
