#!/usr/bin/env bash
# vgpu demo on the simulated GPU node: installs the build dependencies if they
# are missing (from Debian, through scripts/install_deps.sh: only that step uses
# sudo, and only when not run as root), builds with the default preset, then
# trains the SGD sample from C++ and from Python on the simulated node, plain
# and under LD_PRELOAD=libvgpu.so, runs two jobs with their own quotas side by
# side, and checkpoints a running job to disk and restores it (vgpuctl).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${ROOT}/build"
if [[ -t 1 ]]; then BOLD=$'\033[1m' PLAIN=$'\033[0m'; else BOLD="" PLAIN=""; fi
section() { printf '\n%s==> %s%s\n' "${BOLD}" "$*" "${PLAIN}"; }
die() { printf 'demo.sh: error: %s\n' "$*" >&2; exit 1; }

install_dependencies() {
  section "Dependencies"
  "${ROOT}/scripts/install_deps.sh" || die "the build dependencies could not be installed"
  [[ -x /usr/local/cuda/bin/nvcc ]] || command -v nvcc >/dev/null \
    || die "the CUDA toolkit (nvcc, cuda.h) is needed, e.g. in /usr/local/cuda"
}

# What the demo runs, and nothing else: the tests and benchmarks (most of the
# 350 targets) are built by scripts/test.sh.
DEMO_TARGETS=(vgpu vgpuctl vgpud vgpu_sim_cuda vgpu_sim_nvml vgpu_sample_train
  vgpu_sample_kernels vgpu_sample_modules vgpu_timeslice_job)

build() {
  section "Configure and build what the demo runs (cmake --preset default)"
  cd "${ROOT}"
  cmake --preset default
  cmake --build --preset default --target "${DEMO_TARGETS[@]}"
}

# Environment of the simulated node used by the demo.
sim_env() {
  export LD_LIBRARY_PATH="${BUILD}/lib/vgpu/sim${LD_LIBRARY_PATH:+:${LD_LIBRARY_PATH}}"
  export VGPU_SIM_KERNELS="${BUILD}/samples/libvgpu_sample_kernels.so"
  export VGPU_SIM_NODE="${VGPU_SIM_NODE:-vgpu-demo}"
  export VGPU_SIM_DEVICES="${VGPU_SIM_DEVICES:-2x16GiB}"
}

# Prints the "checksum: 0x..." line of a training run's output file.
checksum_of() { grep -o 'checksum: 0x[0-9a-f]*' "$1"; }

# Trains from C++ and from Python (optionally under LD_PRELOAD) and checks that
# both print the same checksum.
run_samples() {
  local preload="$1" label="$2"
  local cubin="${BUILD}/samples/sgd_kernels.cubin"
  local -a pre=()
  [[ -z "${preload}" ]] || pre=("LD_PRELOAD=${preload}")
  section "C++ training loop (vgpu_sample_train)${label}"
  env "${pre[@]}" "${BUILD}/samples/vgpu_sample_train" --steps 100 --report-every 20 \
    "${cubin}" | tee "${TMP}/cc.out"
  section "Python training loop (python3 samples/train.py, ctypes)${label}"
  env "${pre[@]}" python3 "${ROOT}/samples/train.py" --steps 100 --report-every 20 \
    "${cubin}" | tee "${TMP}/py.out"
  [[ "$(checksum_of "${TMP}/cc.out")" == "$(checksum_of "${TMP}/py.out")" ]] \
    || die "the C++ and Python runs disagree"
  echo
  echo "C++ and Python agree: $(checksum_of "${TMP}/cc.out")"
}

# Two jobs share one simulated node, each with its own quota and device set,
# at the same time; each sees only what it was given.
run_two_jobs() {
  local lib="${BUILD}/lib/libvgpu.so" view="${ROOT}/samples/quota_view.py"
  section "Two jobs on one node: job A (1 GiB quota, GPUs 0,1) and job B (512 MiB quota, GPU 1 only)"
  LD_PRELOAD="${lib}" VGPU_GROUP="demo-a-$$" VGPU_DEVICE_MEMORY_LIMIT=1GiB \
    python3 "${view}" "job A" --alloc 600 600 --hold 2 > "${TMP}/a.out" &
  local a=$!
  LD_PRELOAD="${lib}" VGPU_GROUP="demo-b-$$" VGPU_DEVICE_MEMORY_LIMIT=512MiB VGPU_VISIBLE_DEVICES=1 \
    python3 "${view}" "job B" --alloc 256 300 --hold 2 > "${TMP}/b.out" &
  local b=$!
  # Each job's ledger exists once it has initialized CUDA (slower on a busy machine).
  local g
  for g in "demo-a-$$" "demo-b-$$"; do
    for _ in $(seq 1 200); do
      [[ -e "/dev/shm/vgpu-ledger-$(id -u)-${g}" ]] && break
      sleep 0.05
    done
  done
  sleep 0.5
  echo "while both run, their quota groups:"
  "${BUILD}/bin/vgpuctl" quota "demo-a-$$" | sed 's/^/  A: /'
  "${BUILD}/bin/vgpuctl" quota "demo-b-$$" | sed 's/^/  B: /'
  wait "${a}" "${b}"
  cat "${TMP}/a.out" "${TMP}/b.out"
  echo "the node itself (no libvgpu) still sees every device at full size:"
  python3 "${view}" "node"
}

