// Unit tests of vgpud's parts that need no jobs: configuration, the state
// file, request parsing and the peer policy, the metrics exposition.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "ctl/vgpud/daemon_config.h"
#include "ctl/vgpud/daemon_server.h"
#include "ctl/vgpud/metrics.h"
#include "ctl/vgpud/state_file.h"

namespace vgpu::vgpud {
namespace {

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/vgpud-unit-" + std::to_string(getpid()) + "-" + name;
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
}

TEST(DaemonConfigTest, FileKeysApplyAndBadOnesAreNamed) {
  const std::string path = TempPath("config.json");
  WriteFile(path, R"({"quantum": "10s", "oversubscribe": false, "host_budget": "1GiB"})");
  DaemonConfig c;
  ASSERT_TRUE(LoadConfigFile(path, &c).ok());
  EXPECT_EQ(c.quantum_ms, 10000);
  EXPECT_FALSE(c.oversubscribe);
  EXPECT_EQ(c.host_budget, 1ull << 30);

  WriteFile(path, R"({"quantum": "soon"})");
  Status s = LoadConfigFile(path, &c);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message.find("'quantum'"), std::string::npos) << s.message;

  WriteFile(path, R"({"quantun": "1s"})");
  s = LoadConfigFile(path, &c);
  EXPECT_NE(s.message.find("unknown config key 'quantun'"), std::string::npos) << s.message;

  WriteFile(path, R"({"quantum": [1]})");
  EXPECT_FALSE(LoadConfigFile(path, &c).ok());
  WriteFile(path, "{not json");
  EXPECT_FALSE(LoadConfigFile(path, &c).ok());
  std::remove(path.c_str());
}

TEST(DaemonConfigTest, ValidationNamesTheKey) {
  DaemonConfig c;
  EXPECT_TRUE(ValidateConfig(c).ok());
  c.metrics_listen = "localhost";
  EXPECT_NE(ValidateConfig(c).message.find("metrics_listen"), std::string::npos);
  c.metrics_listen = "127.0.0.1:99999";
  EXPECT_FALSE(ValidateConfig(c).ok());
  c.metrics_listen = "off";
  c.quantum_ms = 1;
  EXPECT_NE(ValidateConfig(c).message.find("quantum"), std::string::npos);
  DaemonConfig d;
  EXPECT_FALSE(ApplyConfigValue("run_dir", "relative/dir", &d).ok());
}

TEST(StateFileTest, RoundTripsAndRefusesForeignFiles) {
  const std::string path = TempPath("state");
  DaemonState s;
  s.parked.push_back({123, 456, 789, true});
  s.parked.push_back({124, 457, 790, false});
  s.events.push_back({1000, "suspend", 123, 124, "GPU-x", 1 << 20, 0.5, "made room for 124"});
  ASSERT_TRUE(WriteState(path, s).ok());
  DaemonState r;
  ASSERT_TRUE(ReadState(path, &r).ok());
  ASSERT_EQ(r.parked.size(), 2u);
  EXPECT_EQ(r.parked[0].pid, 123);
  EXPECT_EQ(r.parked[0].start_time, 456u);
  EXPECT_TRUE(r.parked[0].on_disk);
  EXPECT_FALSE(r.parked[1].on_disk);
  ASSERT_EQ(r.events.size(), 1u);
  EXPECT_EQ(r.events[0].message, "made room for 124");

  for (const char* bad : {"", "{}", "[1,2]", R"({"format":"vgpud-state","version":99,"parked":[]})",
                          R"({"format":"vgpud-state","version":1,"parked":[{"pid":"x"}],"events":[]})"}) {
    WriteFile(path, bad);
    DaemonState x;
    Status st = ReadState(path, &x);
    EXPECT_EQ(st.code, ErrorCode::kInval) << bad;
    EXPECT_TRUE(x.parked.empty()) << bad;
  }
  std::remove(path.c_str());
  DaemonState none;
  EXPECT_EQ(ReadState(path, &none).code, ErrorCode::kNoEnt);
}

TEST(DaemonRequestTest, MakeRoomOnlyForItself) {
  Peer job{4242, 1000, 1000, false};
  DaemonRequest r;
  const std::string own = R"({"v":1,"id":1,"cmd":"make_room","args":{"pid":4242,"device":"GPU-1","bytes":2097152}})";
  EXPECT_TRUE(ParseDaemonRequest(own, job, &r).ok());
  EXPECT_EQ(r.target, 4242);
  const std::string other = R"({"v":1,"id":1,"cmd":"make_room","args":{"pid":4243,"device":"GPU-1","bytes":2097152}})";
  DaemonRequest r2;
  EXPECT_EQ(ParseDaemonRequest(other, job, &r2).code, ErrorCode::kPerm);
  Peer root{1, 0, 0, true};
  DaemonRequest r3;
  EXPECT_TRUE(ParseDaemonRequest(other, root, &r3).ok());
}

