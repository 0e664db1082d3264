#!/bin/bash
# CUDA IPC with and without libvgpu on the simulated node (docs/performance.md,
# "CUDA IPC"): conformance_child's two-rank ring all-reduce (legacy handles, and
# NCCL's fd-exported cuMemCreate memory), run directly and under
# LD_PRELOAD=libvgpu.so (VGPU_VMM=on, a memory quota) in alternation, ROUNDS
# times. Prints the medians per configuration of the time one rank takes to
# open its peer's buffer (cuIpcOpenMemHandle; for fd: import + map) and of the
# time per all-reduce step, and the hooked/direct ratios.
# Usage (from the build tree's parent):
#   bench/ipc_bench.sh [--build DIR] [--rounds N] [--steps N] [--count U32S]
set -eu
build=build
rounds=5
steps=200
count=$((1 << 20))
while [ $# -gt 0 ]; do
  case $1 in
  --build) build=$2; shift ;;
  --rounds) rounds=$2; shift ;;
  --steps) steps=$2; shift ;;
  --count) count=$2; shift ;;
  *) echo "usage: $0 [--build DIR] [--rounds N] [--steps N] [--count U32S]" >&2; exit 2 ;;
  esac
  shift
done
CHILD=$build/tests/conformance/conformance_child
CUBIN=$build/tests/conformance/conformance_kernels.cubin
LIBVGPU=$build/lib/libvgpu.so
for f in "$CHILD" "$CUBIN" "$LIBVGPU"; do
  [ -e "$f" ] || { echo "missing $f: build the default preset first" >&2; exit 2; }
done
export LD_LIBRARY_PATH=$build/lib/vgpu/sim VGPU_SIM_NODE=vgpu-ipc-bench-$$ VGPU_SIM_DEVICES=2x16GiB
export VGPU_SIM_KERNELS=$(ls "$build"/tests/conformance/libconformance_kernels_host.so)
export VGPU_RUN_DIR=$(mktemp -d)
trap 'rm -rf "$VGPU_RUN_DIR"; rm -f /dev/shm/vgpu-sim-vgpu-ipc-bench-$$*' EXIT
out=$(mktemp)
run() {  # CONFIG MODE [env...]: "CONFIG MODE open_ns step_ns" per rank
  local cfg=$1 mode=$2
  shift 2
  env "$@" "$CHILD" ipcring "$mode" "$steps" "$count" "$CUBIN" |
    awk -v c="$cfg" -v m="$mode" '$3 == "result" && $4 == 0 && $5 == 0 { print c, m, $7, $6 }' |
    tee -a "$out"
}
for ((i = 0; i < rounds; i++)); do
  for mode in legacy fd; do
    run direct $mode
    run hooked $mode LD_PRELOAD="$LIBVGPU" VGPU_VMM=on VGPU_DEVICE_MEMORY_LIMIT=8GiB
  done
done
awk '
  { k = $1 SUBSEP $2; o[k, ++n[k]] = $3; s[k, n[k]] = $4 }
  function median(arr, k, m,   a, i, j, t) {
    for (i = 1; i <= m; i++) a[i] = arr[k, i]
    for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return a[int((m + 1) / 2)]
  }
  END {
    split("legacy fd", modes, " ")
    for (x = 1; x <= 2; x++) {
      md = modes[x]; d = "direct" SUBSEP md; h = "hooked" SUBSEP md
      if (n[d] == 0 || n[h] == 0) { printf("%s: no successful run\n", md); continue }
      od = median(o, d, n[d]); oh = median(o, h, n[h]); sd = median(s, d, n[d]); sh = median(s, h, n[h])
      printf("%-6s open  direct %9.1f us  hooked %9.1f us  ratio %5.2f\n", md, od / 1e3, oh / 1e3, oh / od)
      printf("%-6s step  direct %9.1f us  hooked %9.1f us  ratio %5.2f  (medians of %d rank-runs)\n",
             md, sd / 1e3, sh / 1e3, sh / sd, n[d])
    }
  }' "$out"
rm -f "$out"
