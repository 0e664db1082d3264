#!/bin/bash
# End-to-end residency tests on the simulated node (tests/residency/CMakeLists.txt).
#   residency_test.sh train       checkpoint + restore of the sample mid-run: same checksum
#   residency_test.sh migrate_faults  a fault at each driver step; a stranded job recovered
#   residency_test.sh migrate_chip    a target of another chip type is refused, the job runs on
#   residency_test.sh migrate_two     a job on devices 0 and 1 moved onto 2 and 3 (--map)
#   residency_test.sh migrate_busy    three round trips of a job whose 4 threads work on its memory
#   residency_test.sh restore_device  checkpoint on device 0, restore --device 1: same checksum
#   residency_test.sh migrate     vgpuctl migrate of the sample to device 1 and back: same
#                                 checksum, quota charge and UUID follow; a failed restore
#                                 onto the target leaves it running
#   residency_test.sh cycles N    N suspend/resume cycles under concurrent CUDA calls
#   residency_test.sh corrupt     damaged image refused, process stays suspended, good image works
#   residency_test.sh suspended_restore
#                                 restores into a suspended process: a damaged image is refused
#                                 and resume gives the data back; one that fails midway leaves it
#                                 checkpointed on the image, and resume restores from it
#   residency_test.sh resume_retry
#                                 a resume whose copy fails stays suspended; the retry brings all back
#   residency_test.sh pitch       off VMM, cuMemAllocPitch memory makes suspend/checkpoint refuse
#   residency_test.sh ctx_drain   suspend drains a created context that allocated nothing but has
#                                 work queued on another context's memory
#   residency_test.sh green_drain the same for work queued on a green context's stream
#   residency_test.sh two_jobs    two jobs checkpointed into one directory keep an image each and
#                                 both restore with their own data; another job's image (or any
#                                 file) at a job's image name is never replaced; a job may
#                                 replace its own image
#   residency_test.sh counters    a quota refusal and a suspend/resume show in vgpuctl info's
#                                 counters (--json and text)
#   residency_test.sh default_dir without --dir, the image goes to a private
#                                 $TMPDIR/vgpu-checkpoints-<uid>/<pid>; an unsafe base is refused
# Environment (from CMake): VGPUCTL LIBVGPU CLIENT TRAIN CUBIN SIM_DIR KERNELS
set -u
mode=$1
work=$(mktemp -d /tmp/vgpu-res-test.XXXXXX)
# $child: pids. The simulated node's region goes too (each run names its own).
trap 'rm -rf "$work"; [ -n "${child:-}" ] && kill -9 $child 2>/dev/null; rm -f "/dev/shm/vgpu-sim-$VGPU_SIM_NODE"' EXIT
export LD_LIBRARY_PATH=$SIM_DIR
export VGPU_SIM_KERNELS=$KERNELS
export VGPU_SIM_NODE=vgpu-res-$mode-$$
export VGPU_SIM_DEVICES=${VGPU_SIM_DEVICES:-2x1GiB}
export VGPU_RUN_DIR=$work/run
mkdir -p "$VGPU_RUN_DIR"
fail() { echo "FAIL: $*"; exit 1; }
ctl() { "$VGPUCTL" "$@" >"$work/ctl.out" 2>&1 || { cat "$work/ctl.out"; return 1; }; }
wait_agent() {  # the agent starts after cuInit
  for _ in $(seq 1 500); do
    [ -S "$VGPU_RUN_DIR/agent-$1.sock" ] && return 0
    sleep 0.01
  done
  fail "no agent socket for pid $1"
}
wait_ready() {  # the client prints "ready" once its buffers are filled
  for _ in $(seq 1 500); do grep -q ready "$1" && return 0; sleep 0.01; done
  cat "$1"
  fail "client not ready"
}
# expect_busy VERB PID WHAT [ARGS...]: vgpuctl VERB refuses (busy: exit 5)
# and names the non-migratable memory the process holds (WHAT, for the message).
expect_busy() {
  local verb=$1 pid=$2 what=$3 st
  shift 3
  "$VGPUCTL" "$verb" "$pid" "$@" >"$work/ctl.out" 2>&1; st=$?
  cat "$work/ctl.out"
  [ $st -eq 5 ] || fail "$verb of a process holding $what: exit $st, want 5"
  grep -q non-migratable "$work/ctl.out" || fail "refusal does not name the non-migratable memory"
}
start_time() { sed 's/.*) //' "/proc/$1/stat" | cut -d' ' -f20; }  # field 22, after comm
image_of() { echo "$1/vgpu-$2-$(start_time "$2").vgpuckpt"; }  # DIR PID: its checkpoint image
# mem free|total VAR: sets VAR to a reading of the simulated device; an empty
# reading fails the test (two empty readings must not compare equal).
mem() {
  local v
  v=$("$CLIENT" meminfo | sed -n "s/^\(.* \)\?$1=\([0-9]*\).*/\2/p")
  [ -n "$v" ] || fail "no $1 reading from the meminfo client"
  printf -v "$2" '%s' "$v"
}

