// vgpu-oci-hook run as a runtime runs it: a fake bundle in a temporary
// directory, the state on stdin; checks the exit code, the one-line error, and
// what it wrote in the rootfs (the VGPU_CONFIG file read back by libvgpu's
// own loader).
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "common/config/config.h"
#include "gtest/gtest.h"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

struct Result {
  int exit_code = -1;
  std::string err;
};

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class OciHookRun : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/vgpu-oci-hook-run-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    bundle_ = tmpl;
    root_ = bundle_ + "/rootfs";
    fs::create_directories(root_ + "/etc");
  }
  void TearDown() override { fs::remove_all(bundle_); }

  void MountLibrary() {
    fs::create_directories(root_ + "/usr/lib/vgpu");
    std::ofstream(root_ + "/usr/lib/vgpu/libvgpu.so") << "elf";
  }
  void WriteConfig(const json& annotations, const std::vector<std::string>& env) {
    json c = {{"ociVersion", "1.2.0"}, {"root", {{"path", "rootfs"}}}, {"process", {{"env", env}}}};
    if (!annotations.is_null()) c["annotations"] = annotations;
    std::ofstream(bundle_ + "/config.json") << c.dump();
  }
  std::string State(const std::string& id = "c0ffee") {
    return json({{"ociVersion", "1.2.0"},
                 {"id", id},
                 {"status", "creating"},
                 {"pid", 1},
                 {"bundle", bundle_}})
        .dump();
  }

  // Runs the hook with `stdin_text` on stdin; stderr captured.
  Result Run(const std::vector<std::string>& args, const std::string& stdin_text) {
    const std::string in_path = bundle_ + "/.stdin", err_path = bundle_ + "/.stderr";
    std::ofstream(in_path) << stdin_text;
    pid_t pid = ::fork();
    if (pid == 0) {
      int in = ::open(in_path.c_str(), O_RDONLY);
      int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      ::dup2(in, 0);
      ::dup2(err, 2);
      std::vector<char*> argv{const_cast<char*>(VGPU_OCI_HOOK_PATH)};
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    Result r;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.err = Read(err_path);
    return r;
  }

  std::string bundle_, root_;
};

TEST_F(OciHookRun, CdiModeWritesPreloadAndConfig) {
  MountLibrary();
  WriteConfig({{"vgpu.io/memory-limit", "2GiB"}, {"vgpu.io/priority", "high"}},
              {"PATH=/bin", "VGPU_CONFIG=/etc/vgpu/container.json"});
  Result r = Run({"--cdi", "--preload", "/usr/lib/vgpu/libvgpu.so"}, State());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(Read(root_ + "/etc/ld.so.preload"), "/usr/lib/vgpu/libvgpu.so\n");
  // What libvgpu will make of the file VGPU_CONFIG names.
  const std::string file = root_ + "/etc/vgpu/container.json";
  vgpu::Config cfg;
  const std::vector<std::string> no_names;
  auto env = [&file](const char* name) -> const char* {
    return std::string_view(name) == "VGPU_CONFIG" ? file.c_str() : nullptr;
  };
  vgpu::Status s = vgpu::LoadConfig(env, &cfg, &no_names);
  ASSERT_TRUE(s.ok()) << s.message;
  EXPECT_EQ(cfg.memory_limit_all, 2ull << 30);
  EXPECT_TRUE(cfg.high_priority());
  EXPECT_EQ(cfg.group, "c0ffee");
  // Run again (a restarted container): still one line.
  ASSERT_EQ(Run({"--cdi"}, State()).exit_code, 0);
  EXPECT_EQ(Read(root_ + "/etc/ld.so.preload"), "/usr/lib/vgpu/libvgpu.so\n");
}

