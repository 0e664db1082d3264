// vgpu-oci-hook's library (ctl/oci_hook): parsing the container state and
// config.json, the asks-for-vgpu decision, the VGPU_CONFIG file it builds,
// and the writes inside a rootfs (temporary directories, no processes).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "ctl/oci_hook/oci_state.h"
#include "ctl/oci_hook/preload_file.h"
#include "gtest/gtest.h"

namespace vgpu::oci_hook {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// --- parsing ---

TEST(OciState, ParsesState) {
  ContainerState st;
  Status s = ParseState(
      R"({"ociVersion":"1.2.0","id":"c1","status":"creating","pid":42,"bundle":"/b",
          "annotations":{"vgpu.io/priority":"high"}})",
      &st);
  ASSERT_TRUE(s.ok()) << s.message;
  EXPECT_EQ(st.id, "c1");
  EXPECT_EQ(st.status, "creating");
  EXPECT_EQ(st.pid, 42);
  EXPECT_EQ(st.bundle, "/b");
  EXPECT_EQ(st.annotations.at("vgpu.io/priority"), "high");
}

TEST(OciState, RejectsBadState) {
  ContainerState st;
  for (const char* text :
       {"", "garbage", "[]", R"({"bundle":"/b"})", R"({"id":"c","bundle":"b"})",
        R"({"id":"","bundle":"/b"})", R"({"id":7,"bundle":"/b"})",
        R"({"id":"c","bundle":"/b","pid":"x"})",
        R"({"id":"c","bundle":"/b","annotations":{"a":1}})", R"({"id":"c\n","bundle":"/b"})"}) {
    Status s = ParseState(text, &st);
    EXPECT_FALSE(s.ok()) << text;
    EXPECT_EQ(s.message.find('\n'), std::string::npos) << s.message;
    EXPECT_FALSE(s.message.empty());
  }
}

TEST(OciState, RejectsDeepNesting) {
  std::string deep =
      R"({"id":"c","bundle":"/b","x":)" + std::string(100000, '[') + std::string(100000, ']') + "}";
  ContainerState st;
  Status s = ParseState(deep, &st);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message.find("nested"), std::string::npos) << s.message;
}

TEST(OciState, RootPathRelativeToBundle) {
  BundleConfig c;
  ASSERT_TRUE(ParseBundleConfig(R"({"root":{"path":"rootfs"}})", "/var/b", &c).ok());
  EXPECT_EQ(c.rootfs, "/var/b/rootfs");
  ASSERT_TRUE(ParseBundleConfig(R"({"root":{"path":"/srv/root"}})", "/var/b", &c).ok());
  EXPECT_EQ(c.rootfs, "/srv/root");
}

TEST(OciState, ParsesEnvAndAnnotations) {
  BundleConfig c;
  Status s = ParseBundleConfig(
      R"({"root":{"path":"r"},"process":{"env":["A=1","VGPU_GROUP=g"]},
          "annotations":{"vgpu.io/memory-limit":"1g"}})",
      "/b", &c);
  ASSERT_TRUE(s.ok()) << s.message;
  EXPECT_EQ(c.env, (std::vector<std::string>{"A=1", "VGPU_GROUP=g"}));
  EXPECT_EQ(c.annotations.at("vgpu.io/memory-limit"), "1g");
}

TEST(OciState, RejectsBadConfig) {
  BundleConfig c;
  for (const char* text : {"{", R"({})", R"({"root":{}})", R"({"root":{"path":""}})",
                           R"({"root":{"path":"r"},"process":{"env":"A=1"}})",
                           R"({"root":{"path":"r"},"process":{"env":[1]}})",
                           R"({"root":{"path":"r"},"process":{"user":{"uid":-1}}})",
                           R"({"root":{"path":"r"},"process":{"user":{"gid":"0"}}})",
                           R"({"root":{"path":"r"},"process":{"user":7}})"}) {
    EXPECT_FALSE(ParseBundleConfig(text, "/b", &c).ok()) << text;
  }
}

