#!/bin/bash
# vgpud benchmarks on the simulated node (docs/performance.md, "vgpud"):
#   switch   the switch time (suspend one job + resume another) against the bytes moved
#   slicing  aggregate throughput of N jobs time-sliced by vgpud on one device that does not hold
#            them together, against the same jobs run back to back, at several quanta
#   high     a high-priority job's wait for memory held by a normal one, against the victim's
#            copy-out time
# Every figure is a ratio or a breakdown measured in this run. Prints one JSON object per line.
# Usage (from the build tree's parent): bench/vgpud_bench.sh [--build DIR] [--mib N] [--jobs N]
#          [--work-s S] [--quanta "2 10 30"] [--only switch|slicing|high]
set -u
build=build
mib=512
jobs=3
work_s=30
quanta="2 10 30"
only=""
while [ $# -gt 0 ]; do
  case $1 in
  --build) build=$2; shift ;;
  --mib) mib=$2; shift ;;
  --jobs) jobs=$2; shift ;;
  --work-s) work_s=$2; shift ;;
  --quanta) quanta=$2; shift ;;
  --only) only=$2; shift ;;
  *) echo "usage: $0 [--build DIR] [--mib N] [--jobs N] [--work-s S] [--quanta \"2 10 30\"] [--only switch|slicing|high]" >&2; exit 2 ;;
  esac
  shift
done
VGPUD=$build/bin/vgpud
VGPUCTL=$build/bin/vgpuctl
JOB=$build/bin/vgpu_timeslice_job
LIBVGPU=$build/lib/libvgpu.so
SIM_DIR=$build/lib/vgpu/sim
for f in "$VGPUD" "$VGPUCTL" "$JOB" "$LIBVGPU"; do
  [ -e "$f" ] || { echo "missing $f: build the default preset first" >&2; exit 2; }
done
work=$(mktemp -d /tmp/vgpud-bench.XXXXXX)
trap '[ -n "${daemon:-}" ] && kill -9 $daemon 2>/dev/null; pkill -9 -f "$JOB" 2>/dev/null; rm -rf "$work" /dev/shm/vgpu-sim-vgpud-bench-$$*' EXIT
export LD_LIBRARY_PATH=$SIM_DIR VGPU_VMM=on VGPU_RUN_DIR=$work/run
mkdir -p "$VGPU_RUN_DIR" && chmod 700 "$VGPU_RUN_DIR"
now() { date +%s.%N; }
start_daemon() {
  "$VGPUD" --run-dir "$VGPU_RUN_DIR" --tick 50ms --metrics-listen off "$@" >>"$work/vgpud.log" 2>&1 &
  daemon=$!
  for _ in $(seq 1 200); do [ -S "$VGPU_RUN_DIR/vgpud.sock" ] && return; sleep 0.02; done
  echo "vgpud did not start" >&2; exit 1
}
stop_daemon() { kill "$daemon"; wait "$daemon" 2>/dev/null; daemon=""; rm -f "$VGPU_RUN_DIR/vgpud.state"; }
run_job() {  # OUT MiB STEPS STEP_MS [env]
  local out=$1; shift
  env "${@:4}" LD_PRELOAD="$LIBVGPU" "$JOB" "$1" "$2" "$3" >"$out" 2>&1
}
# Sum of the "seconds" of events of KIND in vgpuctl events --json.
event_seconds() {
  "$VGPUCTL" events --json | python3 -c "
import json,sys
ev=json.load(sys.stdin)['events']
k=sys.argv[1]
print(sum(e.get('seconds',0) for e in ev if e['kind']==k), sum(e.get('bytes',0) for e in ev if e['kind']==k), sum(1 for e in ev if e['kind']==k))" "$1"
}