# counter NAME: the value of counter NAME in $work/ctl.out (vgpuctl info --json).
counter() { grep -o "\"$1\":[0-9]*" "$work/ctl.out" | cut -d: -f2; }

case $mode in
counters)
  VGPU_VMM=on VGPU_DEVICE_MEMORY_LIMIT=64MiB LD_PRELOAD=$LIBVGPU "$CLIENT" overquota "$work/stop" \
    >"$work/q.out" 2>&1 &
  child=$!
  wait_ready "$work/q.out"
  wait_agent $child
  grep -q "refused=1" "$work/q.out" || fail "the quota did not refuse: $(cat "$work/q.out")"
  ctl info $child --json || fail "info"
  [ "$(counter allocations_refused)" = 1 ] || fail "allocations_refused: $(cat "$work/ctl.out")"
  [ "$(counter quota_charged_bytes)" -ge $((40 << 20)) ] || fail "quota_charged_bytes too small"
  [ "$(counter suspends)" = 0 ] && [ "$(counter resumes)" = 0 ] || fail "suspended already?"
  ctl suspend $child || fail "suspend"
  ctl resume $child || fail "resume"
  ctl info $child --json || fail "info after resume"
  [ "$(counter suspends)" = 1 ] && [ "$(counter resumes)" = 1 ] || fail "suspend/resume not counted: $(cat "$work/ctl.out")"
  [ "$(counter suspend_bytes)" -ge $((40 << 20)) ] || fail "suspend_bytes too small"
  [ "$(counter resume_ns)" -gt 0 ] || fail "resume_ns not counted"
  [ "$(counter allocations_refused)" = 1 ] || fail "allocations_refused changed"
  ctl info $child || fail "info (text)"
  grep -Eq "^  suspends +1 operations$" "$work/ctl.out" || fail "text output: $(cat "$work/ctl.out")"
  grep -Eq "^  allocations_refused +1 allocations$" "$work/ctl.out" || fail "text output"
  touch "$work/stop"
  wait $child; st=$?; child=
  [ $st -eq 0 ] || fail "client failed: $(cat "$work/q.out")"
  ;;
allocations)
  # VGPU_TRACE_ALLOCATIONS: vgpuctl info --allocations names the call site that
  # holds the 40 MiB, and the quota refusal's log line names its call site.
  VGPU_TRACE_ALLOCATIONS=on VGPU_LOG_FILE="$work/vgpu.log" VGPU_VMM=on VGPU_DEVICE_MEMORY_LIMIT=64MiB \
    LD_PRELOAD=$LIBVGPU "$CLIENT" overquota "$work/stop" >"$work/q.out" 2>&1 &
  child=$!
  wait_ready "$work/q.out"
  wait_agent $child
  client=$(basename "$CLIENT")
  ctl info $child --allocations || fail "info --allocations"
  grep -Eq "^ +40 MiB +1 +1  $client" "$work/ctl.out" || fail "no call site holding 40 MiB: $(cat "$work/ctl.out")"
  ctl info $child --json || fail "info --json"
  grep -q "\"allocations\":\[{" "$work/ctl.out" || fail "no allocations in --json"
  grep -q "out of device memory quota.* at $client" "$work/vgpu.log" || fail "refusal without call site: $(cat "$work/vgpu.log")"
  touch "$work/stop"
  wait $child; st=$?; child=
  [ $st -eq 0 ] || fail "client failed: $(cat "$work/q.out")"
  # Off: no call sites, and the text says how to turn them on.
  rm -f "$work/stop"
  VGPU_VMM=on LD_PRELOAD=$LIBVGPU "$CLIENT" overquota "$work/stop" >"$work/q.out" 2>&1 &
  child=$!
  wait_ready "$work/q.out"
  wait_agent $child
  ctl info $child --allocations || fail "info --allocations (off)"
  grep -q "not traced" "$work/ctl.out" || fail "tracing off: $(cat "$work/ctl.out")"
  touch "$work/stop"
  wait $child; child=
  ;;
