// Allocation call sites: capture, live bytes per site, description.
#include "common/call_sites.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <string>

// Two distinct call sites, exported (ENABLE_EXPORTS) so that dladdr names them.
extern "C" __attribute__((noinline)) uint64_t vgpu_test_site_a(vgpu::CallSites* cs) {
  uint64_t s = cs->Capture();
  asm volatile("" ::: "memory");  // keep the call out of a tail position
  return s;
}
extern "C" __attribute__((noinline)) uint64_t vgpu_test_site_b(vgpu::CallSites* cs) {
  uint64_t s = cs->Capture();
  asm volatile("" ::: "memory");
  return s;
}

namespace vgpu {
namespace {

TEST(CallSitesTest, DisabledCapturesNothingAndLoadsNoUnwinder) {
  CallSites cs;
  EXPECT_FALSE(cs.enabled());
  EXPECT_EQ(cs.Capture(), 0u);
  cs.OnAlloc(1, 100, 0);
  EXPECT_TRUE(cs.Top(10).empty());
  // Off means libunwind is never loaded into the process.
  EXPECT_EQ(dlopen("libunwind.so.8", RTLD_NOW | RTLD_NOLOAD), nullptr);
}

TEST(CallSitesTest, LiveBytesPerSiteLargestFirst) {
  CallSites cs;
  Status enabled = cs.Enable(nullptr);
  ASSERT_TRUE(enabled.ok()) << enabled.message;
  uint64_t ids[2] = {};
  volatile int times = 2;  // not unrolled: one call instruction, reached twice
  for (int i = 0; i < times; ++i) ids[i] = vgpu_test_site_a(&cs);
  uint64_t a = ids[0], b = vgpu_test_site_b(&cs);
  ASSERT_NE(a, 0u);
  ASSERT_NE(b, 0u);
  ASSERT_NE(a, b) << "two call sites must be told apart";
  EXPECT_EQ(ids[1], a) << "the same site must map to the same id";
  EXPECT_NE(cs.Describe(a).find("vgpu_test_site_a"), std::string::npos) << cs.Describe(a);
  EXPECT_NE(cs.Describe(b).find("vgpu_test_site_b"), std::string::npos) << cs.Describe(b);

  cs.OnAlloc(/*key=*/1, 100, a);
  cs.OnAlloc(2, 300, b);
  cs.OnAlloc(3, 50, a);
  auto top = cs.Top(10);
  ASSERT_EQ(top.size(), 2u);
  EXPECT_NE(top[0].where.find("vgpu_test_site_b"), std::string::npos);
  EXPECT_EQ(top[0].live_bytes, 300u);
  EXPECT_EQ(top[1].live_bytes, 150u);
  EXPECT_EQ(top[1].live_count, 2u);

  cs.OnFree(2);
  cs.OnFree(2);   // twice: the second is unknown and ignored
  cs.OnFree(99);  // never allocated
  top = cs.Top(1);
  ASSERT_EQ(top.size(), 1u);
  EXPECT_NE(top[0].where.find("vgpu_test_site_a"), std::string::npos);
  EXPECT_EQ(top[0].live_bytes, 150u);
  EXPECT_EQ(top[0].total_count, 2u);

  // A key recorded again (its memory freed behind our back) moves its bytes.
  cs.OnAlloc(1, 400, b);
  top = cs.Top(10);
  EXPECT_EQ(top[0].live_bytes, 400u);
  EXPECT_EQ(top[1].live_bytes, 50u);
}

TEST(CallSitesTest, FramesOfTheSkippedModuleAreNotTheSite) {
  CallSites cs;
  // Skipping this test's own module: the site is found further up the stack,
  // outside it (the C library's start-up code).
  Status enabled = cs.Enable(reinterpret_cast<const void*>(&vgpu_test_site_a));
  ASSERT_TRUE(enabled.ok()) << enabled.message;
  uint64_t s = vgpu_test_site_a(&cs);
  ASSERT_NE(s, 0u) << "the C library's frames lie outside the skipped module";
  EXPECT_EQ(cs.Describe(s).find("vgpu_test_site_a"), std::string::npos) << cs.Describe(s);
  const std::string innermost = cs.Describe(s).substr(0, cs.Describe(s).find(" < "));
  EXPECT_EQ(innermost.find("call_sites_test"), std::string::npos) << cs.Describe(s);
}

}  // namespace
}  // namespace vgpu
