#!/bin/bash
# End to end: spank_vgpu.so in a real Slurm 22.05 (Debian's munged, slurmctld
# and slurmd on the loopback, slurm_cluster.sh) on a simulated node of two
# 1 GiB GPUs, with vgpud time-slicing. gres.conf and the plugstack line come
# from `vgpuctl slurm gres` (16 shards of 128 MiB per GPU: twice the memory).
#   ceilings   a --gres=shard:2 job sees 256 MiB and cannot allocate past it,
#              runs in group slurm-<jobid>; --vgpu-mem lowers it; a job asking
#              for more (VGPU_DEVICE_MEMORY_LIMIT) is held at the ceiling;
#              vgpuctl ps shows the job id
#   oversub    two jobs whose shards oversubscribe GPU 0 both finish with the
#              reference checksum; vgpud suspended one for the other
#   preempt    a high-partition job (896 MiB) preempts a low one that holds
#              256 MiB of GPU 0: Slurm suspends the low job (SIGTSTP, 2 s,
#              SIGSTOP), its memory is released and restored, both finish with
#              the reference checksum
#   suspend    scontrol suspend/resume of a job holding 256 MiB: the memory is
#              freed while suspended, vgpud answers throughout, result intact
# The suspended jobs hold 256 MiB so that the copy out ends within Slurm's 2 s
# even on a loaded 2-core machine; a copy that does not is docs/slurm.md's
# "overrun" case (the preemptor waits, then is refused), measured by
# bench/slurm_bench.sh.
#   cancel     scancel mid-run: the job file and the quota group are gone
# Environment (from CMake): SPANK LIBVGPU VGPUD VGPUCTL PROBE JOB SIM_DIR
# Exit 77 (skipped) where Slurm cannot run here, naming what is missing.
set -u
skip() { echo "SKIP: $*"; exit 77; }
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=slurm_cluster.sh
. "$here/slurm_cluster.sh"
[ "$(id -u)" = 0 ] || skip "not root: slurmd runs jobs as root here"
missing=$(slurm_missing)
[ -z "$missing" ] || skip "$missing is not installed (scripts/install_deps.sh --ci installs Slurm)"

work=$(mktemp -d /tmp/vgpu-slurm.XXXXXX)
chmod 755 "$work"
export VGPU_SIM_NODE=vgpu-slurm-$$ VGPU_SIM_DEVICES=2x1GiB VGPU_RUN_DIR=$work/run VGPU_VMM=on
export LD_LIBRARY_PATH=$SIM_DIR
mkdir -p "$VGPU_RUN_DIR"
chmod 700 "$VGPU_RUN_DIR"
daemon=
fail() {
  echo "FAIL: $*"
  slurm_cluster_logs
  [ -f "$work/vgpud.log" ] && { echo "--- vgpud.log"; tail -30 "$work/vgpud.log"; }
  exit 1
}
cleanup() {
  slurm_cluster_stop
  [ -n "$daemon" ] && kill -9 "$daemon" 2>/dev/null
  rm -f /run/vgpu-slurm/job-"$first_job"*.json 2>/dev/null
  rm -rf "$work" "/dev/shm/vgpu-sim-$VGPU_SIM_NODE"
}
first_job=none
trap cleanup EXIT

# Device files for gres.conf: slurmd only stats them, and sets
# CUDA_VISIBLE_DEVICES only for character devices.
mkdir -p "$work/dev"
for i in 0 1; do
  mknod "$work/dev/nvidia$i" c 195 "$i" 2>/dev/null || skip "mknod fails here: slurmd sets no GPU for a File= that is not a device node"
done
"$VGPUCTL" slurm gres --shard-mem 128MiB --overcommit 2 --dev-dir "$work/dev" \
  --plugin "$SPANK" --libvgpu "$LIBVGPU" >"$work/gres.out" 2>&1 || { cat "$work/gres.out"; fail "vgpuctl slurm gres"; }
grep '^Name=' "$work/gres.out" >"$work/gres.conf.in"
node_gres=$(sed -n 's/.*Gres=\([^ ]*\).*/\1/p' "$work/gres.out" | head -1)
plugstack=$(sed -n 's/^# \(required .*\)/\1/p' "$work/gres.out" | head -1)
[ "$(grep -c '^Name=shard Count=16 ' "$work/gres.conf.in")" = 2 ] || { cat "$work/gres.out"; fail "gres lines"; }
[ "$node_gres" = "gpu:2,shard:32" ] || { cat "$work/gres.out"; fail "node Gres=$node_gres"; }
plugstack="$plugstack priority_partition=high:high,low:low"
echo "plugstack: $plugstack"