train)
  ref=$("$TRAIN" --steps 200 --sleep-ms 5 "$CUBIN" | grep '^checksum') || fail "reference run"
  VGPU_VMM=on LD_PRELOAD=$LIBVGPU "$TRAIN" --steps 200 --sleep-ms 5 "$CUBIN" >"$work/train.out" 2>&1 &
  child=$!
  wait_agent $child
  sleep 0.3
  mem free before
  ctl checkpoint $child --dir "$work/ckpt" || fail "checkpoint"
  mem free during
  echo "device free before checkpoint $before, while checkpointed $during"
  [ "$during" -gt "$before" ] || fail "device memory not released while checkpointed"
  sleep 0.2
  ctl restore $child --from "$work/ckpt" || fail "restore"
  wait $child || { cat "$work/train.out"; fail "training failed after restore"; }
  child=
  got=$(grep '^checksum' "$work/train.out")
  echo "reference $ref, checkpointed+restored $got"
  [ "$ref" = "$got" ] || fail "checksum differs"
  ;;
migrate)
  # vgpuctl migrate: the sample training moved to device 1 mid-run and back
  # finishes with the checksum of an uninterrupted run; its quota charge and
  # its device's UUID follow it. Then a restore onto the target that fails
  # (injected into vgpuctl's driver calls) leaves it running where it was.
  ref=$("$TRAIN" --steps 300 --sleep-ms 5 "$CUBIN" | grep '^checksum') || fail "reference run"
  VGPU_VMM=on VGPU_DEVICE_MEMORY_LIMIT=512MiB VGPU_GROUP=mig-$$ LD_PRELOAD=$LIBVGPU \
    "$TRAIN" --steps 300 --sleep-ms 5 "$CUBIN" >"$work/train.out" 2>&1 &
  child=$!
  wait_agent $child
  sleep 0.3
  ctl info $child --json || fail "info"
  uuid0=$(grep -o '"uuid":"[^"]*"' "$work/ctl.out" | head -1)
  ctl migrate $child --to 1 || fail "migrate to 1"
  cat "$work/ctl.out"
  grep -q "to GPU 1" "$work/ctl.out" || fail "no migration line"
  "$VGPUCTL" quota mig-$$ >"$work/quota.out"
  cat "$work/quota.out"
  # DEVICE LIMIT-number unit USED-number unit
  awk '$1 == 1 && $2 == 512 && $4 != 0 {ok=1} END {exit !ok}' "$work/quota.out" ||
    fail "the quota and the charge did not follow the job to device 1"
  awk '$1 == 0 && $4 != 0 {bad=1} END {exit bad}' "$work/quota.out" || fail "charge left on device 0"
  ctl info $child --json || fail "info after"
  uuid1=$(grep -o '"uuid":"[^"]*"' "$work/ctl.out" | head -1)
  [ "$uuid0" != "$uuid1" ] || fail "the job's device UUID did not change ($uuid0)"
  sleep 0.2
  ctl migrate $child --to 0 || fail "migrate back to 0"
  cat "$work/ctl.out"
  sleep 0.1
  VGPU_SIM_FAULTS=cuCheckpointProcessRestore:1:2 "$VGPUCTL" migrate $child --to 1 \
    >"$work/fault.out" 2>&1 && fail "an injected restore failure reported success"
  cat "$work/fault.out"
  grep -q "runs where it was" "$work/fault.out" || fail "no recovery message"
  wait $child || { cat "$work/train.out"; fail "training failed after migrations"; }
  child=
  got=$(grep '^checksum' "$work/train.out")
  echo "reference $ref, migrated twice $got"
  [ "$ref" = "$got" ] || fail "checksum differs"
  ;;
