// spank_vgpu.so loaded as slurmstepd and srun load it (dlopen), with this
// test as its SPANK host: the spank_* and slurm_* functions it calls are
// defined here and exported from the test executable. Its exports, its
// options, a step's admin file and LD_PRELOAD, and the job epilog's cleanup.
// The admin file's directory is the fixed /run/vgpu-slurm: the tests that
// write it run as root only. Label integration.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdarg>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

extern "C" {
#include <slurm/spank.h>
}

// slurm_errno.h's values are plain ints in C++.
#define RC(e) static_cast<spank_err_t>(e)

#include "common/container_paths.h"

namespace {

// The host's state, as slurmstepd would hold it for one step.
struct Host {
  spank_context_t ctx = S_CTX_REMOTE;
  uint32_t job_id = 0, step_id = 0;
  uid_t uid = 0;
  uint32_t task = 0;
  std::map<std::string, std::string> env;
  std::vector<spank_option> options;
  std::vector<std::string> errors, infos;
};
Host g_host;

std::string Format(const char* fmt, va_list ap) {
  char buf[4096];
  vsnprintf(buf, sizeof buf, fmt, ap);
  return buf;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) spank_context_t spank_context(void) { return g_host.ctx; }

__attribute__((visibility("default"))) int spank_remote(spank_t) {
  return g_host.ctx == S_CTX_REMOTE ? 1 : 0;
}

__attribute__((visibility("default"))) spank_err_t spank_option_register(spank_t,
                                                                         struct spank_option* o) {
  g_host.options.push_back(*o);
  return RC(ESPANK_SUCCESS);
}

__attribute__((visibility("default"))) spank_err_t spank_get_item(spank_t, spank_item_t item, ...) {
  va_list ap;
  va_start(ap, item);
  spank_err_t rc = RC(ESPANK_SUCCESS);
  switch (item) {
    case S_JOB_ID:
      *va_arg(ap, uint32_t*) = g_host.job_id;
      break;
    case S_JOB_STEPID:
      *va_arg(ap, uint32_t*) = g_host.step_id;
      break;
    case S_JOB_UID:
      *va_arg(ap, uid_t*) = g_host.uid;
      break;
    case S_TASK_GLOBAL_ID:
      *va_arg(ap, uint32_t*) = g_host.task;
      break;
    default:
      rc = RC(ESPANK_BAD_ARG);
  }
  va_end(ap);
  return rc;
}

__attribute__((visibility("default"))) spank_err_t spank_getenv(spank_t, const char* var, char* buf,
                                                                int len) {
  auto it = g_host.env.find(var);
  if (it == g_host.env.end()) return RC(ESPANK_ENV_NOEXIST);
  if (static_cast<int>(it->second.size()) >= len) return RC(ESPANK_NOSPACE);
  std::memcpy(buf, it->second.c_str(), it->second.size() + 1);
  return RC(ESPANK_SUCCESS);
}

__attribute__((visibility("default"))) spank_err_t spank_setenv(spank_t, const char* var,
                                                                const char* val, int overwrite) {
  if (!overwrite && g_host.env.count(var) != 0) return RC(ESPANK_ENV_EXISTS);
  g_host.env[var] = val;
  return RC(ESPANK_SUCCESS);
}

__attribute__((visibility("default"))) void slurm_error(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  g_host.errors.push_back(Format(fmt, ap));
  va_end(ap);
}

__attribute__((visibility("default"))) void slurm_info(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  g_host.infos.push_back(Format(fmt, ap));
  va_end(ap);
}

}  // extern "C"

namespace {

using Hook = int (*)(spank_t, int, char**);

class SpankPluginTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    handle_ = dlopen(VGPU_SPANK_PLUGIN, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(handle_, nullptr) << dlerror();
  }
  void SetUp() override {
    ASSERT_NE(handle_, nullptr);
    g_host = Host{};
    g_host.job_id = 3000000000u + static_cast<uint32_t>(getpid() % 1000000);
    g_host.uid = 1000;
    char tmpl[] = "/tmp/vgpu-spank-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    tmp_ = tmpl;
    lib_ = tmp_ + "/libvgpu.so";
    std::ofstream(lib_) << "x";
  }
  void TearDown() override {
    std::filesystem::remove_all(tmp_);
    std::filesystem::remove(vgpu::SlurmJobFile(g_host.job_id, g_host.uid));
  }
  Hook Sym(const char* name) { return reinterpret_cast<Hook>(dlsym(handle_, name)); }
  // slurm_spank_init, the options' callbacks (as Slurm calls them with each
  // option given), slurm_spank_init_post_opt: slurmstepd's order.
  int RunStep(std::vector<std::string> args,
              const std::vector<std::pair<std::string, std::string>>& opts = {}) {
    std::vector<char*> av;
    for (std::string& a : args) av.push_back(a.data());
    auto sp = reinterpret_cast<spank_t>(&g_host);
    if (int rc = Sym("slurm_spank_init")(sp, static_cast<int>(av.size()), av.data()); rc != 0) {
      return rc;
    }
    for (const auto& [name, value] : opts) {
      for (const spank_option& o : g_host.options) {
        if (name == o.name) {
          if (int rc = o.cb(o.val, value.c_str(), 1); rc != 0) return rc;
        }
      }
    }
    return Sym("slurm_spank_init_post_opt")(sp, static_cast<int>(av.size()), av.data());
  }
  std::string Errors() {
    std::string all;
    for (const std::string& e : g_host.errors) all += e + "\n";
    return all;
  }
  static bool Root() { return geteuid() == 0; }

