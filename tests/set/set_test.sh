#!/bin/bash
# `vgpuctl set` end to end on the simulated node (tests/set/CMakeLists.txt):
# each client is a CUDA process under LD_PRELOAD driven line by line (set_client.cc).
#   set_test.sh memory     lowering the quota makes the next large allocation fail with
#                          OUT_OF_MEMORY, raising it lets it succeed; a limit below the usage is
#                          refused with its message and changes nothing; cuMemGetInfo and info
#                          follow the quota; 0 is unlimited
#   set_test.sh compute    --compute-share, --priority and --weight show in info (VGPU_PRIORITY=low
#                          at start too); a process without the compute share or without a quota
#                          ledger refuses what it cannot apply, with a message
#   set_test.sh group      --group G changes every process of the group and no other
# Environment (from CMake): VGPUCTL LIBVGPU CLIENT SIM_DIR
set -u
mode=$1
work=$(mktemp -d /tmp/vgpu-set-test.XXXXXX)
group=vgpu-set-$mode-$$
export VGPU_SCHED_REGION=/vgpu-sched-settest-$mode-$$
cleanup() {
  # A client exits at the end of its input; one that does not is killed.
  for f in "${fd[@]}"; do exec {f}>&-; done
  for p in "${pid[@]}"; do
    for _ in $(seq 1 200); do kill -0 "$p" 2>/dev/null || break; sleep 0.01; done
    kill -9 "$p" 2>/dev/null
  done
  rm -rf "$work"
  rm -f "/dev/shm/vgpu-sim-$VGPU_SIM_NODE" "/dev/shm$VGPU_SCHED_REGION" \
    "/dev/shm/vgpu-ledger-$(id -u)-$group"
}
trap cleanup EXIT
export LD_LIBRARY_PATH=$SIM_DIR
export VGPU_SIM_NODE=vgpu-set-$mode-$$
export VGPU_SIM_DEVICES=2x1GiB
export VGPU_RUN_DIR=$work/run
mkdir -p "$VGPU_RUN_DIR"
fail() { echo "FAIL: $*"; exit 1; }
declare -A pid fd count

# start NAME [VAR=VALUE...]: a client under libvgpu, ready and with its agent up.
start() {
  local name=$1 f
  shift
  mkfifo "$work/$name.in"
  env "$@" LD_PRELOAD="$LIBVGPU" "$CLIENT" <"$work/$name.in" >"$work/$name.out" 2>&1 &
  pid[$name]=$!
  exec {f}>"$work/$name.in"
  fd[$name]=$f
  count[$name]=0
  for _ in $(seq 1 500); do
    grep -q ready "$work/$name.out" && [ -S "$VGPU_RUN_DIR/agent-${pid[$name]}.sock" ] && return 0
    sleep 0.01
  done
  fail "$name not ready: $(cat "$work/$name.out")"
}
# send NAME COMMAND: sets $answer to the client's answer to COMMAND (no
# subshell: the command count must survive).
send() {
  local name=$1 n
  count[$name]=$((count[$name] + 1))
  n=${count[$name]}
  echo "$2" >&"${fd[$name]}"
  for _ in $(seq 1 1000); do
    answer=$(sed -n "s/^$n //p" "$work/$name.out")
    [ -n "$answer" ] && return 0
    sleep 0.01
  done
  fail "$name did not answer '$2': $(cat "$work/$name.out")"
}
expect() {  # NAME COMMAND ANSWER
  send "$1" "$2"
  [ "$answer" = "$3" ] || fail "$1: '$2' answered '$answer', expected '$3'"
}
# ctl ARGS...: runs vgpuctl; $rc, $work/ctl.out and $work/ctl.err hold the outcome.
ctl() {
  "$VGPUCTL" "$@" >"$work/ctl.out" 2>"$work/ctl.err"
  rc=$?
  echo "vgpuctl $*: exit $rc: $(cat "$work/ctl.out" "$work/ctl.err")"
}
ctl_ok() { ctl "$@"; [ $rc = 0 ] || fail "vgpuctl $* failed"; }
has() { grep -Eq -- "$1" "$work/ctl.out" || fail "expected /$1/ in: $(cat "$work/ctl.out")"; }
mib() { echo $(($1 << 20)); }

