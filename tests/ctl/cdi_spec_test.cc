// The CDI spec library (ctl/cdi/): the spec built from an inventory, the
// inventory found on a fake host (temporary directories), validation, parsing
// and the atomic write. Label unit.
#include "ctl/cdi/cdi_spec.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "ctl/cdi/cdi_host.h"
#include "ctl/cdi/library_deps.h"
#include "tests/ctl/test_util.h"

namespace vgpu::cdi {
namespace {

using nlohmann::json;

void Touch(const std::string& path) { std::ofstream(path) << "x"; }

bool Contains(const json& list, const json& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

Inventory TwoGpus() {
  Inventory inv;
  inv.gpus = {{0, "GPU-aaaa", "/dev/nvidia0"}, {1, "GPU-bbbb", ""}};
  inv.libvgpu = "/opt/vgpu/lib/libvgpu.so";
  inv.libcuda = "/usr/lib64/libcuda.so.1";
  inv.libnvml = "/usr/lib64/libnvidia-ml.so.1";
  inv.common_nodes = {"/dev/nvidiactl"};
  inv.run_dir = "/run/vgpu";
  inv.hook = "/opt/vgpu/bin/vgpu-oci-hook";
  return inv;
}

const json& Device(const json& spec, const std::string& name) {
  for (const json& d : spec["devices"]) {
    if (d["name"] == name) return d;
  }
  static const json kNone;
  ADD_FAILURE() << "no device " << name;
  return kNone;
}

TEST(CdiSpec, DevicesPerGpuAndAll) {
  json spec = BuildSpec(TwoGpus());
  EXPECT_EQ(spec["kind"], "vgpu.io/gpu");
  EXPECT_EQ(spec["cdiVersion"], "0.5.0");
  ASSERT_EQ(spec["devices"].size(), 3u) << spec.dump(2);
  const json& d0 = Device(spec, "0")["containerEdits"];
  EXPECT_EQ(d0["env"], json({"VGPU_VISIBLE_DEVICES=GPU-aaaa"}));
  EXPECT_EQ(d0["deviceNodes"], json::parse(R"([{"path":"/dev/nvidia0"}])"));
  EXPECT_FALSE(Device(spec, "1")["containerEdits"].contains("deviceNodes"));
  const json& all = Device(spec, "all")["containerEdits"];
  EXPECT_EQ(all["env"], json({"VGPU_VISIBLE_DEVICES=0,1"}));
  EXPECT_EQ(all["deviceNodes"].size(), 1u);
  EXPECT_TRUE(ValidateSpec(spec).ok()) << ValidateSpec(spec).message;
}

TEST(CdiSpec, CommonEdits) {
  json edits = BuildSpec(TwoGpus())["containerEdits"];
  for (const char* e :
       {"LD_PRELOAD=/usr/lib/vgpu/libvgpu.so",
        "VGPU_REAL_LIBCUDA=/usr/lib/vgpu/driver/libcuda.so.1",
        "VGPU_REAL_LIBNVML=/usr/lib/vgpu/driver/libnvidia-ml.so.1", "VGPU_RUN_DIR=/run/vgpu"}) {
    EXPECT_TRUE(Contains(edits["env"], e)) << e << " in " << edits["env"].dump();
  }
  json ro = {"ro", "nosuid", "nodev", "bind"};
  EXPECT_TRUE(Contains(edits["mounts"], json({{"hostPath", "/opt/vgpu/lib/libvgpu.so"},
                                              {"containerPath", "/usr/lib/vgpu/libvgpu.so"},
                                              {"options", ro}})))
      << edits["mounts"].dump(2);
  EXPECT_TRUE(
      Contains(edits["mounts"], json({{"hostPath", "/usr/lib64/libcuda.so.1"},
                                      {"containerPath", "/usr/lib/vgpu/driver/libcuda.so.1"},
                                      {"options", ro}})));
  // libvgpu, libcuda, NVML; not the run directory (the hook mounts the
  // container's own directory under it).
  EXPECT_EQ(edits["mounts"].size(), 3u);
  EXPECT_EQ(edits["deviceNodes"], json::parse(R"([{"path":"/dev/nvidiactl"}])"));
  ASSERT_EQ(edits["hooks"].size(), 2u);
  EXPECT_EQ(edits["hooks"][0]["hookName"], "createContainer");
  // The container's run directory goes with the container.
  EXPECT_EQ(edits["hooks"][1], json({{"hookName", "poststop"},
                                     {"path", "/opt/vgpu/bin/vgpu-oci-hook"},
                                     {"args", {"vgpu-oci-hook", "--poststop", "--run-dir",
                                               "/run/vgpu"}}}));
  EXPECT_EQ(edits["hooks"][0]["path"], "/opt/vgpu/bin/vgpu-oci-hook");
  EXPECT_EQ(edits["hooks"][0]["args"], json({"vgpu-oci-hook", "--cdi", "--preload",
                                             "/usr/lib/vgpu/libvgpu.so", "--run-dir", "/run/vgpu"}));
  EXPECT_TRUE(Contains(edits["env"], "VGPU_CONFIG=/etc/vgpu/container.json")) << edits["env"].dump();
}

TEST(CdiSpec, DriverDependenciesAreMountedBesideTheDriver) {
  Inventory inv = TwoGpus();
  inv.driver_deps = {"/lib/x86_64-linux-gnu/libelf.so.1"};
  json edits = BuildSpec(inv)["containerEdits"];
  EXPECT_TRUE(Contains(edits["mounts"], json({{"hostPath", "/lib/x86_64-linux-gnu/libelf.so.1"},
                                              {"containerPath", "/usr/lib/vgpu/driver/libelf.so.1"},
                                              {"options", {"ro", "nosuid", "nodev", "bind"}}})))
      << edits["mounts"].dump(2);
}

// The node's shared files (the scheduler region; the simulated node's file)
// are mounted like device nodes: same path, writable, nothing executable.
TEST(CdiSpec, SharedNodeFilesAreMountedAtTheirOwnPath) {
  Inventory inv = TwoGpus();
  inv.shared_files = {"/dev/shm/vgpu-sched", "/dev/shm/vgpu-sim-n"};
  json edits = BuildSpec(inv)["containerEdits"];
  for (const std::string f : {"/dev/shm/vgpu-sched", "/dev/shm/vgpu-sim-n"}) {
    EXPECT_TRUE(
        Contains(edits["mounts"], json({{"hostPath", f},
                                        {"containerPath", f},
                                        {"options", {"rw", "nosuid", "nodev", "noexec", "bind"}}})))
        << f << edits["mounts"].dump(2);
  }
  EXPECT_TRUE(ValidateSpec(BuildSpec(inv)).ok());
}

// The node's admin file holds in containers: read-only, over the image's.
TEST(CdiSpec, TheNodesAdminFileIsMountedReadOnly) {
  Inventory inv = TwoGpus();
  EXPECT_EQ(BuildSpec(inv)["containerEdits"]["mounts"].dump().find("node.json"), std::string::npos);
  inv.node_config = "/etc/vgpu/node.json";
  json edits = BuildSpec(inv)["containerEdits"];
  EXPECT_TRUE(Contains(edits["mounts"], json({{"hostPath", "/etc/vgpu/node.json"},
                                              {"containerPath", "/etc/vgpu/node.json"},
                                              {"options", {"ro", "nosuid", "nodev", "bind"}}})))
      << edits["mounts"].dump(2);
}

std::string LdconfigOutput() {
  std::string out;
  if (FILE* p = popen("/sbin/ldconfig -p 2>/dev/null", "r")) {
    char buf[4096];
    for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    pclose(p);
  }
  return out;
}

// The simulated driver needs libelf (and libelf libz); glibc's own libraries
// are never listed: the image's copies match its loader.
TEST(CdiLibraryDeps, SimulatedDriverNeedsLibelfAndLibz) {
  std::vector<std::string> deps;
  ASSERT_TRUE(NonGlibcDependencies({VGPU_SIM_LIBCUDA}, "/nonexistent", LdconfigOutput(), &deps).ok());
  std::vector<std::string> names;
  for (const std::string& d : deps) names.push_back(d.substr(d.rfind('/') + 1));
  // (Sanitizer builds add the C++ runtime, which they link shared.)
  for (const char* want : {"libelf.so.1", "libz.so.1"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  }
  for (const std::string& n : names) EXPECT_FALSE(IsGlibcSoname(n)) << n;
  EXPECT_TRUE(IsGlibcSoname("libc.so.6"));
  EXPECT_TRUE(IsGlibcSoname("ld-linux-x86-64.so.2"));
  EXPECT_FALSE(IsGlibcSoname("libstdc++.so.6"));
}

TEST(CdiLibraryDeps, NotAnElfFileIsAnError) {
  std::vector<std::string> deps;
  EXPECT_FALSE(NonGlibcDependencies({"/proc/self/status"}, "/", "", &deps).ok());
  EXPECT_FALSE(NonGlibcDependencies({"/nonexistent/libcuda.so.1"}, "/", "", &deps).ok());
}

TEST(CdiSpec, OptionalPartsLeftOut) {
  Inventory inv = TwoGpus();
  inv.libnvml.clear();
  inv.run_dir.clear();
  inv.hook.clear();
  inv.common_nodes.clear();
  json edits = BuildSpec(inv)["containerEdits"];
  EXPECT_EQ(edits["mounts"].size(), 2u);
  EXPECT_EQ(edits["env"].size(), 2u) << edits["env"].dump();
  EXPECT_FALSE(edits.contains("hooks"));
  EXPECT_FALSE(Contains(edits["env"], "VGPU_CONFIG=/etc/vgpu/container.json"));
  EXPECT_FALSE(edits.contains("deviceNodes"));
}

TEST(CdiSpec, IndexWithoutUuid) {
  Inventory inv = TwoGpus();
  inv.gpus[1].uuid.clear();
  EXPECT_EQ(Device(BuildSpec(inv), "1")["containerEdits"]["env"][0], "VGPU_VISIBLE_DEVICES=1");
}

// --- validation ---

json Valid() { return BuildSpec(TwoGpus()); }

TEST(CdiValidate, Kinds) {
  for (const char* kind : {"vgpu.io", "/gpu", "vgpu.io/", "1vgpu.io/gpu", "vgpu..io/gpu",
                           "vgpu.io/gpu-", "vgpu.io/g pu", "-vgpu.io/gpu", "vgpu.io./gpu"}) {
    json spec = Valid();
    spec["kind"] = kind;
    EXPECT_FALSE(ValidateSpec(spec).ok()) << kind;
  }
  json spec = Valid();
  spec["kind"] = "example.com/Gpu_2";
  EXPECT_TRUE(ValidateSpec(spec).ok()) << ValidateSpec(spec).message;
  spec["kind"] = 7;
  EXPECT_FALSE(ValidateSpec(spec).ok());
}

TEST(CdiValidate, DeviceNames) {
  for (const char* name : {"", "-a", "a-", "a b", "a/b", "ä"}) {
    json spec = Valid();
    spec["devices"][0]["name"] = name;
    EXPECT_FALSE(ValidateSpec(spec).ok()) << name;
  }
  json spec = Valid();
  spec["devices"][0]["name"] = "gpu:0.a_b-c";
  EXPECT_TRUE(ValidateSpec(spec).ok()) << ValidateSpec(spec).message;
  spec = Valid();
  spec["cdiVersion"] = "0.4.0";  // names starting with a digit came with 0.5.0
  EXPECT_FALSE(ValidateSpec(spec).ok());
}

TEST(CdiValidate, Versions) {
  json spec = Valid();
  for (const char* v : {"0.5.0", "0.8.0", "1.0.0"}) {
    spec["cdiVersion"] = v;
    EXPECT_TRUE(ValidateSpec(spec).ok()) << v;
  }
  for (const char* v : {"", "0.6", "9.9.9", "v0.6.0"}) {
    spec["cdiVersion"] = v;
    EXPECT_FALSE(ValidateSpec(spec).ok()) << v;
  }
  spec.erase("cdiVersion");
  EXPECT_FALSE(ValidateSpec(spec).ok());
}

TEST(CdiValidate, RelativePaths) {
  json spec = Valid();
  spec["containerEdits"]["mounts"][0]["hostPath"] = "lib/libvgpu.so";
  EXPECT_FALSE(ValidateSpec(spec).ok());
  spec = Valid();
  spec["containerEdits"]["mounts"][1]["containerPath"] = "usr/lib";
  EXPECT_FALSE(ValidateSpec(spec).ok());
  spec = Valid();
  spec["containerEdits"]["mounts"][1].erase("containerPath");
  EXPECT_FALSE(ValidateSpec(spec).ok());
  spec = Valid();
  spec["devices"][0]["containerEdits"]["deviceNodes"][0]["path"] = "nvidia0";
  EXPECT_FALSE(ValidateSpec(spec).ok());
  spec = Valid();
  spec["containerEdits"]["hooks"][0]["path"] = "vgpu-oci-hook";
  EXPECT_FALSE(ValidateSpec(spec).ok());
}

TEST(CdiValidate, DuplicatesAndShapes) {
  json spec = Valid();
  spec["devices"][1]["name"] = "0";
  Status st = ValidateSpec(spec);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message.find("twice"), std::string::npos) << st.message;
  spec = Valid();
  spec["devices"] = json::array();
  EXPECT_FALSE(ValidateSpec(spec).ok());
  spec = Valid();
  spec["containerEdits"]["hooks"][0]["hookName"] = "beforeEverything";
  EXPECT_FALSE(ValidateSpec(spec).ok());
  spec = Valid();
  spec["containerEdits"]["env"].push_back("=x");
  EXPECT_FALSE(ValidateSpec(spec).ok());
  spec = Valid();
  spec["containerEdits"]["mounts"] = "nope";
  EXPECT_FALSE(ValidateSpec(spec).ok());
  spec = Valid();
  spec["devices"][0].erase("containerEdits");
  EXPECT_FALSE(ValidateSpec(spec).ok());
  EXPECT_FALSE(ValidateSpec(json::array()).ok());
}

// --- parsing ---

TEST(CdiParse, RoundTrip) {
  ParsedSpec parsed;
  ASSERT_TRUE(ParseSpec(Valid().dump(2), &parsed).ok());
  EXPECT_EQ(parsed.kind, "vgpu.io/gpu");
  ASSERT_EQ(parsed.devices.size(), 3u);
  EXPECT_EQ(parsed.devices[0].name, "0");
  EXPECT_EQ(parsed.devices[0].visible, "GPU-aaaa");
  EXPECT_EQ(parsed.devices[2].name, "all");
  EXPECT_EQ(parsed.devices[2].visible, "0,1");
}

TEST(CdiParse, OtherKindsAreNotChecked) {
  ParsedSpec parsed;
  Status st = ParseSpec(R"({"kind":"example.com/nic","devices":[{"name":"-"}]})", &parsed);
  ASSERT_TRUE(st.ok()) << st.message;
  EXPECT_EQ(parsed.kind, "example.com/nic");
  EXPECT_TRUE(parsed.devices.empty());
}

TEST(CdiParse, MalformedIsAnErrorNotACrash) {
  const std::string head = R"({"cdiVersion":"0.6.0","kind":"vgpu.io/gpu")";
  ParsedSpec parsed;
  for (const std::string& text :
       {std::string(""), std::string("{"), std::string("[]"), std::string("null"),
        std::string(R"({"kind":1})"), head + "}",
        head + R"(,"devices":[{"name":"x","containerEdits":7}]})",
        head + R"(,"devices":[{"name":"x","containerEdits":{"env":[1]}}]})",
        head +
            R"(,"devices":[{"name":"x","containerEdits":{"env":["A=1"]}}],"containerEdits":[]})"}) {
    EXPECT_FALSE(ParseSpec(text, &parsed).ok()) << text;
  }
}

// --- the host ---

TEST(CdiHost, Ldconfig) {
  const char* out =
      "3 libs found in cache `/etc/ld.so.cache'\n"
      "\tlibcuda.so.1 (libc6) => /usr/lib/i386-linux-gnu/libcuda.so.1\n"
      "\tlibcuda.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so.1\n"
      "\tlibcuda.so (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so\n";
  EXPECT_EQ(LibraryFromLdconfig(out, "libcuda.so.1"), "/usr/lib/x86_64-linux-gnu/libcuda.so.1");
  EXPECT_EQ(LibraryFromLdconfig(out, "libnvidia-ml.so.1"), "");
  EXPECT_EQ(LibraryFromLdconfig("\tlibcuda.so.1 (libc6) => /lib/libcuda.so.1\n", "libcuda.so.1"),
            "/lib/libcuda.so.1");
}

class CdiHostTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* d : {"/bin", "/lib", "/driver", "/dev", "/run"}) {
      std::filesystem::create_directory(tmp_.path() + d);
    }
    Touch(tmp_.path() + "/lib/libvgpu.so");
    Touch(tmp_.path() + "/driver/libcuda.so.1");
    Touch(tmp_.path() + "/dev/nvidia0");
    Touch(tmp_.path() + "/dev/nvidiactl");
    o_.exe_dir = tmp_.path() + "/bin";
    o_.driver_dir = tmp_.path() + "/driver";
    o_.dev_dir = tmp_.path() + "/dev";
    o_.run_dir = tmp_.path() + "/no-run";
    o_.gpus = 2;
  }
  ctl::testing::TempDir tmp_;
  HostOptions o_;
  Inventory inv_;
  std::vector<std::string> warnings_;
};

