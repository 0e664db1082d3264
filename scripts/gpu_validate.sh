#!/usr/bin/env bash
# The checks that need a real GPU (docs/gpu-validation.md), as one script:
#   1. the portable conformance suite on the real driver, then under
#      LD_PRELOAD=libvgpu.so with VMM off and on;
#   2. unmodified PyTorch under libvgpu: the quota, the compute share, and a
#      live job suspended, resumed, checkpointed and restored with vgpuctl;
#   3. the interposer and residency benchmarks against the real driver.
# Prints "STEP <name> ok|FAIL" and the torch "RESULT" lines; logs go to $OUT.
#
#   scripts/gpu_validate.sh pack DIR   copy what the run needs out of build/
#                                      (stripped, same absolute paths under
#                                      DIR/build) for a machine without a build
#   scripts/gpu_validate.sh run [conformance|migrate]
#                                      run the checks (build/ must hold them;
#                                      "conformance": the first part only;
#                                      "migrate": it and vgpuctl migrate of a
#                                      live torch job onto the same GPU)
# VGPU_DRIVER_DIR names the directory of the real libcuda.so.1 (default: from
# ldconfig); TAR_TO=FILE.tgz packs the logs at the end. VGPU_GPU_SKIP_TORCH=1 leaves PyTorch out (to try the script on
# the simulator: VGPU_DRIVER_DIR=build/lib/vgpu/sim).
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=$ROOT/build
CONF=$B/tests/conformance

pack() {
  local dst=$1 f
  rm -rf "$dst" && mkdir -p "$dst"
  for f in lib/libvgpu.so bin/vgpuctl bin/vgpu_bench_interposer bin/vgpu_bench_residency \
           tests/residency/vgpu_residency_client \
           tests/conformance/conformance_tests tests/conformance/conformance_nvml_tests \
           tests/conformance/conformance_child tests/conformance/conformance_kernels.cubin \
           tests/conformance/conformance_kernels.fatbin; do
    [ -e "$B/$f" ] || { echo "missing $B/$f (build it first)" >&2; return 1; }
    mkdir -p "$dst/build/$(dirname "$f")"
    case $f in
      *.cubin|*.fatbin) cp "$B/$f" "$dst/build/$f" ;;
      *) strip --strip-debug -o "$dst/build/$f" "$B/$f" ;;
    esac
  done
  echo "$ROOT" > "$dst/root"
  du -sh "$dst"
}

# The packed files expect their build-time absolute paths (baked into the
# binaries: the cubin, the child helper, libvgpu.so).
unpack() {
  local src=$1 root
  root=$(cat "$src/root")
  mkdir -p "$root/build"
  cp -a "$src/build/." "$root/build/"
  echo "$root"
}

FAILED=0
ms_since() { echo $((($(date +%s%N) - $1) / 1000000)); }

step() {  # step NAME TIMEOUT_S CMD...: runs CMD, log in $OUT/NAME.log
  local name=$1 limit=$2 t0 rc
  shift 2
  t0=$(date +%s%N)
  timeout -k 5 "$limit" "$@" > "$OUT/$name.log" 2>&1
  rc=$?
  echo "STEP $name $([ $rc = 0 ] && echo ok || echo FAIL) rc=$rc $(ms_since "$t0") ms"
  [ $rc = 0 ] || { FAILED=1; tail -n 25 "$OUT/$name.log"; }
  grep -h '^RESULT\|^RATE\|tests, listed below\|PASSED\|SKIPPED' "$OUT/$name.log" | head -n 20
}

conformance() {
  local t
  for t in conformance_tests conformance_nvml_tests; do
    step "gpu.$t" 120 env VGPU_CONFORMANCE_TARGET=gpu LD_LIBRARY_PATH="$DRV" \
      "$CONF/$t" --gtest_filter='-Sim*' --gtest_brief=1
  done
  for vmm in off on; do
    step "gpu.conformance_under_preload_vmm_$vmm" 120 env VGPU_CONFORMANCE_TARGET=gpu \
      LD_LIBRARY_PATH="$DRV" LD_PRELOAD="$B/lib/libvgpu.so" VGPU_VMM=$vmm \
      "$CONF/conformance_tests" --gtest_filter="-Sim*$([ $vmm = on ] && echo ':StreamOrderedAllocTest.CreatedPool:PoolReservationTest.*:PointerSetAttributeTest.*')" \
      --gtest_brief=1
  done
}

torch_checks() {
  local py="python3 $ROOT/tests/gpu/torch_check.py" pre="$B/lib/libvgpu.so"
  step gpu.nvidia_smi_under_quota 30 env LD_PRELOAD="$pre" VGPU_DEVICE_MEMORY_LIMIT=4GiB \
    nvidia-smi --query-gpu=memory.total,memory.used,memory.free --format=csv
  cat "$OUT/gpu.nvidia_smi_under_quota.log"
  step gpu.torch_quota 90 env LD_PRELOAD="$pre" VGPU_DEVICE_MEMORY_LIMIT=4GiB \
    $py quota $((4 << 30))
  step gpu.torch_rate_direct 45 $py rate 5
  step gpu.torch_rate_hooked 45 env LD_PRELOAD="$pre" $py rate 5
  step gpu.torch_rate_share50 45 env LD_PRELOAD="$pre" VGPU_COMPUTE_SHARE=50 $py rate 5
  step gpu.torch_rate_share25 45 env LD_PRELOAD="$pre" VGPU_COMPUTE_SHARE=25 $py rate 5
  export -f torch_residency smi_used timed ms_since
  export B ROOT OUT
  step gpu.torch_suspend_checkpoint 150 bash -c torch_residency
  grep -v '^RESULT' "$OUT/gpu.torch_suspend_checkpoint.log"
}

