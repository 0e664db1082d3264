// Integration tests of the quota under VGPU_VMM=on (docs/vmm.md): the ledger
// is charged with physical chunks, whole granules.
#include <string>
#include <vector>

#include "intercept_fixture.h"
#include "intercept_test_util.h"

namespace vgpu::itest {
namespace {

// Under VGPU_VMM=on the quota is charged with the physical memory the job
// holds, whole 2 MiB granules (docs/vmm.md): 3 MB pieces take 4 MiB each, so
// 16 fit in 64 MiB; a 256-byte allocation shows a whole 2 MiB chunk as used,
// and later small ones share it until it is full.
TEST_P(PathTest, QuotaChargesWholeGranulesUnderVmm) {
  const PathParam& p = GetParam();
  auto env = Env(true, {"VGPU_DEVICE_MEMORY_LIMIT=64MiB", "VGPU_VMM=on"});
  RunResult r = Client(p, {"init", "ctx:0", "fill:64M:3000000", "meminfo", "alloc:1"}, env);
  ASSERT_CLEAN_EXIT(r);
  EXPECT_EQ(r.out.Get("fill"), std::to_string(kOutOfMemory)) << r.Describe();
  EXPECT_EQ(r.out.Int("fill_bytes"), 16 * 3000000LL);
  EXPECT_EQ(r.out.Get("free"), "0");
  EXPECT_EQ(r.out.Int("total"), static_cast<long long>(k64MiB));
  EXPECT_EQ(r.out.Get("alloc"), std::to_string(kOutOfMemory)) << "a new chunk over the quota\n" << r.Describe();

  RunResult r2 = Client(p, {"init", "ctx:0", "alloc:256", "meminfo", "alloc:256", "meminfo", "alloc:62M", "meminfo",
                            "alloc:1", "alloc:1M"},
                        env);
  ASSERT_CLEAN_EXIT(r2);
  EXPECT_EQ(r2.out.All("alloc"),
            (std::vector<std::string>{"0", "0", "0", "0", std::to_string(kOutOfMemory)})) << r2.Describe();
  EXPECT_EQ(r2.out.All("free"), (std::vector<std::string>{std::to_string(62 * kMiB), std::to_string(62 * kMiB),
                                                          "0"})) << r2.Describe();
}

}  // namespace
}  // namespace vgpu::itest
