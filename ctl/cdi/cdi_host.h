// The host side of the CDI spec: finding what the node has (libvgpu, the
// driver libraries, device nodes, GPUs, the run directory, the OCI hook) and
// reading and writing spec files. cdi_spec.h turns the result into a spec.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "ctl/cdi/cdi_spec.h"

namespace vgpu::cdi {

// Where to look; an empty field means its default (docs/containers.md).
// Every path is absolute.
struct HostOptions {
  std::string exe_dir;     // vgpuctl's directory: libvgpu and the hook are found from it
  std::string libvgpu;     // default: <exe_dir>/../lib/libvgpu.so (installed and build tree)
  std::string driver_dir;  // default: libcuda.so.1's directory by ldconfig, else NVML's
  std::string run_dir;     // required: the caller knows the default (ctl::RunDir)
  std::string dev_dir = "/dev";
  std::optional<int> gpus;  // default: the GPUs NVML lists
  // Files to share with every container besides the scheduler region
  // (--node-file: the simulated node's file); each must exist.
  std::vector<std::string> node_files;
  std::string sched_region_file;              // the node's scheduler region: required, must exist
  std::string node_config = kNodeConfigFile;  // mounted if it exists
};

// The directory of the running executable (vgpuctl, vgpu-kubelet-plugin):
// libvgpu and the hook are installed relative to it, and lie the same way in
// the build tree (HostOptions::exe_dir). "" if /proc/self/exe cannot be read.
std::string RunningExeDir();

// Fills *inv with what exists. A missing optional path is left out and
// described in *warnings; a missing libvgpu or libcuda.so.1, or no GPU list,
// is an error.
Status CollectInventory(const HostOptions& o, Inventory* inv, std::vector<std::string>* warnings);

// The path `ldconfig -p` gives for `soname`, preferring a 64-bit entry; ""
// if none. Pure, for tests.
std::string LibraryFromLdconfig(std::string_view ldconfig_output, std::string_view soname);

// Writes `text` to `path` through a temporary file and rename, mode 0644, so
// that a runtime never reads half a spec.
Status WriteFileAtomic(const std::string& path, const std::string& text);

// Reads a spec file (at most 4 MiB).
Status ReadSpecFile(const std::string& path, std::string* text);

// The spec files `path` names: itself if it is a file, else its *.json files
// in name order. ENOENT if it does not exist.
Status SpecFiles(const std::string& path, std::vector<std::string>* files);

}  // namespace vgpu::cdi