TEST_F(CdiHostTest, MissingOptionalPathsAreLeftOut) {
  ASSERT_TRUE(CollectInventory(o_, &inv_, &warnings_).ok());
  EXPECT_EQ(inv_.libvgpu, tmp_.path() + "/lib/libvgpu.so");  // beside bin/, normalized
  EXPECT_EQ(inv_.libcuda, tmp_.path() + "/driver/libcuda.so.1");
  EXPECT_EQ(inv_.libnvml, "");
  ASSERT_EQ(inv_.gpus.size(), 2u);
  EXPECT_EQ(inv_.gpus[0].device_node, tmp_.path() + "/dev/nvidia0");
  EXPECT_EQ(inv_.gpus[1].device_node, "");
  EXPECT_EQ(inv_.common_nodes, std::vector<std::string>{tmp_.path() + "/dev/nvidiactl"});
  EXPECT_EQ(inv_.run_dir, "");
  EXPECT_EQ(inv_.hook, "");
  std::string all;
  for (const std::string& w : warnings_) all += w + "\n";
  for (const char* missing : {"libnvidia-ml.so.1", "nvidia1", "nvidia-uvm", "no-run", "hook"}) {
    EXPECT_NE(all.find(missing), std::string::npos) << missing << " in\n" << all;
  }
  json spec = BuildSpec(inv_);
  EXPECT_TRUE(ValidateSpec(spec).ok());
  // The spec names the container's /dev path and the host's file.
  EXPECT_EQ(Device(spec, "0")["containerEdits"]["deviceNodes"][0],
            json({{"path", "/dev/nvidia0"}, {"hostPath", tmp_.path() + "/dev/nvidia0"}}));
}

