// vgpuctl cdi generate|list, spawned: on a fake host (temporary directories
// with stand-in libraries and device nodes), and with the GPUs listed by the
// simulated node's NVML. Label integration.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "tests/ctl/test_util.h"

namespace vgpu::ctl {
namespace {

using nlohmann::json;
using testing::RunResult;
using testing::Vgpuctl;

void Write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

class CdiVgpuctlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* d : {"/lib", "/driver", "/dev", "/run", "/specs"}) {
      std::filesystem::create_directory(tmp_.path() + d);
    }
    Write(tmp_.path() + "/lib/libvgpu.so", "x");
    Write(tmp_.path() + "/driver/libcuda.so.1", "x");
    Write(tmp_.path() + "/dev/nvidia0", "");
    Write(tmp_.path() + "/dev/nvidiactl", "");
  }
  // generate on the fake host with `more` arguments.
  RunResult Generate(std::vector<std::string> more) {
    std::vector<std::string> args = {"cdi",           "generate",
                                     "--libvgpu",     tmp_.path() + "/lib/libvgpu.so",
                                     "--driver-dir",  tmp_.path() + "/driver",
                                     "--dev-dir",     tmp_.path() + "/dev",
                                     "--run-dir",     tmp_.path() + "/run",
                                     "--node-config", tmp_.path() + "/node.json"};
    args.insert(args.end(), more.begin(), more.end());
    return Vgpuctl(args);
  }
  std::string Spec() { return tmp_.path() + "/specs/vgpu.json"; }

  testing::TempDir tmp_;
};

