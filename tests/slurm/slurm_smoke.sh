#!/usr/bin/env bash
# A smoke run of spank_vgpu.so under Debian's Slurm 22.05 (slurm_cluster.sh:
# munged, slurmctld and slurmd on free loopback ports, a temporary directory), the
# node's gres.conf from `vgpuctl slurm gres` on the simulated node (device
# nodes made with mknod: slurmd drops a File= that is no device), a stand-in
# libvgpu.so (an empty library: the jobs here run no CUDA). Checks a shard
# job's admin file and LD_PRELOAD, a held option's line on the job's stderr,
# a whole-GPU job, a job without GPUs, a malformed option, and the epilog's
# cleanup. Root only; 77 (skipped) without root or Slurm.
#   SPANK=build/lib/spank_vgpu.so VGPUCTL=build/bin/vgpuctl SIM_DIR=build/lib/vgpu/sim slurm_smoke.sh
set -u
[ "$(id -u)" = 0 ] || { echo "SKIP: root only"; exit 77; }
for b in munged slurmctld slurmd sbatch; do
  command -v "$b" >/dev/null || { echo "SKIP: no $b"; exit 77; }
done
: "${SPANK:?}" "${VGPUCTL:?}" "${SIM_DIR:?}"

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=slurm_cluster.sh
. "$here/slurm_cluster.sh"
T=$(mktemp -d /tmp/vgpu-slurm-smoke-XXXXXX)
cleanup() {
  slurm_cluster_stop
  rm -rf "$T"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; for f in "$T"/o.*; do echo "== $f"; cat "$f"; done; slurm_cluster_logs; exit 1; }

mkdir -p "$T"/{dev,lib}
mknod "$T/dev/nvidia0" c 195 0 && mknod "$T/dev/nvidia1" c 195 1
echo 'void vgpu_smoke(void) {}' >"$T/lib/d.c" && cc -shared -fPIC -o "$T/lib/libvgpu.so" "$T/lib/d.c"

node="slurm-smoke-$$"
LD_LIBRARY_PATH=$SIM_DIR VGPU_SIM_NODE=$node VGPU_SIM_DEVICES=2x4GiB "$VGPUCTL" slurm gres \
  --dev-dir "$T/dev" --shard-mem 512MiB --shard-compute 10 --libvgpu "$T/lib/libvgpu.so" \
  --plugin "$SPANK" >"$T/gres.out" || fail "vgpuctl slurm gres"
rm -f "/dev/shm/vgpu-sim-$node"
grep -v '^#' "$T/gres.out" >"$T/gres.conf"
sed -n 's/^# required /required /p' "$T/gres.out" | sed 's/$/ priority_partition=gpu:high/' >"$T/plugstack.conf"
uuid0=$(sed -n 's/.*devices=\([^,]*\),.*/\1/p' "$T/plugstack.conf")

slurm_cluster_start "$T/slurm" "gpu:2,shard:16" "$(cat "$T/gres.conf")" "$(cat "$T/plugstack.conf")" \
  "PartitionName=gpu Nodes=vgpunode Default=YES OverSubscribe=FORCE:2 MaxTime=INFINITE State=UP
PartitionName=other Nodes=vgpunode MaxTime=INFINITE State=UP" || fail "the Slurm cluster did not start"

wait_jobs() {
  for _ in $(seq 60); do [ -z "$(squeue -h)" ] && return 0; sleep 1; done
  fail "jobs still queued"
}
sub() { sbatch -o "$T/o.%j" "$@" | awk '{print $4}'; }
j1=$(sub --gres=shard:3 --vgpu-mem=1GiB --wrap 'echo PRELOAD=$LD_PRELOAD PRIO=$VGPU_PRIORITY; cat /run/vgpu-slurm/job-$SLURM_JOB_ID.0.json; touch /dev/shm/vgpu-ledger-0-slurm-$SLURM_JOB_ID')
j2=$(sub -p other --gres=shard:2 --vgpu-mem=8GiB --wrap 'cat /run/vgpu-slurm/job-$SLURM_JOB_ID.0.json')
j3=$(sub -p other --gres=gpu:1 --wrap 'cat /run/vgpu-slurm/job-$SLURM_JOB_ID.0.json')
j4=$(sub --wrap 'echo PRELOAD=$LD_PRELOAD; ls /run/vgpu-slurm/job-$SLURM_JOB_ID.* 2>&1')
bad=$(sbatch --gres=shard:1 --vgpu-mem=lots --wrap true 2>&1) && fail "--vgpu-mem=lots accepted"
wait_jobs

grep -q "PRELOAD=$T/lib/libvgpu.so PRIO=high" "$T/o.$j1" || fail "job $j1: LD_PRELOAD, VGPU_PRIORITY"
grep -q '"device_memory_limit": "1073741824"' "$T/o.$j1" || fail "job $j1: memory"
grep -q '"compute_share": "30%"' "$T/o.$j1" || fail "job $j1: share"
grep -q '"priority": "high"' "$T/o.$j1" || fail "job $j1: the partition's priority"
grep -q "\"visible_devices\": \"$uuid0\"" "$T/o.$j1" || fail "job $j1: devices"
grep -q "\"group\": \"slurm-$j1\"" "$T/o.$j1" || fail "job $j1: group"
grep -q "vgpu: --vgpu-mem=8 GiB is above the job's 1 GiB (2 shards of 512 MiB)" "$T/o.$j2" ||
  fail "job $j2: the held option's line"
grep -q '"priority": "normal"' "$T/o.$j2" || fail "job $j2: priority"
grep -q device_memory_limit "$T/o.$j3" && fail "job $j3: a whole GPU has no memory ceiling"
grep -q "\"group\": \"slurm-$j3\"" "$T/o.$j3" || fail "job $j3: group"
grep -qx "PRELOAD=" "$T/o.$j4" || fail "job $j4: no GPU, no preload"
grep -q "No such file" "$T/o.$j4" || fail "job $j4: no GPU, no file"
echo "$bad" | grep -q -- "--vgpu-mem='lots'" || fail "malformed option: $bad"
sleep 2  # the last epilog
ls /run/vgpu-slurm/job-"$j1".* 2>/dev/null && fail "the epilog left job $j1's file"
[ -e "/dev/shm/vgpu-ledger-0-slurm-$j1" ] && fail "the epilog left job $j1's ledger"
echo "PASS"
