// vgpuctl: the command-line tool. Configuration and quota ledgers are read
// locally; process control talks to the in-process agents
// (vgpuctl_process.cc, docs/control-protocol.md).
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/byte_size.h"
#include "common/config/config.h"
#include "common/parse.h"
#include "ctl/vgpuctl/vgpuctl_cdi.h"
#include "ctl/vgpuctl/vgpuctl_cli.h"
#include "ctl/vgpuctl/vgpuctl_daemon.h"
#include "ctl/vgpuctl/vgpuctl_process.h"
#include "ctl/vgpuctl/vgpuctl_slurm.h"
#include "quota/quota_ledger.h"

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
    "  slurm gres [--shard-mem SIZE] [--shard-compute PCT] [--overcommit F] [--dev-dir DIR]\n"
    "      [--libvgpu PATH] [--plugin PATH]\n"
    "                          the node's gres.conf lines (gpu and shard), its slurm.conf\n"
    "                          Gres= and the plugstack.conf line of spank_vgpu.so\n"
    "                          (docs/slurm.md)\n"
    "options of the process commands:\n"
    "  --json                  machine-readable output on stdout\n"
    "  -q, --quiet             no progress display\n"
    "  --run-dir DIR           where agent sockets live (default: see docs/control-protocol.md)\n"
    "  --timeout SEC           longest silence tolerated from the agent\n"
    "exit codes: 0 ok, 1 operation failed, 2 usage, 3 no such process or agent,\n"
    "  4 permission denied, 5 busy or wrong state, 6 timeout or protocol error,\n"
    "  7 untrusted run directory or agent (not owned by you, writable by others, a symlink,\n"
    "    or the socket is not served by that process)\n";

// Exit codes scripts can rely on (the full list is in vgpuctl_cli.h).
constexpr int kOk = vgpu::ctl::cli::kExitOk;
constexpr int kUsageError = vgpu::ctl::cli::kExitUsage;
constexpr int kNotFound = vgpu::ctl::cli::kExitNotFound;

