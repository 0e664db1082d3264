# A one-node Slurm cluster on the loopback for the end-to-end tests: Debian's
# munged, slurmctld and slurmd, as root, every file under one work directory,
# ports chosen free. Sourced by slurm_e2e_test.sh (bash).
#   slurm_cluster_start WORK NODE_GRES GRES_CONF PLUGSTACK_LINE [PARTITIONS]
#     WORK: an empty directory; NODE_GRES: e.g. gpu:1,shard:8; GRES_CONF: the
#     gres.conf text; PLUGSTACK_LINE: the plugstack.conf line ("" for none);
#     PARTITIONS: slurm.conf's PartitionName lines for node vgpunode (default:
#     low and high below).
#   Afterwards SLURM_CONF is exported (sbatch, squeue, scontrol use it) and
#   slurm_cluster_stop kills what was started.
# Partitions: low (PriorityTier=1, default) and high (PriorityTier=10), with
# PreemptType=preempt/partition_prio and PreemptMode=SUSPEND,GANG: a high job
# that needs what a low job holds suspends it (slurmstepd: SIGTSTP, 2 s,
# SIGSTOP) and the low job resumes (SIGCONT) when the high one ends.

slurm_missing() {
  local c
  for c in munged slurmctld slurmd sbatch squeue scontrol; do
    command -v "$c" >/dev/null || { echo "$c"; return; }
  done
}

# A TCP port nobody listens on (the kernel picks it).
slurm_free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

slurm_cluster_start() {
  local w=$1 node_gres=$2 gres_conf=$3 plugstack=$4
  local parts=${5:-"PartitionName=low Nodes=vgpunode PriorityTier=1 Default=YES OverSubscribe=FORCE:1 MaxTime=INFINITE State=UP
PartitionName=high Nodes=vgpunode PriorityTier=10 OverSubscribe=FORCE:1 MaxTime=INFINITE State=UP"}
  SLURM_WORK=$w
  mkdir -p "$w"/{munge,ctld,spool,log}
  chmod 0700 "$w/munge"
  head -c 1024 /dev/urandom >"$w/munge/munge.key"
  chmod 0400 "$w/munge/munge.key"
  munged --force --key-file="$w/munge/munge.key" --socket="$w/munge/munge.sock" \
    --pid-file="$w/munge/munged.pid" --log-file="$w/log/munged.log" \
    --seed-file="$w/munge/seed" || return 1
  local ctld_port slurmd_port host
  ctld_port=$(slurm_free_port)
  slurmd_port=$(slurm_free_port)
  host=$(hostname -s)
  printf '%s\n' "$gres_conf" >"$w/gres.conf"
  printf '%s\n' "$plugstack" >"$w/plugstack.conf"
  cat >"$w/slurm.conf" <<CONF
ClusterName=vgputest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$w/munge/munge.sock
CredType=cred/munge
StateSaveLocation=$w/ctld
SlurmdSpoolDir=$w/spool
SlurmctldPidFile=$w/slurmctld.pid
SlurmdPidFile=$w/slurmd.pid
SlurmctldLogFile=$w/log/slurmctld.log
SlurmdLogFile=$w/log/slurmd.log
SlurmctldDebug=debug
SlurmdDebug=debug2
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
GresTypes=gpu,shard
PreemptType=preempt/partition_prio
PreemptMode=SUSPEND,GANG
SchedulerTimeSlice=30
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
ReturnToService=2
PlugStackConfig=$w/plugstack.conf
FirstJobId=$(( ($$ % 100000) * 100 + 1000 ))
MessageTimeout=10
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
SlurmdParameters=config_overrides
NodeName=vgpunode NodeHostname=$host NodeAddr=127.0.0.1 CPUs=2 RealMemory=1000 Gres=$node_gres State=UNKNOWN
$parts
CONF
  export SLURM_CONF=$w/slurm.conf
  slurmctld -i -f "$SLURM_CONF" || return 1
  slurmd -N vgpunode -f "$SLURM_CONF" || return 1
  local i
  for i in $(seq 1 100); do
    sinfo -h -o '%T' 2>/dev/null | grep -qx idle && return 0
    sleep 0.2
  done
  echo "slurm: the node did not become idle"; sinfo -N -l 2>&1; return 1
}

slurm_cluster_logs() {
  [ -n "${SLURM_WORK:-}" ] || return 0
  local f
  for f in slurmctld slurmd; do
    echo "--- $f.log (tail)"; tail -40 "$SLURM_WORK/log/$f.log" 2>/dev/null
  done
}

slurm_cluster_stop() {
  [ -n "${SLURM_WORK:-}" ] || return 0
  scancel --quiet --full -u root 2>/dev/null
  local f
  for f in slurmd.pid slurmctld.pid munge/munged.pid; do
    [ -s "$SLURM_WORK/$f" ] && kill "$(cat "$SLURM_WORK/$f")" 2>/dev/null
  done
  sleep 0.5
  for f in slurmd.pid slurmctld.pid munge/munged.pid; do
    [ -s "$SLURM_WORK/$f" ] && kill -9 "$(cat "$SLURM_WORK/$f")" 2>/dev/null
  done
  # slurmstepd of jobs still running.
  pkill -9 -f "slurmstepd.*" 2>/dev/null
  return 0
}

# Waits until job $1 is in one of the states $2 (a regex, e.g. 'RUNNING'),
# up to $3 seconds (default 60). Prints the state.
slurm_wait_state() {
  local job=$1 want=$2 limit=${3:-60} st i
  for i in $(seq 1 $((limit * 5))); do
    st=$(scontrol show job "$job" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
    if [[ $st =~ ^($want)$ ]]; then echo "$st"; return 0; fi
    sleep 0.2
  done
  echo "${st:-none}"; return 1
}
