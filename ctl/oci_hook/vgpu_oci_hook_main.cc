// vgpu-oci-hook: the OCI runtime hook that makes libvgpu load in every
// process of a container that asked for vgpu (docs/containers.md, "The OCI
// hook"). The runtime writes the container state to stdin; the hook reads the
// bundle's config.json, and writes the container's /etc/vgpu/container.json
// (its VGPU_CONFIG) and /etc/ld.so.preload.
//
// Exit codes: 0 done (or nothing to do), 1 failed (the runtime then fails the
// container: fail closed), 2 bad arguments.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <string_view>

#include "ctl/oci_hook/container_setup.h"
#include "ctl/oci_hook/oci_state.h"
#include "ctl/oci_hook/preload_file.h"

namespace vgpu::oci_hook {
namespace {

constexpr const char* kUsage =
    "usage: vgpu-oci-hook [--cdi] [--preload PATH] [--run-dir DIR] [--claim FILE]   (container "
    "state JSON on stdin)\n"
    "       vgpu-oci-hook --poststop --run-dir DIR";

struct Options {
  bool cdi = false;       // injected by our CDI spec: the container asked for vgpu
  bool poststop = false;  // the container is gone: remove its run directory
  std::string preload{kDefaultPreload};
  // The host's run directory: the container gets a directory of its own
  // under it, mounted at its path (none without the option).
  std::string run_dir;
  // A host file of the claim's options (the DRA plugin's, one per prepared
  // ResourceClaim): they override the annotations. Empty: none.
  std::string claim;
};

int Fail(const std::string& message) {
  std::fprintf(stderr, "vgpu-oci-hook: %s\n", message.c_str());
  return 1;
}

// A preload entry must be one absolute path the loader reads as one entry.
bool ValidPreload(std::string_view path) {
  return !path.empty() && path[0] == '/' &&
         path.find_first_of(" \t\n\r\f\v:") == std::string_view::npos &&
         Printable(path, path.size()) == path;
}

bool ParseArgs(int argc, char** argv, Options* out) {
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--cdi") {
      out->cdi = true;
    } else if (arg == "--poststop") {
      out->poststop = true;
    } else if (arg == "--preload" && i + 1 < argc && ValidPreload(argv[i + 1])) {
      out->preload = argv[++i];
    } else if (arg == "--run-dir" && i + 1 < argc && argv[i + 1][0] == '/') {
      out->run_dir = argv[++i];
    } else if (arg == "--claim" && i + 1 < argc && argv[i + 1][0] == '/' &&
               Printable(argv[i + 1], std::strlen(argv[i + 1])) == argv[i + 1]) {
      out->claim = argv[++i];
    } else {
      return false;
    }
  }
  return !out->poststop || (!out->run_dir.empty() && out->claim.empty());
}