// --claim: the claim file's options become the container's ceilings and its
// group; a claim file that cannot be read or checked fails the container.
TEST_F(OciHookRun, ClaimFileSetsTheContainersLimits) {
  MountLibrary();
  WriteConfig({{"vgpu.io/memory-limit", "2GiB"}}, {"VGPU_CONFIG=/etc/vgpu/container.json"});
  const std::string claim = bundle_ + "/claim.json";
  std::ofstream(claim) << R"({"group": "claim-u1", "device_memory_limit": "512MiB",
                              "claim": "default/c", "pod": "default/p", "preemptible": "false"})";
  Result r = Run({"--cdi", "--claim", claim}, State());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json limits = json::parse(Read(root_ + "/etc/vgpu/limits.json"));
  EXPECT_EQ(limits.value("device_memory_limit", ""), "512MiB") << limits.dump();
  EXPECT_EQ(limits.value("group", ""), "claim-u1") << limits.dump();
  EXPECT_EQ(limits.value("pod", ""), "default/p") << limits.dump();
  EXPECT_EQ(json::parse(Read(root_ + "/etc/vgpu/container.json")).value("group", ""), "claim-u1");
  fs::remove(root_ + "/etc/ld.so.preload");
  for (const std::string& text :
       {std::string(R"({"device_memory_limt": "1GiB"})"),
        std::string(R"({"device_memory_limit": "lots"})"), std::string("not json")}) {
    std::ofstream(claim) << text;
    r = Run({"--cdi", "--claim", claim}, State());
    EXPECT_EQ(r.exit_code, 1) << text;
    EXPECT_NE(r.err.find("claim file"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
  }
  // Ceilings anyone could have written are no ceilings.
  std::ofstream(claim, std::ios::trunc) << R"({"device_memory_limit": "512MiB"})";
  fs::permissions(claim, fs::perms::others_write, fs::perm_options::add);
  r = Run({"--cdi", "--claim", claim}, State());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("refused"), std::string::npos) << r.err;
  r = Run({"--cdi", "--claim", bundle_ + "/no-such-claim.json"}, State());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("no-such-claim.json"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(root_ + "/etc/ld.so.preload")) << "never preloaded without its limits";
  EXPECT_EQ(Run({"--cdi", "--claim", "relative.json"}, State()).exit_code, 2);
}

TEST_F(OciHookRun, HooksDirModeIgnoresOtherContainers) {
  WriteConfig(nullptr, {"PATH=/bin"});  // no library, no request
  Result r = Run({}, State());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_FALSE(fs::exists(root_ + "/etc/ld.so.preload"));
  EXPECT_FALSE(fs::exists(root_ + "/etc/vgpu"));
}

TEST_F(OciHookRun, HooksDirModeActsOnEnvRequest) {
  MountLibrary();
  WriteConfig(nullptr, {"VGPU_GROUP=team"});
  Result r = Run({}, State());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Read(root_ + "/etc/ld.so.preload"), "/usr/lib/vgpu/libvgpu.so\n");
  EXPECT_EQ(json::parse(Read(root_ + "/etc/vgpu/container.json")), json({{"group", "team"}}));
}

TEST_F(OciHookRun, MissingLibraryFailsClosed) {
  WriteConfig({{"vgpu.io/memory-limit", "1GiB"}}, {"VGPU_CONFIG=/etc/vgpu/container.json"});
  for (const std::vector<std::string>& args : {std::vector<std::string>{"--cdi"}, {}}) {
    Result r = Run(args, State("job7"));
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.err,
              "vgpu-oci-hook: container job7 asks for vgpu but /usr/lib/vgpu/libvgpu.so is not in "
              "its root file system: use --device vgpu.io/gpu=N (CDI) or mount it\n");
  }
  EXPECT_FALSE(fs::exists(root_ + "/etc/ld.so.preload"));
}

TEST_F(OciHookRun, InvalidAnnotationFails) {
  MountLibrary();
  WriteConfig({{"vgpu.io/compute-share", "250%"}}, {"VGPU_CONFIG=/etc/vgpu/container.json"});
  Result r = Run({}, State());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("vgpu.io/compute-share"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
  EXPECT_FALSE(fs::exists(root_ + "/etc/ld.so.preload"));
}

// hooks.d, no CDI spec: VGPU_CONFIG unset is fine (libvgpu reads the
// container file by itself); one naming another file would hide the limits.
TEST_F(OciHookRun, AnnotationsWithAnotherVgpuConfigFail) {
  MountLibrary();
  WriteConfig({{"vgpu.io/memory-limit", "1GiB"}}, {"PATH=/bin", "VGPU_CONFIG=/etc/my.json"});
  Result r = Run({}, State());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("names another file"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(root_ + "/etc/ld.so.preload"));
  WriteConfig({{"vgpu.io/memory-limit", "1GiB"}}, {"PATH=/bin"});
  r = Run({}, State());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(root_ + "/etc/vgpu/container.json"));
}

