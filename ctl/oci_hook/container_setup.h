// What vgpu-oci-hook prepares besides the container's two files
// (docs/containers.md, "The OCI hook"): the driver libraries findable by
// soname, and a run directory that is the container's own. Both run at
// createContainer, in the container's mount namespace before pivot_root.
#pragma once

#include <sys/types.h>

#include <string>

#include "common/status.h"

namespace vgpu::oci_hook {

// When the rootfs has kContainerDriverDir (the CDI spec mounted the driver
// there), lists it in /etc/ld.so.conf.d/000-vgpu.conf (writing an
// /etc/ld.so.conf that includes that directory when the image has none) and
// rebuilds the image's loader cache with the host's static ldconfig chrooted
// into the rootfs: programs that link or dlopen libcuda.so.1 by name (cudart)
// find it, with or without their environment. Nothing to do otherwise.
Status MakeDriverFindable(int rootfs_fd, const std::string& rootfs);

// Creates <host_run_dir>/containers/<id> (mode 0700, owned by uid:gid, the
// container's user) and bind mounts it (nosuid, nodev, noexec) at
// host_run_dir's path inside the rootfs: the container's agents listen there
// and see no other container's or the host's sockets; the host's vgpuctl and
// vgpud find them under containers/. host_run_dir must be a directory owned
// by root (created 0700 if missing). The hook must run in the container's
// mount namespace (createContainer), else nothing is mounted.
Status ExposeRunDir(const std::string& host_run_dir, const std::string& id, uid_t uid, gid_t gid,
                    int rootfs_fd);

// Removes what ExposeRunDir made on the host once the container is gone
// (poststop): its directory and the sockets its agents left (a killed process
// leaves its socket). Nothing there is no error.
Status RemoveRunDir(const std::string& host_run_dir, const std::string& id);

}  // namespace vgpu::oci_hook
