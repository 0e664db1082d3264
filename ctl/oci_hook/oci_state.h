// What vgpu-oci-hook reads and decides (docs/containers.md, "The OCI hook"):
// the container state an OCI runtime writes to a hook's stdin, the bundle's
// config.json, whether the container asked for vgpu, and the VGPU_CONFIG file
// it gets. Pure (no I/O) so that tests and the fuzz target drive it with bytes;
// nothing here throws.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/container_paths.h"
#include "common/status.h"

namespace vgpu::oci_hook {

inline constexpr std::string_view kDefaultPreload = kContainerLibvgpu;
inline constexpr std::string_view kContainerConfig = kContainerConfigFile;
// Annotations of this prefix, or a VGPU_* variable, ask for vgpu.
inline constexpr std::string_view kAnnotationPrefix = "vgpu.io/";

// Bounds on untrusted input: a state is a few hundred bytes, a config.json
// rarely above some kilobytes; far more means something is wrong.
inline constexpr size_t kMaxStateBytes = 1 << 20;
inline constexpr size_t kMaxBundleConfigBytes = 16 << 20;
// A claim file holds a dozen short options.
inline constexpr size_t kMaxClaimFileBytes = 64 << 10;

using Annotations = std::map<std::string, std::string>;

// The state of the OCI runtime spec ("State"), the fields the hook uses.
struct ContainerState {
  std::string id;
  std::string status;  // "creating" at createContainer
  std::string bundle;  // absolute host path of the bundle directory
  long long pid = 0;   // 0: not given
  Annotations annotations;
};

// The bundle's config.json, the fields the hook uses.
struct BundleConfig {
  std::string rootfs;            // root.path resolved against the bundle: absolute
  std::vector<std::string> env;  // process.env, "NAME=VALUE"
  long long uid = 0, gid = 0;    // process.user: who the container's processes run as
  Annotations annotations;
};

// The options of a claim file (--claim PATH, written on the host by the DRA
// kubelet plugin for one prepared ResourceClaim): a JSON object of option
// JSON keys to string values, each checked by libvgpu's own parser.
struct ClaimOptions {
  std::string path;                           // for messages
  std::map<std::string, std::string> values;  // json key -> value
  // The claim's group, if it sets one.
  const std::string* group() const {
    auto it = values.find("group");
    return it == values.end() ? nullptr : &it->second;
  }
};

// Parses and checks a claim file's text. An unknown key, a key twice, a
// value that is not a string or that libvgpu would refuse, or a
// sched_region other than the node's is an error: the container must not
// start without the claim's limits.
Status ParseClaimFile(std::string_view text, const std::string& path, ClaimOptions* out);

Status ParseState(std::string_view text, ContainerState* out);
// `bundle` resolves a relative root.path.
Status ParseBundleConfig(std::string_view text, const std::string& bundle, BundleConfig* out);

// config.json's annotations over the state's (they should be the same; the
// runtime copies them, so config.json is the source).
Annotations MergedAnnotations(const ContainerState& state, const BundleConfig& config);

// Whether the container asked for vgpu: an annotation vgpu.io/*, or a VGPU_*
// variable in process.env.
bool AsksForVgpu(const Annotations& annotations, const std::vector<std::string>& env);

// The value of `name` in process.env ("NAME=VALUE" entries; the last wins, as
// in the environment a runtime builds); false if absent.
bool EnvValue(const std::vector<std::string>& env, std::string_view name, std::string* value);

// The VGPU_CONFIG file's JSON text for the container: the vgpu.io/
// annotations as options, each unless process.env sets the option's VGPU_*
// variable itself (then its value: the user's environment wins, also for
// processes that clear theirs), the group (VGPU_GROUP, else the container
// id), and every other option process.env sets by its VGPU_* name (the CDI
// spec's VGPU_REAL_LIBCUDA among them). Every value goes through libvgpu's
// own parsers (common/config); an unknown vgpu.io/ annotation or a malformed
// value is an error. A claim's options (`claim`, may be null) count as
// annotations that win over the vgpu.io/ ones, and its group replaces the
// container id as the default group.
Status BuildContainerConfig(const std::string& id, const Annotations& annotations,
                            const std::vector<std::string>& env, std::string* json_text,
                            const ClaimOptions* claim = nullptr);

// The admin's part of the container's configuration, written to
// kContainerLimitsFile: the vgpu.io/ annotations' values, the container's
// group (its id, whatever its environment asks: the group is its bucket on
// the node's scheduler) and the node's scheduler region, which libvgpu
// applies as ceilings over the container's own environment and files
// (docs/configuration.md, "Ceilings"). A claim's options (may be null)
// override the annotations', its group the container id; the scheduler
// region stays the node's.
Status BuildContainerLimits(const Annotations& annotations, const std::string& id,
                            std::string* json_text, const ClaimOptions* claim = nullptr);

// Whether libvgpu in the container will read the file: with vgpu.io/
// annotations, process.env must leave VGPU_CONFIG unset (libvgpu then reads
// kContainerConfig) or name kContainerConfig (as the CDI spec does). A
// VGPU_CONFIG naming another file is an error: limits asked for but never
// applied are worse than a container that does not start. A claim (`claim`
// true) asks for limits as annotations do.
Status CheckConfigReachable(const Annotations& annotations, const std::vector<std::string>& env,
                            bool claim = false);

// A value fit for a one-line message: control characters escaped, truncated.
std::string Printable(std::string_view s, size_t max_chars = 120);

}  // namespace vgpu::oci_hook