migrate_faults)
  # A fault injected into vgpuctl's driver call at each step of a migration.
  ref=$("$TRAIN" --steps 300 --sleep-ms 5 "$CUBIN" | grep '^checksum') || fail "reference run"
  VGPU_VMM=on LD_PRELOAD=$LIBVGPU "$TRAIN" --steps 300 --sleep-ms 5 "$CUBIN" >"$work/train.out" 2>&1 &
  child=$!
  wait_agent $child
  sleep 0.2
  for f in cuCheckpointProcessLock:1:600 cuCheckpointProcessCheckpoint:1:999; do
    VGPU_SIM_FAULTS=$f "$VGPUCTL" migrate $child --to 1 >"$work/f.out" 2>&1 && fail "$f: reported success"
    grep -q "runs where it was" "$work/f.out" || fail "$f: $(cat "$work/f.out")"
  done
  # The first unlock fails: asked again, the move succeeds.
  VGPU_SIM_FAULTS=cuCheckpointProcessUnlock:1:999 "$VGPUCTL" migrate $child --to 1 >"$work/f.out" 2>&1 ||
    fail "a failed unlock was not retried: $(cat "$work/f.out")"
  # Both restores fail: the job is left CHECKPOINTED, and migrate recovers it.
  VGPU_SIM_FAULTS=cuCheckpointProcessRestore:1:2,cuCheckpointProcessRestore:2:2 \
    "$VGPUCTL" migrate $child --to 0 >"$work/f.out" 2>&1 && fail "a stranded job reported success"
  cat "$work/f.out"
  grep -q "CHECKPOINTED" "$work/f.out" || fail "no stranded message"
  grep -q "vgpuctl migrate $child --to DEVICE" "$work/f.out" || fail "no recovery command named"
  sleep 0.3
  ctl migrate $child --to 0 || fail "recovery by migrate"
  cat "$work/ctl.out"
  wait $child || { cat "$work/train.out"; fail "training failed after the faults"; }
  child=
  got=$(grep '^checksum' "$work/train.out")
  echo "reference $ref, after the faults $got"
  [ "$ref" = "$got" ] || fail "checksum differs"
  ;;
migrate_chip)
  # A target of another chip type (108 SMs against 132): the driver refuses
  # the restore there and the job runs on where it was, its result intact.
  export VGPU_SIM_DEVICES=1x1GiB,1x1GiB:sm=108
  ref=$("$TRAIN" --steps 200 --sleep-ms 5 "$CUBIN" | grep '^checksum') || fail "reference run"
  VGPU_VMM=on LD_PRELOAD=$LIBVGPU "$TRAIN" --steps 200 --sleep-ms 5 "$CUBIN" >"$work/train.out" 2>&1 &
  child=$!
  wait_agent $child
  sleep 0.2
  "$VGPUCTL" migrate $child --to 1 >"$work/f.out" 2>&1 && fail "a move to another chip type succeeded"
  cat "$work/f.out"
  grep -q "CUDA_ERROR_NOT_SUPPORTED.*runs where it was" "$work/f.out" || fail "$(cat "$work/f.out")"
  wait $child || { cat "$work/train.out"; fail "training failed"; }
  child=
  [ "$ref" = "$(grep '^checksum' "$work/train.out")" ] || fail "checksum differs"
  ;;
migrate_two)
  # A job on devices 0 and 1 remapped onto 2 and 3 (--map), its data intact.
  export VGPU_SIM_DEVICES=4x1GiB
  VGPU_VMM=on LD_PRELOAD=$LIBVGPU "$CLIENT" twodev "$work/stop" >"$work/two.out" 2>&1 &
  child=$!
  wait_ready "$work/two.out"
  wait_agent $child
  ctl migrate $child --map 0:2,1:3 || fail "migrate --map 0:2,1:3"
  cat "$work/ctl.out"
  [ "$(grep -c '^migrated' "$work/ctl.out")" = 2 ] || fail "two moves expected"
  ctl info $child --json || fail "info"
  "$CLIENT" meminfo >/dev/null  # the node still answers
  touch "$work/stop"
  wait $child || { cat "$work/two.out"; fail "data wrong after the remap"; }
  child=
  grep -q "errors=0" "$work/two.out" || fail "$(cat "$work/two.out")"
  ;;
migrate_busy)
  # Migrations of a job whose 4 threads copy, memset and verify all along.
  VGPU_VMM=on LD_PRELOAD=$LIBVGPU "$CLIENT" hold 4 "$work/stop" >"$work/hold.out" 2>&1 &
  child=$!
  wait_ready "$work/hold.out"
  wait_agent $child
  for i in 1 2 3; do
    ctl migrate $child --to 1 || fail "migrate to 1 (round $i)"
    ctl migrate $child --to 0 || fail "migrate to 0 (round $i)"
  done
  cat "$work/ctl.out"
  touch "$work/stop"
  wait $child || { cat "$work/hold.out"; fail "the busy job saw wrong data"; }
  child=
  cat "$work/hold.out"
  grep -q "errors=0" "$work/hold.out" || fail "$(cat "$work/hold.out")"
  ;;