# Two jobs whose memory does not fit on one GPU together both finish under
# vgpud, which time-slices the device: the second job's allocation waits while
# vgpud suspends the first, and they take turns of one quantum each.
run_timeslicing() {
  local lib="${BUILD}/lib/libvgpu.so" ctl="${BUILD}/bin/vgpuctl" job="${BUILD}/bin/vgpu_timeslice_job"
  section "Two jobs that do not fit together on a 1 GiB GPU, time-sliced by vgpud (quantum 3 s)"
  local run="${TMP}/run-ts"
  mkdir -p "${run}" && chmod 700 "${run}"
  export VGPU_RUN_DIR="${run}" VGPU_VMM=on
  local node="${VGPU_SIM_NODE}" devices="${VGPU_SIM_DEVICES}"
  export VGPU_SIM_NODE="vgpu-demo-ts-$$" VGPU_SIM_DEVICES=1x1GiB
  "${BUILD}/bin/vgpud" --run-dir "${run}" --quantum 3s --tick 100ms --metrics-listen off \
    2> "${TMP}/vgpud.log" &
  local daemon=$!
  for _ in $(seq 1 200); do [[ -S "${run}/vgpud.sock" ]] && break; sleep 0.02; done
  echo "\$ LD_PRELOAD=libvgpu.so vgpu_timeslice_job 640 8 400 &   # twice: 2 x 640 MiB on a 1 GiB GPU"
  LD_PRELOAD="${lib}" "${job}" 640 8 400 > "${TMP}/ts-a.out" 2>&1 &
  local a=$!
  LD_PRELOAD="${lib}" "${job}" 640 8 400 > "${TMP}/ts-b.out" 2>&1 &
  local b=$!
  sleep 2.5
  echo "\$ vgpuctl top --once"
  "${ctl}" top --once || true
  wait "${a}" || die "job A failed: $(cat "${TMP}/ts-a.out")"
  wait "${b}" || die "job B failed: $(cat "${TMP}/ts-b.out")"
  echo "job A: $(cat "${TMP}/ts-a.out" | tail -1)"
  echo "job B: $(cat "${TMP}/ts-b.out" | tail -1)"
  echo "\$ vgpuctl events"
  "${ctl}" events
  kill "${daemon}"
  wait "${daemon}" 2>/dev/null || true
  rm -f "/dev/shm/vgpu-sim-${VGPU_SIM_NODE}"
  export VGPU_SIM_NODE="${node}" VGPU_SIM_DEVICES="${devices}"
  unset VGPU_RUN_DIR VGPU_VMM
}

# A training job is checkpointed to disk while it runs (its device memory is
# released meanwhile) and restored with vgpuctl; its final checksum must equal
# that of an uninterrupted run. Agent sockets go to a private run directory,
# so this needs no root.
run_checkpoint_restore() {
  local lib="${BUILD}/lib/libvgpu.so" ctl="${BUILD}/bin/vgpuctl"
  local train="${BUILD}/samples/vgpu_sample_train" cubin="${BUILD}/samples/sgd_kernels.cubin"
  local -a args=(--steps 300 --report-every 100 --sleep-ms 5 "${cubin}")
  section "Checkpoint and restore a running job (VGPU_VMM=on, vgpuctl checkpoint / restore)"
  "${train}" "${args[@]}" > "${TMP}/ref.out"
  echo "uninterrupted run:         $(checksum_of "${TMP}/ref.out")"
  export VGPU_RUN_DIR="${TMP}/run"
  mkdir -p "${VGPU_RUN_DIR}"
  VGPU_VMM=on LD_PRELOAD="${lib}" "${train}" "${args[@]}" > "${TMP}/job.out" &
  local job=$! i
  for ((i = 0; i < 500; ++i)); do  # the agent listens once the job has called cuInit
    [[ -S "${VGPU_RUN_DIR}/agent-${job}.sock" ]] && break
    sleep 0.01
  done
  sleep 0.3
  echo "\$ vgpuctl checkpoint ${job} --dir ${TMP}/ckpt"
  "${ctl}" checkpoint "${job}" --dir "${TMP}/ckpt" -q
  echo "\$ vgpuctl ps    # suspended: device memory released (the quota charge stays), CUDA calls wait"
  "${ctl}" ps
  ls -l "${TMP}/ckpt"
  sleep 0.5
  echo "\$ vgpuctl restore ${job} --from ${TMP}/ckpt"
  "${ctl}" restore "${job}" --from "${TMP}/ckpt" -q
  wait "${job}" || die "the restored job failed: $(cat "${TMP}/job.out")"
  unset VGPU_RUN_DIR
  echo "checkpointed and restored: $(checksum_of "${TMP}/job.out")"
  [[ "$(checksum_of "${TMP}/ref.out")" == "$(checksum_of "${TMP}/job.out")" ]] \
    || die "the restored job's checksum differs from the uninterrupted run"
  echo "same result as the uninterrupted run"
}

main() {
  install_dependencies
  build
  sim_env
  TMP="$(mktemp -d)"
  trap 'rm -rf "${TMP}"' EXIT
  section "Simulated node '${VGPU_SIM_NODE}': VGPU_SIM_DEVICES=${VGPU_SIM_DEVICES}"
  echo "libcuda.so.1 from ${BUILD}/lib/vgpu/sim; kernels run through ${VGPU_SIM_KERNELS}"
  run_samples "" " on the simulated node"
  if [[ -f "${BUILD}/lib/libvgpu.so" ]]; then
    run_samples "${BUILD}/lib/libvgpu.so" " under LD_PRELOAD=libvgpu.so"
    run_two_jobs
    run_checkpoint_restore
    run_timeslicing
  else
    section "libvgpu.so not built; skipping the interposed run"
  fi
  section "Done"
}

main "$@"
