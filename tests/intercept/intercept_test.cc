// Integration tests of libvgpu.so on the simulated node: real processes (the
// intercept_client program, the sample training loop) run under
// LD_PRELOAD=libvgpu.so with LD_LIBRARY_PATH at the simulated driver, and the
// tests assert on what they print. Every test uses its own simulated node and
// quota group (names include this process's pid and a counter) and removes
// their /dev/shm objects afterwards.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "intercept_fixture.h"
#include "intercept_test_util.h"
#include "quota/quota_ledger.h"

namespace vgpu::itest {
namespace {

INSTANTIATE_TEST_SUITE_P(Paths, PathTest, ::testing::ValuesIn(kPaths), ParamName);

// ---------------------------------------------------------------------------
// The hook is reached through every path: with a 64 MiB quota a 65 MiB
// allocation fails, and cuMemGetInfo shows the quota view.
TEST_P(PathTest, HookIsReachedAndQuotaApplies) {
  const PathParam& p = GetParam();
  std::vector<std::string> ops = {"init", "ctx:0", "meminfo", "alloc:65M", "alloc:10M", "meminfo"};
  RunResult control = Client(p, ops, Env(false, {"VGPU_DEVICE_MEMORY_LIMIT=64MiB"}));
  ASSERT_CLEAN_EXIT(control);
  // Without libvgpu the variable means nothing: both allocations succeed.
  EXPECT_EQ(control.out.All("alloc"), (std::vector<std::string>{"0", "0"})) << control.Describe();
  EXPECT_EQ(control.out.Get("init.lib"), "libcuda.so.1");

  RunResult r = Client(p, ops, Env(true, {"VGPU_DEVICE_MEMORY_LIMIT=64MiB"}));
  ASSERT_CLEAN_EXIT(r);
  EXPECT_EQ(r.out.Get("init"), "0");
  // The entry points the program got are libvgpu's hooks, ptsz variant included.
  EXPECT_EQ(r.out.Get("init.lib"), "libvgpu.so") << r.Describe();
  EXPECT_EQ(r.out.Get("init.lib_ptsz"), "libvgpu.so") << r.Describe();
  EXPECT_EQ(r.out.Get("init.lib_count"), "libvgpu.so") << r.Describe();
  EXPECT_EQ(r.out.All("alloc"), (std::vector<std::string>{std::to_string(kOutOfMemory), "0"}))
      << r.Describe();
  EXPECT_EQ(r.out.All("total"),
            (std::vector<std::string>{std::to_string(k64MiB), std::to_string(k64MiB)}));
  EXPECT_EQ(r.out.All("free"),
            (std::vector<std::string>{std::to_string(k64MiB), std::to_string(k64MiB - 10 * kMiB)}));
  // libvgpu never writes to the application's stderr by default.
  EXPECT_EQ(r.stderr_text, "");
}

// Every allocation path counts, exactly, and returns what it took: X takes
// 40 MiB (free shows 24 MiB), a 30 MiB cuMemAlloc beside it fails, the
// matching free gives all 64 MiB back. In both VGPU_VMM modes.
TEST_P(PathTest, EveryAllocationPathCounts) {
  const PathParam& p = GetParam();
  struct Kind {
    const char* name;
    std::vector<std::string> take, give;
  };
  const std::vector<Kind> kinds = {
      {"cuMemAlloc", {"alloc:40M"}, {"free"}},
      {"cuMemAllocPitch", {"pitch:40960:1024"}, {"free"}},
      {"cuMemAllocManaged", {"managed:40M"}, {"free"}},
      {"cuMemAllocAsync", {"async:40M", "sync"}, {"freeasync", "sync"}},
      {"cuMemAllocAsync_ptsz", {"async_ptsz:40M", "sync"}, {"freeasync_ptsz", "sync"}},
      {"cuMemAllocFromPoolAsync", {"pool:40M", "sync"}, {"freeasync", "sync"}},
      {"cuMemCreate", {"create:40M"}, {"release"}},
      // Released while mapped: a driver frees it only at the unmap.
      {"cuMemCreate mapped", {"create:40M", "map", "release"}, {"unmap"}},
      {"cuArrayCreate", {"array:40960:1024"}, {"arrdestroy"}},
      {"cuArray3DCreate", {"array3d:4096:1024:10"}, {"arrdestroy"}},
  };
  for (const char* vmm : {"on", "off"}) {
    for (const Kind& k : kinds) {
      SCOPED_TRACE(std::string(k.name) + ", VGPU_VMM=" + vmm);
      std::vector<std::string> ops = {"init", "ctx:0"};
      ops.insert(ops.end(), k.take.begin(), k.take.end());
      ops.insert(ops.end(), {"meminfo", "alloc:30M"});
      ops.insert(ops.end(), k.give.begin(), k.give.end());
      ops.insert(ops.end(), {"meminfo", "alloc:60M", "free"});
      RunResult r = Client(
          p, ops, Env(true, {"VGPU_DEVICE_MEMORY_LIMIT=64MiB", std::string("VGPU_VMM=") + vmm}));
      ASSERT_CLEAN_EXIT(r);
      const std::string op = k.take[0].substr(0, k.take[0].find(':'));
      ASSERT_EQ(r.out.Get(op), "0") << r.Describe();
      EXPECT_EQ(r.out.All("free"),
                (std::vector<std::string>{std::to_string(24 * kMiB), std::to_string(k64MiB)}))
          << r.Describe();
      std::vector<std::string> allocs{std::to_string(kOutOfMemory), "0"};
      if (op == "alloc") allocs.insert(allocs.begin(), "0");
      EXPECT_EQ(r.out.All("alloc"), allocs) << r.Describe();
      for (const std::string& g : k.give)
        EXPECT_EQ(r.out.Get(g == "free" ? "freed" : g), "0") << g << "\n" << r.Describe();
    }
  }
}

// A mipmapped array counts too: all its levels (4096 x 4096 x 1 byte, one
// level: 16 MiB). A driver that lacks the entry point answers
// CUDA_ERROR_NOT_SUPPORTED from its stub; libvgpu must then behave exactly like
// the driver (no crash, same result) and the accounting cannot be checked.
TEST_P(PathTest, MipmappedArray) {
  const PathParam& p = GetParam();
  RunResult plain = Client(p, {"init", "ctx:0", "mipmap:4096:4096:1"}, Env(false));
  ASSERT_CLEAN_EXIT(plain);
  if (plain.out.Get("mipmap") != "0") {
    if (std::string(p.name) !=
        "link") {  // the linked case: HookOfEntryPointMissingInDriverFailsCleanly
      RunResult r = Client(p, {"init", "ctx:0", "mipmap:4096:4096:1", "alloc:1M"},
                           Env(true, {"VGPU_DEVICE_MEMORY_LIMIT=64MiB"}));
      ASSERT_CLEAN_EXIT(r);
      EXPECT_EQ(r.out.Get("mipmap"), plain.out.Get("mipmap")) << r.Describe();
      EXPECT_EQ(r.out.Get("alloc"), "0");
    }
    GTEST_SKIP() << "the driver has no cuMipmappedArrayCreate (mipmap=" << plain.out.Get("mipmap")
                 << ")";
  }
  RunResult r = Client(p, {"init", "ctx:0", "mipmap:4096:4096:1", "meminfo"},
                       Env(true, {"VGPU_DEVICE_MEMORY_LIMIT=64MiB"}));
  ASSERT_CLEAN_EXIT(r);
  EXPECT_EQ(r.out.Get("mipmap"), "0");
  EXPECT_EQ(r.out.Int("free"), static_cast<long long>(k64MiB - 16 * kMiB));
}

// A program linked against cuda.h may reference an entry point that the
// installed driver lacks (weakly, as the linked client does for
// cuMipmappedArrayCreate). Without libvgpu the symbol is null and the program
// does not call it; with libvgpu preloaded, the symbol resolves to libvgpu's
// exported hook, which must then fail cleanly rather than call a null real
// entry point. The simulated driver exports every symbol of the toolkit's stub
// libcuda.so, as a real driver does, so this skips there; it runs against an
// older real driver.
// CUDA 3.x names that would allocate, launch or report memory outside the
// accounting are refused under libvgpu, by symbol and through
// cuGetProcAddress; the driver itself serves them.
TEST_F(InterceptTest, LegacyEntryPointsOutsideTheAccountingAreRefused) {
  const PathParam& p = kPaths[0];
  RunResult plain = Client(p, {"init", "ctx:0", "legacy"}, Env(false));
  ASSERT_CLEAN_EXIT(plain);
  EXPECT_EQ(plain.out.Get("legacy.meminfo"), "0") << plain.Describe();
  RunResult r =
      Client(p, {"init", "ctx:0", "legacy"}, Env(true, {"VGPU_DEVICE_MEMORY_LIMIT=64MiB"}));
  ASSERT_CLEAN_EXIT(r);
  EXPECT_EQ(r.out.Get("legacy.meminfo"), "801") << r.Describe();  // CUDA_ERROR_NOT_SUPPORTED
  for (const char* sym : {"cuMemAlloc", "cuArrayCreate", "cuLaunchGrid", "cuMemGetInfo"}) {
    EXPECT_EQ(r.out.Get(std::string("legacy.same.") + sym), "1") << sym << "\n" << r.Describe();
  }
}

// Graph memory allocation nodes would take device memory at each launch,
// outside the quota: refused under libvgpu, by name and through the generic
// node API, which still builds every other node. (The simulated node does
// not model them either, so where the function comes from is what tells.)
// Graph memory is charged when a launch takes it, for as long as the
// driver's graph pool keeps it (until cuDeviceGraphMemTrim), and a launch the
// quota cannot hold fails with nothing taken. Quota 96 MiB: a 64 MiB graph
// allocation leaves no room for 48 MiB more.
TEST_F(InterceptTest, GraphMemoryIsChargedFromLaunchToTrim) {
  const PathParam& p = kPaths[0];
  RunResult plain = Client(p, {"init", "ctx:0", "graphmem"}, Env(false));
  ASSERT_CLEAN_EXIT(plain);
  EXPECT_EQ(plain.out.Get("graphmem.alloc_lib"), "libcuda") << plain.Describe();
  EXPECT_EQ(plain.out.Get("graphmem.held_alloc"), "0") << plain.Describe();  // no quota
  RunResult r = Client(p, {"init", "ctx:0", "graphmem"},
                       Env(true, {"VGPU_DEVICE_MEMORY_LIMIT=96MiB"}));
  ASSERT_CLEAN_EXIT(r);
  EXPECT_EQ(r.out.Get("graphmem.alloc_lib"), "libvgpu") << r.Describe();
  EXPECT_EQ(r.out.Get("graphmem.add_lib"), "libvgpu") << r.Describe();
  EXPECT_EQ(r.out.Get("graphmem.alloc"), "0") << r.Describe();
  EXPECT_EQ(r.out.Get("graphmem.generic"), "0") << r.Describe();
  EXPECT_EQ(r.out.Get("graphmem.empty"), "0") << r.Describe();
  EXPECT_EQ(r.out.Get("graphmem.launch"), "0") << r.Describe();
  EXPECT_EQ(r.out.Get("graphmem.held_alloc"), "2") << r.Describe();  // CUDA_ERROR_OUT_OF_MEMORY
  EXPECT_EQ(r.out.Get("graphmem.free"), "0") << r.Describe();
  EXPECT_EQ(r.out.Get("graphmem.cached_alloc"), "2") << r.Describe();  // the pool keeps it
  EXPECT_EQ(r.out.Get("graphmem.trim"), "0") << r.Describe();
  EXPECT_EQ(r.out.Get("graphmem.trimmed_alloc"), "0") << r.Describe();
  EXPECT_EQ(r.out.Get("graphmem.big_launch"), "2") << r.Describe();  // 128 MiB > 96 MiB
  // Captured allocations: nothing at capture, the launch's pool afterwards.
  EXPECT_EQ(r.out.Get("graphmem.captured_alloc"), "0") << r.Describe();
  EXPECT_EQ(r.out.Get("graphmem.capturing_alloc"), "0") << r.Describe();
  EXPECT_EQ(r.out.Get("graphmem.captured_launch"), "0") << r.Describe();
  EXPECT_EQ(r.out.Get("graphmem.captured_cached_alloc"), "2") << r.Describe();
  EXPECT_EQ(r.out.Get("graphmem.captured_trimmed_alloc"), "0") << r.Describe();
}

// With the device set remapped, an allocation node naming device 0 takes its
// memory on the physical device 0 stands for, and that device's quota pays.
TEST_F(InterceptTest, GraphMemoryOfARemappedDeviceIsChargedToIt) {
  const PathParam& p = kPaths[0];
  RunResult r = Client(p, {"init", "ctx:0", "graphmem"},
                       Env(true, {"VGPU_SIM_DEVICES=4x16GiB", "VGPU_VISIBLE_DEVICES=2",
                                  "VGPU_DEVICE_MEMORY_LIMIT=96MiB"}));
  ASSERT_CLEAN_EXIT(r);
  EXPECT_EQ(r.out.Get("graphmem.launch"), "0") << r.Describe();
  EXPECT_EQ(r.out.Get("graphmem.held_alloc"), "2") << r.Describe();
  EXPECT_EQ(r.out.Get("graphmem.trim"), "0") << r.Describe();
  EXPECT_EQ(r.out.Get("graphmem.trimmed_alloc"), "0") << r.Describe();
  EXPECT_EQ(r.out.Get("graphmem.big_launch"), "2") << r.Describe();
}

TEST_F(InterceptTest, HookOfEntryPointMissingInDriverFailsCleanly) {
  const PathParam& p = kPaths[0];
  RunResult plain = Client(p, {"init", "ctx:0", "mipmap:64:64:3"}, Env(false));
  ASSERT_CLEAN_EXIT(plain);
  if (plain.out.Get("mipmap") != "unavailable")
    GTEST_SKIP() << "the driver has cuMipmappedArrayCreate";
  RunResult r = Client(p, {"init", "ctx:0", "mipmap:64:64:3", "alloc:1M"},
                       Env(true, {"VGPU_DEVICE_MEMORY_LIMIT=64MiB"}));
  ASSERT_TRUE(r.ExitedZero()) << "libvgpu's cuMipmappedArrayCreate hook with no real entry point\n"
                              << r.Describe();
  EXPECT_NE(r.out.Get("mipmap"), "0") << r.Describe();
  EXPECT_EQ(r.out.Get("alloc"), "0");
}

// ---------------------------------------------------------------------------
// Freed memory returns: 1000 alloc/free pairs of 48 MiB never leak quota;
// destroying a context or resetting the primary context returns its memory.
// In both VGPU_VMM modes.
TEST_P(PathTest, FreedMemoryReturns) {
  const PathParam& p = GetParam();
  for (const char* vmm : {"on", "off"}) {
    SCOPED_TRACE(std::string("VGPU_VMM=") + vmm);
    auto env = Env(true, {"VGPU_DEVICE_MEMORY_LIMIT=64MiB", std::string("VGPU_VMM=") + vmm});
    RunResult loop = Client(p, {"init", "ctx:0", "loop:1000:48M", "meminfo"}, env);
    ASSERT_CLEAN_EXIT(loop);
    EXPECT_EQ(loop.out.Get("loop"), "0") << loop.Describe();
    EXPECT_EQ(loop.out.Int("free"), static_cast<long long>(k64MiB));

    RunResult ctx = Client(p,
                           {"init", "ctxnew:0", "alloc:40M", "alloc:20M", "meminfo", "ctxdestroy",
                            "ctx:0", "meminfo", "alloc:60M"},
                           env);
    ASSERT_CLEAN_EXIT(ctx);
    EXPECT_EQ(ctx.out.Get("ctxdestroy"), "0");
    EXPECT_EQ(ctx.out.All("free"),
              (std::vector<std::string>{std::to_string(4 * kMiB), std::to_string(k64MiB)}))
        << ctx.Describe();
    EXPECT_EQ(ctx.out.All("alloc"), (std::vector<std::string>{"0", "0", "0"})) << ctx.Describe();

    RunResult reset =
        Client(p, {"init", "ctx:0", "alloc:40M", "reset:0", "ctx:0", "meminfo", "alloc:60M"}, env);
    ASSERT_CLEAN_EXIT(reset);
    EXPECT_EQ(reset.out.Get("reset"), "0");
    EXPECT_EQ(reset.out.Int("free"), static_cast<long long>(k64MiB)) << reset.Describe();
    EXPECT_EQ(reset.out.All("alloc"), (std::vector<std::string>{"0", "0"})) << reset.Describe();
  }
}

// The quota is exact on the driver's allocator (VGPU_VMM=off): 64 MiB in
// odd-sized pieces fits, one more byte does not.
TEST_P(PathTest, QuotaIsExactToTheByte) {
  const PathParam& p = GetParam();
  auto env = Env(true, {"VGPU_DEVICE_MEMORY_LIMIT=64MiB", "VGPU_VMM=off"});
  RunResult r = Client(p, {"init", "ctx:0", "fill:64M:1000000", "meminfo", "alloc:1"}, env);
  ASSERT_CLEAN_EXIT(r);
  EXPECT_EQ(r.out.Get("fill"), "0") << r.Describe();
  EXPECT_EQ(r.out.Int("fill_bytes"), static_cast<long long>(k64MiB));
  EXPECT_EQ(r.out.Get("free"), "0");
  EXPECT_EQ(r.out.Int("total"), static_cast<long long>(k64MiB));
  EXPECT_EQ(r.out.Get("alloc"), std::to_string(kOutOfMemory)) << "one byte over the quota\n"
                                                              << r.Describe();
  // Free the last piece, 67108864 - 67 * 1000000 = 108864 bytes: one byte
  // more than that does not fit, exactly that does.
  RunResult r2 =
      Client(p, {"init", "ctx:0", "fill:64M:1000000", "free", "alloc:108865", "alloc:108864"}, env);
  ASSERT_CLEAN_EXIT(r2);
  EXPECT_EQ(r2.out.All("alloc"), (std::vector<std::string>{std::to_string(kOutOfMemory), "0"}))
      << r2.Describe();
}

// ---------------------------------------------------------------------------
// Device mapping: 4 simulated devices, the process sees physical 2 and 0.
struct PhysDevice {
  std::string uuid, pci;
};

class DeviceMapTest : public PathTest {
 protected:
  std::vector<PhysDevice> Physical(const PathParam& p) {
    RunResult r = Client(p, {"init", "devices"}, Env(false, {"VGPU_SIM_DEVICES=4x16GiB"}));
    EXPECT_TRUE(r.ExitedZero()) << r.Describe();
    std::vector<PhysDevice> d;
    for (int i = 0; i < r.out.Int("count"); ++i) {
      d.push_back({r.out.Get("dev" + std::to_string(i) + ".uuid"),
                   r.out.Get("dev" + std::to_string(i) + ".pci")});
    }
    return d;
  }
};

INSTANTIATE_TEST_SUITE_P(Paths, DeviceMapTest, ::testing::ValuesIn(kPaths), ParamName);

TEST_P(DeviceMapTest, VisibleDevicesByIndexAndUuid) {
  const PathParam& p = GetParam();
  std::vector<PhysDevice> phys = Physical(p);
  ASSERT_EQ(phys.size(), 4u);
  for (const std::string& visible : {std::string("2,0"), phys[2].uuid + "," + phys[0].uuid}) {
    SCOPED_TRACE("VGPU_VISIBLE_DEVICES=" + visible);
    RunResult r =
        Client(p,
               {"init", "devices", "bypci:" + phys[1].pci, "bypci:" + phys[3].pci,
                "bypci:" + phys[0].pci, "getdev:2", "ctx:1", "ctxdev", "alloc:1M", "ptrdev",
                "ctx:0", "ctxdev", "alloc:1M", "ptrdev"},
               Env(true, {"VGPU_SIM_DEVICES=4x16GiB", "VGPU_VISIBLE_DEVICES=" + visible}));
    ASSERT_CLEAN_EXIT(r);
    EXPECT_EQ(r.out.Get("count"), "2");
    EXPECT_EQ(r.out.Get("dev0.uuid"), phys[2].uuid);
    EXPECT_EQ(r.out.Get("dev0.pci"), phys[2].pci);
    EXPECT_EQ(r.out.Get("dev1.uuid"), phys[0].uuid);
    EXPECT_EQ(r.out.Get("dev1.pci"), phys[0].pci);
    std::vector<std::string> bypci = r.out.All("bypci"), bydev = r.out.All("bypci.dev");
    ASSERT_EQ(bypci.size(), 3u);
    EXPECT_NE(bypci[0], "0") << "hidden physical device 1 reachable by PCI id";
    EXPECT_NE(bypci[1], "0") << "hidden physical device 3 reachable by PCI id";
    EXPECT_EQ(bypci[2], "0");
    EXPECT_EQ(bydev[2], "1");  // physical 0 is virtual 1
    EXPECT_EQ(r.out.Get("getdev"), std::to_string(kInvalidDevice));
    EXPECT_EQ(r.out.All("ctxdev.dev"), (std::vector<std::string>{"1", "0"}));
    EXPECT_EQ(r.out.All("ptrdev.ord"), (std::vector<std::string>{"1", "0"}));
  }
}

// The generated device queries (hook_policy.h, VGPU_DEVICE_MAPPED_PASSTHROUGH)
// translate every device argument, each in its own position: with physical
// devices 0 and 2 peers (only), visible 2,0 makes virtual 0 and 1 peers; a
// hidden or unknown device in either position is an invalid device.
TEST_F(InterceptTest, DeviceQueriesTranslateEveryDeviceArgument) {
  const PathParam& p = kPaths[2];
  RunResult r = Client(p, {"init", "peer:0:1", "peer:1:0", "peer:0:2", "peer:2:0"},
                       Env(true, {"VGPU_SIM_DEVICES=4x16GiB", "VGPU_SIM_P2P=0-2",
                                  "VGPU_VISIBLE_DEVICES=2,0"}));
  ASSERT_CLEAN_EXIT(r);
  const std::string invalid = std::to_string(kInvalidDevice);
  EXPECT_EQ(r.out.All("peer"), (std::vector<std::string>{"0", "0", invalid, invalid}));
  EXPECT_EQ(r.out.All("peer.can")[0], "1") << r.Describe();
  EXPECT_EQ(r.out.All("peer.can")[1], "1") << r.Describe();
  EXPECT_EQ(r.out.All("p2p"), (std::vector<std::string>{"0", "0", invalid, invalid}));
  EXPECT_EQ(r.out.All("p2p.value")[0], "1") << r.Describe();
  // Without the remap, physical 0 and 1 are not peers: the answer above was
  // about physical 2 and 0.
  RunResult plain = Client(p, {"init", "peer:0:1"},
                           Env(true, {"VGPU_SIM_DEVICES=4x16GiB", "VGPU_SIM_P2P=0-2"}));
  ASSERT_CLEAN_EXIT(plain);
  EXPECT_EQ(plain.out.Get("peer.can"), "0") << plain.Describe();
}

// A context on virtual device 0 allocates on physical device 2, as seen by a
// process without libvgpu (through the simulated node's NVML and CUDA).
TEST_F(InterceptTest, VirtualDeviceAllocatesOnPhysical) {
  const PathParam& p = kPaths[2];
  Proc holder;
  ASSERT_TRUE(holder.Start(Argv(p, {"init", "ctx:0", "alloc:100M", "wait", "free"}),
                           Env(true, {"VGPU_SIM_DEVICES=4x16GiB", "VGPU_VISIBLE_DEVICES=2,0"})));
  ASSERT_TRUE(holder.WaitKey("waiting", nullptr, 20000)) << holder.StderrText();
  ASSERT_EQ(holder.out().Get("alloc"), "0");
  RunResult watcher = Client(p, {"nvml", "init", "ctx:2", "meminfo", "ctx:0", "meminfo"},
                             Env(false, {"VGPU_SIM_DEVICES=4x16GiB"}));
  holder.Send("go");
  int st = holder.Finish(20000);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  ASSERT_CLEAN_EXIT(watcher);
  EXPECT_EQ(watcher.out.Get("nvml.count"), "4");
  EXPECT_GE(watcher.out.Int("nvml2.used"), static_cast<long long>(100 * kMiB))
      << watcher.Describe();
  EXPECT_LT(watcher.out.Int("nvml0.used"), static_cast<long long>(100 * kMiB))
      << watcher.Describe();
  std::vector<std::string> free = watcher.out.All("free"), total = watcher.out.All("total");
  ASSERT_EQ(free.size(), 2u);
  EXPECT_LE(std::stoull(free[0]) + 100 * kMiB, std::stoull(total[0]))
      << "physical 2 does not hold the 100 MiB";
  EXPECT_EQ(free[1], total[1]) << "physical 0 holds memory";
}

// NVML under libvgpu: only visible devices, in the configured order, agreeing
// with CUDA; hidden devices unreachable by UUID and PCI id.
TEST_F(InterceptTest, NvmlMapping) {
  const PathParam& p = kPaths[1];
  RunResult phys = Client(p, {"init", "devices"}, Env(false, {"VGPU_SIM_DEVICES=4x16GiB"}));
  ASSERT_CLEAN_EXIT(phys);
  std::string u0 = phys.out.Get("dev0.uuid"), u1 = phys.out.Get("dev1.uuid"),
              u2 = phys.out.Get("dev2.uuid");
  std::string pci3 = phys.out.Get("dev3.pci"), pci2 = phys.out.Get("dev2.pci");
  RunResult r = Client(p,
                       {"init", "devices", "nvml", "nvmlbyuuid:" + u1, "nvmlbypci:" + pci3,
                        "nvmlbyuuid:" + u0, "nvmlbypci:" + pci2},
                       Env(true, {"VGPU_SIM_DEVICES=4x16GiB", "VGPU_VISIBLE_DEVICES=2,0"}));
  ASSERT_CLEAN_EXIT(r);
  EXPECT_EQ(r.out.Get("nvmlinit"), "0");
  EXPECT_EQ(r.out.Get("nvml.count"), "2");
  EXPECT_EQ(r.out.Get("nvml0.uuid"), u2);
  EXPECT_EQ(r.out.Get("nvml1.uuid"), u0);
  EXPECT_EQ(r.out.Get("nvml0.uuid"), r.out.Get("dev0.uuid"));  // NVML and CUDA agree
  EXPECT_EQ(r.out.Get("nvml1.uuid"), r.out.Get("dev1.uuid"));
  EXPECT_EQ(r.out.Get("nvml0.index"), "0");
  EXPECT_EQ(r.out.Get("nvml1.index"), "1");
  std::vector<std::string> byuuid = r.out.All("nvmlbyuuid"), bypci = r.out.All("nvmlbypci");
  ASSERT_EQ(byuuid.size(), 2u);
  ASSERT_EQ(bypci.size(), 2u);
  EXPECT_EQ(byuuid[0], std::to_string(kNvmlNotFound)) << "hidden device by UUID";
  EXPECT_EQ(bypci[0], std::to_string(kNvmlNotFound)) << "hidden device by PCI id";
  EXPECT_EQ(byuuid[1], "0");
  EXPECT_EQ(r.out.All("nvmlbyuuid.index")[1], "1");
  EXPECT_EQ(bypci[1], "0") << r.Describe();
  EXPECT_EQ(r.out.All("nvmlbypci.index")[1], "0");
}

// NVML memory info (v1 and v2) shows total = quota and used = the group's
// usage, also in a group member that never initialized CUDA.
TEST_F(InterceptTest, NvmlMemoryShowsGroupQuota) {
  const PathParam& p = kPaths[1];
  auto env = Env(true, {"VGPU_DEVICE_MEMORY_LIMIT=64MiB", GroupVar(), "VGPU_VISIBLE_DEVICES=1"});
  Proc holder;
  ASSERT_TRUE(holder.Start(Argv(p, {"init", "ctx:0", "alloc:10M", "nvml", "wait"}), env));
  ASSERT_TRUE(holder.WaitKey("waiting", nullptr, 20000)) << holder.StderrText();
  RunResult other = Client(p, {"nvml"}, env);
  holder.Send("go");
  holder.Finish(20000);
  for (const Output* o : std::vector<const Output*>{&holder.out(), &other.out}) {
    EXPECT_EQ(o->Get("nvml.count"), "1");
    EXPECT_EQ(o->Int("nvml0.total"), static_cast<long long>(k64MiB));
    EXPECT_EQ(o->Int("nvml0.used"), static_cast<long long>(10 * kMiB));
    EXPECT_EQ(o->Int("nvml0.free"), static_cast<long long>(54 * kMiB));
    EXPECT_EQ(o->Get("nvml0.mem2"), "0");
    EXPECT_EQ(o->Int("nvml0.total2"), static_cast<long long>(k64MiB));
    EXPECT_EQ(o->Int("nvml0.used2"), static_cast<long long>(10 * kMiB));
    EXPECT_EQ(o->Int("nvml0.free2"), static_cast<long long>(54 * kMiB));
  }
  EXPECT_TRUE(other.ExitedZero()) << other.Describe();
}

// When the device has less free than the quota leaves (another tenant holds
// most of it), cuMemGetInfo and NVML agree inside the limited process: both
// report min(quota free, device free).
TEST_F(InterceptTest, ScarceDeviceMemoryBoundsTheQuotaViewInCudaAndNvml) {
  const PathParam& p = kPaths[1];
  const std::string node = "VGPU_SIM_DEVICES=1x256MiB";
  Proc other;  // no libvgpu: the device's other tenant
  ASSERT_TRUE(other.Start(Argv(p, {"init", "ctx:0", "alloc:240M", "wait"}), Env(false, {node})));
  ASSERT_TRUE(other.WaitKey("waiting", nullptr, 20000)) << other.StderrText();
  ASSERT_EQ(other.out().Get("alloc"), "0");
  RunResult job = Client(p, {"init", "ctx:0", "meminfo", "nvml"},
                         Env(true, {node, "VGPU_DEVICE_MEMORY_LIMIT=64MiB", GroupVar()}));
  other.Send("go");
  other.Finish(20000);
  ASSERT_CLEAN_EXIT(job);
  EXPECT_EQ(job.out.Int("total"), static_cast<long long>(k64MiB));
  EXPECT_EQ(job.out.Int("nvml0.total"), static_cast<long long>(k64MiB));
  const long long device_free = job.out.Int("free");
  EXPECT_LE(device_free, static_cast<long long>(16 * kMiB)) << job.Describe();
  EXPECT_GT(device_free, 0) << job.Describe();
  EXPECT_EQ(job.out.Int("nvml0.free"), device_free) << job.Describe();
  EXPECT_EQ(job.out.Int("nvml0.free2"), device_free) << job.Describe();
}

// ---------------------------------------------------------------------------
// Pass-through: the sample training loop prints the same losses and checksum
// with and without libvgpu (and with libvgpu enforcing a generous quota).
TEST_F(InterceptTest, SampleTrainingSameChecksum) {
  auto run = [&](bool preload, std::vector<std::string> extra) {
    extra.push_back(std::string("VGPU_SIM_KERNELS=") + ITEST_SAMPLE_KERNELS);
    return RunToEnd(
        {ITEST_SAMPLE_TRAIN, "--steps", "20", "--report-every", "5", ITEST_SAMPLE_CUBIN},
        Env(preload, extra), 60000);
  };
  auto lines = [](const std::string& text) {
    std::istringstream in(text);
    std::string l, keep;
    while (std::getline(in, l)) {
      if (l.rfind("step", 0) == 0 || l.rfind("checksum:", 0) == 0) keep += l + "\n";
    }
    return keep;
  };
  RunResult plain = run(false, {});
  ASSERT_TRUE(plain.ExitedZero()) << plain.Describe();
  ASSERT_NE(plain.stdout_text.find("checksum: 0x"), std::string::npos) << plain.Describe();
  RunResult pre = run(true, {});
  ASSERT_TRUE(pre.ExitedZero()) << pre.Describe();
  EXPECT_EQ(lines(pre.stdout_text), lines(plain.stdout_text));
  EXPECT_EQ(pre.stderr_text, plain.stderr_text);
  RunResult quota = run(true, {"VGPU_DEVICE_MEMORY_LIMIT=1GiB", GroupVar()});
  ASSERT_TRUE(quota.ExitedZero()) << quota.Describe();
  EXPECT_EQ(lines(quota.stdout_text), lines(plain.stdout_text));
}

// ---------------------------------------------------------------------------
// Group sharing across processes: 128 MiB for the group; the first holds
// 100 MiB, so the second gets 28 MiB and not a byte more; after the first
// exits, the second gets all 128 MiB.
TEST_F(InterceptTest, GroupSharesOneQuota) {
  const PathParam& p = kPaths[0];
  auto env = Env(true, {"VGPU_DEVICE_MEMORY_LIMIT=128MiB", GroupVar()});
  Proc first, second;
  ASSERT_TRUE(first.Start(Argv(p, {"init", "ctx:0", "alloc:100M", "wait"}), env));
  ASSERT_TRUE(first.WaitKey("waiting", nullptr, 20000)) << first.StderrText();
  ASSERT_EQ(first.out().Get("alloc"), "0");
  ASSERT_TRUE(second.Start(Argv(p, {"init", "ctx:0", "meminfo", "alloc:29M", "alloc:28M", "alloc:1",
                                    "free", "wait", "alloc:128M", "meminfo"}),
                           env));
  ASSERT_TRUE(second.WaitKey("waiting", nullptr, 20000)) << second.StderrText();
  EXPECT_EQ(second.out().Int("free"), static_cast<long long>(28 * kMiB));
  EXPECT_EQ(second.out().All("alloc"), (std::vector<std::string>{std::to_string(kOutOfMemory), "0",
                                                                 std::to_string(kOutOfMemory)}));
  first.Send("go");
  int st = first.Finish(20000);  // exits holding its 100 MiB; reaped here
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  second.Send("go");
  ASSERT_TRUE(second.WaitKey("done", nullptr, 20000)) << second.StderrText();
  EXPECT_EQ(second.out().All("alloc").back(), "0") << second.stdout_text();
  EXPECT_EQ(second.out().Get("free"), "0");
  second.Finish(20000);
}

// A member configured with a larger quota than its group's sees the group's
// (the stricter member's) in cuDeviceTotalMem as in cuMemGetInfo.
TEST_F(InterceptTest, DeviceTotalMemIsTheGroupQuota) {
  const PathParam& p = kPaths[0];
  Proc strict;
  ASSERT_TRUE(strict.Start(Argv(p, {"init", "ctx:0", "wait"}),
                           Env(true, {"VGPU_DEVICE_MEMORY_LIMIT=64MiB", GroupVar()})));
  ASSERT_TRUE(strict.WaitKey("waiting", nullptr, 20000)) << strict.StderrText();
  RunResult loose = Client(p, {"init", "ctx:0", "devices", "meminfo"},
                           Env(true, {"VGPU_DEVICE_MEMORY_LIMIT=128MiB", GroupVar()}));
  strict.Send("go");
  strict.Finish(20000);
  ASSERT_TRUE(loose.ExitedZero()) << loose.Describe();
  EXPECT_EQ(loose.out.Int("total"), static_cast<long long>(k64MiB));
  EXPECT_EQ(loose.out.Int("dev0.total"), static_cast<long long>(k64MiB));
}

// ---------------------------------------------------------------------------
// The race: 8 processes x 4 threads hammer cuMemAlloc/cuMemFree with random
// page-multiple sizes against one group quota of 64 MiB, on a simulated node
// whose single device has exactly 64 MiB.
//
// Why this can fail if the quota is ever overshot: with VGPU_VMM=off the sim
// charges exactly the page-rounded size and libvgpu charges the requested
// size, equal here; with VGPU_VMM=on (the default) both charge whole chunks.
// libvgpu reserves before it calls the driver and releases after the driver
// freed, so at every instant the sim's usage <= the group's reservations. If
// libvgpu ever let the group's reservations exceed 64 MiB, the allocation
// that made them do so reaches a sim with less than its size free and the sim
// refuses it with CUDA_ERROR_OUT_OF_MEMORY. libvgpu logs exactly one line
// ("out of device memory quota") for each refusal of its own, so every
// CUDA_ERROR_OUT_OF_MEMORY a client sees must match one such log line; an
// OOM without its log line is an overshoot caught by the sim. A watcher
// without libvgpu samples the node through NVML meanwhile, to show that the
// race really ran at the limit. Run once per VGPU_VMM mode.
class RaceTest : public InterceptTest, public ::testing::WithParamInterface<const char*> {};

INSTANTIATE_TEST_SUITE_P(Vmm, RaceTest, ::testing::Values("on", "off"),
                         [](const ::testing::TestParamInfo<const char*>& i) {
                           return std::string(i.param);
                         });

TEST_P(RaceTest, RaceNeverOvershoots) {
  const std::string log = TempFile("race.log");
  constexpr int kProcs = 8;
  const PathParam& p = kPaths[2];
  auto env = Env(
      true, {"VGPU_SIM_DEVICES=1x64MiB", "VGPU_DEVICE_MEMORY_LIMIT=64MiB", GroupVar(),
             "VGPU_LOG_FILE=" + log, "VGPU_LOG_LEVEL=warn", std::string("VGPU_VMM=") + GetParam()});
  // The node must exist with its size before the watcher attaches.
  RunResult boot = Client(p, {"init", "ctx:0"}, Env(false, {"VGPU_SIM_DEVICES=1x64MiB"}));
  ASSERT_CLEAN_EXIT(boot);
  Proc watcher;
  ASSERT_TRUE(watcher.Start(Argv(p, {"watch:40000:0"}), Env(false, {"VGPU_SIM_DEVICES=1x64MiB"})));
  ASSERT_TRUE(watcher.WaitKey("watching", nullptr, 20000)) << watcher.StderrText();
  std::vector<std::unique_ptr<Proc>> clients;
  // 4000 iterations per thread: with VGPU_VMM=off 400 took a client about 3 ms, so the clients
  // could run one after another without ever contending (0 refusals seen on 2-core machines).
  for (int i = 0; i < kProcs; ++i) {
    clients.push_back(std::make_unique<Proc>());
    ASSERT_TRUE(clients.back()->Start(
        Argv(p, {"init", "wait", "race:4:4000:8:" + std::to_string(i + 1)}), env));
  }
  for (auto& c : clients) ASSERT_TRUE(c->WaitKey("waiting", nullptr, 20000)) << c->StderrText();
  for (auto& c : clients) c->Send("go");  // all at once
  long long ok = 0, oom = 0;
  for (auto& c : clients) {
    int st = c->Finish(45000);
    ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0 && !c->timed_out())
        << "status " << st << "\n"
        << c->stdout_text() << c->StderrText();
    EXPECT_EQ(c->out().Get("init"), "0");
    EXPECT_EQ(c->out().Int("race.other"), 0) << c->stdout_text();
    EXPECT_LE(c->out().Int("race.maxheld"), static_cast<long long>(k64MiB));
    ok += c->out().Int("race.ok");
    oom += c->out().Int("race.oom");
  }
  watcher.Finish(20000);
  std::ifstream in(log);
  std::string line;
  long long refusals = 0, other_lines = 0;
  while (std::getline(in, line)) {
    if (line.find("out of device memory quota") != std::string::npos) {
      ++refusals;
    } else {
      ++other_lines;
    }
  }
  RecordProperty("race_ok", std::to_string(ok));
  RecordProperty("race_oom", std::to_string(oom));
  std::printf("race: %lld successful allocations, %lld refused, watcher max %lld bytes\n", ok, oom,
              watcher.out().Int("watch.max"));
  EXPECT_GT(ok, 1000);
  EXPECT_GT(oom, 50) << "no contention: the test did not exercise the limit";
  EXPECT_EQ(oom, refusals)
      << "CUDA_ERROR_OUT_OF_MEMORY from the simulated driver, not from the quota: the "
         "group's reservations exceeded the 64 MiB limit";
  EXPECT_EQ(other_lines, 0);
  EXPECT_LE(watcher.out().Int("watch.max"), static_cast<long long>(k64MiB));
  EXPECT_GE(watcher.out().Int("watch.max"), static_cast<long long>(k64MiB - 16 * kMiB))
      << "the race never came near the limit";
}

// ---------------------------------------------------------------------------
// SIGKILL mid-allocation: two processes looping cuMemAlloc/cuMemFree of
// 100 MiB are killed; a waiting group member then gets the whole 128 MiB
// within a second, and nobody hangs.
TEST_F(InterceptTest, SigkillMidAllocationReturnsUsage) {
  const PathParam& p = kPaths[0];
  auto env = Env(true, {"VGPU_DEVICE_MEMORY_LIMIT=128MiB", GroupVar()});
  Proc waiter;
  ASSERT_TRUE(waiter.Start(Argv(p, {"init", "ctx:0", "wait", "alloc:128M", "meminfo"}), env));
  ASSERT_TRUE(waiter.WaitKey("waiting", nullptr, 20000)) << waiter.StderrText();
  std::mt19937 rng(static_cast<unsigned>(getpid()));
  for (int round = 0; round < 2; ++round) {
    Proc churn1, churn2;
    ASSERT_TRUE(churn1.Start(Argv(p, {"init", "ctx:0", "churn:100M"}), env));
    ASSERT_TRUE(churn2.Start(Argv(p, {"init", "ctx:0", "churn:60M"}), env));
    ASSERT_TRUE(churn1.WaitKey("ready", nullptr, 20000)) << churn1.StderrText();
    ASSERT_TRUE(churn2.WaitKey("ready", nullptr, 20000)) << churn2.StderrText();
    usleep(20000 + rng() % 30000);
    churn1.Kill();
    usleep(rng() % 5000);
    churn2.Kill();
  }
  double t0 = NowMs();
  waiter.Send("go");
  std::string v;
  ASSERT_TRUE(waiter.WaitKey("alloc", &v, 5000)) << "group member hangs after SIGKILL";
  double dt = NowMs() - t0;
  EXPECT_EQ(v, "0") << "usage of SIGKILLed processes not returned";
  EXPECT_LT(dt, 1000.0);
  ASSERT_TRUE(waiter.WaitKey("done", nullptr, 5000));
  EXPECT_EQ(waiter.out().Get("free"), "0");
  waiter.Finish(10000);
}

// ---------------------------------------------------------------------------
// A damaged, foreign, version-mismatched or unsafe ledger region: the process
// fails closed (cuInit fails with a one-line message on stderr), no crash.
TEST_F(InterceptTest, DamagedLedgerFailsClosed) {
  const PathParam& p = kPaths[1];
  struct Case {
    const char* name;
    std::function<void(int fd)> write;
    mode_t mode;
    const char* expect;  // in the message
  };
  auto garbage = [](int fd) {
    std::vector<char> b(sizeof(LedgerRegion));
    for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<char>(i * 131 + 7);
    ASSERT_EQ(write(fd, b.data(), b.size()), static_cast<ssize_t>(b.size()));
  };
  auto header = [](uint32_t version, uint32_t bytes, size_t file_size) {
    return [=](int fd) {
      std::vector<char> b(file_size, 0);
      auto* r = reinterpret_cast<LedgerRegion*>(b.data());
      r->magic = kLedgerMagic;
      r->version = version;
      r->region_bytes = bytes;
      std::memcpy(b.data() + offsetof(LedgerRegion, ready), "\1\0\0\0", 4);
      ASSERT_EQ(write(fd, b.data(), b.size()), static_cast<ssize_t>(b.size()));
    };
  };
  const std::vector<Case> cases = {
      {"garbage", garbage, 0600, "magic"},
      {"version", header(kLedgerVersion + 1, sizeof(LedgerRegion), sizeof(LedgerRegion)), 0600,
       "version"},
      {"size", header(kLedgerVersion, sizeof(LedgerRegion) - 64, sizeof(LedgerRegion) - 64), 0600,
       "size"},
      {"mode", header(kLedgerVersion, sizeof(LedgerRegion), sizeof(LedgerRegion)), 0644, "mode"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    UnlinkLedger(group_);
    int fd = open(LedgerPath(group_).c_str(), O_CREAT | O_EXCL | O_WRONLY, 0600);
    ASSERT_GE(fd, 0);
    c.write(fd);
    fchmod(fd, c.mode);
    close(fd);
    RunResult r = Client(p, {"init", "ctx:0", "alloc:1M"},
                         Env(true, {"VGPU_DEVICE_MEMORY_LIMIT=64MiB", GroupVar()}));
    ASSERT_CLEAN_EXIT(r);
    EXPECT_NE(r.out.Get("init"), "0") << r.Describe();
    EXPECT_NE(r.out.Get("alloc"), "0") << r.Describe();
    EXPECT_EQ(std::count(r.stderr_text.begin(), r.stderr_text.end(), '\n'), 1) << r.stderr_text;
    EXPECT_NE(r.stderr_text.find("ledger"), std::string::npos) << r.stderr_text;
    EXPECT_NE(r.stderr_text.find(c.expect), std::string::npos) << r.stderr_text;
    // The damaged region is left alone for an operator to inspect.
    struct stat st;
    EXPECT_EQ(stat(LedgerPath(group_).c_str(), &st), 0);
  }
}

// ---------------------------------------------------------------------------
// Malformed configuration: cuInit fails, one clear line on stderr naming the
// variable, the program exits normally.
TEST_F(InterceptTest, MalformedConfigurationFailsClosed) {
  const std::string bad_json = TempFile("bad.json");
  { std::ofstream(bad_json) << "{\"device_memory_limit\": \"1GiB\","; }
  const std::string typo_json = TempFile("typo.json");
  { std::ofstream(typo_json) << "{\"device_memory_limt\": \"1GiB\"}"; }
  struct Case {
    std::string var, names;
  };
  const std::vector<Case> cases = {
      {"VGPU_DEVICE_MEMORY_LIMIT=64XB", "VGPU_DEVICE_MEMORY_LIMIT"},
      {"VGPU_DEVICE_MEMORY_LIMIT=0", "VGPU_DEVICE_MEMORY_LIMIT"},
      {"VGPU_DEVICE_MEMORY_LIMIT=1GiB,1GiB,1GiB", "VGPU_DEVICE_MEMORY_LIMIT"},  // 2 devices
      {"CUDA_DEVICE_MEMORY_LIMIT=lots", "CUDA_DEVICE_MEMORY_LIMIT"},
      {"VGPU_VISIBLE_DEVICES=GPU-00000000-1111-2222-3333-444444444444", "VGPU_VISIBLE_DEVICES"},
      {"VGPU_VISIBLE_DEVICES=5", "VGPU_VISIBLE_DEVICES"},
      {"VGPU_CONFIG=" + bad_json, "VGPU_CONFIG"},
      {"VGPU_CONFIG=" + typo_json, "device_memory_limt"},
      {"VGPU_CONFIG=/nonexistent/vgpu.json", "VGPU_CONFIG"},
  };
  for (const PathParam& p : {kPaths[0], kPaths[2]}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(p.name) + " " + c.var);
      RunResult r = Client(p, {"init", "ctx:0", "alloc:1M", "devices"}, Env(true, {c.var}));
      ASSERT_CLEAN_EXIT(r);
      EXPECT_NE(r.out.Get("init"), "0") << r.Describe();
      EXPECT_NE(r.out.Get("alloc"), "0") << r.Describe();
      // count= is the device count, or minus the error code when the call fails.
      ASSERT_FALSE(r.out.Get("count").empty()) << r.Describe();
      EXPECT_LT(r.out.Int("count"), 0) << "devices visible after a failed init\n" << r.Describe();
      EXPECT_EQ(std::count(r.stderr_text.begin(), r.stderr_text.end(), '\n'), 1) << r.stderr_text;
      EXPECT_NE(r.stderr_text.find(c.names), std::string::npos) << r.stderr_text;
    }
  }
}