// Who the container's processes run as: its run directory is given to them.
TEST(OciState, ParsesTheUser) {
  BundleConfig c;
  ASSERT_TRUE(ParseBundleConfig(
                  R"({"root":{"path":"r"},"process":{"user":{"uid":1000,"gid":100}}})", "/b", &c)
                  .ok());
  EXPECT_EQ(c.uid, 1000);
  EXPECT_EQ(c.gid, 100);
  ASSERT_TRUE(ParseBundleConfig(R"({"root":{"path":"r"}})", "/b", &c).ok());
  EXPECT_EQ(c.uid, 0);
}

TEST(OciState, ConfigAnnotationsWinOverState) {
  ContainerState st;
  st.annotations = {{"a", "state"}, {"b", "state"}};
  BundleConfig c;
  c.annotations = {{"a", "config"}};
  Annotations m = MergedAnnotations(st, c);
  EXPECT_EQ(m.at("a"), "config");
  EXPECT_EQ(m.at("b"), "state");
}

// --- the decision ---

TEST(OciState, AsksForVgpu) {
  EXPECT_TRUE(AsksForVgpu({{"vgpu.io/memory-limit", "1g"}}, {}));
  EXPECT_TRUE(AsksForVgpu({}, {"PATH=/bin", "VGPU_GROUP=x"}));
  EXPECT_FALSE(AsksForVgpu({{"io.kubernetes.pod", "x"}, {"vgpu.iox/a", "1"}},
                           {"PATH=/bin", "MY_VGPU_X=1", "CUDA_VISIBLE_DEVICES=0"}));
  EXPECT_FALSE(AsksForVgpu({}, {}));
}

TEST(OciState, EnvValueLastWins) {
  std::string v;
  EXPECT_TRUE(EnvValue({"VGPU_GROUP=a", "VGPU_GROUPX=b", "VGPU_GROUP=c"}, "VGPU_GROUP", &v));
  EXPECT_EQ(v, "c");
  EXPECT_FALSE(EnvValue({"VGPU_GROUPX=b"}, "VGPU_GROUP", &v));
}

// --- the VGPU_CONFIG file ---

json Build(const Annotations& a, const std::vector<std::string>& env, Status* s) {
  std::string text;
  *s = BuildContainerConfig("0123abcd", a, env, &text);
  return s->ok() ? json::parse(text) : json();
}

TEST(OciState, AnnotationsBecomeOptions) {
  Status s;
  json j = Build({{"vgpu.io/memory-limit", "4GiB"},
                  {"vgpu.io/compute-share", "50"},
                  {"vgpu.io/priority", "low"},
                  {"other", "x"}},
                 {}, &s);
  ASSERT_TRUE(s.ok()) << s.message;
  EXPECT_EQ(j, json({{"device_memory_limit", "4GiB"},
                     {"compute_share", "50"},
                     {"priority", "low"},
                     {"group", "0123abcd"}}));
}

TEST(OciState, ContainerEnvWins) {
  Status s;
  json j = Build({{"vgpu.io/memory-limit", "4GiB"}},
                 {"VGPU_DEVICE_MEMORY_LIMIT=1GiB", "VGPU_GROUP=team"}, &s);
  ASSERT_TRUE(s.ok()) << s.message;
  EXPECT_EQ(j["device_memory_limit"], "1GiB");
  EXPECT_EQ(j["group"], "team");
}

// A process that clears its environment still loads libvgpu (ld.so.preload)
// and reads the file: it must find the driver and the limits set as variables.
TEST(OciState, TheContainersOwnOptionsGoIntoTheFile) {
  Status s;
  json j = Build({},
                 {"VGPU_REAL_LIBCUDA=/usr/lib/vgpu/driver/libcuda.so.1", "VGPU_COMPUTE_SHARE=30",
                  "VGPU_CONFIG=/etc/vgpu/container.json", "VGPU_RUN_DIR=/run/vgpu", "PATH=/bin"},
                 &s);
  ASSERT_TRUE(s.ok()) << s.message;
  EXPECT_EQ(j, json({{"real_libcuda", "/usr/lib/vgpu/driver/libcuda.so.1"},
                     {"compute_share", "30"},
                     {"group", "0123abcd"}}))
      << "VGPU_CONFIG and VGPU_RUN_DIR have no key in the file";
  Build({}, {"VGPU_COMPUTE_SHARE=300"}, &s);
  EXPECT_FALSE(s.ok()) << "checked by libvgpu's parser like an annotation";
}

