#!/bin/bash
# spank_vgpu.so's costs and the suspend path under a real Slurm 22.05
# (docs/performance.md, "Slurm"), on a simulated node of one 2 GiB GPU with
# vgpud, using tests/slurm/slurm_cluster.sh (munged, slurmctld, slurmd on the
# loopback; root only):
# - job start overhead: N `srun --gres=shard:1 true` with the plugin's line
#   in plugstack.conf and N without it (the file is read at each job start):
#   mean and median wall time of each and their ratio;
# - suspend to memory free: a job holding 256 MiB, then 1 GiB, `scontrol
#   suspend`, until NVML (through vgpud) shows the GPU's memory free, ROUNDS
#   times (resume between); "held" where the copy did not end before SIGSTOP;
# - preemption wait: a high-partition job needing 1 GiB while a low one holds
#   1 GiB and the node's CPUs: submission to its memory allocated, against the
#   same job alone.
# Usage (from the build tree's parent): bench/slurm_bench.sh [--build DIR] [--runs N] [--rounds N]
set -u
build=build
runs=20
rounds=3
while [ $# -gt 0 ]; do
  case $1 in
  --build) build=$2; shift ;;
  --runs) runs=$2; shift ;;
  --rounds) rounds=$2; shift ;;
  *) echo "usage: $0 [--build DIR] [--runs N] [--rounds N]" >&2; exit 2 ;;
  esac
  shift
done
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "$build" && pwd)
. "$here/tests/slurm/slurm_cluster.sh"
[ "$(id -u)" = 0 ] || { echo "slurm_bench: root only (slurmd)"; exit 77; }
missing=$(slurm_missing)
[ -z "$missing" ] || { echo "slurm_bench: $missing is not installed"; exit 77; }
VGPUCTL=$build/bin/vgpuctl VGPUD=$build/bin/vgpud JOB=$build/bin/vgpu_timeslice_job
SPANK=$build/lib/spank_vgpu.so LIBVGPU=$build/lib/libvgpu.so
SIM_DIR=$build/lib/vgpu/sim
work=$(mktemp -d /tmp/vgpu-slurm-bench.XXXXXX)
chmod 755 "$work"
export VGPU_SIM_NODE=vgpu-slurm-bench-$$ VGPU_SIM_DEVICES=1x2GiB VGPU_RUN_DIR=$work/run VGPU_VMM=on
export LD_LIBRARY_PATH=$SIM_DIR
mkdir -p "$VGPU_RUN_DIR" "$work/dev"
chmod 700 "$VGPU_RUN_DIR"
daemon=
cleanup() {
  slurm_cluster_stop
  [ -n "$daemon" ] && kill -9 "$daemon" 2>/dev/null
  rm -rf "$work" "/dev/shm/vgpu-sim-$VGPU_SIM_NODE"
}
trap cleanup EXIT
die() { echo "slurm_bench: $*"; slurm_cluster_logs; exit 1; }
mknod "$work/dev/nvidia0" c 195 0 || die "mknod"
"$VGPUCTL" slurm gres --shard-mem 256MiB --overcommit 2 --dev-dir "$work/dev" --plugin "$SPANK" \
  --libvgpu "$LIBVGPU" >"$work/gres.out" || die "vgpuctl slurm gres"
plugstack=$(sed -n 's/^# \(required .*\)/\1/p' "$work/gres.out")
plugstack="$plugstack priority_partition=high:high,low:low"
slurm_cluster_start "$work/slurm" "$(sed -n 's/.*Gres=\([^ ]*\).*/\1/p' "$work/gres.out")" \
  "$(grep '^Name=' "$work/gres.out")" "$plugstack" || die "Slurm did not start"
"$VGPUD" --run-dir "$VGPU_RUN_DIR" --tick 100ms --quantum 2s --metrics-listen off >"$work/vgpud.log" 2>&1 &
daemon=$!
for _ in $(seq 1 200); do [ -S "$VGPU_RUN_DIR/vgpud.sock" ] && break; sleep 0.05; done