slurm_cluster_start "$work/slurm" "$node_gres" "$(cat "$work/gres.conf.in")" "$plugstack" ||
  fail "the Slurm cluster did not start"
first_job=$(sed -n 's/^FirstJobId=//p' "$SLURM_CONF")

"$VGPUD" --run-dir "$VGPU_RUN_DIR" --tick 100ms --quantum 2s --metrics-listen off \
  >"$work/vgpud.log" 2>&1 &
daemon=$!
for _ in $(seq 1 200); do [ -S "$VGPU_RUN_DIR/vgpud.sock" ] && break; sleep 0.05; done
[ -S "$VGPU_RUN_DIR/vgpud.sock" ] || fail "vgpud did not start"

out() { echo "$work/slurm/job.$1.out"; }
submit() {  # sbatch args... --wrap: prints the job id
  sbatch --parsable -o "$work/slurm/job.%j.out" "$@"
}
wait_done() {  # JOB [SECONDS]
  local st
  st=$(slurm_wait_state "$1" 'COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY' "${2:-120}") ||
    fail "job $1 did not end (state $st): $(cat "$(out "$1")" 2>/dev/null)"
  echo "$st"
}
sum_of() { sed -n 's/.*checksum=\([0-9a-f]*\).*/\1/p' "$(out "$1")"; }
ok_job() {  # JOB: ended COMPLETED with errors=0
  local st
  st=$(wait_done "$1" "${2:-120}")
  [ "$st" = COMPLETED ] || fail "job $1 ended $st: $(cat "$(out "$1")")"
  grep -q "errors=0" "$(out "$1")" || fail "job $1: $(cat "$(out "$1")")"
}
# Device memory in use on the simulated GPU 0 (NVML, through vgpud's ps: the
# GPU's own count, not vgpud's last view of the jobs), in bytes.
gpu_used() {
  timeout 5 "$VGPUCTL" ps --json 2>/dev/null | python3 -c '
import json,sys
d=json.load(sys.stdin); print(sum(g.get("used",0) for g in d.get("devices",[]) if g.get("index")==0))' 2>/dev/null
}
# A field of job JOB's processes in vgpud's ps: "group slurm_job" of the first.
job_labels() {
  timeout 5 "$VGPUCTL" ps --json 2>/dev/null | python3 -c '
import json,sys
d=json.load(sys.stdin)
for p in d.get("processes",[]):
    if p.get("slurm_job")==sys.argv[1]: print(p.get("group"), p.get("slurm_job")); break' "$1" 2>/dev/null
}

# Reference checksums, outside Slurm.
ref_susp=$("$JOB" 256 40 100 | sed -n 's/.*checksum=\([0-9a-f]*\).*/\1/p')
ref_640=$("$JOB" 640 20 100 | sed -n 's/.*checksum=\([0-9a-f]*\).*/\1/p')
ref_long=$("$JOB" 256 60 100 | sed -n 's/.*checksum=\([0-9a-f]*\).*/\1/p')
ref_896=$("$JOB" 896 20 100 | sed -n 's/.*checksum=\([0-9a-f]*\).*/\1/p')
[ -n "$ref_896" ] && [ -n "$ref_susp" ] && [ -n "$ref_640" ] && [ -n "$ref_long" ] || fail "reference runs"

scenario() { echo "== $* ($(date +%T))"; }

scenario ceilings
j=$(submit --gres=shard:2 --wrap "$PROBE quota 200 100; $VGPUCTL config")
ok_job_probe() {
  local st
  st=$(wait_done "$1")
  [ "$st" = COMPLETED ] || fail "job $1 ended $st: $(cat "$(out "$1")")"
}
ok_job_probe "$j"
grep -q "total=$((256 << 20)) preload=env" "$(out "$j")" || fail "shard:2 should see 256 MiB: $(cat "$(out "$j")")"
grep -q "past the quota: refused" "$(out "$j")" || fail "allocation past 256 MiB: $(cat "$(out "$j")")"
grep -Eq "^VGPU_GROUP +slurm-$j " "$(out "$j")" || fail "group slurm-$j: $(cat "$(out "$j")")"
j=$(submit --gres=shard:2 --vgpu-mem=128MiB --wrap "$PROBE quota 100 100")
ok_job_probe "$j"
grep -q "total=$((128 << 20)) " "$(out "$j")" || fail "--vgpu-mem=128MiB: $(cat "$(out "$j")")"
j=$(VGPU_DEVICE_MEMORY_LIMIT=4GiB submit --gres=shard:2 --wrap "$PROBE quota 200 100")
ok_job_probe "$j"
grep -q "total=$((256 << 20)) " "$(out "$j")" || fail "4GiB asked is held at 256 MiB: $(cat "$(out "$j")")"
grep -q "refused" "$(out "$j")" || fail "no refusal line: $(cat "$(out "$j")")"
# A malformed option fails the job at submission, naming the option.
if submit --gres=shard:2 --vgpu-mem=lots --wrap true >"$work/bad.out" 2>&1; then
  fail "--vgpu-mem=lots was accepted: $(cat "$work/bad.out")"
