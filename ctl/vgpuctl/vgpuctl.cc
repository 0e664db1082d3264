// vgpuctl: the command-line tool. Configuration and quota ledgers are read
// locally; process control talks to the in-process agents
// (vgpuctl_process.cc, docs/control-protocol.md).
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common/byte_size.h"
#include "common/config/config.h"
#include "common/quota_ledger.h"
#include "ctl/vgpuctl/vgpuctl_cdi.h"
#include "ctl/vgpuctl/vgpuctl_cli.h"
#include "ctl/vgpuctl/vgpuctl_daemon.h"
#include "ctl/vgpuctl/vgpuctl_process.h"

namespace {

constexpr const char* kUsage =
    "usage: vgpuctl <command> [args]\n"
    "  version                 print the version\n"
    "  config [--options]      each option in force here and its source; --options: the table\n"
    "  quota GROUP             show a quota group's limits and usage per device\n"
    "  ps                      list interposed processes: state, devices, used, quota\n"
    "                          (vgpud's view when it runs: priority, footprint, reason)\n"
    "  top [--once]            vgpud's live view, refreshed every second\n"
    "  events                  vgpud's recent decisions: who was suspended for whom, how long\n"
    "  drain DEVICE            vgpud moves every job off DEVICE (index or UUID) and keeps new\n"
    "                          ones off it; undrain DEVICE opens it again\n"
    "  info PID [--allocations] one process in detail (--allocations: the call sites holding\n"
    "                          device memory; needs VGPU_TRACE_ALLOCATIONS=on in the process)\n"
    "  suspend PID             move its device memory to host RAM and pause its CUDA calls\n"
    "  resume PID              bring its device memory back and let it run\n"
    "  checkpoint PID [--dir DIR] [--leave-running]\n"
    "                          write its device memory to DIR/vgpu-PID-START.vgpuckpt\n"
    "  restore PID [--from DIR|IMAGE] [--device N]\n"
    "                          load its device memory from its image in DIR (or IMAGE);\n"
    "                          --device: onto GPU N (the job moves there first)\n"
    "  migrate PID --to DEVICE | --map OLD:NEW[,OLD:NEW...]\n"
    "                          move a running job to another GPU (index or UUID) with the\n"
    "                          driver's checkpoint API (r580+; docs/migration.md)\n"
    "  set PID|--group G [--memory-limit SIZE] [--compute-share PCT] [--weight W]\n"
    "      [--priority high|normal|low] [--device N]\n"
    "                          change its limits at runtime (--group G: every process of\n"
    "                          quota group G; SIZE 0: unlimited; --device: one device only)\n"
    "  cdi generate [--output FILE] [--libvgpu PATH] [--driver-dir DIR] [--run-dir DIR]\n"
    "      [--dev-dir DIR] [--gpus N] [--node-file PATH]... [--node-config FILE]\n"
    "                          write the node's CDI spec (kind vgpu.io/gpu) as JSON to stdout\n"
    "                          or FILE (docs/containers.md); creates the node's scheduler region\n"
    "  cdi list [FILE|DIR]...  list the vgpu.io/gpu devices of CDI specs (default: /etc/cdi,\n"
    "                          /var/run/cdi) and the GPUs each makes visible\n"
    "options of the process commands:\n"
    "  --json                  machine-readable output on stdout\n"
    "  -q, --quiet             no progress display\n"
    "  --run-dir DIR           where agent sockets live (default: see docs/control-protocol.md)\n"
    "  --timeout SEC           longest silence tolerated from the agent\n"
    "exit codes: 0 ok, 1 operation failed, 2 usage, 3 no such process or agent,\n"
    "  4 permission denied, 5 busy or wrong state, 6 timeout or protocol error,\n"
    "  7 untrusted run directory or agent (not owned by you, writable by others, a symlink,\n"
    "    or the socket is not served by that process)\n";

using ProcessCommand = int (*)(const std::vector<std::string>&);

struct NamedCommand {
  const char* name;
  ProcessCommand run;
};

constexpr NamedCommand kProcessCommands[] = {
    {"ps", vgpu::ctl::cli::Ps},
    {"info", vgpu::ctl::cli::Info},
    {"suspend", vgpu::ctl::cli::Suspend},
    {"resume", vgpu::ctl::cli::Resume},
    {"checkpoint", vgpu::ctl::cli::Checkpoint},
    {"restore", vgpu::ctl::cli::Restore},
    {"set", vgpu::ctl::cli::Set},
    {"migrate", vgpu::ctl::cli::Migrate},
    {"top", vgpu::ctl::cli::Top},
    {"events", vgpu::ctl::cli::Events},
    {"drain", [](const std::vector<std::string>& a) { return vgpu::ctl::cli::Drain(a, true); }},
    {"undrain", [](const std::vector<std::string>& a) { return vgpu::ctl::cli::Drain(a, false); }},
};

// Exit codes scripts can rely on (the full list is in vgpuctl_cli.h).
constexpr int kOk = vgpu::ctl::cli::kExitOk;
constexpr int kUsageError = vgpu::ctl::cli::kExitUsage;
constexpr int kNotFound = vgpu::ctl::cli::kExitNotFound;

// `vgpuctl config`: each option's value in force in this environment (the
// admin's files, VGPU_CONFIG or the container file, the environment) and where
// it came from; `--options`: the option table (defaults, HAMi aliases, meaning).
int Config(const std::vector<std::string>& args) {
  if (!args.empty() && args[0] == "--options") {
    std::printf("%-26s %-34s %-20s %s\n", "VARIABLE", "ALIASES", "DEFAULT", "MEANING");
    for (const vgpu::OptionInfo& o : vgpu::Options()) {
      std::printf("%-26s %-34s %-20s %s\n", o.env, o.aliases[0] ? o.aliases : "-", o.default_text,
                  o.doc);
    }
    return kOk;
  }
  if (!args.empty()) {
    std::fprintf(stderr, "vgpuctl: config takes no argument but --options\n");
    return kUsageError;
  }
  vgpu::Config c;
  std::string error;
  if (!vgpu::LoadConfig([](const char* n) { return std::getenv(n); }, &c, &error)) {
    std::fprintf(stderr, "vgpuctl: %s\n", error.c_str());
    return kUsageError;
  }
  const auto& options = vgpu::Options();
  std::printf("%-26s %-28s %s\n", "VARIABLE", "VALUE", "SOURCE");
  for (size_t i = 0; i < options.size(); ++i) {
    const std::string& text = c.texts[i];
    std::printf("%-26s %-28s %s\n", options[i].env,
                text.empty() ? options[i].default_text : text.c_str(), c.origins[i].c_str());
  }
  for (const std::string& r : c.refusals) std::printf("refused: %s\n", r.c_str());
  return kOk;
}

int Quota(const std::string& group) {
  std::string shm = vgpu::QuotaLedger::ShmName(group);
  struct stat st {};
  if (stat(("/dev/shm" + shm).c_str(), &st) != 0) {
    std::fprintf(stderr, "vgpuctl: no quota group '%s' (no /dev/shm%s)\n", group.c_str(),
                 shm.c_str());
    return kNotFound;
  }
  std::string error;
  // Unlimited requests never lower an existing group's limits.
  auto ledger = vgpu::QuotaLedger::Open(
      group, std::vector<uint64_t>(vgpu::kLedgerDevices, vgpu::kUnlimited), &error);
  if (ledger == nullptr) {
    std::fprintf(stderr, "vgpuctl: %s\n", error.c_str());
    return kNotFound;
  }
  ledger->ReapDead();
  std::printf("%-8s %-14s %-14s\n", "DEVICE", "LIMIT", "USED");
  for (int d = 0; d < vgpu::kLedgerDevices; ++d) {
    uint64_t limit = ledger->Limit(d), used = ledger->Used(d);
    if (limit == vgpu::kUnlimited && used == 0) continue;
    std::printf("%-8d %-14s %-14s\n", d,
                limit == vgpu::kUnlimited ? "unlimited" : vgpu::FormatByteSize(limit).c_str(),
                vgpu::FormatByteSize(used).c_str());
  }
  return kOk;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fputs(kUsage, stderr);
    return kUsageError;
  }
  std::string cmd = argv[1];
  if (cmd == "version" || cmd == "--version") {
    std::printf("vgpuctl %s\n", VGPU_VERSION);
    return kOk;
  }
  if (cmd == "config") return Config(std::vector<std::string>(argv + 2, argv + argc));
  if (cmd == "quota" && argc == 3) return Quota(argv[2]);
  if (cmd == "cdi") return vgpu::ctl::cli::Cdi(std::vector<std::string>(argv + 2, argv + argc));
  for (const NamedCommand& c : kProcessCommands) {
    if (cmd == c.name) return c.run(std::vector<std::string>(argv + 2, argv + argc));
  }
  if (cmd == "help" || cmd == "--help" || cmd == "-h") {
    std::fputs(kUsage, stdout);
    return kOk;
  }
  std::fprintf(stderr, "vgpuctl: unknown command or arguments: %s\n%s", cmd.c_str(), kUsage);
  return kUsageError;
}