restore_device)
  # vgpuctl restore --device 1: a job checkpointed on device 0 comes back on
  # device 1 (its contexts move first), with the uninterrupted run's checksum.
  ref=$("$TRAIN" --steps 200 --sleep-ms 5 "$CUBIN" | grep '^checksum') || fail "reference run"
  VGPU_VMM=on LD_PRELOAD=$LIBVGPU "$TRAIN" --steps 200 --sleep-ms 5 "$CUBIN" >"$work/train.out" 2>&1 &
  child=$!
  wait_agent $child
  sleep 0.3
  ctl info $child --json || fail "info"
  uuid0=$(grep -o '"uuid":"[^"]*"' "$work/ctl.out" | head -1)
  ctl checkpoint $child --dir "$work/ckpt" || fail "checkpoint"
  ctl restore $child --from "$work/ckpt" --device 1 || fail "restore --device 1"
  cat "$work/ctl.out"
  grep -q "moved $child to GPU 1" "$work/ctl.out" || fail "the job was not moved"
  ctl info $child --json || fail "info after"
  uuid1=$(grep -o '"uuid":"[^"]*"' "$work/ctl.out" | head -1)
  [ "$uuid0" != "$uuid1" ] || fail "the job's device UUID did not change ($uuid0)"
  wait $child || { cat "$work/train.out"; fail "training failed after restore"; }
  child=
  got=$(grep '^checksum' "$work/train.out")
  echo "reference $ref, restored onto device 1 $got"
  [ "$ref" = "$got" ] || fail "checksum differs"
  ;;
cycles)
  n=$2
  VGPU_VMM=on LD_PRELOAD=$LIBVGPU "$CLIENT" hold 4 "$work/stop" >"$work/hold.out" 2>&1 &
  child=$!
  wait_ready "$work/hold.out"
  wait_agent $child
  mem free base
  for i in $(seq 1 "$n"); do
    ctl suspend $child || fail "suspend $i"
    if [ $((i % 10)) -eq 1 ]; then
      mem free free
      [ "$free" -gt "$base" ] || fail "cycle $i: device memory not released ($free <= $base)"
      # Everything, the chunk of the buffer it freed before "ready" included
      # (the VMM cache of freed chunks must not survive a suspend).
      mem total total
      [ "$free" -eq "$total" ] || fail "cycle $i: device memory still held while suspended ($free free)"
    fi
    ctl resume $child || fail "resume $i"
  done
  touch "$work/stop"
  wait $child; st=$?; child=
  cat "$work/hold.out"
  [ $st -eq 0 ] || fail "client saw wrong data or failed calls"
  ;;
corrupt)
  VGPU_VMM=on LD_PRELOAD=$LIBVGPU "$CLIENT" hold 2 "$work/stop" >"$work/hold.out" 2>&1 &
  child=$!
  wait_ready "$work/hold.out"
  wait_agent $child
  ctl checkpoint $child --dir "$work/good" || fail "checkpoint"
  good=$(image_of "$work/good" $child)
  [ -f "$good" ] || { ls -l "$work/good"; fail "no image $good"; }
  mkdir -p "$work/bad"
  bad=$(image_of "$work/bad" $child)
  cp "$good" "$bad"
  size=$(stat -c %s "$bad")
  printf '\xff\xff\xff\xff' | dd of="$bad" bs=1 seek=$((size / 2)) conv=notrunc status=none
  mem free released
  if "$VGPUCTL" restore $child --from "$work/bad" >"$work/ctl.out" 2>&1; then fail "damaged image accepted"; fi
  cat "$work/ctl.out"
  "$VGPUCTL" ps --json >"$work/ps.out" 2>&1
  grep -q suspended "$work/ps.out" || { cat "$work/ps.out"; fail "process not suspended after refused restore"; }
  # Damage in the last frame: restore verifies frame by frame while it maps
  # and copies, so by then nearly everything is on the device; the refusal
  # must release it all again.
  cp "$good" "$bad"
  tables=$(tail -c 64 "$bad" | od -An -tu8 -N8 | tr -d ' ')
  # Inverted, not overwritten: a fixed value would leave the image intact
  # whenever the byte already held it (1 run in 256).
  at=$((tables - 7))
  byte=$(od -An -tu1 -j "$at" -N1 "$bad" | tr -d ' ')
  printf "\\$(printf '%03o' $((byte ^ 0xff)))" | dd of="$bad" bs=1 seek="$at" conv=notrunc status=none
  cmp -s "$good" "$bad" && fail "the damage changed nothing"
  if "$VGPUCTL" restore $child --from "$work/bad" >"$work/ctl.out" 2>&1; then fail "image with a damaged last frame accepted"; fi
  cat "$work/ctl.out"
  grep -q "stays suspended" "$work/ctl.out" || fail "refusal does not say the process stays suspended"
  mem free after
  echo "device free while checkpointed $released, after the refused restore $after"
  [ "$after" = "$released" ] || fail "refused restore left device memory mapped"
  : >"$bad"
  if "$VGPUCTL" restore $child --from "$work/bad" >/dev/null 2>&1; then fail "truncated image accepted"; fi
  ctl restore $child --from "$work/good" || fail "restore from the good image"
  sleep 0.2
  touch "$work/stop"
  wait $child; st=$?; child=
  cat "$work/hold.out"
  [ $st -eq 0 ] || fail "client saw wrong data after restore"
  ;;
