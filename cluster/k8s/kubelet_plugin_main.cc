// vgpu-kubelet-plugin: the node side of the Kubernetes DRA driver vgpu.io
// (docs/kubernetes.md). Registers with the kubelet, serves DRAPlugin v1
// (prepare / unprepare: per-claim CDI specs and ceilings), and publishes the
// node's ResourceSlice, again whenever vgpud drains a GPU or the GPUs change.
// A thin executable: flags, logging, the servers and the publishing loop.
#include <signal.h>
#include <time.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "cluster/k8s/claim_preparer.h"
#include "cluster/k8s/dra_service.h"
#include "cluster/k8s/kube_client.h"
#include "cluster/k8s/node_state.h"
#include "cluster/k8s/slice_publisher.h"
#include "common/log.h"
#include "common/log_level.h"
#include "ctl/cdi/cdi_host.h"
#include "ctl/control/run_dir.h"
#include "share/sched_region.h"

namespace vgpu::k8s {
namespace {

struct Flags {
  std::string node_name;
  std::string kubelet_dir = "/var/lib/kubelet";
  std::string cdi_dir = "/var/run/cdi";
  std::string claims_dir = "/run/vgpu/claims";
  std::string run_dir;
  std::string kube_api;  // empty: in-cluster
  std::string token_file = "/var/run/secrets/kubernetes.io/serviceaccount/token";
  std::string ca_file = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt";
  std::vector<std::string> node_files;
  std::string driver_dir;  // empty: as vgpuctl cdi generate finds it
  std::string node_config = kNodeConfigFile;
  double memory_overcommit = 1.0;
  int64_t high_priority_from = 1000;
  double poll_s = 1.0;
  double resync_s = 300.0;
  std::string log_level = "info";
};

int Fail(const std::string& message) {
  std::fprintf(stderr, "vgpu-kubelet-plugin: %s\n", message.c_str());
  return 1;
}

LogLevel LevelOf(const std::string& s) {
  // The flags' values were checked against the same names.
  LogLevel level = LogLevel::kInfo;
  ParseLogLevelName(s, &level);
  return level;
}

int ParseFlags(int argc, char** argv, Flags* f) {
  CLI::App app{"vgpu-kubelet-plugin: the vgpu.io DRA driver's node plugin (docs/kubernetes.md)",
               "vgpu-kubelet-plugin"};
  if (const char* n = std::getenv("NODE_NAME")) f->node_name = n;
  app.add_option("--node-name", f->node_name, "this node's name (default: $NODE_NAME)");
  app.add_option("--kubelet-dir", f->kubelet_dir, "the kubelet's root directory");
  app.add_option("--cdi-dir", f->cdi_dir, "where per-claim CDI specs are written");
  app.add_option("--claims-dir", f->claims_dir, "where per-claim ceilings files are written");
  app.add_option("--run-dir", f->run_dir, "the agents' and vgpud's run directory");
  app.add_option("--kube-api", f->kube_api,
                 "API server URL (default: in-cluster, from KUBERNETES_SERVICE_HOST)");
  app.add_option("--token-file", f->token_file, "bearer token file");
  app.add_option("--ca-file", f->ca_file, "the API server's CA bundle");
  app.add_option(
      "--driver-dir", f->driver_dir,
      "the driver libraries' directory (default: libcuda.so.1's by ldconfig, else NVML's)");
  app.add_option("--node-file", f->node_files, "a node file every container shares (repeatable)");
  app.add_option("--node-config", f->node_config, "the node's admin file, mounted if it exists");
  app.add_option("--memory-overcommit", f->memory_overcommit,
                 "advertised memory per GPU as a multiple of the physical, when vgpud time-slices")
      ->check(CLI::Range(1.0, 8.0));
  app.add_option("--high-priority-from", f->high_priority_from,
                 "pod priority from which a claim's jobs run at vgpu priority high");
  app.add_option("--poll", f->poll_s, "seconds between looks at vgpud and NVML")
      ->check(CLI::Range(0.05, 60.0));
  app.add_option("--resync", f->resync_s, "seconds between slice writes with no change")
      ->check(CLI::Range(1.0, 86400.0));
  app.add_option("--log-level", f->log_level, "off, error, warn, info, debug")
      ->check(CLI::IsMember({"off", "error", "warn", "info", "debug"}));
  app.set_version_flag("--version", VGPU_VERSION);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? -1 : 2;
  }
  if (f->node_name.empty()) return Fail("no node name: set --node-name or NODE_NAME"), 2;
  // The specs and the hook name these paths on the host: relative ones would
  // mean nothing there.
  std::vector<std::string> paths = {f->kubelet_dir, f->cdi_dir, f->claims_dir, f->node_config};
  paths.insert(paths.end(), f->node_files.begin(), f->node_files.end());
  if (!f->driver_dir.empty()) paths.push_back(f->driver_dir);
  if (!f->run_dir.empty()) paths.push_back(f->run_dir);
  for (const std::string& p : paths) {
    if (p.empty() || p[0] != '/') return Fail("'" + p + "' is not an absolute path"), 2;
  }
  if (f->run_dir.empty()) f->run_dir = ctl::RunDir();
  return 0;
}

// The API server through the REST client.
class KubeReader : public ClusterReader {
 public:
  explicit KubeReader(KubeClient* c) : c_(c) {}
  Status GetClaim(const std::string& ns, const std::string& name, nlohmann::json* out) override {
    return Get("/apis/resource.k8s.io/v1/namespaces/" + ns + "/resourceclaims/" + name, out);
  }
  Status GetPod(const std::string& ns, const std::string& name, nlohmann::json* out) override {
    return Get("/api/v1/namespaces/" + ns + "/pods/" + name, out);
  }