// ---------------------------------------------------------------------------
// fork/exec and threads.

// A process that preloads libvgpu but never uses CUDA loads no driver and
// starts no thread, with or without configuration.
TEST_F(InterceptTest, NoCudaNoCost) {
  const PathParam& p = kPaths[1];
  for (bool configured : {false, true}) {
    SCOPED_TRACE(configured ? "configured" : "unconfigured");
    std::vector<std::string> extra;
    if (configured)
      extra = {"VGPU_DEVICE_MEMORY_LIMIT=64MiB", GroupVar(), "VGPU_VISIBLE_DEVICES=0"};
    RunResult r = Client(p, {"maps", "sleep:50", "maps", "init", "maps"}, Env(true, extra));
    ASSERT_CLEAN_EXIT(r);
    std::vector<std::string> loaded = r.out.All("libcuda_loaded"), threads = r.out.All("threads");
    ASSERT_EQ(loaded.size(), 3u) << r.Describe();
    EXPECT_EQ(loaded[0], "0");
    EXPECT_EQ(loaded[1], "0");
    EXPECT_EQ(loaded[2], "1");  // the check itself sees a loaded driver
    EXPECT_EQ(threads[0], "1");
    EXPECT_EQ(threads[1], "1");
  }
}

// A fork()ed child of a CUDA-initialized parent: its CUDA calls behave as the
// driver's do after fork (same results with and without libvgpu), nothing
// crashes or hangs, and the parent's quota state is intact.
TEST_F(InterceptTest, ForkedChildIsConsistent) {
  const PathParam& p = kPaths[0];
  std::vector<std::string> ops = {"init",    "ctx:0",     "alloc:10M", "fork",
                                  "meminfo", "alloc:54M", "alloc:1"};
  RunResult plain = Client(p, ops, Env(false));
  ASSERT_CLEAN_EXIT(plain);
  RunResult r = Client(p, ops, Env(true, {"VGPU_DEVICE_MEMORY_LIMIT=64MiB"}), 20000);
  ASSERT_CLEAN_EXIT(r);
  EXPECT_EQ(r.out.Get("fork.status"), "0") << r.Describe();
  for (const char* k : {"child.alloc", "child.meminfo", "child.count"}) {
    EXPECT_TRUE(r.out.Has(k)) << r.Describe();
    EXPECT_EQ(r.out.Get(k), plain.out.Get(k)) << k << "\n--- without libvgpu\n"
                                              << plain.Describe() << "\n--- with\n"
                                              << r.Describe();
  }
  EXPECT_EQ(r.out.Int("free"), static_cast<long long>(54 * kMiB));
  EXPECT_EQ(r.out.All("alloc"), (std::vector<std::string>{"0", "0", std::to_string(kOutOfMemory)}));
  // In a group too (the child takes its own ledger slot).
  RunResult g = Client(p, ops, Env(true, {"VGPU_DEVICE_MEMORY_LIMIT=64MiB", GroupVar()}), 20000);
  ASSERT_CLEAN_EXIT(g);
  EXPECT_EQ(g.out.Get("fork.status"), "0");
  EXPECT_EQ(g.out.Int("free"), static_cast<long long>(54 * kMiB)) << g.Describe();
  EXPECT_EQ(g.out.All("alloc"), (std::vector<std::string>{"0", "0", std::to_string(kOutOfMemory)}));
}