  static void* handle_;
  std::string tmp_, lib_;
};
void* SpankPluginTest::handle_ = nullptr;

TEST_F(SpankPluginTest, ExportsWhatSlurmLooksUp) {
  EXPECT_STREQ(static_cast<const char*>(dlsym(handle_, "plugin_name")), "vgpu");
  EXPECT_STREQ(static_cast<const char*>(dlsym(handle_, "plugin_type")), "spank");
  ASSERT_NE(dlsym(handle_, "plugin_version"), nullptr);
  EXPECT_EQ(*static_cast<const unsigned*>(dlsym(handle_, "plugin_version")),
            static_cast<unsigned>(SLURM_VERSION_NUMBER));
  EXPECT_EQ(*static_cast<const unsigned*>(dlsym(handle_, "spank_plugin_version")), 1u);
  for (const char* hook :
       {"slurm_spank_init", "slurm_spank_init_post_opt", "slurm_spank_job_epilog"}) {
    EXPECT_NE(dlsym(handle_, hook), nullptr) << hook;
  }
  EXPECT_EQ(dlsym(handle_, "_ZNSt7__cxx119to_stringEm"), nullptr) << "its C++ runtime is its own";
}

TEST_F(SpankPluginTest, RegistersTheOptionsAndRejectsMalformedValues) {
  g_host.ctx = S_CTX_LOCAL;  // srun
  ASSERT_EQ(RunStep({"shard_mem=1g"}, {{"vgpu-mem", "2GiB"}}), 0) << Errors();
  ASSERT_EQ(g_host.options.size(), 3u);
  EXPECT_STREQ(g_host.options[0].name, "vgpu-mem");
  EXPECT_STREQ(g_host.options[1].name, "vgpu-compute");
  EXPECT_STREQ(g_host.options[2].name, "vgpu-priority");
  EXPECT_EQ(RunStep({"shard_mem=1g"}, {{"vgpu-priority", "urgent"}}), -1);
  EXPECT_NE(Errors().find("--vgpu-priority='urgent': expected low, normal or high"),
            std::string::npos)
      << Errors();
}

TEST_F(SpankPluginTest, MalformedArgumentFailsWithItsName) {
  EXPECT_EQ(RunStep({"shard_mem=lots"}), -1);
  EXPECT_NE(Errors().find("plugstack argument 'shard_mem=lots'"), std::string::npos) << Errors();
  // slurmd's own context loads the plugin too: it must not fail there.
  g_host = Host{.ctx = S_CTX_SLURMD};
  EXPECT_EQ(RunStep({"shard_mem=lots"}), 0);
}

TEST_F(SpankPluginTest, StepWithoutGpusIsLeftAlone) {
  g_host.env = {{"LD_PRELOAD", "/a.so"}};
  ASSERT_EQ(RunStep({"lib=" + lib_, "shard_mem=1g"}), 0) << Errors();
  EXPECT_EQ(g_host.env["LD_PRELOAD"], "/a.so");
  EXPECT_FALSE(std::filesystem::exists(vgpu::SlurmJobFile(g_host.job_id, g_host.uid)));
}