case $mode in
memory)
  start a VGPU_DEVICE_MEMORY_LIMIT=256MiB
  p=${pid[a]}
  expect a "alloc 100" "alloc ok"
  ctl_ok info "$p" --json
  has "\"quota\":$(mib 256),"
  # Lower: the next 100 MiB no longer fits (100 + 100 > 150).
  ctl_ok set "$p" --memory-limit 150MiB
  expect a "alloc 100" "alloc oom"
  ctl_ok info "$p" --json
  has "\"quota\":$(mib 150),"
  expect a "meminfo" "meminfo free=$(mib 50) total=$(mib 150)"
  # Below the usage: refused (EBUSY, exit 5) with the usage, and nothing changes.
  ctl set "$p" --memory-limit 64MiB
  [ $rc = 5 ] || fail "a limit below usage: exit $rc, expected 5"
  grep -q "memory_limit 64 MiB on device 0 is below current usage 100 MiB" "$work/ctl.err" ||
    fail "message: $(cat "$work/ctl.err")"
  ctl set "$p" --memory-limit 64MiB --json
  has '"code":"EBUSY"'
  ctl_ok info "$p" --json
  has "\"quota\":$(mib 150),"
  # Raise: it fits again.
  ctl_ok set "$p" --memory-limit 300MiB --device 0
  has "^set $p: "
  expect a "alloc 100" "alloc ok"
  expect a "alloc 100" "alloc ok"
  expect a "alloc 100" "alloc oom"
  # 0: unlimited.
  ctl_ok set "$p" --memory-limit 0
  ctl_ok info "$p" --json
  has '"quota":null'
  expect a "alloc 100" "alloc ok"
  ctl_ok info "$p"
  has "device 0 .*used 400 MiB of unlimited"
  # A device the process does not have.
  ctl set "$p" --memory-limit 1GiB --device 7
  [ $rc = 1 ] && grep -q "invalid argument 'device': no device 7" "$work/ctl.err" ||
    fail "device 7: exit $rc"
  ;;
compute)
  start a VGPU_COMPUTE_SHARE=50 VGPU_DEVICE_MEMORY_LIMIT=256MiB
  p=${pid[a]}
  expect a "alloc 1" "alloc ok"
  ctl_ok info "$p" --json
  has '"compute_policy":"fixed"'
  has '"compute_share":50(\.0)?[,}]'
  has '"priority":"normal"'
  has '"weight":1[,}]'
  ctl_ok set "$p" --compute-share 25 --device 1
  ctl_ok info "$p" --json
  has '"compute_share":50(\.0)?,("[a-z_]+":[0-9]+,)*"index":0,'
  has '"compute_share":25(\.0)?,("[a-z_]+":[0-9]+,)*"index":1,'
  ctl_ok set "$p" --compute-share 30
  ctl_ok set "$p" --priority low --weight 5
  ctl_ok info "$p" --json
  has '"compute_share":30(\.0)?,("[a-z_]+":[0-9]+,)*"index":0,'
  has '"priority":"low"'
  has '"weight":5[,}]'
  ctl_ok info "$p"
  has '^priority +low$'
  has '^weight +5$'
  has "compute share 30%"
  ctl set "$p" --priority urgent
  [ $rc = 2 ] || fail "--priority urgent: exit $rc, expected 2 (usage)"
  # Without the compute share (native) and without a quota ledger: refused with the reason;
  # priority and weight are still recorded (for the coordinator).
  start b VGPU_PRIORITY=low
  q=${pid[b]}
  ctl_ok info "$q" --json
  has '"priority":"low"'
  has '"compute_policy":"native"'
  ctl set "$q" --compute-share 20
  [ $rc = 1 ] && grep -q "compute_share: the compute share is off here" "$work/ctl.err" ||
    fail "compute share on a native process: exit $rc"
  ctl set "$q" --memory-limit 1GiB
  [ $rc = 1 ] && grep -q "memory_limit: this process has no quota ledger" "$work/ctl.err" ||
    fail "memory limit without a ledger: exit $rc"
  ctl_ok set "$q" --priority high --weight 3
  ctl_ok info "$q" --json
  has '"priority":"high"'
  has '"weight":3[,}]'
  ;;
group)
  start a VGPU_GROUP=$group VGPU_DEVICE_MEMORY_LIMIT=256MiB VGPU_COMPUTE_WEIGHT=1
  start b VGPU_GROUP=$group VGPU_DEVICE_MEMORY_LIMIT=256MiB VGPU_COMPUTE_WEIGHT=1
  start c VGPU_DEVICE_MEMORY_LIMIT=256MiB  # not in the group
  expect a "alloc 60" "alloc ok"
  expect b "alloc 60" "alloc ok"
  # The group's usage (120 MiB) is what a lower limit is checked against.
  ctl set --group "$group" --memory-limit 100MiB
  [ $rc = 5 ] && grep -q "is below current usage 120 MiB" "$work/ctl.err" ||
    fail "below the group's usage: exit $rc"
  ctl_ok set --group "$group" --memory-limit 150MiB --priority high --weight 4
  has "^set ${pid[a]} \(group $group\)"
  has "^set ${pid[b]} \(group $group\)"
  for name in a b; do
    ctl_ok info "${pid[$name]}" --json
    has "\"quota\":$(mib 150),"
    has '"priority":"high"'
    has '"weight":4[,}]'
  done
  expect b "alloc 40" "alloc oom"  # 120 + 40 > 150: the limit is the group's
  expect a "alloc 30" "alloc ok"
  ctl_ok info "${pid[c]}" --json
  has "\"quota\":$(mib 256),"
  has '"priority":"normal"'
  ctl set --group nobody-$$ --weight 2
  [ $rc = 3 ] && grep -q "no process of quota group 'nobody-$$'" "$work/ctl.err" ||
    fail "an empty group: exit $rc"
  ctl set "${pid[a]}" --group "$group" --weight 2
  [ $rc = 2 ] || fail "a PID and --group: exit $rc, expected 2 (usage)"
  ;;
*)
  fail "unknown mode $mode"
  ;;
esac
echo PASS