fi
grep -q "vgpu-mem" "$work/bad.out" || fail "the refusal does not name --vgpu-mem: $(cat "$work/bad.out")"
j=$(submit --gres=shard:2 --wrap "$JOB 128 40 100")
for _ in $(seq 1 100); do grep -q allocated "$(out "$j")" 2>/dev/null && break; sleep 0.1; done
[ "$(job_labels "$j")" = "slurm-$j $j" ] || fail "vgpud's ps: no Slurm job $j in group slurm-$j: $("$VGPUCTL" ps --json)"
"$VGPUCTL" ps | grep -q "SLURM" || fail "vgpuctl ps has no SLURM column"
ok_job "$j"

scenario oversub
a=$(submit -c 1 --gres=shard:8 --wrap "$JOB 640 20 100")
b=$(submit -c 1 --gres=shard:8 --wrap "$JOB 640 20 100")
ok_job "$a" 180
ok_job "$b" 180
[ "$(sum_of "$a")" = "$ref_640" ] && [ "$(sum_of "$b")" = "$ref_640" ] || fail "oversub checksums"
"$VGPUCTL" events >"$work/events.out"
grep -q "suspend" "$work/events.out" || fail "no vgpud suspension: $(cat "$work/events.out")"

scenario preempt
low=$(submit -p low -c 2 --gres=shard:8 --wrap "$JOB 256 60 100")
for _ in $(seq 1 200); do grep -q allocated "$(out "$low")" 2>/dev/null && break; sleep 0.1; done
t0=$(date +%s.%N)
high=$(submit -p high -c 1 --gres=shard:8 --wrap "$JOB 896 20 100")
slurm_wait_state "$low" SUSPENDED 30 >/dev/null || fail "Slurm did not suspend the low job"
ok_job "$high"
t1=$(date +%s.%N)
[ "$(sum_of "$high")" = "$ref_896" ] || fail "high job checksum"
ok_job "$low" 240
[ "$(sum_of "$low")" = "$ref_long" ] || fail "low job checksum after its suspension"
echo "preempt: high job submitted to done $(python3 -c "print(round($t1-$t0,2))") s"

scenario suspend
s=$(submit -c 1 --gres=shard:8 --wrap "$JOB 256 40 100")
for _ in $(seq 1 200); do grep -q allocated "$(out "$s")" 2>/dev/null && break; sleep 0.1; done
before=$(gpu_used)
t0=$(date +%s.%N)
scontrol suspend "$s" || fail "scontrol suspend"
freed=
for _ in $(seq 1 100); do
  u=$(gpu_used)
  if [ -n "$u" ] && [ "$u" -lt $((64 << 20)) ]; then freed=$(date +%s.%N); break; fi
  sleep 0.05
done
[ -n "$freed" ] || fail "suspended job's memory not freed (used before ${before:-?}, now ${u:-?})"
echo "suspend: memory free $(python3 -c "print(round($freed-$t0,2))") s after scontrol suspend"
timeout 5 "$VGPUCTL" ps >/dev/null || fail "vgpud does not answer while the job is stopped"
sleep 1
scontrol resume "$s" || fail "scontrol resume"
ok_job "$s" 120
[ "$(sum_of "$s")" = "$ref_susp" ] || fail "suspend: checksum after scontrol suspend/resume"

scenario cancel
c=$(submit -c 1 --gres=shard:2 --wrap "$JOB 128 400 100")
for _ in $(seq 1 200); do grep -q allocated "$(out "$c")" 2>/dev/null && break; sleep 0.1; done
[ -f "/run/vgpu-slurm/job-$c.0.json" ] || fail "no job file while the job runs"
[ -e "/dev/shm/vgpu-ledger-0-slurm-$c" ] || fail "no quota group while the job runs"
scancel "$c"
wait_done "$c" >/dev/null
for _ in $(seq 1 100); do
  [ ! -e "/run/vgpu-slurm/job-$c.0.json" ] && [ ! -e "/dev/shm/vgpu-ledger-0-slurm-$c" ] && break
  sleep 0.1
done
[ ! -e "/run/vgpu-slurm/job-$c.0.json" ] || fail "job file left after scancel"
[ ! -e "/dev/shm/vgpu-ledger-0-slurm-$c" ] || fail "quota group left after scancel"
echo PASS
