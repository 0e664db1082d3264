#!/usr/bin/env bash
# Installs the Debian packages vgpu needs, the ones missing only. Works as root
# and as a user with sudo: only the package installation is escalated, so the
# build tree stays owned by whoever runs the build.
#   scripts/install_deps.sh          what the build, the tests and the demo need
#   scripts/install_deps.sh --ci     also what CI's sanitizer and fuzz runs need
set -euo pipefail

PACKAGES=(cmake ninja-build g++ make pkg-config python3
  libelf-dev libunwind-dev libxxhash-dev libzstd-dev libspdlog-dev nlohmann-json3-dev
  libgtest-dev googletest libbenchmark-dev libcli11-dev libcpp-httplib-dev libsystemd-dev
  libssl-dev libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  python3-yaml python3-jsonschema libslurm-dev)
# podman and runc: the container end-to-end tests (tests/containers); munge,
# slurmctld, slurmd and the client commands: the Slurm end-to-end test
# (tests/slurm), which runs them on the loopback.
CI_PACKAGES=(gnuplot-nox clang libclang-rt-14-dev prometheus podman runc
  munge slurmctld slurmd slurm-client)

if [[ "${1:-}" == "--ci" ]]; then PACKAGES+=("${CI_PACKAGES[@]}"); fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "install_deps: all ${#PACKAGES[@]} packages installed"
  exit 0
fi

as_root=()
if ((EUID != 0)); then
  command -v sudo >/dev/null || {
    echo "install_deps: missing packages: ${missing[*]}; run this as root or install sudo" >&2
    exit 1
  }
  as_root=(sudo)
fi
echo "install_deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update -qq
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
  "${missing[@]}" >/dev/null
