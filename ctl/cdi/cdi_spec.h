// The Container Device Interface (CDI) spec of kind vgpu.io/gpu: built from
// what the node has (an Inventory), validated, and read back. Pure: no file
// system, no driver; cdi_host.h finds the Inventory. docs/containers.md says
// what the spec holds and why. Nothing here throws.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "common/container_paths.h"
#include "common/status.h"

namespace vgpu::cdi {

inline constexpr std::string_view kKind = "vgpu.io/gpu";
// The lowest version with what the spec uses (device names starting with a
// digit need 0.5.0), as the CDI library picks: runtimes that vendor an older
// CDI library (podman 4.3 reads up to 0.5.0) refuse a higher one.
inline constexpr std::string_view kCdiVersion = "0.5.0";
// Where the spec puts libvgpu (common/container_paths.h) and the driver
// libraries inside the container: a directory of ours.
inline constexpr std::string_view kContainerLibvgpu = vgpu::kContainerLibvgpu;
inline constexpr std::string_view kContainerDriverDir = vgpu::kContainerDriverDir;
inline constexpr std::string_view kLibcuda = "libcuda.so.1";
inline constexpr std::string_view kLibnvml = "libnvidia-ml.so.1";
inline constexpr std::string_view kHookName = "vgpu-oci-hook";
inline constexpr std::string_view kContainerConfig = kContainerConfigFile;

struct Gpu {
  int index = 0;
  std::string uuid;         // empty when not known (vgpuctl cdi generate --gpus N)
  std::string device_node;  // host path of its /dev/nvidia<index>; empty if absent
};

// What the node has. Every path is absolute and exists (CollectInventory
// checks); an empty optional one is left out of the spec.
struct Inventory {
  std::vector<Gpu> gpus;
  std::string libvgpu;  // required
  std::string libcuda;  // required
  std::string libnvml;
  // Host paths of the non-glibc libraries the driver libraries need (none
  // for a real driver), mounted beside them under their file names.
  std::vector<std::string> driver_deps;
  std::vector<std::string> common_nodes;  // host paths: nvidiactl, nvidia-uvm, ...
  std::string run_dir;                    // the agents' socket directory
  // Host files every container shares, mounted read-write at the same path:
  // the node's compute-scheduler region (/dev/shm/vgpu-sched, created by
  // `vgpuctl cdi generate`), and on the simulated node its node file.
  std::vector<std::string> shared_files;
  // The node's admin file (kNodeConfigFile) when it exists: mounted
  // read-only at that path, so its ceilings hold in containers too.
  std::string node_config;
  std::string hook;                       // host path of vgpu-oci-hook
};

// The spec for `inv`: one device per GPU (named by its index) and "all".
nlohmann::json BuildSpec(const Inventory& inv);

// The device of a spec of its own for one DRA claim (cluster/k8s): the
// claim's GPUs by UUID, and the hook pointed at the claim's ceilings file,
// which it turns into the container's admin limits (docs/kubernetes.md).
struct ClaimSpecDevice {
  std::string kind;  // "vgpu.io/claim"
  std::string name;  // the claim's UID
  std::vector<Gpu> gpus;
  std::string claim_file;  // host path, absolute
};
nlohmann::json BuildClaimSpec(const Inventory& inv, const ClaimSpecDevice& d);

// Checks what a CDI runtime would refuse: kind, cdiVersion, device names
// (unique), absolute paths in every edit, hook names.
Status ValidateSpec(const nlohmann::json& spec);

// One device of a spec, as `vgpuctl cdi list` shows it.
struct ListedDevice {
  std::string name;     // "0", "all"
  std::string visible;  // its VGPU_VISIBLE_DEVICES, empty if it sets none
};

struct ParsedSpec {
  std::string kind;
  std::vector<ListedDevice> devices;
};

// Parses and validates a spec file's text (JSON; CDI's YAML is not read). A
// spec of another kind is only parsed: *out gets its kind and no devices.
Status ParseSpec(std::string_view text, ParsedSpec* out);

}  // namespace vgpu::cdi