TEST_F(CdiHostTest, EverythingPresent) {
  Touch(tmp_.path() + "/driver/libnvidia-ml.so.1");
  Touch(tmp_.path() + "/bin/vgpu-oci-hook");
  o_.run_dir = tmp_.path() + "/run";
  ASSERT_TRUE(CollectInventory(o_, &inv_, &warnings_).ok());
  EXPECT_EQ(inv_.libnvml, tmp_.path() + "/driver/libnvidia-ml.so.1");
  EXPECT_EQ(inv_.run_dir, tmp_.path() + "/run");
  EXPECT_EQ(inv_.hook, tmp_.path() + "/bin/vgpu-oci-hook");
}

TEST_F(CdiHostTest, MissingLibvgpuIsAnError) {
  o_.libvgpu = tmp_.path() + "/nowhere/libvgpu.so";
  Status st = CollectInventory(o_, &inv_, &warnings_);
  EXPECT_EQ(st.code, ErrorCode::kNoEnt);
  EXPECT_NE(st.message.find("libvgpu.so not found"), std::string::npos) << st.message;
}

TEST_F(CdiHostTest, MissingLibcudaIsAnError) {
  o_.driver_dir = tmp_.path() + "/dev";
  Status st = CollectInventory(o_, &inv_, &warnings_);
  EXPECT_EQ(st.code, ErrorCode::kNoEnt);
  EXPECT_NE(st.message.find("libcuda.so.1"), std::string::npos) << st.message;
}

TEST_F(CdiHostTest, AtomicWriteIsWorldReadable) {
  std::string path = tmp_.path() + "/vgpu.json";
  mode_t old = umask(077);
  Status st = WriteFileAtomic(path, "{}\n");
  umask(old);
  ASSERT_TRUE(st.ok()) << st.message;
  struct stat s{};
  ASSERT_EQ(stat(path.c_str(), &s), 0);
  EXPECT_EQ(s.st_mode & 0777, 0644u);
  std::string text;
  ASSERT_TRUE(ReadSpecFile(path, &text).ok());
  EXPECT_EQ(text, "{}\n");
  std::vector<std::string> files;
  ASSERT_TRUE(SpecFiles(tmp_.path(), &files).ok());
  EXPECT_EQ(files, std::vector<std::string>{path});  // no temporary file left
  EXPECT_FALSE(WriteFileAtomic(tmp_.path() + "/no/such/dir.json", "{}").ok());
}

}  // namespace
}  // namespace vgpu::cdi
