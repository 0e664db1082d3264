// Paths inside a container that vgpu prepares, shared by the CDI spec
// (ctl/cdi), the OCI hook (ctl/oci_hook) and libvgpu's configuration
// (common/config): declared once, here.
#pragma once

#include <cstdint>
#include <string>

namespace vgpu {

// Where the CDI spec mounts libvgpu, and what the hook preloads by default:
// a directory of ours, so nothing of the image is shadowed.
inline constexpr const char* kContainerLibvgpu = "/usr/lib/vgpu/libvgpu.so";
// Where the CDI spec mounts the driver libraries (and what they need besides
// glibc); the hook adds it to the container's loader cache.
inline constexpr const char* kContainerDriverDir = "/usr/lib/vgpu/driver";
// The hook's entry listing it for the loader.
inline constexpr const char* kContainerLdConf = "/etc/ld.so.conf.d/000-vgpu.conf";
// The file the hook writes (the container's limits and group). The CDI spec
// points VGPU_CONFIG at it, and libvgpu reads it when VGPU_CONFIG is unset.
inline constexpr const char* kContainerConfigFile = "/etc/vgpu/container.json";
// The admin's part of it (annotations; next the DRA claim): ceilings that the
// container's own environment and files may only tighten. Root-owned, 0644.
inline constexpr const char* kContainerLimitsFile = "/etc/vgpu/limits.json";
// The node's admin file of ceilings (root-owned; absent: none), at the same
// path on the host and, mounted read-only by the CDI spec, in containers: an
// image's own copy cannot stand in for it.
inline constexpr const char* kNodeConfigFile = "/etc/vgpu/node.json";
// The node's scheduler region (shm name; share/sched_region.h): /dev/shm/vgpu-sched
// on the host, mounted at the same path in containers by the CDI spec.
inline constexpr const char* kNodeSchedRegion = "/vgpu-sched";
// The Slurm plugin's admin files (cluster/slurm, docs/slurm.md): one per job
// and uid on the node, written by spank_vgpu.so in slurmstepd (root, 0644),
// removed by its job epilog. libvgpu reads the one of its job and uid. Not
// under root's run directory /run/vgpu, which is 0700: every job's uid must
// reach its file.
inline constexpr const char* kSlurmJobDir = "/run/vgpu-slurm";
// "/run/vgpu-slurm/job-<job_id>.<uid>.json".
inline std::string SlurmJobFile(uint32_t job_id, uint32_t uid) {
  return std::string(kSlurmJobDir) + "/job-" + std::to_string(job_id) + "." + std::to_string(uid) +
         ".json";
}

}  // namespace vgpu