// A container configured with HAMi-core names keeps those limits in processes
// that clear their environment; a VGPU_* name wins over its alias, an alias
// over an annotation (as in libvgpu), and per-device NAME_<i> forms stay
// environment-only.
TEST(OciState, HamiNamesGoIntoTheFile) {
  Status s;
  json j = Build(
      {{"vgpu.io/memory-limit", "4GiB"}},
      {"CUDA_DEVICE_MEMORY_LIMIT=1g", "CUDA_DEVICE_SM_LIMIT=30", "CUDA_DEVICE_MEMORY_LIMIT_1=2g"},
      &s);
  ASSERT_TRUE(s.ok()) << s.message;
  EXPECT_EQ(j.value("device_memory_limit", ""), "1g") << j.dump();
  EXPECT_EQ(j.value("compute_share", ""), "30") << j.dump();
  j = Build({}, {"CUDA_DEVICE_MEMORY_LIMIT=1g", "VGPU_DEVICE_MEMORY_LIMIT=3GiB"}, &s);
  ASSERT_TRUE(s.ok()) << s.message;
  EXPECT_EQ(j.value("device_memory_limit", ""), "3GiB") << j.dump();
  Build({}, {"CUDA_DEVICE_MEMORY_LIMIT=lots"}, &s);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message.find("CUDA_DEVICE_MEMORY_LIMIT"), std::string::npos) << s.message;
}

// The annotations are the admin's: they go into the limits file too, with
// the container's group, where libvgpu reads them as ceilings; the
// container's own variables stay in container.json only. Without an
// annotation the file still fixes the group and the node's scheduler region:
// a container that chose its own would escape the node's scheduling.
TEST(OciState, AnnotationsAreTheContainersCeilings) {
  const Annotations a = {
      {"vgpu.io/memory-limit", "1GiB"}, {"vgpu.io/priority", "normal"}, {"x", "y"}};
  const std::vector<std::string> env = {"VGPU_DEVICE_MEMORY_LIMIT=16GiB", "VGPU_PRIORITY=high"};
  std::string file, limits;
  ASSERT_TRUE(BuildContainerConfig("0123abcd", a, env, &file).ok());
  ASSERT_TRUE(BuildContainerLimits(a, "0123abcd", &limits).ok());
  const json l = json::parse(limits);
  EXPECT_EQ(l.value("device_memory_limit", ""), "1GiB") << limits;
  EXPECT_EQ(l.value("priority", ""), "normal") << limits;
  EXPECT_EQ(l.value("group", ""), "0123abcd") << limits;
  EXPECT_EQ(l.value("sched_region", ""), "/vgpu-sched") << limits;
  EXPECT_EQ(l.size(), 4u) << limits;
  EXPECT_EQ(json::parse(file).value("device_memory_limit", ""), "16GiB")
      << "the tenant's ask, refused later";
  ASSERT_TRUE(BuildContainerConfig("0123abcd", {}, env, &file).ok());
  ASSERT_TRUE(BuildContainerLimits({}, "0123abcd", &limits).ok());
  EXPECT_EQ(json::parse(limits),
            json::parse(R"({"group": "0123abcd", "sched_region": "/vgpu-sched"})"))
      << limits;
  // A group of the container's own choosing stays in container.json, refused
  // later: its group is its bucket on the node's scheduler.
  ASSERT_TRUE(BuildContainerConfig("0123abcd", {}, {"VGPU_GROUP=other"}, &file).ok());
  ASSERT_TRUE(BuildContainerLimits({}, "0123abcd", &limits).ok());
  EXPECT_EQ(json::parse(limits).value("group", ""), "0123abcd") << limits;
}