suspended_restore)
  # The 4th cuMemcpyHtoDAsync of the process fails: the client makes none,
  # the refused restore none (it fails verifying), the resume between them
  # one per chunk (3: the 2 MiB chunk of the small buffers, 3 MiB's and
  # 8 MiB's, each one piece), so it hits the second restore below, after the
  # image was verified and the host copies dropped.
  VGPU_VMM=on VGPU_SIM_FAULTS=cuMemcpyHtoDAsync_v2:4:999 LD_PRELOAD=$LIBVGPU \
    "$CLIENT" hold 2 "$work/stop" >"$work/hold.out" 2>&1 &
  child=$!
  wait_ready "$work/hold.out"
  wait_agent $child
  mem total total
  ctl checkpoint $child --dir "$work/good" --leave-running || fail "checkpoint"
  ctl suspend $child || fail "suspend"
  mkdir -p "$work/bad"
  bad=$(image_of "$work/bad" $child)
  cp "$(image_of "$work/good" $child)" "$bad"
  size=$(stat -c %s "$bad")
  printf '\xff\xff\xff\xff' | dd of="$bad" bs=1 seek=$((size / 2)) conv=notrunc status=none
  if "$VGPUCTL" restore $child --from "$work/bad" >"$work/ctl.out" 2>&1; then fail "damaged image accepted"; fi
  cat "$work/ctl.out"
  "$VGPUCTL" ps --json >"$work/ps.out" 2>&1
  grep -q suspended "$work/ps.out" || { cat "$work/ps.out"; fail "process not suspended after refused restore"; }
  # The refusal must not have touched the host copies: resume brings them back.
  ctl resume $child || fail "resume after the refused restore"
  sleep 0.2
  ctl suspend $child || fail "second suspend"
  if "$VGPUCTL" restore $child --from "$work/good" >"$work/ctl.out" 2>&1; then
    fail "restore with a failing copy succeeded (was VGPU_SIM_FAULTS applied?)"
  fi
  cat "$work/ctl.out"
  grep -q "its memory is in" "$work/ctl.out" || fail "a midway failure does not say where the memory is"
  "$VGPUCTL" ps --json >"$work/ps.out" 2>&1
  grep -q suspended "$work/ps.out" || { cat "$work/ps.out"; fail "process not suspended after failed restore"; }
  mem free free
  [ "$free" = "$total" ] || fail "failed restore left device memory mapped ($free of $total free)"
  # The host copies are gone: resume must restore from the verified image.
  ctl resume $child || fail "resume after the failed restore"
  sleep 0.2
  touch "$work/stop"
  wait $child; st=$?; child=
  cat "$work/hold.out"
  [ $st -eq 0 ] || fail "client saw wrong data after resume"
  ;;
resume_retry)
  # The client makes no cuMemcpyHtoDAsync call (it copies synchronously):
  # the first is resume's copy of the first chunk.
  VGPU_VMM=on VGPU_SIM_FAULTS=cuMemcpyHtoDAsync_v2:1:999 LD_PRELOAD=$LIBVGPU \
    "$CLIENT" hold 2 "$work/stop" >"$work/hold.out" 2>&1 &
  child=$!
  wait_ready "$work/hold.out"
  wait_agent $child
  ctl suspend $child || fail "suspend"
  if "$VGPUCTL" resume $child >"$work/ctl.out" 2>&1; then fail "resume with a failing copy succeeded"; fi
  cat "$work/ctl.out"
  grep -q "still suspended" "$work/ctl.out" || fail "a failed resume does not say the process is still suspended"
  "$VGPUCTL" ps --json >"$work/ps.out" 2>&1
  grep -q suspended "$work/ps.out" || { cat "$work/ps.out"; fail "process not suspended after failed resume"; }
  ctl resume $child || fail "retried resume"
  sleep 0.2
  touch "$work/stop"
  wait $child; st=$?; child=
  cat "$work/hold.out"
  [ $st -eq 0 ] || fail "client saw wrong data after the retried resume"
  ;;
