#include "ctl/vgpuctl/vgpuctl_cdi.h"

#include <cstdio>
#include <filesystem>
#include <map>

#include "common/sched_region.h"
#include "ctl/cdi/cdi_host.h"
#include "ctl/cdi/cdi_spec.h"
#include "ctl/control/run_dir.h"
#include "ctl/vgpuctl/vgpuctl_cli.h"

namespace vgpu::ctl::cli {
namespace {

constexpr const char* kDefaultSpecDirs[] = {"/etc/cdi", "/var/run/cdi"};
constexpr int kMaxGpus = 64;

int Usage(const std::string& message) {
  std::fprintf(stderr,
               "vgpuctl cdi: %s\n"
               "usage: vgpuctl cdi generate [--output FILE] [--libvgpu PATH] [--driver-dir DIR]\n"
               "                            [--run-dir DIR] [--dev-dir DIR] [--gpus N]\n"
               "                            [--node-file PATH]... [--node-config FILE]\n"
               "       vgpuctl cdi list [FILE|DIR]...\n",
               message.c_str());
  return kExitUsage;
}

int Fail(const std::string& message) {
  std::fprintf(stderr, "vgpuctl cdi: %s\n", message.c_str());
  return kExitFailed;
}

// The directory of the running vgpuctl: libvgpu and the hook are installed
// relative to it (and lie the same way in the build tree).
std::string ExeDir() {
  std::error_code ec;
  std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "" : exe.parent_path().string();
}

bool ParseGpus(const std::string& s, int* out) {
  if (s.empty() || s.size() > 3 || s.find_first_not_of("0123456789") != std::string::npos) {
    return false;
  }
  *out = std::stoi(s);
  return *out >= 1 && *out <= kMaxGpus;
}

// Parses generate's options into *o and *output; false with *error.
bool ParseGenerate(const std::vector<std::string>& args, cdi::HostOptions* o, std::string* output,
                   std::string* error) {
  std::string gpus;
  const std::map<std::string, std::string*> paths = {{"--output", output},
                                                     {"--libvgpu", &o->libvgpu},
                                                     {"--driver-dir", &o->driver_dir},
                                                     {"--run-dir", &o->run_dir},
                                                     {"--dev-dir", &o->dev_dir},
                                                     {"--gpus", &gpus},
                                                     {"--node-config", &o->node_config}};
  for (size_t i = 1; i < args.size(); ++i) {
    if (args[i] == "--node-file" && i + 1 < args.size() && !args[i + 1].empty()) {
      o->node_files.push_back(AbsolutePath(args[++i]));
      continue;
    }
    auto it = paths.find(args[i]);
    if (it == paths.end()) return *error = "unknown argument " + args[i], false;
    // An empty value (a script's unset variable) must not mean "the default".
    if (i + 1 >= args.size() || args[i + 1].empty()) {
      return *error = args[i] + " needs a value", false;
    }
    *it->second = args[++i];
    if (it->first != "--gpus") *it->second = AbsolutePath(*it->second);
  }
  int n = 0;
  if (!gpus.empty() && !ParseGpus(gpus, &n)) {
    return *error = "--gpus wants a count 1.." + std::to_string(kMaxGpus), false;
  }
  if (!gpus.empty()) o->gpus = n;
  return true;
}

int Generate(const std::vector<std::string>& args) {
  cdi::HostOptions o;
  std::string output, error;
  if (!ParseGenerate(args, &o, &output, &error)) return Usage(error);
  o.exe_dir = ExeDir();
  if (o.run_dir.empty()) o.run_dir = RunDir();
  // The node's scheduler region must exist before a container mounts it:
  // created here (mode 0666), as by the first governed process of the node.
  std::string region_error;
  if (SchedRegion::Open(kNodeSchedRegion, &region_error) == nullptr) {
    return Fail("the node's scheduler region: " + region_error);
  }
  o.sched_region_file = std::string("/dev/shm") + kNodeSchedRegion;
  cdi::Inventory inv;
  std::vector<std::string> warnings;
  Status st = cdi::CollectInventory(o, &inv, &warnings);
  for (const std::string& w : warnings)
    std::fprintf(stderr, "vgpuctl cdi: warning: %s\n", w.c_str());
  if (!st.ok()) return Fail(st.message);
  nlohmann::json spec = cdi::BuildSpec(inv);
  if (st = cdi::ValidateSpec(spec); !st.ok())
    return Fail("generated spec is invalid: " + st.message);
  std::string text = spec.dump(2) + "\n";
  if (output.empty()) return std::fputs(text.c_str(), stdout) < 0 ? kExitFailed : kExitOk;
  if (st = cdi::WriteFileAtomic(output, text); !st.ok()) return Fail(st.message);
  return kExitOk;
}

// Lists one file's devices; false if it is malformed (reported on stderr).
bool ListFile(const std::string& path) {
  std::string text;
  cdi::ParsedSpec spec;
  Status st = cdi::ReadSpecFile(path, &text);
  if (st.ok()) st = cdi::ParseSpec(text, &spec);
  if (!st.ok()) {
    std::fprintf(stderr, "vgpuctl cdi: %s: %s\n", path.c_str(), st.message.c_str());
    return false;
  }
  if (spec.kind != cdi::kKind) return true;  // another vendor's devices
  for (const cdi::ListedDevice& d : spec.devices) {
    std::printf("%s=%s\t%s\n", spec.kind.c_str(), d.name.c_str(),
                d.visible.empty() ? "-" : d.visible.c_str());
  }
  return true;
}

int List(const std::vector<std::string>& args) {
  std::vector<std::string> paths(args.begin() + 1, args.end());
  bool defaults = paths.empty();
  if (defaults) paths.assign(std::begin(kDefaultSpecDirs), std::end(kDefaultSpecDirs));
  bool ok = true;
  for (const std::string& p : paths) {
    if (p.starts_with("-")) return Usage("unknown argument " + p);
    std::vector<std::string> files;
    Status st = cdi::SpecFiles(p, &files);
    // A default directory that does not exist holds no spec; a path given does.
    if (!st.ok() && !(defaults && st.code == ErrorCode::kNoEnt)) {
      Fail(st.message);
      ok = false;
    }
    for (const std::string& f : files) ok = ListFile(f) && ok;
  }
  return ok ? kExitOk : kExitFailed;
}

}  // namespace

int Cdi(const std::vector<std::string>& args) {
  // nlohmann::json throws on what its checks did not foresee; none escapes.
  try {
    if (!args.empty() && args[0] == "generate") return Generate(args);
    if (!args.empty() && args[0] == "list") return List(args);
    return Usage("expected generate or list");
  } catch (const std::exception& e) {
    return Fail(std::string("internal error: ") + e.what());
  }
}

}  // namespace vgpu::ctl::cli