smi_used() {  # device memory the process holds, as nvidia-smi sees it
  nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits |
    awk -F', ' -v p="$1" '$1 == p {print $2 " MiB"}'
}

timed() {  # timed LABEL CMD...: runs CMD, prints its wall time
  local t0 rc
  t0=$(date +%s%N)
  "${@:2}"
  rc=$?
  echo "$1: rc=$rc $(ms_since "$t0") ms"
  return $rc
}

torch_residency() {
  local run=/tmp/vgpu-gpu-run ck=/tmp/vgpu-gpu-ck stop=/tmp/vgpu-gpu-stop log=$OUT/hold.out pid rc=0
  rm -rf "$run" "$ck" "$stop" && mkdir -p "$run" "$ck"
  export VGPU_RUN_DIR=$run
  LD_PRELOAD="$B/lib/libvgpu.so" python3 "$ROOT/tests/gpu/torch_check.py" hold 16384 "$stop" \
    > "$log" 2>&1 &
  pid=$!
  for _ in $(seq 600); do grep -q ready "$log" && break; sleep 0.1; done
  grep ready "$log" || { cat "$log"; return 1; }
  echo "running: $(smi_used $pid)"
  timed suspend "$B/bin/vgpuctl" suspend "$pid" -q || rc=1
  echo "suspended: $(smi_used $pid)"
  sleep 2
  timed resume "$B/bin/vgpuctl" resume "$pid" -q || rc=1
  echo "resumed: $(smi_used $pid)"
  sleep 1
  timed checkpoint "$B/bin/vgpuctl" checkpoint "$pid" --dir "$ck" -q || rc=1
  echo "checkpointed (released): $(smi_used $pid); image: $(du -sh "$ck" | cut -f1)"
  timed restore "$B/bin/vgpuctl" restore "$pid" --from "$ck" -q || rc=1
  echo "restored: $(smi_used $pid)"
  "$B/bin/vgpuctl" info "$pid" --json > "$OUT/hold_info.json" || rc=1
  sleep 1
  touch "$stop"
  wait "$pid" || rc=1
  cat "$log"
  return $rc
}

# vgpuctl migrate of a live torch job onto the same GPU (the one GPU of a
# lent machine): libvgpu's prepare/finish around the driver's lock,
# checkpoint, restore with a GPU pair and unlock, on a real r580+ driver.
torch_migrate() {
  local run=/tmp/vgpu-gpu-mig stop=/tmp/vgpu-gpu-mig-stop log=$OUT/migrate_hold.out pid rc=0 i
  rm -rf "$run" "$stop" && mkdir -p "$run" && chmod 700 "$run"
  export VGPU_RUN_DIR=$run
  LD_PRELOAD="$B/lib/libvgpu.so" python3 "$ROOT/tests/gpu/torch_check.py" hold 4096 "$stop" \
    > "$log" 2>&1 &
  pid=$!
  for _ in $(seq 600); do grep -q ready "$log" && break; sleep 0.1; done
  grep ready "$log" || { cat "$log"; return 1; }
  for i in 1 2; do
    timed "migrate$i" "$B/bin/vgpuctl" migrate "$pid" --to 0 --json || rc=1
    echo "after migrate $i: $(smi_used $pid)"
    sleep 1
  done
  touch "$stop"
  wait "$pid" || rc=1
  cat "$log"
  return $rc
}

benches() {
  step gpu.bench_interposer 120 "$B/bin/vgpu_bench_interposer" --libcuda "$DRV/libcuda.so.1" \
    --module "$CONF/conformance_kernels.cubin" --kernel conf_sleep_ns --batches 300 \
    --alloc-batches 200 --contention-seconds 1 --json "$OUT/interposer.json"
  step gpu.bench_residency 150 "$B/bin/vgpu_bench_residency" --mib 4096 --rounds 2 \
    --dir /tmp/vgpu-gpu-residency --driver-dir "$DRV"
  sed -n '/^single process, pass/,$p' "$OUT/gpu.bench_interposer.log"
  tail -n 16 "$OUT/gpu.bench_residency.log"
}

run() {
  [ "${1:-}" = conformance ] && ONLY_CONFORMANCE=1
  OUT=${OUT:-/tmp/vgpu-gpu-validate}
  mkdir -p "$OUT"
  DRV=${VGPU_DRIVER_DIR:-$(dirname "$(ldconfig -p | awk '$1 == "libcuda.so.1" {print $NF; exit}')")}
  DRV=$(cd "$DRV" && pwd)
  echo "date: $(date -u +%FT%TZ)  driver dir: $DRV"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -n 2
  conformance
  if [ "${1:-}" = migrate ]; then
    export -f torch_migrate smi_used timed ms_since
    export B ROOT OUT
    step gpu.torch_migrate_same_gpu 120 bash -c torch_migrate
    cat "$OUT/gpu.torch_migrate_same_gpu.log"
    ONLY_CONFORMANCE=1
  fi
  if [ -z "${ONLY_CONFORMANCE:-}" ]; then
    [ "${VGPU_GPU_SKIP_TORCH:-0}" = 1 ] || torch_checks
    benches
  fi
  echo "overall: $([ $FAILED = 0 ] && echo ok || echo FAIL)"
  [ -z "${TAR_TO:-}" ] || { tar czf /tmp/vgpu-gpu-logs.tgz -C "$OUT" . && mv /tmp/vgpu-gpu-logs.tgz "$TAR_TO"; }
  return $FAILED
}

case ${1:-} in
  pack) pack "${2:?pack DIR}" ;;
  unpack) unpack "${2:?unpack DIR}" ;;
  run) run "${2:-}" ;;
  *) sed -n '2,17p' "$0"; exit 2 ;;
esac
