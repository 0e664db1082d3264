#!/bin/bash
# What libvgpu adds to cuGraphLaunch (docs/performance.md, "Graph launches"):
# vgpu_bench_graph_launch run directly and under LD_PRELOAD=libvgpu.so (with a
# memory quota, so that graph memory is charged) in alternation, ROUNDS times;
# prints each run and the medians of each configuration and their difference
# (ns per launch) for a plain graph and for a graph with allocation/free nodes.
# Usage (from the build tree's parent): bench/graph_launch_bench.sh [--build DIR] [--rounds N]
set -eu
build=build
rounds=5
while [ $# -gt 0 ]; do
  case $1 in
  --build) build=$2; shift ;;
  --rounds) rounds=$2; shift ;;
  *) echo "usage: $0 [--build DIR] [--rounds N]" >&2; exit 2 ;;
  esac
  shift
done
BENCH=$build/bin/vgpu_bench_graph_launch
LIBVGPU=$build/lib/libvgpu.so
for f in "$BENCH" "$LIBVGPU"; do
  [ -e "$f" ] || { echo "missing $f: build the default preset first" >&2; exit 2; }
done
export LD_LIBRARY_PATH=$build/lib/vgpu/sim VGPU_SIM_NODE=vgpu-graph-launch-bench-$$
trap 'rm -f /dev/shm/vgpu-sim-vgpu-graph-launch-bench-$$* /dev/shm/vgpu-*graph-launch-bench-$$*' EXIT
out=$(mktemp)
for ((i = 0; i < rounds; i++)); do
  echo "direct $("$BENCH")" | tee -a "$out"
  echo "hooked $(LD_PRELOAD=$LIBVGPU VGPU_DEVICE_MEMORY_LIMIT=8GiB VGPU_GROUP=graph-bench-$$ "$BENCH")" | tee -a "$out"
done
awk '
  { for (i = 2; i <= NF; i++) { split($i, kv, "="); v[$1, kv[1], ++n[$1, kv[1]]] = kv[2] } }
  function median(cfg, key,   k, m, a, t, j) {
    m = n[cfg, key]
    for (k = 1; k <= m; k++) a[k] = v[cfg, key, k]
    for (k = 1; k <= m; k++) for (j = k + 1; j <= m; j++) if (a[j] < a[k]) { t = a[k]; a[k] = a[j]; a[j] = t }
    return a[int((m + 1) / 2)]
  }
  END {
    split("plain_ns memnode_ns", keys, " ")
    for (k in keys) {
      d = median("direct", keys[k]); h = median("hooked", keys[k])
      printf("%-10s direct %8.1f ns  hooked %8.1f ns  added %7.1f ns  (median of %d runs)\n",
             keys[k], d, h, h - d, n["direct", keys[k]])
    }
  }' "$out"
rm -f "$out"