TEST(OciState, InvalidAnnotationIsAnError) {
  Status s;
  Build({{"vgpu.io/memory-limit", "lots"}}, {}, &s);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message.find("vgpu.io/memory-limit"), std::string::npos) << s.message;
  Build({{"vgpu.io/compute-share", "150"}}, {}, &s);
  EXPECT_FALSE(s.ok());
  Build({{"vgpu.io/priority", "urgent"}}, {}, &s);
  EXPECT_FALSE(s.ok());
  Build({{"vgpu.io/memory-limt", "1g"}}, {}, &s);  // a typo is not ignored
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message.find("unknown annotation"), std::string::npos) << s.message;
  Build({}, {"VGPU_GROUP=no spaces"}, &s);
  EXPECT_FALSE(s.ok());
}

TEST(OciState, IdThatIsNoGroupNameIsAnError) {
  std::string text;
  Status s = BuildContainerConfig("a/b", {}, {}, &text);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message.find("VGPU_GROUP"), std::string::npos) << s.message;
  EXPECT_TRUE(BuildContainerConfig("a/b", {}, {"VGPU_GROUP=g"}, &text).ok());
}

TEST(OciState, AnnotationsNeedTheContainerFileToBeRead) {
  Status s = CheckConfigReachable({{"vgpu.io/memory-limit", "1g"}}, {"VGPU_CONFIG=/etc/my.json"});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message.find("/etc/my.json"), std::string::npos) << s.message;
  EXPECT_NE(s.message.find("/etc/vgpu/container.json"), std::string::npos) << s.message;
  // Unset: libvgpu reads the container file by itself.
  EXPECT_TRUE(CheckConfigReachable({{"vgpu.io/memory-limit", "1g"}}, {"PATH=/bin"}).ok());
  EXPECT_TRUE(CheckConfigReachable({{"vgpu.io/memory-limit", "1g"}},
                                   {"VGPU_CONFIG=/etc/vgpu/container.json"})
                  .ok());
  EXPECT_TRUE(CheckConfigReachable({{"other", "x"}}, {"VGPU_CONFIG=/etc/my.json"}).ok());
}

// --- the claim file (--claim) ---

ClaimOptions Claim(const std::string& text) {
  ClaimOptions c;
  const Status s = ParseClaimFile(text, "/run/vgpu/claims/u1/limits.json", &c);
  EXPECT_TRUE(s.ok()) << s.message;
  return c;
}

Status ClaimError(const std::string& text) {
  ClaimOptions c;
  return ParseClaimFile(text, "/run/vgpu/claims/u1/limits.json", &c);
}

TEST(ClaimFile, ParsesTheOptionsOfAClaim) {
  const ClaimOptions c = Claim(R"({"group": "claim-u1", "visible_devices": "0",
      "device_memory_limit": "512MiB", "compute_share": "50", "compute_weight": "1",
      "priority": "high", "claim": "default/my-claim", "pod": "default/my-pod",
      "preemptible": "false", "sched_region": "/vgpu-sched"})");
  EXPECT_EQ(c.values.size(), 10u);
  ASSERT_NE(c.group(), nullptr);
  EXPECT_EQ(*c.group(), "claim-u1");
  EXPECT_EQ(Claim("{}").group(), nullptr);
}

// Fail closed: a claim whose limits cannot all be applied must not start
// the container with some of them, or none.
TEST(ClaimFile, AnythingLibvgpuWouldRefuseIsAnError) {
  const std::pair<const char*, const char*> bad[] = {
      {"", "not valid JSON"},
      {"[1]", "not a JSON object"},
      {R"({"device_memory_limt": "1GiB"})", "unknown key 'device_memory_limt'"},
      {R"({"device_memory_limit": "lots"})", "device_memory_limit"},
      {R"({"device_memory_limit": 512})", "expected a string"},
      {R"({"preemptible": "maybe"})", "preemptible"},
      {R"({"claim": "a b"})", "claim"},
      {R"({"group": "no/slash"})", "group"},
      {R"({"compute_share": "150"})", "compute_share"},
      {R"({"sched_region": "/vgpu-sched-mine"})", "not the node's"},
      {R"({"group": "a", "group": "b"})", "twice"},
      {R"({"vmm": "off"})", "unknown key"},
  };
  for (const auto& [text, why] : bad) {
    const Status s = ClaimError(text);
    ASSERT_FALSE(s.ok()) << text;
    EXPECT_NE(s.message.find(why), std::string::npos) << text << ": " << s.message;
    EXPECT_NE(s.message.find("claim file /run/vgpu/claims/u1/limits.json"), std::string::npos)
        << s.message;
    EXPECT_EQ(s.message.find('\n'), std::string::npos) << s.message;
  }
}