TEST_F(CdiVgpuctlTest, GenerateWritesAValidSpecFile) {
  RunResult r = Generate({"--gpus", "2", "--output", Spec()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  // The fake host has no NVML library and no nvidia1: warned, left out.
  EXPECT_NE(r.err.find("libnvidia-ml.so.1 (NVML) does not exist"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("nvidia1 (GPU device)"), std::string::npos) << r.err;
  // vgpu-oci-hook is built beside vgpuctl (CMakeLists.txt makes sure), where
  // the generator looks; with it comes the VGPU_CONFIG file it writes.
  EXPECT_EQ(r.err.find("OCI hook"), std::string::npos) << r.err;
  struct stat st{};
  ASSERT_EQ(stat(Spec().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  std::ifstream in(Spec());
  json spec = json::parse(in, nullptr, false);
  ASSERT_FALSE(spec.is_discarded());
  EXPECT_EQ(spec["kind"], "vgpu.io/gpu");
  EXPECT_EQ(spec["devices"].size(), 3u);
  // libvgpu, libcuda and the node's scheduler region, which generate created
  // (the hook, not the spec, mounts the container's own run directory); the
  // fake libcuda is no ELF file: what it needs is unknown.
  const json& mounts = spec["containerEdits"]["mounts"];
  ASSERT_EQ(mounts.size(), 3u) << "no node.json on the fake host" << spec["containerEdits"].dump(2);
  EXPECT_EQ(mounts[2]["hostPath"], "/dev/shm/vgpu-sched");
  EXPECT_EQ(mounts[2]["containerPath"], "/dev/shm/vgpu-sched");
  ASSERT_EQ(stat("/dev/shm/vgpu-sched", &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0666u) << "every tenant of the node opens it";
  // With the node's admin file: mounted read-only over the image's path.
  Write(tmp_.path() + "/node.json", R"({"priority": "normal"})");
  ASSERT_EQ(Generate({"--gpus", "2", "--output", Spec()}).exit_code, 0);
  std::ifstream again(Spec());
  const json with = json::parse(again, nullptr, false);
  ASSERT_EQ(with["containerEdits"]["mounts"].size(), 4u) << with["containerEdits"].dump(2);
  EXPECT_EQ(with["containerEdits"]["mounts"][3]["containerPath"], "/etc/vgpu/node.json");
  EXPECT_NE(r.err.find("is not an ELF file"), std::string::npos) << r.err;
  const json& args = spec["containerEdits"]["hooks"][0]["args"];
  EXPECT_NE(std::find(args.begin(), args.end(), "--run-dir"), args.end()) << args.dump();
  ASSERT_EQ(spec["containerEdits"]["hooks"].size(), 2u) << spec["containerEdits"].dump(2);
  const std::string hook = spec["containerEdits"]["hooks"][0]["path"];
  EXPECT_EQ(hook.substr(hook.rfind('/') + 1), "vgpu-oci-hook");
  EXPECT_EQ(access(hook.c_str(), X_OK), 0) << hook;
  const json& env = spec["containerEdits"]["env"];
  EXPECT_NE(std::find(env.begin(), env.end(), "VGPU_CONFIG=/etc/vgpu/container.json"), env.end())
      << env.dump();
}

TEST_F(CdiVgpuctlTest, GenerateToStdout) {
  RunResult r = Generate({"--gpus", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json spec = json::parse(r.out, nullptr, false);
  ASSERT_FALSE(spec.is_discarded()) << r.out;
  EXPECT_EQ(spec["devices"][0]["name"], "0");
  EXPECT_EQ(spec["devices"][1]["name"], "all");
}

TEST_F(CdiVgpuctlTest, MissingLibvgpuFails) {
  RunResult r =
      Generate({"--gpus", "1", "--libvgpu", tmp_.path() + "/none.so", "--output", Spec()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("libvgpu.so not found at " + tmp_.path() + "/none.so"), std::string::npos)
      << r.err;
  EXPECT_FALSE(std::filesystem::exists(Spec()));
}

TEST_F(CdiVgpuctlTest, MissingLibcudaFails) {
  RunResult r = Generate({"--gpus", "1", "--driver-dir", tmp_.path() + "/lib"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("libcuda.so.1 does not exist"), std::string::npos) << r.err;
}

TEST_F(CdiVgpuctlTest, Usage) {
  EXPECT_EQ(Vgpuctl({"cdi"}).exit_code, 2);
  EXPECT_EQ(Vgpuctl({"cdi", "frobnicate"}).exit_code, 2);
  EXPECT_EQ(Generate({"--bogus"}).exit_code, 2);
  EXPECT_EQ(Generate({"--gpus", "0"}).exit_code, 2);
  EXPECT_EQ(Generate({"--gpus", "2x"}).exit_code, 2);
  EXPECT_EQ(Generate({"--output"}).exit_code, 2);
  EXPECT_EQ(Generate({"--output", ""}).exit_code, 2);
}

TEST_F(CdiVgpuctlTest, ListAGeneratedSpec) {
  ASSERT_EQ(Generate({"--gpus", "2", "--output", Spec()}).exit_code, 0);
  RunResult r = Vgpuctl({"cdi", "list", Spec()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "vgpu.io/gpu=0\t0\nvgpu.io/gpu=1\t1\nvgpu.io/gpu=all\t0,1\n");
  // A directory: its JSON specs; another vendor's spec is neither listed nor
  // checked (a relative mount path is CDI-valid).
  Write(tmp_.path() + "/specs/other.json",
        R"({"cdiVersion":"0.6.0","kind":"example.com/nic","devices":[{"name":"n0",)"
        R"("containerEdits":{"mounts":[{"hostPath":"/a","containerPath":"b"}]}}]})");
  Write(tmp_.path() + "/specs/notes.txt", "not a spec");
  r = Vgpuctl({"cdi", "list", tmp_.path() + "/specs"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "vgpu.io/gpu=0\t0\nvgpu.io/gpu=1\t1\nvgpu.io/gpu=all\t0,1\n");
}

TEST_F(CdiVgpuctlTest, ListMalformedFails) {
  ASSERT_EQ(Generate({"--gpus", "1", "--output", Spec()}).exit_code, 0);
  std::string bad = tmp_.path() + "/specs/bad.json";
  Write(bad, "{\"cdiVersion\": \"0.6.0\", \"kind\": ");
  RunResult r = Vgpuctl({"cdi", "list", tmp_.path() + "/specs"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "vgpuctl cdi: " + bad + ": not valid JSON\n");
  EXPECT_EQ(r.out, "vgpu.io/gpu=0\t0\nvgpu.io/gpu=all\t0\n");  // the good file still listed
  Write(bad, R"({"cdiVersion":"0.6.0","kind":"vgpu.io/gpu","devices":[{"name":"0",)"
             R"("containerEdits":{"mounts":[{"hostPath":"rel","containerPath":"/x"}]}}]})");
  r = Vgpuctl({"cdi", "list", bad});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("hostPath must be an absolute path"), std::string::npos) << r.err;
  r = Vgpuctl({"cdi", "list", tmp_.path() + "/none"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("does not exist"), std::string::npos) << r.err;
}

// The GPUs come from the simulated node's NVML (found through LD_LIBRARY_PATH,
// like every sim test): their UUIDs name the per-GPU devices.
TEST_F(CdiVgpuctlTest, GpusFromNvml) {
  std::string node = "cdi-test-" + std::to_string(getpid());
  setenv("LD_LIBRARY_PATH", VGPU_SIM_LIB_DIR, 1);
  setenv("VGPU_SIM_NODE", node.c_str(), 1);
  setenv("VGPU_SIM_DEVICES", "3x1GiB", 1);
  RunResult r = Generate({});
  unsetenv("LD_LIBRARY_PATH");
  unsetenv("VGPU_SIM_NODE");
  unsetenv("VGPU_SIM_DEVICES");
  std::filesystem::remove("/dev/shm/vgpu-sim-" + node);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json spec = json::parse(r.out, nullptr, false);
  ASSERT_FALSE(spec.is_discarded()) << r.out;
  ASSERT_EQ(spec["devices"].size(), 4u) << r.out;
  std::string env0 = spec["devices"][0]["containerEdits"]["env"][0];
  EXPECT_TRUE(env0.starts_with("VGPU_VISIBLE_DEVICES=GPU-")) << env0;
  EXPECT_EQ(spec["devices"][3]["containerEdits"]["env"][0], "VGPU_VISIBLE_DEVICES=0,1,2");
}

TEST_F(CdiVgpuctlTest, NoNvmlAndNoGpusFails) {
  if (void* h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL)) {
    dlclose(h);
    GTEST_SKIP() << "this machine has an NVML library";
  }
  RunResult r = Generate({});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("cannot list the GPUs through NVML"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("give --gpus N"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace vgpu::ctl