 private:
  Status Get(const std::string& path, nlohmann::json* out) {
    int http = 0;
    return c_->Get(path, out, &http);
  }
  KubeClient* c_;
};

Status Inventory(const Flags& f, cdi::Inventory* inv) {
  cdi::HostOptions o;
  o.exe_dir = cdi::RunningExeDir();
  o.run_dir = f.run_dir;
  o.node_files = f.node_files;
  o.driver_dir = f.driver_dir;
  o.node_config = f.node_config;
  if (auto region = SchedRegion::Open(kNodeSchedRegion); !region.ok()) {
    return Status::Error(ErrorCode::kIo, "the node's scheduler region: " + region.status().message);
  }
  o.sched_region_file = std::string("/dev/shm") + kNodeSchedRegion;
  std::vector<std::string> warnings;
  Status s = cdi::CollectInventory(o, inv, &warnings);
  for (const std::string& w : warnings) VGPU_LOG(kWarn, "{}", w);
  return s;
}

Status Client(const Flags& f, KubeConfig* cfg) {
  if (f.kube_api.empty()) return InClusterConfig(cfg);
  cfg->server = f.kube_api;
  // Outside a cluster (tests, a node's own kubeconfig-less setup): the token
  // and CA are optional.
  std::error_code ec;
  if (std::filesystem::exists(f.token_file, ec)) {
    cfg->token_file = f.token_file;
    if (Status s = ReadToken(cfg->token_file, &cfg->token); !s.ok()) return s;
  }
  if (std::filesystem::exists(f.ca_file, ec)) cfg->ca_file = f.ca_file;
  return Status::Ok();
}

// Publishes when the node changed or the resync period passed; a failed
// write is tried again at the next look.
class Publisher {
 public:
  Publisher(const Flags& f, KubeClient* client, const driver::NodeGpus* nvml)
      : f_(f), nvml_(nvml), slices_(client, Options(f)) {}

  void Tick() {
    NodeState now;
    std::string warning;
    if (Status s = ReadNodeState(*nvml_, f_.run_dir, &now, &warning); !s.ok()) {
      VGPU_LOG(kError, "reading the node: {}", s.message);
      return;
    }
    if (!warning.empty() && warning != last_warning_) VGPU_LOG(kWarn, "{}", warning);
    last_warning_ = warning;
    auto t = std::chrono::steady_clock::now();
    if (published_ && now == last_ && t - last_time_ < std::chrono::duration<double>(f_.resync_s)) {
      return;
    }
    slices_.set_memory_overcommit(EffectiveOvercommit(now, f_.memory_overcommit));
    if (Status s = slices_.Publish(SliceGpus(now)); !s.ok()) {
      VGPU_LOG(kError, "publishing the ResourceSlice: {}", s.message);
      return;
    }
    VGPU_LOG(kInfo, "ResourceSlice published: {} GPUs, {} drained", now.gpus.size(),
             now.drained.size());
    published_ = true;
    last_ = now;
    last_time_ = t;
  }