// The claim's options are the admin's: in limits.json over the annotations,
// its group instead of the container id; the scheduler region stays the
// node's. container.json gets them as its defaults, the group among them.
TEST(ClaimFile, TheClaimOverridesTheAnnotations) {
  const ClaimOptions c = Claim(R"({"group": "claim-u1", "device_memory_limit": "512MiB",
      "priority": "high", "claim": "default/c", "preemptible": "false"})");
  const Annotations a = {{"vgpu.io/memory-limit", "1GiB"}, {"vgpu.io/compute-share", "30"}};
  std::string limits, file;
  ASSERT_TRUE(BuildContainerLimits(a, "0123abcd", &limits, &c).ok());
  EXPECT_EQ(json::parse(limits), json::parse(R"({"group": "claim-u1", "sched_region": "/vgpu-sched",
      "device_memory_limit": "512MiB", "compute_share": "30", "priority": "high",
      "claim": "default/c", "preemptible": "false"})"))
      << limits;
  ASSERT_TRUE(BuildContainerConfig("0123abcd", a, {}, &file, &c).ok());
  const json f = json::parse(file);
  EXPECT_EQ(f.value("group", ""), "claim-u1") << file;
  EXPECT_EQ(f.value("device_memory_limit", ""), "512MiB") << file;
  EXPECT_EQ(f.value("priority", ""), "high") << file;
  // The container's own variables still win in its own file (refused later
  // where above the claim's ceilings).
  ASSERT_TRUE(
      BuildContainerConfig("0123abcd", a, {"VGPU_DEVICE_MEMORY_LIMIT=8GiB"}, &file, &c).ok());
  EXPECT_EQ(json::parse(file).value("device_memory_limit", ""), "8GiB") << file;
  // A claim without a group: the container id, as without a claim.
  const ClaimOptions no_group = Claim(R"({"device_memory_limit": "1GiB"})");
  ASSERT_TRUE(BuildContainerLimits({}, "0123abcd", &limits, &no_group).ok());
  EXPECT_EQ(json::parse(limits).value("group", ""), "0123abcd") << limits;
  ASSERT_TRUE(BuildContainerConfig("0123abcd", {}, {}, &file, &no_group).ok());
  EXPECT_EQ(json::parse(file).value("group", ""), "0123abcd") << file;
  // A claim asks for limits: another VGPU_CONFIG would hide the claim's.
  EXPECT_FALSE(CheckConfigReachable({}, {"VGPU_CONFIG=/etc/my.json"}, true).ok());
  EXPECT_TRUE(CheckConfigReachable({}, {"VGPU_CONFIG=/etc/my.json"}, false).ok());
}

// --- writes inside a rootfs ---

class Rootfs : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/vgpu-oci-hook-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    root_ = dir_ + "/rootfs";
    fs::create_directories(root_);
    ASSERT_TRUE(OpenRootfs(root_, &fd_).ok());
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Read(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  std::string dir_, root_;
  Fd fd_;
};

