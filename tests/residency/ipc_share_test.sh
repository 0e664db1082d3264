#!/bin/bash
# Two processes sharing device memory through CUDA IPC under libvgpu (VMM on),
# on the simulated node (issue 29): a producer allocates and exports, a
# consumer opens, writes, closes. Checks the rules of docs/vmm.md "CUDA IPC":
#  - suspend and checkpoint of either side are refused (busy, exit 5) and name
#    the peer ("memory shared with PIDs ..."), and both keep running;
#  - the memory is charged once, to the producer; a free while the consumer
#    still maps it keeps the charge until the consumer closes;
#  - once nothing is shared, both suspend and resume.
#  - a two-rank ring all-reduce through IPC memory and events (legacy handles,
#    and NCCL's fd-exported cuMemCreate memory) sums right, and each rank is
#    charged for its own memory only.
# Environment (from CMake): VGPUCTL LIBVGPU CHILD SIM_DIR KERNELS CONF_KERNELS CUBIN
set -u
work=$(mktemp -d /tmp/vgpu-ipc-test.XXXXXX)
trap 'exec 7>&- 8>&-; kill -9 ${prod:-} ${cons:-} 2>/dev/null; rm -rf "$work"; rm -f "/dev/shm/vgpu-sim-$VGPU_SIM_NODE"' EXIT
export LD_LIBRARY_PATH=$SIM_DIR
export VGPU_SIM_KERNELS=$KERNELS
export VGPU_SIM_NODE=vgpu-ipc-$$
export VGPU_SIM_DEVICES=2x1GiB
export VGPU_RUN_DIR=$work/run
mkdir -p "$VGPU_RUN_DIR"
fail() { echo "FAIL: $*"; for f in "$work"/*.out; do echo "== $f"; cat "$f"; done; exit 1; }
# wait_for FILE REGEX: a line of FILE matches within 10 s.
wait_for() {
  for _ in $(seq 1 1000); do grep -qE "$2" "$1" && return 0; sleep 0.01; done
  fail "no line /$2/ in $1"
}
wait_agent() {
  for _ in $(seq 1 500); do [ -S "$VGPU_RUN_DIR/agent-$1.sock" ] && return 0; sleep 0.01; done
  fail "no agent socket for pid $1"
}
# used PID: device 0's bytes charged to the process (vgpuctl info --json).
used() {
  "$VGPUCTL" info "$1" --json >"$work/info.json" 2>&1 || fail "vgpuctl info $1"
  grep -o '"used":[0-9]*' "$work/info.json" | head -1 | cut -d: -f2
}
# refused VERB PID PEER [ARGS...]: busy (exit 5), naming PEER as the sharer.
refused() {
  local verb=$1 pid=$2 peer=$3 st
  shift 3
  "$VGPUCTL" "$verb" "$pid" "$@" >"$work/ctl.out" 2>&1; st=$?
  [ $st -eq 5 ] || fail "$verb $pid while sharing: exit $st, want 5: $(cat "$work/ctl.out")"
  grep -q "memory shared with PIDs $peer" "$work/ctl.out" ||
    fail "$verb refusal does not name $peer: $(cat "$work/ctl.out")"
}
ok() { "$VGPUCTL" "$@" >"$work/ctl.out" 2>&1 || fail "vgpuctl $*: $(cat "$work/ctl.out")"; }

BYTES=$((4 << 20))
export VGPU_VMM=on VGPU_DEVICE_MEMORY_LIMIT=256MiB
mkfifo "$work/p.in" "$work/c.in"
LD_PRELOAD=$LIBVGPU "$CHILD" ipcproduce $BYTES <"$work/p.in" >"$work/p.out" 2>&1 &
prod=$!
exec 7>"$work/p.in"
wait_for "$work/p.out" '^handle '
handle=$(sed -n 's/^handle //p' "$work/p.out")
LD_PRELOAD=$LIBVGPU "$CHILD" ipcconsume "$handle" $BYTES <"$work/c.in" >"$work/c.out" 2>&1 &
cons=$!
exec 8>"$work/c.in"
wait_for "$work/c.out" '^open '
grep -q '^open 0$' "$work/c.out" || fail "the consumer did not open the handle"
wait_agent $prod
wait_agent $cons

# Charged once: to the producer (its 4 MiB chunk), nothing to the consumer.
[ "$(used $prod)" = "$BYTES" ] || fail "producer charged $(used $prod), want $BYTES"
[ "$(used $cons)" = "0" ] || fail "consumer charged $(used $cons) for memory it opened"

refused suspend $prod $cons
refused checkpoint $prod $cons --dir "$work/ckpt"
refused suspend $cons $prod
refused checkpoint $cons $prod --dir "$work/ckpt"

# Both kept running, on the same memory.
echo "write 7" >&8
wait_for "$work/c.out" '^wrote '
grep -q '^wrote 0$' "$work/c.out" || fail "the consumer's write failed"
echo "check 7" >&7
wait_for "$work/p.out" '^check '
grep -q '^check 0$' "$work/p.out" || fail "the producer does not see the consumer's write"

# Freed by the producer while the consumer maps it: still charged.
echo free >&7
wait_for "$work/p.out" '^freed '
grep -q '^freed 0$' "$work/p.out" || fail "free failed"
[ "$(used $prod)" = "$BYTES" ] || fail "charge returned while the consumer maps the memory"
echo close >&8
wait_for "$work/c.out" '^closed '
grep -q '^closed 0$' "$work/c.out" || fail "close failed"
for _ in $(seq 1 500); do [ "$(used $prod)" = "0" ] && break; sleep 0.01; done
[ "$(used $prod)" = "0" ] || fail "charge not returned after the last close: $(used $prod)"

# Nothing shared any more: each suspends and resumes on its own.
ok suspend $prod
ok resume $prod
ok suspend $cons
ok resume $cons
echo quit >&7
echo quit >&8
wait $prod || fail "producer exit $?"
wait $cons || fail "consumer exit $?"
prod= cons=

# The ring. Under VMM its two 256 KiB buffers share one 2 MiB chunk per rank;
# off VMM they are charged exactly (512 KiB). NCCL's way makes the receive
# buffer the rank's own 2 MiB cuMemCreate. The peer's memory a rank maps is
# never charged to it.
for vmm in on off; do
  for mode in legacy fd; do
    VGPU_VMM=$vmm VGPU_SIM_KERNELS=$CONF_KERNELS LD_PRELOAD=$LIBVGPU \
      "$CHILD" ipcring $mode 8 65536 "$CUBIN" >"$work/ring.out" 2>&1 ||
      fail "ring ($mode, VMM $vmm) failed"
    case $vmm/$mode in
    on/legacy) want=$((2 << 20)) ;;
    on/fd) want=$((4 << 20)) ;;
    off/legacy) want=$((512 << 10)) ;;
    off/fd) want=$(((256 << 10) + (2 << 20))) ;;
    esac
    for r in 0 1; do
      read -r _ _ _ err wrong _ _ charged < <(grep "^rank $r " "$work/ring.out")
      [ "${err:-}" = 0 ] && [ "${wrong:-}" = 0 ] ||
        fail "ring ($mode, VMM $vmm) rank $r: error ${err:-}, ${wrong:-} wrong sums"
      [ "${charged:-}" = "$want" ] ||
        fail "ring ($mode, VMM $vmm) rank $r charged ${charged:-}, want $want"
    done
  done
done
echo PASS