 private:
  static SliceOptions Options(const Flags& f) {
    SliceOptions o;
    o.driver = std::string(kDriverName);
    o.node_name = f.node_name;
    return o;
  }
  const Flags& f_;
  const driver::NodeGpus* nvml_;
  SlicePublisher slices_;
  NodeState last_;
  bool published_ = false;
  std::chrono::steady_clock::time_point last_time_{};
  std::string last_warning_;
};

int Run(const Flags& f) {
  InitLog("vgpu-kubelet-plugin", LevelOf(f.log_level), "stderr");
  driver::NodeGpus nvml;
  if (Status s = nvml.Init(); !s.ok()) return Fail("NVML: " + s.message);
  KubeConfig cfg;
  if (Status s = Client(f, &cfg); !s.ok()) return Fail("API server: " + s.message);
  KubeClient client(cfg);
  KubeReader reader(&client);
  PreparerOptions po;
  po.cdi_dir = f.cdi_dir;
  po.claims_dir = f.claims_dir;
  std::string plugin_dir = f.kubelet_dir + "/plugins/" + std::string(kDriverName);
  po.checkpoint_file = plugin_dir + "/checkpoint.json";
  po.priority.high_from = f.high_priority_from;
  if (Status s = Inventory(f, &po.inventory); !s.ok()) return Fail(s.message);
  std::error_code ec;
  for (const std::string& d :
       {plugin_dir, f.kubelet_dir + "/plugins_registry", f.cdi_dir, f.claims_dir}) {
    std::filesystem::create_directories(d, ec);
    if (ec) return Fail("mkdir " + d + ": " + ec.message());
  }
  auto gpus = [&nvml](std::vector<NodeGpu>* out) {
    *out = ClaimGpus(nvml.Models(), "/dev");
    return out->empty() ? Status::Error(ErrorCode::kIo, "NVML lists no GPU") : Status::Ok();
  };
  ClaimPreparer preparer(po, &reader, gpus);
  std::string warning;
  if (Status s = preparer.Init(&warning); !s.ok()) return Fail(s.message);
  if (!warning.empty()) VGPU_LOG(kError, "{}", warning);
  PluginServer server(&preparer,
                      f.kubelet_dir + "/plugins_registry/" + std::string(kDriverName) + "-reg.sock",
                      plugin_dir + "/dra.sock");
  // Signals are taken synchronously by the loop below (no handler state).
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);  // before gRPC starts its threads
  if (Status s = server.Start(); !s.ok()) return Fail(s.message);
  VGPU_LOG(kInfo, "vgpu-kubelet-plugin {} on node {}: {} prepared claims", VGPU_VERSION,
           f.node_name, preparer.prepared());
  Publisher publisher(f, &client, &nvml);
  timespec poll{static_cast<time_t>(f.poll_s),
                static_cast<long>((f.poll_s - static_cast<time_t>(f.poll_s)) * 1e9)};
  while (true) {
    publisher.Tick();
    int sig = sigtimedwait(&stop, nullptr, &poll);
    if (sig == SIGTERM || sig == SIGINT) break;
  }
  VGPU_LOG(kInfo, "stopping");
  server.Stop();
  return 0;
}

}  // namespace
}  // namespace vgpu::k8s

int main(int argc, char** argv) {
  vgpu::k8s::Flags f;
  if (int rc = vgpu::k8s::ParseFlags(argc, argv, &f); rc != 0) return rc < 0 ? 0 : rc;
  try {
    return vgpu::k8s::Run(f);
  } catch (const std::exception& e) {
    return vgpu::k8s::Fail(std::string("internal error: ") + e.what());
  }
}