// An exec'd child is interposed again through the environment: the quota
// applies in it.
TEST_F(InterceptTest, ExecedChildIsInterposed) {
  const PathParam& p = kPaths[1];
  RunResult r = Client(
      p,
      {"init", "ctx:0", "alloc:10M", "exec:--path=procaddr,init,ctx:0,alloc:65M,alloc:40M,meminfo"},
      Env(true, {"VGPU_DEVICE_MEMORY_LIMIT=64MiB"}));
  ASSERT_CLEAN_EXIT(r);
  EXPECT_EQ(r.out.All("alloc"), (std::vector<std::string>{"0", std::to_string(kOutOfMemory), "0"}))
      << r.Describe();
  EXPECT_EQ(r.out.Int("total"), static_cast<long long>(k64MiB));
  EXPECT_EQ(r.out.Int("free"), static_cast<long long>(24 * kMiB));
}

// The same in a group: exec keeps the pid, but the old image's device memory
// died with it, so it must not stay charged to the group.
TEST_F(InterceptTest, ExecInGroupDoesNotKeepOldCharges) {
  const PathParam& p = kPaths[1];
  RunResult r =
      Client(p, {"init", "ctx:0", "alloc:40M", "exec:--path=dlsym,init,ctx:0,meminfo,alloc:40M"},
             Env(true, {"VGPU_DEVICE_MEMORY_LIMIT=64MiB", GroupVar()}));
  ASSERT_CLEAN_EXIT(r);
  EXPECT_EQ(r.out.Int("free"), static_cast<long long>(k64MiB)) << r.Describe();
  EXPECT_EQ(r.out.All("alloc"), (std::vector<std::string>{"0", "0"})) << r.Describe();
}

// Many threads, each with its own context, allocate and free concurrently;
// destroying each context returns the allocation it still held.
TEST_P(PathTest, ManyThreadsWithOwnContexts) {
  const PathParam& p = GetParam();
  RunResult r = Client(p, {"init", "threads:8:4M", "ctx:0", "meminfo"},
                       Env(true, {"VGPU_DEVICE_MEMORY_LIMIT=64MiB"}));
  ASSERT_CLEAN_EXIT(r);
  EXPECT_EQ(r.out.Get("threads"), "0") << r.Describe();
  EXPECT_EQ(r.out.Int("free"), static_cast<long long>(k64MiB)) << r.Describe();
}

}  // namespace
}  // namespace vgpu::itest