Status ReadStdin(std::string* out) {
  char buf[8192];
  while (true) {
    ssize_t n = ::read(STDIN_FILENO, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::Error(ErrorCode::kIo, std::string("stdin: ") + std::strerror(errno));
    if (n == 0) return Status::Ok();
    if (out->size() + static_cast<size_t>(n) > kMaxStateBytes) {
      return Status::Error(ErrorCode::kTooBig, "the container state on stdin is larger than " +
                                                   std::to_string(kMaxStateBytes) + " bytes");
    }
    out->append(buf, static_cast<size_t>(n));
  }
}

Status LoadContainer(ContainerState* state, BundleConfig* config) {
  std::string text;
  Status s = ReadStdin(&text);
  if (s.ok()) s = ParseState(text, state);
  if (!s.ok()) return s;
  const std::string path = state->bundle + "/config.json";
  s = ReadRegularFile(path, kMaxBundleConfigBytes, &text);
  if (s.ok()) s = ParseBundleConfig(text, state->bundle, config);
  if (!s.ok()) s.message = "container " + Printable(state->id) + ": " + s.message;
  return s;
}

// Writes the container's limits (the admin's ceilings) and VGPU_CONFIG file,
// then its ld.so.preload: libvgpu is never preloaded without its limits. Then the driver is made
// findable and the container gets its own run directory.
// The claim file holds the admin's ceilings: only its writer (root, or the
// user the hook runs as) may have been able to write it.
Status CheckClaimFileOwner(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return Status::Error(ErrorCode::kNoEnt, "claim file " + path + ": " + std::strerror(errno));
  }
  if ((st.st_uid != 0 && st.st_uid != ::geteuid()) || (st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return Status::Error(ErrorCode::kPerm, "claim file " + path +
                                               " may be written by others than its owner or is "
                                               "not root's: refused");
  }
  return Status::Ok();
}

int Act(const Options& opt, const ContainerState& state, const BundleConfig& config) {
  const std::string id = Printable(state.id);
  std::string file, limits;
  const Annotations annotations = MergedAnnotations(state, config);
  // A claim file that cannot be read or checked fails the container: it
  // would otherwise start without the claim's limits.
  ClaimOptions claim;
  Status s;
  if (!opt.claim.empty()) {
    std::string text;
    s = CheckClaimFileOwner(opt.claim);
    if (s.ok()) s = ReadRegularFile(opt.claim, kMaxClaimFileBytes, &text);
    if (!s.ok()) s.message = "claim file " + s.message;
    if (s.ok()) s = ParseClaimFile(text, opt.claim, &claim);
  }
  const ClaimOptions* claimed = opt.claim.empty() ? nullptr : &claim;
  if (s.ok()) s = BuildContainerConfig(state.id, annotations, config.env, &file, claimed);
  if (s.ok()) s = BuildContainerLimits(annotations, state.id, &limits, claimed);
  if (s.ok()) s = CheckConfigReachable(annotations, config.env, claimed != nullptr);
  Fd rootfs;
  if (s.ok()) s = OpenRootfs(config.rootfs, &rootfs);
  if (!s.ok()) return Fail("container " + id + ": " + s.message);
  s = CheckRegularFile(rootfs.get(), opt.preload);
  if (s.code == ErrorCode::kNoEnt) {
    return Fail("container " + id + " asks for vgpu but " + opt.preload +
                " is not in its root file system: use --device vgpu.io/gpu=N (CDI) or mount it");
  }
  // The ceilings before anything else: libvgpu never runs with the
  // container's own values but without the admin's.
  if (s.ok() && !limits.empty()) s = WriteContainerFile(rootfs.get(), kContainerLimitsFile, limits);
  if (s.ok()) s = WriteContainerFile(rootfs.get(), kContainerConfig, file);
  if (s.ok()) s = AddPreloadLine(rootfs.get(), opt.preload);
  if (s.ok()) s = MakeDriverFindable(rootfs.get(), config.rootfs);
  if (s.ok() && !opt.run_dir.empty()) {
    s = ExposeRunDir(opt.run_dir, state.id, static_cast<uid_t>(config.uid),
                     static_cast<gid_t>(config.gid), rootfs.get());
  }
  if (!s.ok()) return Fail("container " + id + ": " + s.message);
  return 0;
}

int Run(int argc, char** argv) {
  Options opt;
  if (!ParseArgs(argc, argv, &opt)) {
    std::fprintf(stderr, "%s\n", kUsage);
    return 2;
  }
  ContainerState state;
  BundleConfig config;
  if (opt.poststop) {
    // The bundle may be gone already: the state alone names the container.
    std::string text;
    Status s = ReadStdin(&text);
    if (s.ok()) s = ParseState(text, &state);
    if (s.ok()) s = RemoveRunDir(opt.run_dir, state.id);
    return s.ok() ? 0 : Fail(s.message);
  }
  // Even without --cdi an unreadable state or config.json is an error: the
  // hook cannot tell whether the container asked for vgpu, and a failed hook
  // is visible where a silently ungoverned container is not.
  Status s = LoadContainer(&state, &config);
  if (!s.ok()) return Fail(s.message);
  // A claim file is the orchestrator asking for vgpu, as --cdi is.
  if (!opt.cdi && opt.claim.empty() && !AsksForVgpu(MergedAnnotations(state, config), config.env)) {
    return 0;
  }
  return Act(opt, state, config);
}

}  // namespace
}  // namespace vgpu::oci_hook

int main(int argc, char** argv) {
  try {
    return vgpu::oci_hook::Run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vgpu-oci-hook: internal error: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "vgpu-oci-hook: internal error\n");
  }
  return 1;
}
