// vgpud: the node coordinator (docs/vgpud.md). A thin executable: flags and
// config file, logging, the coordinator's tick loop, its socket and /metrics.
// Runs in the foreground, as systemd's Type=notify expects.
#include <signal.h>
#include <systemd/sd-daemon.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <map>
#include <string>

#include "common/log.h"
#include "common/log_level.h"
#include "ctl/control/run_dir.h"
#include "ctl/vgpud/coordinator.h"
#include "ctl/vgpud/daemon_config.h"
#include "ctl/vgpud/daemon_server.h"
#include "ctl/vgpud/metrics.h"
#include "share/sched_region.h"

namespace {

using vgpu::Status;
using namespace vgpu::vgpud;

vgpu::LogLevel LevelOf(const std::string& s) {
  // The flags' values were checked against the same names.
  vgpu::LogLevel level = vgpu::LogLevel::kInfo;
  vgpu::ParseLogLevelName(s, &level);
  return level;
}

int Fail(const std::string& message) {
  std::fprintf(stderr, "vgpud: %s\n", message.c_str());
  return 2;
}

// Flags override the file's keys; both go through one parser per key.
int ParseArgs(int argc, char** argv, DaemonConfig* config) {
  CLI::App app{"vgpud: the vgpu node coordinator (docs/vgpud.md)", "vgpud"};
  std::string config_file;
  app.add_option("--config", config_file, "JSON file of config keys");
  std::map<std::string, std::string> values;
  for (const ConfigKey& k : ConfigKeys()) app.add_option(k.flag, values[k.key], k.help);
  app.set_version_flag("--version", VGPU_VERSION);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? -1 : 2;
  }
  if (!config_file.empty()) {
    if (Status s = LoadConfigFile(config_file, config); !s.ok()) return Fail(s.message);
  }
  for (const ConfigKey& k : ConfigKeys()) {
    const std::string& v = values[k.key];
    if (app.count(k.flag) == 0) continue;
    if (Status s = ApplyConfigValue(k.key, v, config); !s.ok()) return Fail(s.message);
  }
  if (config->run_dir.empty()) config->run_dir = vgpu::ctl::RunDir();
  if (Status s = ValidateConfig(*config); !s.ok()) return Fail(s.message);
  return 0;
}

int Run(const DaemonConfig& config) {
  if (Status s = vgpu::ctl::EnsureRunDir(config.run_dir); !s.ok()) return Fail(s.message);
  // The node's scheduler region: after a reboot /dev/shm is empty, and the
  // CDI spec mounts this file into every container (a missing source fails it).
  if (auto region = vgpu::SchedRegion::Open(vgpu::kNodeSchedRegion); !region.ok()) {
    VGPU_LOG(kWarn, "the node's scheduler region: {}", region.status().message);
  }
  NodeGpus gpus;
  if (Status s = gpus.Init(); !s.ok()) return Fail("cannot see the node's GPUs: " + s.message);
  EventLog events;
  Coordinator coordinator(config, &gpus, &events);
  DaemonState previous;
  if (Status s = ReadState(StateFilePath(config), &previous); !s.ok() && s.code != vgpu::ErrorCode::kNoEnt) {
    VGPU_LOG(kWarn, "{} (starting from the agents alone)", s.message);
  }
  coordinator.Reconcile(previous);
  DaemonServer server(&coordinator, config.run_dir + "/vgpud.sock", config.admin_group,
                      config.run_dir + "/" + kTenantSubdir);
  if (Status s = server.Start(); !s.ok()) return Fail(s.message);
  MetricsServer metrics(&coordinator, config.oversubscribe);
  if (config.metrics_listen != "off") {
    if (Status s = metrics.Start(config.metrics_listen); !s.ok()) return Fail(s.message);
  }
  VGPU_LOG(kInfo, "vgpud {} serving {}/vgpud.sock, metrics on {}, quantum {} ms", VGPU_VERSION,
           config.run_dir, config.metrics_listen, config.quantum_ms);
  sd_notify(0, "READY=1\nSTATUS=coordinating");
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  timespec tick{config.tick_ms / 1000, (config.tick_ms % 1000) * 1000000};
  for (;;) {
    int sig = sigtimedwait(&stop_signals, nullptr, &tick);
    if (sig == SIGTERM || sig == SIGINT) break;
    try {
      coordinator.Tick();
    } catch (const std::exception& e) {  // a bad answer from one agent must not stop the node's coordinator
      VGPU_LOG(kWarn, "tick failed: {}", e.what());
    }
  }
  sd_notify(0, "STOPPING=1");
  VGPU_LOG(kInfo, "vgpud stopping; jobs it suspended resume in their turn under the next vgpud, or by themselves after the grace period");
  server.Stop();
  metrics.Stop();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Blocked before any thread starts, so that only the main loop takes them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  DaemonConfig config;
  int rc = ParseArgs(argc, argv, &config);
  if (rc != 0) return rc < 0 ? 0 : rc;
  vgpu::InitLog("vgpud", LevelOf(config.log_level), "stderr");
  try {
    return Run(config);
  } catch (const std::exception& e) {
    return Fail(std::string("internal error: ") + e.what());
  }
}