pitch)
  # Off VMM, pitched memory is the driver's: suspend cannot move it, so it
  # must refuse (busy: exit 5) rather than leave it behind, as for cuMemAlloc.
  VGPU_VMM=off LD_PRELOAD=$LIBVGPU "$CLIENT" pitch "$work/stop" >"$work/pitch.out" 2>&1 &
  child=$!
  wait_ready "$work/pitch.out"
  wait_agent $child
  expect_busy suspend $child "pitched driver memory"
  expect_busy checkpoint $child "pitched driver memory" --dir "$work/ckpt"
  touch "$work/stop"
  wait $child; st=$?; child=
  [ $st -eq 0 ] || { cat "$work/pitch.out"; fail "pitch client failed"; }
  ;;
graph_memory)
  # Graph memory a launch holds is the driver's: suspend refuses (busy, exit 5);
  # once the allocation is freed, the pool's cached copy is trimmed and the
  # process suspends and resumes.
  VGPU_VMM=on LD_PRELOAD=$LIBVGPU "$CLIENT" graphmem "$work/stop" >"$work/graph.out" 2>&1 &
  child=$!
  wait_ready "$work/graph.out"
  wait_agent $child
  expect_busy suspend $child "graph memory"
  touch "$work/stop.1"
  for _ in $(seq 1 500); do grep -q freed "$work/graph.out" && break; sleep 0.01; done
  grep -q freed "$work/graph.out" || { cat "$work/graph.out"; fail "client did not free"; }
  ctl suspend $child || fail "suspend after the graph allocation was freed"
  ctl resume $child || fail "resume"
  touch "$work/stop.2"
  wait $child; st=$?; child=
  [ $st -eq 0 ] || { cat "$work/graph.out"; fail "graphmem client failed"; }
  ;;
green_drain)
  VGPU_VMM=on LD_PRELOAD=$LIBVGPU "$CLIENT" greenwork "$work/stop" >"$work/ctx.out" 2>&1 &
  child=$!
  wait_ready "$work/ctx.out"
  wait_agent $child
  ctl suspend $child || fail "suspend"
  sleep 0.6  # past the fill: without the drain it lands on released memory
  ctl resume $child || fail "resume"
  touch "$work/stop"
  wait $child; st=$?; child=
  cat "$work/ctx.out"
  [ $st -eq 0 ] || fail "the green context's work was lost or faulted across suspend (exit $st)"
  ;;
ctx_drain)
  # The fill runs ~400 ms after "ready": a suspend that did not drain the
  # second context would copy the buffer out before it and release it under
  # the kernel (a fault, or the old contents after resume).
  VGPU_VMM=on LD_PRELOAD=$LIBVGPU "$CLIENT" ctxwork "$work/stop" >"$work/ctx.out" 2>&1 &
  child=$!
  wait_ready "$work/ctx.out"
  wait_agent $child
  # The agent reports the version it was built as, the same as vgpuctl's.
  want=$("$VGPUCTL" version | awk '{print $NF}')
  ctl info $child --json || fail "info"
  grep -q "\"version\": *\"$want\"" "$work/ctl.out" || { cat "$work/ctl.out"; fail "agent version is not $want"; }
  ctl suspend $child || fail "suspend"
  sleep 0.6  # past the fill: without the drain it lands on released memory
  ctl resume $child || fail "resume"
  touch "$work/stop"
  wait $child; st=$?; child=
  cat "$work/ctx.out"
  [ $st -eq 0 ] || fail "the second context's work was lost or faulted across suspend (exit $st)"
  ;;