TEST_F(OciHookRun, SymlinkedEtcRefused) {
  MountLibrary();
  WriteConfig(nullptr, {});
  const std::string elsewhere = bundle_ + "/elsewhere";
  fs::create_directories(elsewhere);
  fs::remove_all(root_ + "/etc");
  fs::create_directory_symlink(elsewhere, root_ + "/etc");
  Result r = Run({"--cdi"}, State());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("symlink"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::is_empty(elsewhere));
}

TEST_F(OciHookRun, MalformedInputIsOneLineError) {
  WriteConfig(nullptr, {});
  for (const std::vector<std::string>& args : {std::vector<std::string>{"--cdi"}, {}}) {
    for (const std::string& in : {std::string("not json"), std::string(), std::string(2 << 20, ' '),
                                  std::string(R"({"id":"x","bundle":"/nonexistent-vgpu"})")}) {
      Result r = Run(args, in);
      EXPECT_EQ(r.exit_code, 1) << r.err;
      EXPECT_EQ(r.err.rfind("vgpu-oci-hook: ", 0), 0u) << r.err;
      EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
    }
  }
  std::ofstream(bundle_ + "/config.json") << "{\"root\":";
  Result r = Run({}, State());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("config.json is not valid JSON"), std::string::npos) << r.err;
}

// --run-dir mounts the container's own directory, which only makes sense in
// the container's mount namespace: run on the host (no /proc mounted in the
// rootfs), the hook fails closed and mounts nothing.
TEST_F(OciHookRun, RunDirOutsideTheContainersMountNamespaceFails) {
  MountLibrary();
  WriteConfig(nullptr, {"VGPU_DEVICE_MEMORY_LIMIT=1GiB"});
  const std::string run = bundle_ + "/run";
  Result r = Run({"--cdi", "--run-dir", run}, State());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("does not run in the container's mount namespace"), std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(root_ + run)) << "a mount point was made";
}

// The driver directory the CDI spec mounts is listed for the loader; without
// it (no CDI mount) nothing is written.
TEST_F(OciHookRun, DriverDirectoryGoesIntoTheLoaderConfiguration) {
  MountLibrary();
  WriteConfig(nullptr, {"VGPU_DEVICE_MEMORY_LIMIT=1GiB"});
  ASSERT_EQ(Run({"--cdi"}, State()).exit_code, 0);
  EXPECT_FALSE(fs::exists(root_ + "/etc/ld.so.conf.d/000-vgpu.conf"));
  if (::geteuid() != 0) GTEST_SKIP() << "ldconfig -r chroots: needs root";
  fs::create_directories(root_ + "/usr/lib/vgpu/driver");
  Result r = Run({"--cdi"}, State());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Read(root_ + "/etc/ld.so.conf.d/000-vgpu.conf"), "/usr/lib/vgpu/driver\n");
  EXPECT_EQ(Read(root_ + "/etc/ld.so.conf"), "include /etc/ld.so.conf.d/*.conf\n");
  EXPECT_TRUE(fs::exists(root_ + "/etc/ld.so.cache"));
}

TEST_F(OciHookRun, BadArgumentsAreUsage) {
  EXPECT_EQ(Run({"--preload", "relative.so"}, State()).exit_code, 2);
  EXPECT_EQ(Run({"--preload"}, State()).exit_code, 2);
  EXPECT_EQ(Run({"--frobnicate"}, State()).exit_code, 2);
  EXPECT_EQ(Run({"--run-dir", "relative"}, State()).exit_code, 2);
}

}  // namespace