now() { date +%s.%N; }
stats() {  # prints "mean median" (ms) of the numbers on stdin (seconds)
  python3 -c 'import sys,statistics as s; v=[float(x)*1000 for x in sys.stdin.read().split()]; print("%.1f %.1f" % (s.mean(v), s.median(v)))'
}
gpu_used() {
  "$VGPUCTL" ps --json 2>/dev/null | python3 -c '
import json,sys
d=json.load(sys.stdin); print(sum(g.get("used",0) for g in d.get("devices",[])))' 2>/dev/null
}
out() { echo "$work/slurm/job.$1.out"; }
submit() { sbatch --parsable -o "$work/slurm/job.%j.out" "$@"; }
wait_line() {  # JOB TEXT: waits for TEXT in the job's output, prints when
  for _ in $(seq 1 3000); do grep -q "$2" "$(out "$1")" 2>/dev/null && { now; return 0; }; sleep 0.01; done
  die "no '$2' from job $1"
}

# Job start overhead.
srun -c 1 --gres=shard:1 true || die "srun"
for mode in with without; do
  [ $mode = without ] && : >"$work/slurm/plugstack.conf"
  for _ in $(seq 1 "$runs"); do
    t0=$(now); srun -c 1 --gres=shard:1 true || die "srun"; t1=$(now)
    python3 -c "print($t1-$t0)"
  done >"$work/start.$mode"
done
read -r with_mean with_med < <(stats <"$work/start.with")
read -r without_mean without_med < <(stats <"$work/start.without")
echo "job start (srun --gres=shard:1 true, $runs runs): with the plugin mean ${with_mean} ms median ${with_med} ms; without mean ${without_mean} ms median ${without_med} ms; ratio of medians $(python3 -c "print(round($with_med/$without_med,3))")"
printf '%s\n' "$plugstack" >"$work/slurm/plugstack.conf"

# Suspend to memory free, 256 MiB and 1 GiB: "held" when the copy out did not
# end before Slurm's SIGSTOP (2 s after SIGTSTP) and the memory stays until
# the resume (docs/slurm.md, "overrun").
for mib in 256 1024; do
  j=$(submit -c 1 --gres=shard:8 --wrap "$JOB $mib 100000 100")
  wait_line "$j" allocated >/dev/null
  sleep 1
  : >"$work/suspend.$mib"
  for r in $(seq 1 "$rounds"); do
    t0=$(now)
    scontrol suspend "$j" || die "scontrol suspend"
    freed=held
    for _ in $(seq 1 250); do
      u=$(gpu_used)
      if [ -n "$u" ] && [ "$u" -lt $((64 << 20)) ]; then freed=$(python3 -c "print('%.2f s' % ($(now)-$t0))"); break; fi
      sleep 0.02
    done
    echo "$freed" >>"$work/suspend.$mib"
    sleep 1
    scontrol resume "$j" || die "scontrol resume"
    for _ in $(seq 1 1000); do
      u=$(gpu_used); [ -n "$u" ] && [ "$u" -ge $((mib << 20)) ] && break; sleep 0.02
    done
    sleep 1
  done
  scancel "$j"
  slurm_wait_state "$j" 'CANCELLED|COMPLETED|FAILED' 60 >/dev/null
  echo "scontrol suspend to $mib MiB free ($rounds rounds): $(paste -sd, "$work/suspend.$mib" | sed 's/,/, /g')"
done

# Preemption wait of the high job.
t0=$(now); h=$(submit -p high -c 1 --gres=shard:8 --wrap "$JOB 1024 5 100"); t1=$(wait_line "$h" allocated)
solo=$(python3 -c "print($t1-$t0)")
slurm_wait_state "$h" 'COMPLETED|FAILED' 60 >/dev/null
low=$(submit -p low -c 2 --gres=shard:8 --wrap "$JOB 1024 100000 100")
wait_line "$low" allocated >/dev/null
sleep 1
t0=$(now); h=$(submit -p high -c 1 --gres=shard:8 --wrap "$JOB 1024 5 100"); t1=$(wait_line "$h" allocated)
pre=$(python3 -c "print($t1-$t0)")
slurm_wait_state "$h" 'COMPLETED|FAILED' 60 >/dev/null
scancel "$low"
echo "preemption wait (high job, submission to 1 GiB allocated): alone $(printf %.2f "$solo") s, preempting a low job holding 1 GiB $(printf %.2f "$pre") s"