TEST_F(SpankPluginTest, ShardStepGetsItsFileAndPreloadAndTheEpilogRemovesThem) {
  if (!Root()) GTEST_SKIP() << "writes /run/vgpu-slurm: root only";
  g_host.step_id = 0xfffffffb;  // the batch script
  g_host.env = {{"SLURM_SHARDS_ON_NODE", "3"},
                {"SLURM_JOB_GPUS", "1"},
                {"SLURM_JOB_PARTITION", "gpu"},
                {"LD_PRELOAD", "/a.so"}};
  const std::string uuid1 = "GPU-aaaaaaaa-1111-2222-3333-444444444444";
  ASSERT_EQ(RunStep({"lib=" + lib_, "shard_mem=1GiB", "shard_compute=20",
                     "devices=GPU-00000000-1111-2222-3333-444444444444," + uuid1,
                     "priority_partition=gpu:high"},
                    {{"vgpu-mem", "8GiB"}, {"vgpu-priority", "low"}}),
            0)
      << Errors();
  EXPECT_EQ(g_host.env["LD_PRELOAD"], lib_ + ":/a.so");
  EXPECT_EQ(g_host.env["VGPU_PRIORITY"], "low") << "the priority, as a default";
  EXPECT_EQ(g_host.env.count("VGPU_COMPUTE_WEIGHT"), 0u);
  ASSERT_EQ(g_host.infos.size(), 1u);
  EXPECT_NE(g_host.infos[0].find("--vgpu-mem=8 GiB is above the job's 3 GiB"), std::string::npos)
      << g_host.infos[0];
  const std::string file = vgpu::SlurmJobFile(g_host.job_id, g_host.uid);
  struct stat st {};
  ASSERT_EQ(stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  EXPECT_EQ(st.st_uid, 0u);
  ASSERT_EQ(stat(vgpu::kSlurmJobDir, &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0755u);
  std::ifstream in(file);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  ASSERT_FALSE(j.is_discarded());
  EXPECT_EQ(j["device_memory_limit"], std::to_string(3ull << 30));
  EXPECT_EQ(j["compute_share"], "60%");
  EXPECT_EQ(j["visible_devices"], uuid1);
  EXPECT_EQ(j["group"], "slurm-" + std::to_string(g_host.job_id));
  EXPECT_EQ(j["slurm_job"], std::to_string(g_host.job_id));
  EXPECT_EQ(j["priority"], "low");
  EXPECT_EQ(j["suspend_on_sigtstp"], "true");
  // The step's first task tells the job (its stderr); the others do not.
  auto sp = reinterpret_cast<spank_t>(&g_host);
  ::testing::internal::CaptureStderr();
  ASSERT_EQ(Sym("slurm_spank_task_init")(sp, 0, nullptr), 0);
  g_host.task = 1;
  ASSERT_EQ(Sym("slurm_spank_task_init")(sp, 0, nullptr), 0);
  const std::string told = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(told, g_host.infos[0] + "\n");
  // A second step of the job: the preload is not repeated, the job's own
  // VGPU_* values stay (libvgpu holds them to the file).
  g_host.env["VGPU_PRIORITY"] = "high";
  ASSERT_EQ(RunStep({"lib=" + lib_, "shard_mem=1GiB", "weight_per_shard=on"}), 0) << Errors();
  EXPECT_EQ(g_host.env["LD_PRELOAD"], lib_ + ":/a.so");
  EXPECT_EQ(g_host.env["VGPU_PRIORITY"], "high");
  EXPECT_EQ(g_host.env["VGPU_COMPUTE_WEIGHT"], "3");

  // The job's end: its file and its ledger go.
  const std::string ledger = "/dev/shm/vgpu-ledger-" + std::to_string(g_host.uid) + "-slurm-" +
                             std::to_string(g_host.job_id);
  std::ofstream(ledger) << "x";
  g_host.ctx = S_CTX_JOB_SCRIPT;
  ASSERT_EQ(Sym("slurm_spank_init")(sp, 0, nullptr), 0);
  ASSERT_EQ(Sym("slurm_spank_job_epilog")(sp, 0, nullptr), 0) << Errors();
  EXPECT_FALSE(std::filesystem::exists(file));
  EXPECT_FALSE(std::filesystem::exists(ledger));
}

TEST_F(SpankPluginTest, MissingLibFailsTheStep) {
  g_host.env = {{"SLURM_SHARDS_ON_NODE", "1"}, {"SLURM_STEP_GPUS", "0"}};
  EXPECT_EQ(RunStep({"lib=" + tmp_ + "/none.so", "shard_mem=1g"}), -1);
  EXPECT_NE(Errors().find("libvgpu.so not found at '" + tmp_ + "/none.so'"), std::string::npos)
      << Errors();
}

TEST_F(SpankPluginTest, DefaultLibIsBesideThePlugin) {
  const std::string plugin = VGPU_SPANK_PLUGIN;
  const std::string lib = plugin.substr(0, plugin.rfind('/')) + "/libvgpu.so";
  g_host.env = {{"SLURM_SHARDS_ON_NODE", "1"}, {"SLURM_STEP_GPUS", "0"}};
  if (access(lib.c_str(), R_OK) != 0) {
    EXPECT_EQ(RunStep({"shard_mem=1g"}), -1);
    EXPECT_NE(Errors().find("libvgpu.so not found at '" + lib + "'"), std::string::npos)
        << Errors();
    return;
  }
  if (!Root()) GTEST_SKIP() << "writes /run/vgpu-slurm: root only";
  ASSERT_EQ(RunStep({"shard_mem=1g"}), 0) << Errors();
  EXPECT_EQ(g_host.env["LD_PRELOAD"], lib);
}

}  // namespace
