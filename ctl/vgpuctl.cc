// vgpuctl: the command-line tool. This first version reports the
// configuration options and a quota group's ledger; process control
// (ps, suspend, resume, checkpoint, restore) arrives with the agent.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common/byte_size.h"
#include "common/quota_ledger.h"
#include "intercept/config.h"

namespace {

constexpr const char* kUsage =
    "usage: vgpuctl <command> [args]\n"
    "  version           print the version\n"
    "  config            list every configuration variable with its default\n"
    "  quota GROUP       show a quota group's limits and usage per device\n";

// Exit codes scripts can rely on.
constexpr int kOk = 0;
constexpr int kUsageError = 2;
constexpr int kNotFound = 3;

int Config() {
  std::printf("%-26s %-34s %-20s %s\n", "VARIABLE", "ALIASES", "DEFAULT", "MEANING");
  for (const vgpu::OptionInfo& o : vgpu::Options()) {
    std::printf("%-26s %-34s %-20s %s\n", o.env, o.aliases[0] ? o.aliases : "-", o.default_text,
                o.doc);
  }
  return kOk;
}

int Quota(const std::string& group) {
  std::string shm = vgpu::QuotaLedger::ShmName(group);
  struct stat st{};
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
  if (cmd == "config") return Config();
  if (cmd == "quota" && argc == 3) return Quota(argv[2]);
  if (cmd == "help" || cmd == "--help" || cmd == "-h") {
    std::fputs(kUsage, stdout);
    return kOk;
  }
  std::fprintf(stderr, "vgpuctl: unknown command or arguments: %s\n%s", cmd.c_str(), kUsage);
  return kUsageError;
}