// The tenant socket (containers): ping and make_room only, for the peer's
// own pid as the kernel gives it (a container's pid numbers are its own),
// and a container's root is not vgpud's admin.
TEST(TenantRequestTest, OnlyPingAndTheCallersOwnMakeRoomNeverAsAdmin) {
  Peer container_root{30025, 0, 0, true};
  ctl::Request req, out;
  Peer as;
  req.cmd = "make_room";
  req.args = {{"pid", 1}, {"device", "GPU-1"}, {"bytes", 2097152u}};
  ASSERT_TRUE(TenantRequest(req, container_root, &out, &as).ok());
  EXPECT_EQ(out.args["pid"], 30025);
  EXPECT_FALSE(as.admin);
  DaemonRequest r;
  ASSERT_TRUE(CheckDaemonRequest(out, as, &r).ok());
  EXPECT_EQ(r.target, 30025);
  req.cmd = "ping";
  EXPECT_TRUE(TenantRequest(req, container_root, &out, &as).ok());
  for (const char* cmd : {"ps", "events", "set", "migrate", "drain", "undrain", "nope"}) {
    req.cmd = cmd;
    EXPECT_EQ(TenantRequest(req, container_root, &out, &as).code, ErrorCode::kPerm) << cmd;
  }
  req.cmd = "make_room";
  EXPECT_EQ(TenantRequest(req, Peer{0, 0, 0, true}, &out, &as).code, ErrorCode::kPerm);
}

TEST(DaemonRequestTest, MalformedRequestsAreRefusedWithAReason) {
  Peer p{1, 0, 0, true};
  const char* bad[] = {
      "", "{", "[]", R"({"v":2,"cmd":"ps"})", R"({"v":1,"cmd":"launch"})",
      R"({"v":1,"cmd":"make_room","args":{"pid":-1,"device":"GPU-1","bytes":1}})",
      R"({"v":1,"cmd":"make_room","args":{"pid":1,"device":7,"bytes":1}})",
      R"({"v":1,"cmd":"make_room","args":{"pid":1,"device":"GPU-1","bytes":0}})",
      R"({"v":1,"cmd":"set","args":{"memory_limit":"x"}})",
      R"({"v":1,"cmd":"events","args":{"n":100000}})",
      R"({"v":1,"cmd":"ps","args":5})"};
  for (const char* line : bad) {
    DaemonRequest r;
    Status s = ParseDaemonRequest(line, p, &r);
    EXPECT_FALSE(s.ok()) << line;
    EXPECT_FALSE(s.message.empty()) << line;
  }
  DaemonRequest big;
  EXPECT_FALSE(ParseDaemonRequest(std::string(ctl::kMaxRequestBytes + 1, ' '), p, &big).ok());
}

TEST(MetricsTest, ExpositionPassesPromtool) {
  Job j;
  j.pid = 77;
  j.command = "train \"x\"";
  j.state = JobState::kWaiting;
  j.devices.push_back({"GPU-a", 0, 1 << 20, 2 << 20});
  j.counters.emplace_back("suspends", 3);
  j.counters.emplace_back("suspend_ns", 1500000000);
  j.suspensions = 3;
  std::vector<GpuMemory> gpus = {{"GPU-a", 0, 100, 1000}};
  const std::string text = RenderMetrics({j}, gpus, true);
  EXPECT_NE(text.find("vgpu_job_state{pid=\"77\",command=\"train \\\"x\\\"\",state=\"waiting\"} 1"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("vgpu_device_memory_total_bytes{device=\"GPU-a\"} 1000"), std::string::npos);
  EXPECT_NE(text.find("vgpu_lib_suspend_seconds_total{pid=\"77\""), std::string::npos);
  EXPECT_NE(text.find("} 1.5\n"), std::string::npos) << text;
  if (system("command -v promtool >/dev/null 2>&1") != 0) GTEST_SKIP() << "promtool not installed";
  const std::string path = TempPath("metrics.txt");
  WriteFile(path, text);
  EXPECT_EQ(system(("promtool check metrics < " + path).c_str()), 0) << text;
  std::remove(path.c_str());
}

// The achieved share is the rate of libvgpu's compute_charged_ns between
// readings at least 0.5 s apart; none for a job without a compute policy.
TEST(JobTest, AchievedShareIsTheRateOfChargedGpuTime) {
  Job j;
  j.compute_governed = true;
  const Clock::time_point t0 = Clock::now();
  j.counters = {{"compute_charged_ns", 5'000'000'000}};
  j.UpdateAchievedShare(t0);
  EXPECT_LT(j.achieved_share, 0) << "one reading is no rate";
  j.counters = {{"compute_charged_ns", 5'100'000'000}};
  j.UpdateAchievedShare(t0 + std::chrono::milliseconds(200));
  EXPECT_LT(j.achieved_share, 0) << "readings too close together";
  j.counters = {{"compute_charged_ns", 5'300'000'000}};
  j.UpdateAchievedShare(t0 + std::chrono::seconds(1));
  EXPECT_NEAR(j.achieved_share, 0.3, 1e-9);
  j.counters = {{"compute_charged_ns", 1'000}};  // a new process image: starts over
  j.UpdateAchievedShare(t0 + std::chrono::seconds(2));
  EXPECT_NEAR(j.achieved_share, 0.3, 1e-9);
  j.counters = {{"compute_charged_ns", 1'000 + 500'000'000}};
  j.UpdateAchievedShare(t0 + std::chrono::seconds(3));
  EXPECT_NEAR(j.achieved_share, 0.5, 1e-9);
  EXPECT_NE(RenderMetrics({j}, {}, true).find("vgpu_job_compute_share_achieved_ratio{pid=\"0\""),
            std::string::npos);
  j.compute_governed = false;
  j.UpdateAchievedShare(t0 + std::chrono::seconds(4));
  EXPECT_LT(j.achieved_share, 0);
  EXPECT_EQ(RenderMetrics({j}, {}, true).find("vgpu_job_compute_share_achieved_ratio{"), std::string::npos);
}

}  // namespace
}  // namespace vgpu::vgpud