// `vgpuctl config`: each option's value in force in this environment (the
// admin's files, VGPU_CONFIG or the container file, the environment) and where
// it came from; `--options`: the option table (defaults, HAMi aliases, meaning).
int Config(bool table) {
  if (table) {
    std::printf("%-26s %-34s %-20s %s\n", "VARIABLE", "ALIASES", "DEFAULT", "MEANING");
    for (const vgpu::OptionInfo& o : vgpu::Options()) {
      std::printf("%-26s %-34s %-20s %s\n", o.env, o.aliases[0] ? o.aliases : "-", o.default_text,
                  o.doc);
    }
    return kOk;
  }
  vgpu::Config c;
  if (vgpu::Status s = vgpu::LoadConfig([](const char* n) { return std::getenv(n); }, &c);
      !s.ok()) {
    std::fprintf(stderr, "vgpuctl: %s\n", s.message.c_str());
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
  // Unlimited requests never lower an existing group's limits.
  auto opened =
      vgpu::QuotaLedger::Open(group, std::vector<uint64_t>(vgpu::kLedgerDevices, vgpu::kUnlimited));
  if (!opened.ok()) {
    std::fprintf(stderr, "vgpuctl: %s\n", opened.status().message.c_str());
    return kNotFound;
  }
  std::unique_ptr<vgpu::QuotaLedger> ledger = std::move(opened.value());
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

// ---------------------------------------------------------------------------
// The command line: one CLI11 subcommand per command, each filling its own
// option struct (vgpuctl_cli.h) through the value parsers of common/parse.h,
// so that a share, a size or a duration reads as it does in VGPU_* variables.

using namespace vgpu::ctl::cli;

[[noreturn]] void Invalid(const std::string& flag, const std::string& what) {
  throw CLI::ValidationError(flag, what);
}

// A path argument (never empty: Run refuses empty values), made absolute: the
// agent's working directory is not ours.
void AddPath(CLI::App* c, const std::string& flag, std::string* out, const std::string& help,
             bool absolute = true) {
  c->add_option_function<std::string>(
      flag, [out, absolute](const std::string& v) { *out = absolute ? AbsolutePath(v) : v; }, help);
}

void AddCommon(CLI::App* c, CommonOptions* o) {
  c->add_flag("--json", o->json, "machine-readable output on stdout");
  c->add_flag("-q,--quiet", o->quiet, "no progress display");
  AddPath(c, "--run-dir", &o->run_dir, "where agent sockets live", /*absolute=*/false);
  c->add_option_function<std::string>(
      "--timeout",
      [o](const std::string& v) {
        int64_t sec = 0;
        if (!vgpu::ParseInteger(v, 1, 86400, &sec))
          Invalid("--timeout", "wants seconds (1..86400)");
        o->timeout_ms = static_cast<int>(sec * 1000);
      },
      "longest silence tolerated from the agent, in seconds");
}

bool ParsePid(std::string_view text, pid_t* pid) {
  int64_t v = 0;
  if (!vgpu::ParseInteger(text, 1, 0x3fffffff, &v)) return false;
  *pid = static_cast<pid_t>(v);
  return true;
}

// An option (or positional) whose text goes through `parse` (common/parse.h)
// into *out; a refusal is a usage error saying what the option wants.
template <typename T, typename Out>
CLI::Option* AddParsed(CLI::App* c, const std::string& flag, bool (*parse)(std::string_view, T*),
                       Out* out, const std::string& wants, const std::string& help) {
  return c->add_option_function<std::string>(
      flag,
      [flag, parse, out, wants](const std::string& v) {
        T value{};
        if (!parse(v, &value)) Invalid(flag, "wants " + wants + ", not '" + v + "'");
        *out = value;
      },
      help);
}

void AddPid(CLI::App* c, PidCommand* o) {
  AddParsed(c, "PID", ParsePid, &o->pid, "a process id", "process id")->required();
  AddCommon(c, o);
}

// A node device index, as --device takes it.
std::function<void(const std::string&)> DeviceInto(std::optional<int>* out) {
  return [out](const std::string& v) {
    int64_t d = 0;
    if (!vgpu::ParseInteger(v, 0, 1023, &d)) Invalid("--device", "wants a device index");
    *out = static_cast<int>(d);
  };
}

// The commands' option structs, filled by the parser, read by the callbacks.
struct Commands {
  CommonOptions ps, events;
  InfoCommand info;
  PidCommand suspend, resume;
  CheckpointCommand checkpoint;
  RestoreCommand restore;
  SetCommand set;
  MigrateCommand migrate;
  TopCommand top;
  DrainCommand drain, undrain;
  CdiGenerateCommand cdi_generate;
  std::vector<std::string> cdi_list;
  SlurmGresCommand slurm_gres;
  bool config_table = false;
  std::string quota_group;
  int exit_code = 0;  // the command's, once it ran
};

bool ParsePriority(std::string_view text, std::string* out) {
  for (const char* p : vgpu::ctl::kPriorities) {
    if (text == p) return *out = p, true;
  }
  return false;
}

void AddSet(CLI::App* app, SetCommand* o) {
  CLI::App* c = app->add_subcommand("set", "change a process's (or a quota group's) limits");
  AddParsed(c, "PID", ParsePid, &o->pid, "a process id", "process id (or --group)");
  AddCommon(c, o);
  c->add_option_function<std::string>(
      "--group",
      [o](const std::string& v) {
        if (v.empty()) Invalid("--group", "wants a quota group name");
        o->group = v;
      },
      "every process of quota group G");
  AddParsed(c, "--memory-limit", vgpu::ParseByteSize, &o->args.memory_limit,
            "a size (8GiB); 0: unlimited", "SIZE, e.g. 8GiB; 0: unlimited");
  AddParsed(c, "--compute-share", vgpu::ParseSharePermille, &o->args.share_permille,
            "a percentage above 0 and at most 100 (30, 12.5, 30%)", "PCT, e.g. 30, 12.5 or 30%");
  AddParsed(c, "--weight", vgpu::ParseComputeWeight, &o->args.weight, "1..1000",
            "compute weight 1..1000");
  AddParsed(c, "--priority", ParsePriority, &o->args.priority, "high, normal or low",
            "high, normal or low");
  c->add_option_function<std::string>("--device", DeviceInto(&o->args.device),
                                      "one device only (its index)");
  c->parse_complete_callback([o] {
    if (o->pid.has_value() == !o->group.empty()) {
      throw CLI::ValidationError("set", "wants a PID or --group G");
    }
    const vgpu::ctl::SetArgs& a = o->args;
    if (!a.memory_limit && !a.share_permille && !a.weight && !a.priority) {
      throw CLI::ValidationError("set",
                                 "needs --memory-limit, --compute-share, --weight or --priority");
    }
  });
}

void AddCdi(CLI::App* app, Commands* cmds) {
  CLI::App* cdi = app->add_subcommand("cdi", "the node's CDI spec (docs/containers.md)");
  cdi->require_subcommand(1);
  CLI::App* g = cdi->add_subcommand("generate", "write the node's CDI spec");
  vgpu::cdi::HostOptions* h = &cmds->cdi_generate.host;
  AddPath(g, "--output", &cmds->cdi_generate.output, "FILE (default: stdout)");
  AddPath(g, "--libvgpu", &h->libvgpu, "libvgpu.so to inject");
  AddPath(g, "--driver-dir", &h->driver_dir, "directory of the driver's libraries");
  AddPath(g, "--run-dir", &h->run_dir, "where agent sockets live");
  AddPath(g, "--dev-dir", &h->dev_dir, "directory of the GPU device nodes");
  AddPath(g, "--node-config", &h->node_config, "the admin's limits file to mount read-only");
  g->add_option_function<std::vector<std::string>>(
       "--node-file",
       [h](const std::vector<std::string>& files) {
         for (const std::string& f : files) h->node_files.push_back(AbsolutePath(f));
       },
       "a node-wide file to mount into containers (repeatable)")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  g->add_option_function<std::string>(
      "--gpus",
      [h](const std::string& v) {
        int64_t n = 0;
        if (!vgpu::ParseInteger(v, 1, kMaxCdiGpus, &n)) {
          Invalid("--gpus", "wants a count 1.." + std::to_string(kMaxCdiGpus));
        }
        h->gpus = static_cast<int>(n);
      },
      "how many GPUs (default: those NVML lists)");
  g->callback([cmds] { cmds->exit_code = CdiGenerate(cmds->cdi_generate); });
  CLI::App* l = cdi->add_subcommand("list", "list the vgpu.io/gpu devices of CDI specs");
  l->add_option("PATH", cmds->cdi_list,
                "spec files or directories (default: /etc/cdi, /var/run/cdi)");
  l->callback([cmds] { cmds->exit_code = CdiList(cmds->cdi_list); });
}

void AddSlurm(CLI::App* app, Commands* cmds) {
  CLI::App* slurm = app->add_subcommand("slurm", "Slurm's configuration for this node");
  slurm->require_subcommand(1);
  CLI::App* g = slurm->add_subcommand("gres", "gres.conf, Gres= and plugstack.conf lines");
  SlurmGresCommand* o = &cmds->slurm_gres;
  g->add_option_function<std::string>(
      "--shard-mem",
      [o](const std::string& v) {
        if (!vgpu::ParseByteSize(v, &o->shard_mem) || o->shard_mem == 0) {
          Invalid("--shard-mem", "wants a size above 0 (1GiB, 512MiB), not '" + v + "'");
        }
      },
      "device memory per shard (default 1GiB)");
  AddParsed(g, "--shard-compute", vgpu::ParseSharePermille, &o->shard_compute_permille,
            "a percentage above 0 and at most 100 (30, 12.5, 30%)", "compute share per shard");
  g->add_option_function<std::string>(
      "--overcommit",
      [o](const std::string& v) {
        double f = 0;
        if (!vgpu::ParsePercent(v, &f) || f <= 0 || f > 16) {
          Invalid("--overcommit", "wants a factor above 0 and at most 16, not '" + v + "'");
        }
        o->overcommit = f;
      },
      "shards per GPU memory (default 1; above 1 needs vgpud)");
  AddPath(g, "--dev-dir", &o->dev_dir, "directory of the GPU device nodes (default /dev)");
  AddPath(g, "--libvgpu", &o->libvgpu, "libvgpu.so for the plugstack.conf line");
  AddPath(g, "--plugin", &o->plugin, "spank_vgpu.so for the plugstack.conf line");
  g->callback([cmds] { cmds->exit_code = SlurmGres(cmds->slurm_gres); });
}

// Each command's callback runs it once its options are parsed and checked.
template <typename Fn>
void Runs(CLI::App* c, Commands* m, Fn fn) {
  c->callback([m, fn] { m->exit_code = fn(); });
}

void AddCommands(CLI::App* app, Commands* m) {
  CLI::App* c = app->add_subcommand("version", "print the version");
  Runs(c, m, [] { return std::printf("vgpuctl %s\n", VGPU_VERSION) < 0 ? 1 : kOk; });
  c = app->add_subcommand("config", "each option in force here and its source");
  c->add_flag("--options", m->config_table, "the option table");
  Runs(c, m, [m] { return Config(m->config_table); });
  c = app->add_subcommand("quota", "a quota group's limits and usage per device");
  c->add_option("GROUP", m->quota_group, "quota group")->required();
  Runs(c, m, [m] { return Quota(m->quota_group); });
  c = app->add_subcommand("ps", "list interposed processes");
  AddCommon(c, &m->ps);
  Runs(c, m, [m] { return Ps(m->ps); });
  c = app->add_subcommand("top", "vgpud's live view");
  AddCommon(c, &m->top);
  c->add_flag("--once", m->top.once, "one frame, no screen clearing");
  Runs(c, m, [m] { return Top(m->top); });
  c = app->add_subcommand("events", "vgpud's recent decisions");
  AddCommon(c, &m->events);
  Runs(c, m, [m] { return Events(m->events); });
  for (bool on : {true, false}) {
    DrainCommand* d = on ? &m->drain : &m->undrain;
    c = app->add_subcommand(on ? "drain" : "undrain",
                            on ? "move every job off DEVICE" : "open DEVICE again");
    c->add_option("DEVICE", d->device, "index or UUID")->required();
    AddCommon(c, d);
    Runs(c, m, [d, on] { return Drain(*d, on); });
  }
  c = app->add_subcommand("info", "one process in detail");
  AddPid(c, &m->info);
  c->add_flag("--allocations", m->info.allocations, "the call sites holding device memory");
  Runs(c, m, [m] { return Info(m->info); });
  c = app->add_subcommand("suspend", "move its device memory to host RAM, pause its CUDA calls");
  AddPid(c, &m->suspend);
  Runs(c, m, [m] { return Suspend(m->suspend); });
  c = app->add_subcommand("resume", "bring its device memory back and let it run");
  AddPid(c, &m->resume);
  Runs(c, m, [m] { return Resume(m->resume); });
  c = app->add_subcommand("checkpoint", "write its device memory to an image");
  AddPid(c, &m->checkpoint);
  AddPath(c, "--dir", &m->checkpoint.dir, "DIR of the image");
  c->add_flag("--leave-running", m->checkpoint.leave_running, "resume it after the image");
  Runs(c, m, [m] { return Checkpoint(m->checkpoint); });
  c = app->add_subcommand("restore", "load its device memory from its image");
  AddPid(c, &m->restore);
  AddPath(c, "--from", &m->restore.from, "DIR or IMAGE");
  c->add_option_function<std::string>("--device", DeviceInto(&m->restore.device), "onto GPU N");
  Runs(c, m, [m] { return Restore(m->restore); });
  c = app->add_subcommand("migrate", "move a running job to another GPU");
  AddPid(c, &m->migrate);
  c->add_option("--to", m->migrate.to, "DEVICE (index or UUID)");
  c->add_option("--map", m->migrate.map, "OLD:NEW[,OLD:NEW...]");
  Runs(c, m, [m] { return Migrate(m->migrate); });
  AddSet(app, &m->set);
  Runs(app->get_subcommand("set"), m, [m] { return Set(m->set); });
  AddCdi(app, m);
  AddSlurm(app, m);
}

bool IsCommand(const CLI::App& app, const std::string& name) {
  try {
    return app.get_subcommand(name) != nullptr;
  } catch (const CLI::OptionNotFound&) {
    return false;
  }
}

// The option given an empty value ("--dir=", "--dir ''"), if any. A script's
// unset variable must not mean "the default" (CLI11 would read "--dir=" as
// "--dir" missing its value, with a message that hides the cause).
std::string EmptyValue(int argc, char** argv) {
  for (int i = 2; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a.starts_with("--") && a.ends_with("=")) return std::string(a.substr(0, a.size() - 1));
    if (a.empty()) return i > 2 && argv[i - 1][0] == '-' ? argv[i - 1] : "an argument";
  }
  return "";
}

int Run(int argc, char** argv) {
  if (argc < 2) {
    std::fputs(kUsage, stderr);
    return kUsageError;
  }
  const std::string first = argv[1];
  if (first == "help" || first == "--help" || first == "-h") {
    std::fputs(kUsage, stdout);
    return kOk;
  }
  if (first == "--version") {
    std::printf("vgpuctl %s\n", VGPU_VERSION);
    return kOk;
  }
  CLI::App app{"vgpuctl: the vgpu command-line tool (vgpuctl help: every command)", "vgpuctl"};
  app.require_subcommand(1);
  // A repeated option: the last one counts, as in most tools (and before CLI11).
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  Commands commands;
  AddCommands(&app, &commands);
  if (!IsCommand(app, first)) {
    std::fprintf(stderr, "vgpuctl: unknown command: %s\n%s", first.c_str(), kUsage);
    return kUsageError;
  }
  if (std::string empty = EmptyValue(argc, argv); !empty.empty()) {
    std::fprintf(stderr, "vgpuctl: %s wants a value, not an empty string\n", empty.c_str());
    return kUsageError;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "vgpuctl: %s (see vgpuctl help)\n", e.what());
    return kUsageError;
  }
  return commands.exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  // nlohmann::json and the standard library throw on what the checks did not
  // foresee; none escapes as an abort.
  try {
    return Run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vgpuctl: internal error: %s\n", e.what());
    return vgpu::ctl::cli::kExitFailed;
  }
}
