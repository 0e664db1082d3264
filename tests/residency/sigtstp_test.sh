#!/bin/bash
# Suspend on SIGTSTP (VGPU_SUSPEND_ON_SIGTSTP) on the simulated node, with a
# job holding 1 GiB of device memory (residency_client bigfill):
#   sigtstp_test.sh stop      kill -TSTP: the device memory is freed and the job ends
#                             stopped (state T); kill -CONT: it resumes, checksum intact
#   sigtstp_test.sh stop_mid  kill -TSTP then 0.1 s later kill -STOP (Slurm when the copy
#                             outlasts its delay), then kill -CONT: checksum intact
#   sigtstp_test.sh handler   a program with its own SIGTSTP handler: the memory is
#                             freed, its handler is called, it is not stopped; vgpuctl
#                             resume brings the memory back and the SIGCONT after it ends
#   sigtstp_test.sh bench [MiB] prints the time from kill -TSTP to the device memory
#                             freed (measured outside, and libvgpu's own log line)
# Environment (from CMake): LIBVGPU CLIENT SIM_DIR KERNELS VGPUCTL
set -u
mode=$1
mib=${2:-1024}
work=$(mktemp -d /tmp/vgpu-tstp-test.XXXXXX)
trap 'rm -rf "$work"; [ -n "${child:-}" ] && kill -9 $child 2>/dev/null; rm -f "/dev/shm/vgpu-sim-$VGPU_SIM_NODE"' EXIT
export LD_LIBRARY_PATH=$SIM_DIR
export VGPU_SIM_KERNELS=$KERNELS
export VGPU_SIM_NODE=vgpu-tstp-$mode-$$
export VGPU_SIM_DEVICES=1x2GiB
export VGPU_RUN_DIR=$work/run
mkdir -p "$VGPU_RUN_DIR"
fail() {
  echo "FAIL: $*"
  cat "$work/job.out" "$work/vgpu.log" 2>/dev/null
  exit 1
}
wait_ready() {
  for _ in $(seq 1 1000); do
    grep -q ready "$work/job.out" && return 0
    kill -0 $child 2>/dev/null || fail "job exited before ready"
    sleep 0.02
  done
  fail "job not ready"
}
free_mib() { "$CLIENT" meminfo | sed -n 's/^free=\([0-9]*\) .*/\1/p' | awk '{print int($1 / 1048576)}'; }
state() { sed 's/.*) //' "/proc/$1/stat" | cut -d' ' -f1; }
# wait_state PID STATE: up to 20 s.
wait_state() {
  for _ in $(seq 1 2000); do [ "$(state "$1")" = "$2" ] && return 0; sleep 0.01; done
  fail "pid $1 in state $(state "$1"), want $2"
}
wait_running() {
  for _ in $(seq 1 2000); do [ "$(state "$1")" != T ] && return 0; sleep 0.01; done
  fail "pid $1 still stopped"
}
# wait_free MIN: until at least MIN MiB of the device are free (20 s).
wait_free() {
  for _ in $(seq 1 400); do [ "$(free_mib)" -ge "$1" ] && return 0; sleep 0.05; done
  fail "device memory not released: $(free_mib) MiB free, want >= $1"
}
start_job() {
  VGPU_SUSPEND_ON_SIGTSTP=on VGPU_LOG_LEVEL=info VGPU_LOG_FILE=$work/vgpu.log \
    LD_PRELOAD=$LIBVGPU "$CLIENT" bigfill "$mib" "$work/stop" >"$work/job.out" 2>&1 &
  child=$!
  wait_ready
  total=$(("$("$CLIENT" meminfo | sed -n 's/.*total=\([0-9]*\).*/\1/p')" / 1048576))
  held=$((total - $(free_mib)))
  [ "$held" -ge "$mib" ] || fail "job holds $held MiB, want >= $mib"
}
finish_job() {
  touch "$work/stop"
  wait $child
  st=$?
  child=
  cat "$work/job.out"
  [ $st -eq 0 ] || fail "job exit $st (checksum bad or a failed call)"
  grep -q "checksum ok" "$work/job.out" || fail "no checksum line"
}

case $mode in
stop)
  start_job
  kill -TSTP $child
  wait_free $((total - 64))
  wait_state $child T
  kill -CONT $child
  wait_running $child
  finish_job
  grep -q "SIGTSTP: device memory suspended" "$work/vgpu.log" || fail "no suspend logged"
  grep -q "SIGCONT: device memory resumed" "$work/vgpu.log" || fail "no resume logged"
  ;;
stop_mid)
  # SIGSTOP 0.1 s after SIGTSTP lands in the middle of the 1 GiB copy (a
  # SIGSTOP sent together with it would be taken first, and SIGCONT would
  # discard the pending SIGTSTP).
  start_job
  kill -TSTP $child
  sleep 0.1
  kill -STOP $child
  wait_state $child T
  sleep 0.5
  kill -CONT $child
  for _ in $(seq 1 2000); do
    grep -q "SIGCONT: device memory resumed" "$work/vgpu.log" 2>/dev/null && break
    sleep 0.01
  done
  grep -q "SIGCONT: device memory resumed" "$work/vgpu.log" || fail "not resumed after SIGCONT"
  sleep 0.2
  [ "$(state $child)" != T ] || fail "stopped again after SIGCONT"
  finish_job
  ;;
handler)
  export TEST_TSTP_HANDLER=1
  start_job
  kill -TSTP $child
  wait_free $((total - 64))
  for _ in $(seq 1 500); do grep -q "program tstp handler" "$work/job.out" && break; sleep 0.01; done
  grep -q "program tstp handler" "$work/job.out" || fail "the program's handler was not called"
  [ "$(state $child)" != T ] || fail "stopped although the program handles SIGTSTP"
  "$VGPUCTL" info $child --json >"$work/info.out" 2>&1 || { cat "$work/info.out"; fail "vgpuctl info"; }
  grep -Eq '"suspended_by": ?"sigtstp"' "$work/info.out" || fail "info: $(cat "$work/info.out")"
  # Resumed by hand first: the SIGCONT then finds the memory back and ends.
  "$VGPUCTL" resume $child >"$work/ctl.out" 2>&1 || { cat "$work/ctl.out"; fail "vgpuctl resume"; }
  kill -CONT $child
  for _ in $(seq 1 2000); do grep -q "SIGCONT: device memory resumed" "$work/vgpu.log" && break; sleep 0.01; done
  grep -q "SIGCONT: device memory resumed" "$work/vgpu.log" || fail "SIGCONT did not end"
  grep -q "not back yet" "$work/vgpu.log" && fail "SIGCONT retried a resume that was done"
  finish_job
  grep -q "program_tstp=1" "$work/job.out" || fail "handler calls != 1"
  ;;
bench)
  start_job
  t0=$(date +%s.%N)
  kill -TSTP $child
  while [ "$(free_mib)" -lt $((total - 64)) ]; do :; done
  t1=$(date +%s.%N)
  wait_state $child T
  t2=$(date +%s.%N)
  kill -CONT $child
  wait_running $child
  finish_job
  echo "sigtstp_bench: ${mib} MiB: SIGTSTP to device memory freed (seen by another process)" \
    "$(echo "$t1 - $t0" | bc) s; to stopped (state T) $(echo "$t2 - $t0" | bc) s"
  grep "SIGTSTP: \|SIGCONT: \|suspended: " "$work/vgpu.log" | sed 's/^/libvgpu log: /'
  ;;
*)
  fail "unknown mode $mode"
  ;;
esac
echo PASS
