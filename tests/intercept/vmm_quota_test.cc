// Integration tests of the quota under VGPU_VMM=on (docs/vmm.md): the ledger
// is charged with physical chunks, whole granules, and freed chunks may stay
// cached; none of that may ever make an allocation fail that fits.
#include <fstream>
#include <iterator>
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

// Under VGPU_VMM=on a freed chunk's physical memory may stay held and charged
// in a small cache (docs/vmm.md): it is never the reason an allocation fails. With a
// 64 MiB quota a freed 4 MiB chunk is cached; a 62 MiB allocation then
// evicts it rather than fail (no quota refusal is logged), and so does a
// 62 MiB allocation on a 64 MiB device without a quota.
TEST_F(InterceptTest, CachedChunksNeverCauseOutOfMemory) {
  const PathParam& p = kPaths[0];
  const std::string log = TempFile("cache.log");
  RunResult quota = Client(p, {"init", "ctx:0", "alloc:4M", "free", "alloc:62M", "alloc:2M", "meminfo"},
                           Env(true, {"VGPU_DEVICE_MEMORY_LIMIT=64MiB", "VGPU_VMM=on", "VGPU_LOG_FILE=" + log,
                                      "VGPU_LOG_LEVEL=warn"}));
  ASSERT_CLEAN_EXIT(quota);
  EXPECT_EQ(quota.out.All("alloc"), (std::vector<std::string>{"0", "0", "0"})) << quota.Describe();
  EXPECT_EQ(quota.out.Get("free"), "0") << quota.Describe();
  std::ifstream in(log);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text.find("out of device memory quota"), std::string::npos) << text;

  nodes_.push_back(node_);
  node_ = id_ + "-64m";  // a node of its own: the size is fixed when a node is created
  RunResult device = Client(p, {"init", "ctx:0", "alloc:4M", "free", "alloc:62M"},
                            Env(true, {"VGPU_SIM_DEVICES=1x64MiB", "VGPU_VMM=on"}));
  ASSERT_CLEAN_EXIT(device);
  EXPECT_EQ(device.out.All("alloc"), (std::vector<std::string>{"0", "0"})) << device.Describe();
}

// A cached chunk is still held: the group's ledger (NVML's used memory, seen
// from another member) shows it until the context that freed it is destroyed.
// The holder's own cuMemGetInfo gives its cache back first and shows the
// memory free, as the driver would after the free.
TEST_F(InterceptTest, CachedChunkIsHeldUntilItsContextGoes) {
  const PathParam& p = kPaths[1];
  auto env = Env(true, {"VGPU_DEVICE_MEMORY_LIMIT=64MiB", GroupVar(), "VGPU_VMM=on"});
  Proc holder;
  ASSERT_TRUE(holder.Start(Argv(p, {"init", "ctxnew:0", "alloc:4M", "free", "wait", "ctxdestroy", "wait",
                                    "ctx:0", "alloc:4M", "free", "meminfo", "wait"}),
                           env));
  ASSERT_TRUE(holder.WaitKey("waiting", nullptr, 20000)) << holder.StderrText();
  RunResult cached = Client(p, {"nvml"}, env);
  holder.Send("go");
  ASSERT_TRUE(holder.WaitKey("waiting", nullptr, 20000)) << holder.StderrText();
  RunResult destroyed = Client(p, {"nvml"}, env);
  holder.Send("go");
  ASSERT_TRUE(holder.WaitKey("waiting", nullptr, 20000)) << holder.StderrText();
  RunResult trimmed = Client(p, {"nvml"}, env);
  holder.Send("go");
  holder.Finish(20000);
  EXPECT_EQ(cached.out.Int("nvml0.used"), static_cast<long long>(4 * kMiB)) << cached.Describe();
  EXPECT_EQ(destroyed.out.Int("nvml0.used"), 0) << destroyed.Describe();
  EXPECT_EQ(holder.out().Get("ctxdestroy"), "0");
  EXPECT_EQ(holder.out().Int("free"), static_cast<long long>(k64MiB)) << holder.stdout_text();
  EXPECT_EQ(trimmed.out.Int("nvml0.used"), 0) << trimmed.Describe();
}

}  // namespace
}  // namespace vgpu::itest