if [ -z "$only" ] || [ "$only" = switch ]; then
  for m in 64 256 1024; do
    export VGPU_SIM_NODE=vgpud-bench-$$-switch-$m VGPU_SIM_DEVICES=1x$((m * 3 / 2))MiB  # one job fits, two do not
    start_daemon --quantum 1s
    run_job "$work/a.out" "$m" 6 500 &
    a=$!
    for _ in $(seq 1 500); do grep -q allocated "$work/a.out" 2>/dev/null && break; sleep 0.02; done
    run_job "$work/b.out" "$m" 4 500 &
    b=$!
    wait $a $b
    read -r s_sec s_bytes s_n < <(event_seconds suspend)
    read -r r_sec r_bytes r_n < <(event_seconds resume)
    echo "{\"bench\":\"switch\",\"mib\":$m,\"suspends\":$s_n,\"suspend_s\":$s_sec,\"suspend_bytes\":$s_bytes,\"resumes\":$r_n,\"resume_s\":$r_sec,\"resume_bytes\":$r_bytes}"
    stop_daemon
    rm -f "/dev/shm/vgpu-sim-$VGPU_SIM_NODE"
  done
fi

if [ -z "$only" ] || [ "$only" = slicing ]; then
  steps=$((work_s * 10))
  export VGPU_SIM_DEVICES=1x$((mib * 2 + mib / 2))MiB  # two jobs fit, three do not
  export VGPU_SIM_NODE=vgpud-bench-$$-b2b
  t0=$(now)
  for i in $(seq 1 "$jobs"); do run_job "$work/s$i.out" "$mib" "$steps" 100 || exit 1; done
  b2b=$(echo "$(now) - $t0" | bc)
  rm -f "/dev/shm/vgpu-sim-$VGPU_SIM_NODE"
  for q in $quanta; do
    export VGPU_SIM_NODE=vgpud-bench-$$-q$q
    start_daemon --quantum "${q}s"
    t0=$(now)
    ps=""
    for i in $(seq 1 "$jobs"); do run_job "$work/t$i.out" "$mib" "$steps" 100 & ps="$ps $!"; done
    rc=0
    for p in $ps; do wait "$p" || rc=1; done
    sliced=$(echo "$(now) - $t0" | bc)
    read -r s_sec s_bytes s_n < <(event_seconds suspend)
    read -r r_sec r_bytes r_n < <(event_seconds resume)
    ratio=$(echo "scale=3; $b2b / $sliced" | bc)
    echo "{\"bench\":\"slicing\",\"jobs\":$jobs,\"mib\":$mib,\"work_s\":$work_s,\"quantum_s\":$q,\"back_to_back_s\":$b2b,\"time_sliced_s\":$sliced,\"throughput_ratio\":$ratio,\"suspends\":$s_n,\"suspend_s\":$s_sec,\"resumes\":$r_n,\"resume_s\":$r_sec,\"all_ok\":$((1 - rc))}"
    stop_daemon
    rm -f "/dev/shm/vgpu-sim-$VGPU_SIM_NODE"
  done
fi

if [ -z "$only" ] || [ "$only" = high ]; then
  export VGPU_SIM_NODE=vgpud-bench-$$-high VGPU_SIM_DEVICES=1x$((mib * 3 / 2 + 64))MiB
  start_daemon --quantum 600s
  run_job "$work/low.out" "$mib" 100 100 VGPU_PRIORITY=normal &
  low=$!
  for _ in $(seq 1 1000); do grep -q allocated "$work/low.out" 2>/dev/null && break; sleep 0.02; done
  t0=$(now)
  run_job "$work/high.out" "$mib" 1 1 VGPU_PRIORITY=high
  high_s=$(echo "$(now) - $t0" | bc)
  read -r s_sec s_bytes s_n < <(event_seconds suspend)
  # The high job's own run, solo, on an idle device of the same size: its wait is the difference.
  kill $low; wait $low 2>/dev/null
  stop_daemon
  rm -f "/dev/shm/vgpu-sim-$VGPU_SIM_NODE"
  export VGPU_SIM_NODE=vgpud-bench-$$-high-solo
  t0=$(now)
  run_job "$work/solo.out" "$mib" 1 1
  solo_s=$(echo "$(now) - $t0" | bc)
  wait_ms=$(echo "($high_s - $solo_s) * 1000" | bc)
  beyond_ms=$(echo "($high_s - $solo_s - $s_sec) * 1000" | bc)
  echo "{\"bench\":\"high\",\"mib\":$mib,\"high_run_s\":$high_s,\"solo_run_s\":$solo_s,\"wait_ms\":$wait_ms,\"victim_copy_out_s\":$s_sec,\"wait_beyond_copy_ms\":$beyond_ms}"
  rm -f "/dev/shm/vgpu-sim-$VGPU_SIM_NODE"
fi
