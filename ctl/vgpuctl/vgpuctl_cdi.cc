#include "ctl/vgpuctl/vgpuctl_cdi.h"

#include <cstdio>
#include <filesystem>

#include "ctl/cdi/cdi_host.h"
#include "ctl/cdi/cdi_spec.h"
#include "ctl/control/run_dir.h"
#include "ctl/vgpuctl/vgpuctl_cli.h"
#include "share/sched_region.h"

namespace vgpu::ctl::cli {
namespace {

constexpr const char* kDefaultSpecDirs[] = {"/etc/cdi", "/var/run/cdi"};

int Fail(const std::string& message) {
  std::fprintf(stderr, "vgpuctl cdi: %s\n", message.c_str());
  return kExitFailed;
}

}  // namespace

int CdiGenerate(CdiGenerateCommand c) {
  cdi::HostOptions& o = c.host;
  o.exe_dir = cdi::RunningExeDir();
  if (o.run_dir.empty()) o.run_dir = RunDir();
  // The node's scheduler region must exist before a container mounts it:
  // created here (mode 0666), as by the first governed process of the node.
  if (auto region = SchedRegion::Open(kNodeSchedRegion); !region.ok()) {
    return Fail("the node's scheduler region: " + region.status().message);
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
  if (c.output.empty()) return std::fputs(text.c_str(), stdout) < 0 ? kExitFailed : kExitOk;
  if (st = cdi::WriteFileAtomic(c.output, text); !st.ok()) return Fail(st.message);
  return kExitOk;
}

namespace {

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

}  // namespace

int CdiList(std::vector<std::string> paths) {
  bool defaults = paths.empty();
  if (defaults) paths.assign(std::begin(kDefaultSpecDirs), std::end(kDefaultSpecDirs));
  bool ok = true;
  for (const std::string& p : paths) {
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

}  // namespace vgpu::ctl::cli
