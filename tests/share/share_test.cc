// The compute share end to end: tenants under LD_PRELOAD on the simulated
// node; what each got is read from the node's own per-process engine time.
// Tolerances are wider than the benchmark's targets (bench/share_bench.cc):
// these runs are short and share the machine with other tests. A cap is an
// upper bound that holds however loaded the machine is; what a tenant gets
// below it depends on how soon its threads run: with two busy loops on two
// cores a capped tenant got 70-90% of its cap (it is charged for completions
// its accountant sees late). So the lower bounds are half the target: they
// catch a tenant that is starved or a rate that is off by a factor, and the
// exact rates are the deterministic test's
// (tests/unit/compute_share_accounting_test.cc).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "quota/quota_ledger.h"
#include "share/sched_region.h"
#include "sim/node/node_region.h"

extern char** environ;

namespace {

using vgpu::sim::NodeRegion;
using vgpu::sim::NowNs;

class ShareTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string id = std::to_string(getpid()) + "-" +
                     ::testing::UnitTest::GetInstance()->current_test_info()->name();
    node_ = "share-" + id;
    region_ = "/vgpu-sched-test-" + id;
  }
  void TearDown() override {
    for (pid_t p : pids_) {
      kill(p, SIGKILL);
      waitpid(p, nullptr, 0);
    }
    shm_unlink(("/vgpu-sim-" + node_).c_str());
    shm_unlink(region_.c_str());
    for (const std::string& g : groups_) {
      shm_unlink(("/vgpu-ledger-" + std::to_string(getuid()) + "-" + g).c_str());
      shm_unlink(("/vgpu-ledger-65534-" + g).c_str());  // a tenant run as nobody
    }
  }

  pid_t Spawn(const std::vector<std::string>& env_extra, double seconds, int kernel_us,
              const char* out_file = nullptr, bool latency = false, bool as_nobody = false) {
    std::vector<std::string> env = {"LD_PRELOAD=" VGPU_LIBVGPU, "LD_LIBRARY_PATH=" VGPU_SIM_DIR,
                                    "VGPU_SIM_NODE=" + node_, "VGPU_SCHED_REGION=" + region_};
    env.insert(env.end(), env_extra.begin(), env_extra.end());
    for (const std::string& e : env_extra) {
      if (e.rfind("VGPU_GROUP=", 0) == 0) groups_.push_back(e.substr(11));  // its ledger, removed after
    }
    std::vector<char*> envp;
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::string secs = std::to_string(seconds), kus = std::to_string(kernel_us);
    // Another user: setpriv execs the tenant in place (the same pid).
    std::vector<char*> argv;
    if (as_nobody) {
      for (const char* a : {"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"}) {
        argv.push_back(const_cast<char*>(a));
      }
    }
    for (char* a : {const_cast<char*>(VGPU_TENANT), secs.data(), kus.data()}) argv.push_back(a);
    if (latency) argv.push_back(const_cast<char*>("--latency"));
    argv.push_back(nullptr);
    const char* program = as_nobody ? "/usr/bin/setpriv" : VGPU_TENANT;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (out_file != nullptr) {
      posix_spawn_file_actions_addopen(&fa, 1, out_file, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    }
    pid_t pid = 0;
    EXPECT_EQ(posix_spawn(&pid, program, &fa, nullptr, argv.data(), envp.data()), 0);
    posix_spawn_file_actions_destroy(&fa);
    pids_.push_back(pid);
    return pid;
  }

  // Runs a tenant that is expected not to start; its exit status and stderr.
  std::pair<int, std::string> RunToExit(const std::vector<std::string>& env_extra) {
    std::string err_file = "/tmp/vgpu-share-err-" + std::to_string(getpid());
    std::vector<std::string> env = {"LD_PRELOAD=" VGPU_LIBVGPU, "LD_LIBRARY_PATH=" VGPU_SIM_DIR,
                                    "VGPU_SIM_NODE=" + node_, "VGPU_SCHED_REGION=" + region_};
    env.insert(env.end(), env_extra.begin(), env_extra.end());
    std::vector<char*> envp;
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::string secs = "0.2", kus = "1000";
    std::vector<char*> argv = {const_cast<char*>(VGPU_TENANT), secs.data(), kus.data(), nullptr};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 2, err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    pid_t pid = 0;
    EXPECT_EQ(posix_spawn(&pid, VGPU_TENANT, &fa, nullptr, argv.data(), envp.data()), 0);
    posix_spawn_file_actions_destroy(&fa);
    int status = -1;
    waitpid(pid, &status, 0);
    std::string text;
    if (FILE* f = std::fopen(err_file.c_str(), "r")) {
      char buf[512];
      while (std::fgets(buf, sizeof buf, f) != nullptr) text += buf;
      std::fclose(f);
    }
    std::remove(err_file.c_str());
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, text};
  }

  NodeRegion* Node() {
    std::string err;
    for (int i = 0; i < 200 && node_region_ == nullptr; ++i) {
      node_region_ = NodeRegion::Attach(node_, &err);
      if (node_region_ == nullptr) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return node_region_;
  }

  // Engine time of `pid` on physical device `device`.
  uint64_t Busy(pid_t pid, int device = 0) {
    for (auto& s : Node()->header()->processes) {
      if (s.pid.load() == pid) return s.busy_ns[device].load();
    }
    return 0;
  }

  // Engine share of each pid over the next `seconds` (on physical device
  // devices[pid], 0 if not given).
  std::map<pid_t, double> Shares(const std::vector<pid_t>& pids, double seconds,
                                 std::map<pid_t, int> devices = {}) {
    auto Busy = [&](pid_t p) { return this->Busy(p, devices.count(p) != 0 ? devices[p] : 0); };
    std::map<pid_t, uint64_t> b0;
    for (pid_t p : pids) b0[p] = Busy(p);
    uint64_t t0 = NowNs();
    trace_.clear();
    auto sched = std::move(vgpu::SchedRegion::Open(region_).value());
    for (double left = seconds; left > 0; left -= 0.25) {
      std::this_thread::sleep_for(std::chrono::duration<double>(std::min(left, 0.25)));
      if (sched != nullptr) trace_ += SchedLine(*sched, NowNs() - t0);
    }
    uint64_t dt = NowNs() - t0;
    std::map<pid_t, double> out;
    for (pid_t p : pids) out[p] = 100.0 * static_cast<double>(Busy(p) - b0[p]) / static_cast<double>(dt);
    // Every window's reading is printed, passing or not: how far from the
    // target a run lands on a given machine is what the tolerances rest on.
    std::printf("[ window   ] %.2f s:", static_cast<double>(dt) / 1e9);
    for (pid_t p : pids) std::printf(" %.2f%%", out[p]);
    std::printf("\n");
    return out;
  }

  // The scheduler's view (lease holder, each group's bucket and charged
  // time), printed with a failed share expectation.
  static std::string SchedLine(vgpu::SchedRegion& r, uint64_t t) {
    auto& d = r.device(0);
    char buf[160];
    std::snprintf(buf, sizeof buf, "\n  %5.2fs holder=%d", static_cast<double>(t) / 1e9, d.holder.load());
    std::string line = buf;
    for (auto& g : d.groups) {
      if (g.key.load() == 0) continue;
      std::snprintf(buf, sizeof buf, " %s: tokens %.1f ms used %.1f ms", g.name,
                    static_cast<double>(g.tokens_ns.load()) / 1e6, static_cast<double>(g.used_ns.load()) / 1e6);
      line += buf;
    }
    return line;
  }

  void WaitUntilAllRun(const std::vector<pid_t>& pids) {
    for (int i = 0; i < 300; ++i) {
      bool all = Node() != nullptr;
      for (pid_t p : pids) all = all && Busy(p) > 0;
      if (all) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    FAIL() << "tenants did not start";
  }

  // A high-priority latency tenant alone, then beside a saturating trainer.
  void HighPriorityBesideATrainer(bool hp_as_nobody);
  // Tenants capped at 30% and 70%, the second as another user if asked.
  void CapsThirtyAndSeventy(bool b_as_nobody);
  // Spawn(..., as_nobody) needs root, setpriv, and a build tree nobody can
  // read (a checkout under a 0700 directory is not).
  static bool CanRunAsNobody(std::string* why) {
    if (geteuid() != 0) {
      *why = "needs root to run a tenant as nobody";
    } else if (access("/usr/bin/setpriv", X_OK) != 0) {
      *why = "no /usr/bin/setpriv (util-linux)";
    } else if (std::system("/usr/bin/setpriv --reuid=65534 --regid=65534 --clear-groups -- "
                           "/usr/bin/test -x " VGPU_TENANT " -a -r " VGPU_LIBVGPU
                           " -a -r " VGPU_SIM_DIR "/libcuda.so.1") != 0) {
      *why = "user nobody cannot read the build tree (a parent directory is private)";
    }
    return why->empty();
  }

  std::string node_, region_;
  std::string trace_;  // SchedLine every 250 ms of the last Shares()
  std::vector<pid_t> pids_;
  std::vector<std::string> groups_;
  NodeRegion* node_region_ = nullptr;
};

void ShareTest::CapsThirtyAndSeventy(bool b_as_nobody) {
  pid_t a = Spawn({"VGPU_COMPUTE_SHARE=30", "VGPU_GROUP=a"}, 6, 1000);
  pid_t b = Spawn({"VGPU_COMPUTE_SHARE=70", "VGPU_GROUP=b"}, 6, 1000, nullptr, false, b_as_nobody);
  WaitUntilAllRun({a, b});
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  auto s = Shares({a, b}, 3.0);
  EXPECT_LE(s[a], 35) << trace_;
  EXPECT_LE(s[b], 75) << trace_;
  EXPECT_GE(s[a], 15) << trace_;
  EXPECT_GE(s[b], 35) << trace_;
}

TEST_F(ShareTest, FixedCapsAreHonoured) { CapsThirtyAndSeventy(false); }

TEST_F(ShareTest, LoneCappedTenantStaysAtItsCap) {
  pid_t a = Spawn({"VGPU_COMPUTE_SHARE=50", "VGPU_GROUP=a"}, 5, 1000);
  WaitUntilAllRun({a});
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const double s = Shares({a}, 3.0)[a];
  EXPECT_LE(s, 54) << trace_;
  EXPECT_GE(s, 25) << trace_;
}

// HAMi-core's per-device form: CUDA_DEVICE_SM_LIMIT_<i> caps visible device i
// (here physical 1) and overrides CUDA_DEVICE_SM_LIMIT there; 0 uncaps it.
TEST_F(ShareTest, PerDeviceSmLimitCapsItsOwnDevice) {
  const std::string two = "VGPU_SIM_DEVICES=2x1GiB";
  pid_t capped = Spawn({two, "VGPU_VISIBLE_DEVICES=1", "CUDA_DEVICE_SM_LIMIT=80",
                        "CUDA_DEVICE_SM_LIMIT_0=30", "VGPU_GROUP=a"}, 5, 1000);
  pid_t free = Spawn({two, "VGPU_VISIBLE_DEVICES=0", "CUDA_DEVICE_SM_LIMIT=30",
                      "CUDA_DEVICE_SM_LIMIT_0=0", "VGPU_GROUP=b"}, 5, 1000);
  for (int i = 0; i < 300 && (Node() == nullptr || Busy(capped, 1) == 0 || Busy(free, 0) == 0); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  auto s = Shares({capped, free}, 3.0, {{capped, 1}, {free, 0}});
  EXPECT_LE(s[capped], 35) << trace_;
  EXPECT_GE(s[capped], 15) << trace_;
  EXPECT_GT(s[free], 85) << "an uncapped device is not scheduled";
}

TEST_F(ShareTest, WeightsSplitTheDevice) {
  pid_t a = Spawn({"VGPU_COMPUTE_WEIGHT=1", "VGPU_GROUP=a"}, 8, 1000);
  pid_t b = Spawn({"VGPU_COMPUTE_WEIGHT=3", "VGPU_GROUP=b"}, 8, 1000);
  WaitUntilAllRun({a, b});
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  auto s = Shares({a, b}, 3.0);
  // Weights split the time between the two, whatever part of the device a
  // loaded machine lets them use together: 1:3.
  ASSERT_GT(s[a], 0) << trace_;
  EXPECT_GE(s[b] / s[a], 2.0) << trace_;
  EXPECT_LE(s[b] / s[a], 4.5) << trace_;
  EXPECT_GE(s[a] + s[b], 60) << "the two leave the device idle" << trace_;
}

// Two users on the host schedule against each other: one region per node
// (mode 0666), whatever the uid. In regions of their own, capped tenants
// would be charged for waiting behind each other's kernels and fall short,
// and weighted ones would each take half.
TEST_F(ShareTest, CapsOfTwoUsersHold) {
  if (std::string why; !CanRunAsNobody(&why)) GTEST_SKIP() << why;
  CapsThirtyAndSeventy(true);
}

TEST_F(ShareTest, TwoUsersSplitTheDeviceByWeight) {
  if (std::string why; !CanRunAsNobody(&why)) GTEST_SKIP() << why;
  pid_t a = Spawn({"VGPU_COMPUTE_WEIGHT=1", "VGPU_GROUP=a"}, 8, 1000);
  pid_t b = Spawn({"VGPU_COMPUTE_WEIGHT=3", "VGPU_GROUP=a"}, 8, 1000, nullptr, false, true);
  WaitUntilAllRun({a, b});
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  auto s = Shares({a, b}, 3.0);
  ASSERT_GT(s[a], 0) << trace_;
  EXPECT_GE(s[b] / s[a], 2.0) << "the same group name of two users is two groups" << trace_;
  EXPECT_LE(s[b] / s[a], 4.5) << trace_;
  EXPECT_GE(s[a] + s[b], 60) << "the two leave the device idle" << trace_;
}

TEST_F(ShareTest, KilledTenantLeavesNoStuckState) {
  pid_t a = Spawn({"VGPU_COMPUTE_WEIGHT=1", "VGPU_GROUP=a"}, 8, 1000);
  pid_t b = Spawn({"VGPU_COMPUTE_WEIGHT=1", "VGPU_GROUP=b"}, 8, 1000);
  WaitUntilAllRun({a, b});
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  kill(b, SIGKILL);  // wherever it is: holding the lease, waiting, mid-launch
  waitpid(b, nullptr, 0);
  pids_.pop_back();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_GT(Shares({a}, 2.0)[a], 85) << "the survivor gets the whole device";
}

TEST_F(ShareTest, RuntimeShareChangeTakesEffectQuickly) {
  pid_t a = Spawn({"VGPU_COMPUTE_SHARE=20", "VGPU_GROUP=a"}, 6, 1000);
  WaitUntilAllRun({a});
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const double before = Shares({a}, 1.5)[a];
  EXPECT_LE(before, 24) << trace_;
  EXPECT_GE(before, 10) << trace_;
  auto opened = vgpu::SchedRegion::Open(region_);
  ASSERT_TRUE(opened.ok()) << opened.status().message;
  auto region = std::move(opened.value());
  ASSERT_TRUE(region->SetGroupParams(0, vgpu::SchedRegion::TenantGroupName("a", geteuid()),
                                     {vgpu::SchedPolicy::kFixed, 600, 1, false}));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const double after = Shares({a}, 1.5)[a];
  EXPECT_LE(after, 65) << trace_;
  EXPECT_GE(after, 30) << "well above the old cap of 20%" << trace_;
}

TEST_F(ShareTest, HighPriorityRunsAsIfAlone) { HighPriorityBesideATrainer(false); }

// The same with the high-priority tenant another user's (nobody).
TEST_F(ShareTest, HighPriorityOfAnotherUserRunsAsIfAlone) {
  if (std::string why; !CanRunAsNobody(&why)) GTEST_SKIP() << why;
  HighPriorityBesideATrainer(true);
}

void ShareTest::HighPriorityBesideATrainer(bool hp_as_nobody) {
  std::string out_alone = "/tmp/vgpu-share-hp-alone-" + std::to_string(getpid());
  std::string out_shared = "/tmp/vgpu-share-hp-shared-" + std::to_string(getpid());
  pid_t alone = Spawn({"VGPU_PRIORITY=high", "VGPU_GROUP=hp"}, 2.5, 200, out_alone.c_str(), true,
                      hp_as_nobody);
  waitpid(alone, nullptr, 0);
  pids_.clear();
  Spawn({"VGPU_COMPUTE_WEIGHT=1", "VGPU_GROUP=trainer"}, 4, 1000);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  pid_t hp = Spawn({"VGPU_PRIORITY=high", "VGPU_GROUP=hp"}, 2.5, 200, out_shared.c_str(), true,
                   hp_as_nobody);
  waitpid(hp, nullptr, 0);
  struct Latency {
    double p50 = -1, p99 = -1;
  };
  auto read = [](const std::string& f) {
    Latency v;
    FILE* fp = std::fopen(f.c_str(), "r");
    char line[128];
    while (fp != nullptr && std::fgets(line, sizeof line, fp) != nullptr) {
      std::sscanf(line, "p50_us=%lf", &v.p50);
      std::sscanf(line, "p99_us=%lf", &v.p99);
    }
    if (fp != nullptr) std::fclose(fp);
    std::remove(f.c_str());
    return v;
  };
  Latency a = read(out_alone), s = read(out_shared);
  ASSERT_GT(a.p50, 0);
  ASSERT_GT(s.p50, 0);
  std::printf("latency alone p50 %.0f us p99 %.0f us, next to a trainer p50 %.0f us p99 %.0f us\n",
              a.p50, a.p99, s.p50, s.p99);
  // The benchmark holds the p99 within 1.1x. Here the tail is the
  // host's: on a loaded machine the p99 of either run is a scheduling delay
  // of milliseconds. The median still shows a high-priority kernel waiting
  // behind the trainer's turn (a 1 ms kernel at least, each time).
  EXPECT_LT(s.p50, a.p50 * 1.5 + 300)
      << "median alone " << a.p50 << " us, next to a trainer " << s.p50 << " us";
}

// Fail closed (docs/compute-share.md): a process whose compute policy cannot
// be enforced does not start. Every group slot of device 0 is held by a live
// member (this test process) and none can be reclaimed.
TEST_F(ShareTest, FullGroupTableFailsCudaInitNamingTheLimit) {
  auto opened = vgpu::SchedRegion::Open(region_);
  ASSERT_TRUE(opened.ok()) << opened.status().message;
  auto region = std::move(opened.value());
  for (int g = 0; g < vgpu::kSchedGroups; ++g) {
    vgpu::Result<int> registered = region->RegisterClient(getpid());
    ASSERT_TRUE(registered.ok()) << registered.status().message;
    const int c = registered.value();
    // Named as the child processes' groups are (a user's names carry its uid).
    const std::string name =
        vgpu::SchedRegion::TenantGroupName("held-" + std::to_string(g), geteuid());
    ASSERT_GE(region->JoinGroup(0, c, name, {vgpu::SchedPolicy::kFixed, 20, 1, false}, NowNs()), 0);
  }
  groups_.push_back("late");
  auto [status, text] = RunToExit({"VGPU_COMPUTE_SHARE=2", "VGPU_GROUP=late"});
  EXPECT_NE(status, 0);
  EXPECT_NE(text.find("group table of device 0 is full (256 groups"), std::string::npos) << text;
  // A member of a group that has its slot still starts, and runs governed.
  groups_.push_back("held-7");
  auto [ok_status, ok_text] = RunToExit({"VGPU_COMPUTE_SHARE=2", "VGPU_GROUP=held-7"});
  EXPECT_EQ(ok_status, 0) << ok_text;
  // A process without a compute policy needs no slot.
  auto [native_status, native_text] = RunToExit({});
  EXPECT_EQ(native_status, 0) << native_text;
}

TEST_F(ShareTest, FullClientTableFailsCudaInitNamingTheLimit) {
  auto opened = vgpu::SchedRegion::Open(region_);
  ASSERT_TRUE(opened.ok()) << opened.status().message;
  auto region = std::move(opened.value());
  for (int c = 0; c < vgpu::kSchedClients; ++c) ASSERT_TRUE(region->RegisterClient(getpid()).ok());
  auto [status, text] = RunToExit({"VGPU_COMPUTE_WEIGHT=1"});
  EXPECT_NE(status, 0);
  EXPECT_NE(text.find("client table is full (1024 processes"), std::string::npos) << text;
}

// The quota ledger's 513th live member of a group: cuInit fails, naming the
// limit, instead of the process starting with every allocation refused.
TEST_F(ShareTest, QuotaGroupWithAllSlotsLiveRefusesAnotherMember) {
  const std::string group = "full-" + std::to_string(getpid());
  groups_.push_back(group);
  std::vector<std::unique_ptr<vgpu::QuotaLedger>> members;
  for (int i = 0; i < vgpu::kLedgerSlots; ++i) {
    auto opened = vgpu::QuotaLedger::Open(group, {1ull << 30});
    ASSERT_TRUE(opened.ok()) << opened.status().message;
    members.push_back(std::move(opened.value()));
    ASSERT_TRUE(members.back()->Join()) << i;
  }
  auto [status, text] = RunToExit({"VGPU_GROUP=" + group, "VGPU_MEMORY_LIMIT=1GiB"});
  EXPECT_NE(status, 0);
  EXPECT_NE(text.find("quota group '" + group + "' is full: 512 live member processes"), std::string::npos)
      << text;
  members.pop_back();  // a member leaves: its slot (empty) is free again
  auto [ok_status, ok_text] = RunToExit({"VGPU_GROUP=" + group, "VGPU_MEMORY_LIMIT=1GiB"});
  EXPECT_EQ(ok_status, 0) << ok_text;
}

// Issue 18: 48 tenants capped at 2% each on one device. Before version 3 of
// the scheduler region, tenants past the 32nd ran uncapped (up to 3.5x).
TEST_F(ShareTest, FortyEightTenantsAtTwoPercentEachStayWithinTheirCap) {
  constexpr int kTenants = 48;
  std::vector<pid_t> pids;
  for (int i = 0; i < kTenants; ++i) {
    pids.push_back(Spawn({"VGPU_COMPUTE_SHARE=2", "VGPU_GROUP=t" + std::to_string(i)}, 12, 1000));
  }
  WaitUntilAllRun(pids);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  auto s = Shares(pids, 4.0);
  double total = 0;
  for (pid_t p : pids) {
    total += s[p];
    EXPECT_LE(s[p], 3.0) << "pid " << p << " above 1.5x its 2% cap" << trace_;
  }
  // 96% is capped in all; scheduling and a busy machine cost some of it.
  EXPECT_GT(total, 60.0) << "the tenants together leave the device idle";
}

}  // namespace