two_jobs)
  # The jobs' data differ (the client seeds its pattern with its pid): a job
  # restored from the other's image fails its own verification.
  VGPU_VMM=on LD_PRELOAD=$LIBVGPU "$CLIENT" hold 2 "$work/stop" >"$work/a.out" 2>&1 &
  a=$!
  VGPU_VMM=on LD_PRELOAD=$LIBVGPU "$CLIENT" hold 2 "$work/stop" >"$work/b.out" 2>&1 &
  b=$!
  child="$a $b"
  wait_ready "$work/a.out"
  wait_ready "$work/b.out"
  wait_agent $a
  wait_agent $b
  ctl checkpoint $a --dir "$work/ckpt" || fail "checkpoint of job A"
  ctl checkpoint $b --dir "$work/ckpt" || fail "checkpoint of job B"
  ls -l "$work/ckpt"
  ctl restore $a --from "$work/ckpt" || fail "restore of job A"
  ctl restore $b --from "$work/ckpt" || fail "restore of job B"
  [ -f "$(image_of "$work/ckpt" $a)" ] || fail "job A's image is not named after it"
  [ -f "$(image_of "$work/ckpt" $b)" ] || fail "job B's image is not named after it"
  # A directory without the job's image: none is taken instead, the others are named.
  mkdir -p "$work/other"
  cp "$(image_of "$work/ckpt" $a)" "$work/other/"
  if "$VGPUCTL" restore $b --from "$work/other" >"$work/ctl.out" 2>&1; then
    fail "job B restored from a directory holding only job A's image"
  fi
  cat "$work/ctl.out"
  grep -q "vgpu-$a-" "$work/ctl.out" || fail "the refusal does not name the image that is there"
  # A file at a job's image name that the job did not write is never
  # replaced, and the job keeps running.
  mkdir -p "$work/taken"
  echo "someone else's" >"$(image_of "$work/taken" $b)"
  if "$VGPUCTL" checkpoint $b --dir "$work/taken" >"$work/ctl.out" 2>&1; then
    fail "checkpoint replaced a file it did not write"
  fi
  cat "$work/ctl.out"
  grep -q "refusing to replace" "$work/ctl.out" || fail "the refusal does not say why"
  [ "$(cat "$(image_of "$work/taken" $b)")" = "someone else's" ] || fail "the file was changed"
  "$VGPUCTL" info $b >"$work/ctl.out" 2>&1
  grep -q "state *running" "$work/ctl.out" || { cat "$work/ctl.out"; fail "job B not running"; }
  # Its own image a job may replace (atomically), and restore from it.
  ctl checkpoint $a --dir "$work/ckpt" || fail "second checkpoint of job A into the same directory"
  ctl restore $a --from "$work/ckpt" || fail "restore of job A from its replaced image"
  sleep 0.2
  touch "$work/stop"
  wait $a; sa=$?
  wait $b; sb=$?
  child=
  cat "$work/a.out" "$work/b.out"
  [ $sa -eq 0 ] || fail "job A saw wrong data after its restore"
  [ $sb -eq 0 ] || fail "job B saw wrong data after its restore"
  ;;
default_dir)
  # Without --dir the image goes to $TMPDIR/vgpu-checkpoints-<uid>/<pid>. A
  # base another user could write to (pre-created world-writable here) is
  # refused and the job keeps running; once it is private, the checkpoint
  # lands there and restores.
  export TMPDIR=$work/tmp
  base=$TMPDIR/vgpu-checkpoints-$(id -u)
  mkdir -p "$base"
  chmod 0777 "$base"
  VGPU_VMM=on LD_PRELOAD=$LIBVGPU "$CLIENT" hold 2 "$work/stop" >"$work/a.out" 2>&1 &
  child=$!
  wait_ready "$work/a.out"
  wait_agent $child
  if "$VGPUCTL" checkpoint $child >"$work/ctl.out" 2>&1; then
    fail "checkpoint into a default directory writable by others"
  fi
  cat "$work/ctl.out"
  grep -q "writable" "$work/ctl.out" || fail "the refusal does not say why"
  [ -z "$(ls -A "$base")" ] || fail "something was written into the unsafe directory"
  "$VGPUCTL" info $child >"$work/ctl.out" 2>&1
  grep -q "state *running" "$work/ctl.out" || { cat "$work/ctl.out"; fail "job not running"; }
  chmod 0700 "$base"
  ctl checkpoint $child || fail "checkpoint into the default directory"
  [ -f "$(image_of "$base/$child" $child)" ] || { ls -lR "$base"; fail "no image in $base/$child"; }
  ctl restore $child || fail "restore from the default directory"
  touch "$work/stop"
  wait $child; st=$?
  child=
  [ $st -eq 0 ] || fail "job saw wrong data after its restore"
  ;;
*) fail "unknown mode $mode" ;;
esac
echo PASS