TEST_F(Rootfs, CreatesPreload) {
  ASSERT_TRUE(AddPreloadLine(fd_.get(), "/usr/lib/vgpu/libvgpu.so").ok());
  EXPECT_EQ(Read(root_ + "/etc/ld.so.preload"), "/usr/lib/vgpu/libvgpu.so\n");
  struct stat st {};
  ASSERT_EQ(::stat((root_ + "/etc/ld.so.preload").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u);
}

TEST_F(Rootfs, AppendsOnceAndKeepsMode) {
  fs::create_directories(root_ + "/etc");
  std::ofstream(root_ + "/etc/ld.so.preload") << "/lib/other.so";
  ::chmod((root_ + "/etc/ld.so.preload").c_str(), 0600);
  ASSERT_TRUE(AddPreloadLine(fd_.get(), "/usr/lib/vgpu/libvgpu.so").ok());
  ASSERT_TRUE(AddPreloadLine(fd_.get(), "/usr/lib/vgpu/libvgpu.so").ok());
  EXPECT_EQ(Read(root_ + "/etc/ld.so.preload"), "/lib/other.so\n/usr/lib/vgpu/libvgpu.so\n");
  struct stat st {};
  ASSERT_EQ(::stat((root_ + "/etc/ld.so.preload").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  // An entry among others on one line, as the loader splits them, counts too.
  std::ofstream(root_ + "/etc/ld.so.preload") << "/a.so:/usr/lib/vgpu/libvgpu.so /b.so\n";
  ASSERT_TRUE(AddPreloadLine(fd_.get(), "/usr/lib/vgpu/libvgpu.so").ok());
  EXPECT_EQ(Read(root_ + "/etc/ld.so.preload"), "/a.so:/usr/lib/vgpu/libvgpu.so /b.so\n");
}

TEST_F(Rootfs, RefusesSymlinkedEtc) {
  const std::string elsewhere = dir_ + "/elsewhere";
  fs::create_directories(elsewhere);
  fs::create_directory_symlink(elsewhere, root_ + "/etc");
  Status s = AddPreloadLine(fd_.get(), "/usr/lib/vgpu/libvgpu.so");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message.find("symlink"), std::string::npos) << s.message;
  EXPECT_FALSE(WriteContainerFile(fd_.get(), kContainerConfig, "{}").ok());
  EXPECT_TRUE(fs::is_empty(elsewhere));
}

TEST_F(Rootfs, RefusesSymlinkedPreloadFile) {
  const std::string target = dir_ + "/host-file";
  std::ofstream(target) << "host\n";
  fs::create_directories(root_ + "/etc");
  fs::create_symlink(target, root_ + "/etc/ld.so.preload");
  EXPECT_FALSE(AddPreloadLine(fd_.get(), "/usr/lib/vgpu/libvgpu.so").ok());
  EXPECT_EQ(Read(target), "host\n");
}

TEST_F(Rootfs, ChecksLibraryWithoutFollowingSymlinks) {
  EXPECT_EQ(CheckRegularFile(fd_.get(), kDefaultPreload).code, ErrorCode::kNoEnt);
  fs::create_directories(root_ + "/usr/lib/vgpu");
  std::ofstream(root_ + "/usr/lib/vgpu/libvgpu.so") << "elf";
  EXPECT_TRUE(CheckRegularFile(fd_.get(), kDefaultPreload).ok());
  EXPECT_FALSE(CheckRegularFile(fd_.get(), "/usr/../../etc/passwd").ok());
  fs::remove(root_ + "/usr/lib/vgpu/libvgpu.so");
  fs::create_symlink("/bin/sh", root_ + "/usr/lib/vgpu/libvgpu.so");
  EXPECT_FALSE(CheckRegularFile(fd_.get(), kDefaultPreload).ok());
}

TEST_F(Rootfs, WritesContainerFile) {
  ASSERT_TRUE(WriteContainerFile(fd_.get(), kContainerConfig, "{\"group\": \"g\"}\n").ok());
  EXPECT_EQ(Read(root_ + "/etc/vgpu/container.json"), "{\"group\": \"g\"}\n");
  ASSERT_TRUE(WriteContainerFile(fd_.get(), kContainerConfig, "{}\n").ok());
  EXPECT_EQ(Read(root_ + "/etc/vgpu/container.json"), "{}\n");
  int leftovers = 0;
  for (const auto& e : fs::directory_iterator(root_ + "/etc/vgpu"))
    leftovers += e.path().filename().string()[0] == '.';
  EXPECT_EQ(leftovers, 0);
}

}  // namespace
}  // namespace vgpu::oci_hook
