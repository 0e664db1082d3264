#!/bin/bash
# Migration downtime on the simulated node (docs/performance.md, "Migration"):
# a job holding SIZE GiB under libvgpu (vgpu_timeslice_job: its memory filled,
# then steps of device work) is moved to device 1 and back with vgpuctl
# migrate, while it runs. For each move: the job's downtime as the driver sees
# it (locked to unlocked, vgpuctl's "stopped"; the lock first waits for the
# job's queued work, which is not downtime), the time its threads were held by
# libvgpu (the whole vgpuctl call, prepare to finish, an upper bound), the
# bytes moved, and the modelled copy time of the driver's checkpoint API
# (checkpoint at the node's ckpt= rate, restore at its restore= rate; defaults:
# driver 580 on an H100, 2.30 and 5.97 GB/s). Target (issue 14): downtime <=
# 2 x copy time + 100 ms. The job's result is checked bit for bit at the end.
# Prints one JSON object per move.
# Usage (from the build tree's parent): bench/migrate_bench.sh [--build DIR] [--gib "1 8"]
set -u
build=build
sizes="1 8"
while [ $# -gt 0 ]; do
  case $1 in
  --build) build=$2; shift ;;
  --gib) sizes=$2; shift ;;
  *) echo "usage: $0 [--build DIR] [--gib \"1 8\"]" >&2; exit 2 ;;
  esac
  shift
done
VGPUCTL=$build/bin/vgpuctl
JOB=$build/bin/vgpu_timeslice_job
LIBVGPU=$build/lib/libvgpu.so
SIM_DIR=$build/lib/vgpu/sim
for f in "$VGPUCTL" "$JOB" "$LIBVGPU"; do
  [ -e "$f" ] || { echo "missing $f: build the default preset first" >&2; exit 2; }
done
work=$(mktemp -d /tmp/vgpu-migrate-bench.XXXXXX)
trap '[ -n "${job:-}" ] && kill -9 $job 2>/dev/null; rm -rf "$work" /dev/shm/vgpu-sim-vgpu-migrate-bench-$$*' EXIT
export LD_LIBRARY_PATH=$SIM_DIR VGPU_VMM=on VGPU_RUN_DIR=$work/run
mkdir -p "$VGPU_RUN_DIR" && chmod 700 "$VGPU_RUN_DIR"
ckpt_bps=2300000000
restore_bps=5970000000
status=0

now_ms() { echo $(($(date +%s%N) / 1000000)); }

for gib in $sizes; do
  export VGPU_SIM_NODE=vgpu-migrate-bench-$$-$gib
  export VGPU_SIM_DEVICES=2x$((gib + 2))GiB
  mib=$((gib * 1024))
  # A few long steps (each touches all of the job's memory on the host, the
  # simulated kernel's work): the moves fall between them.
  LD_PRELOAD=$LIBVGPU "$JOB" "$mib" 8 500 >"$work/job.out" 2>&1 &
  job=$!
  for _ in $(seq 1 3000); do grep -q allocated "$work/job.out" && break; sleep 0.02; done
  grep -q allocated "$work/job.out" || { cat "$work/job.out"; exit 1; }
  for to in 1 0; do
    t0=$(now_ms)
    "$VGPUCTL" migrate "$job" --to $to --json >"$work/m.json" 2>"$work/m.err" || {
      cat "$work/m.err"; exit 1; }
    held=$(($(now_ms) - t0))
    python3 - "$work/m.json" "$mib" "$to" "$held" "$ckpt_bps" "$restore_bps" <<'EOF' || status=1
import json, sys
m = json.load(open(sys.argv[1]))
b = int(sys.argv[2]) << 20
copy_ms = (b / float(sys.argv[5]) + b / float(sys.argv[6])) * 1e3
stopped = m["stopped_ms"]
held = float(sys.argv[4])
target = 2 * copy_ms + 100
print(json.dumps({"bench": "migrate", "bytes": b, "to": int(sys.argv[3]),
                  "stopped_ms": round(stopped, 1), "held_ms": round(held, 1),
                  "modelled_copy_ms": round(copy_ms, 1),
                  "stopped_over_copy": round(stopped / copy_ms, 3),
                  "overhead_ms": round(stopped - copy_ms, 1),
                  "held_over_copy": round(held / copy_ms, 3),
                  "target_ms": round(target, 1), "met": stopped <= target}))
sys.exit(0 if stopped <= target else 1)
EOF
  done
  wait "$job"
  rc=$?
  job=
  grep -q "errors=0" "$work/job.out" && [ $rc = 0 ] || { echo "job result wrong: $(cat "$work/job.out")"; status=1; }
  rm -f "/dev/shm/vgpu-sim-$VGPU_SIM_NODE"
done
exit $status
