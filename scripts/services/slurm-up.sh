#!/usr/bin/env bash
# slurm-up.sh -- start a throwaway one-host Slurm cluster on loopback, without
# systemd: munged (its own socket and a key made for this run), slurmctld on
# 127.0.0.1:$SLURM_CTLD_PORT and one slurmd per port in $SLURM_NODE_PORTS,
# named fp1, fp2, … (`NodeName=fpK NodeHostname=localhost Port=…`), all in
# one partition "fpdedup". Config, state, spool, pidfiles and logs live under
# $SERVICES_DIR/slurm; nothing is written to /etc.
#
# Prints ONLY the PIDs on stdout (munged slurmctld slurmd...); diagnostics go
# to stderr:
#   SLURM_PIDS=$(bash slurm-up.sh)
#   export SLURM_CONF=/tmp/services/slurm/slurm.conf   # for sbatch, squeue, sacct -c, scontrol
#
# Idempotent: with every daemon of ours alive and the nodes up it only prints
# the PIDs; with none alive it starts from scratch (old state removed, a new
# munge key); with some alive (a test killed one) it restarts the missing
# ones, keeping the controller's state. Exits 3 if a port belongs to someone
# else, 2 if Slurm or munge is not installed, 1 (with the failing daemon's
# last log lines) if the cluster does not come up.
#
# Daemons run as root (SlurmUser=root), with no cgroups (proctrack/linuxproc,
# task/none, jobacct_gather/none), select/cons_tres by CPU, no accounting
# database: finished jobs go to a jobcomp/filetxt log that `sacct -c` reads.
# Requeued jobs may start again after cred_expire (5 s here, 120 s by default).
# Env: SERVICES_DIR (/tmp/services), SLURM_CTLD_PORT (6917), SLURM_NODE_PORTS
#      ("6918 6919"), SLURM_NODE_CPUS (1), SLURM_WAIT_S (30).
set -euo pipefail

DIR="${SERVICES_DIR:-/tmp/services}/slurm"
CTLD_PORT="${SLURM_CTLD_PORT:-6917}"
read -r -a NODE_PORTS <<<"${SLURM_NODE_PORTS:-6918 6919}"
CPUS="${SLURM_NODE_CPUS:-1}"
WAIT_S="${SLURM_WAIT_S:-30}"
CONF="$DIR/slurm.conf"
SOCK="$DIR/munge/munge.sock"
export SLURM_CONF="$CONF"

log() { echo "slurm-up: $*" >&2; }
alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null && ! grep -q '^[0-9]* (.*) Z' "/proc/$1/stat" 2>/dev/null; }
port_busy() { timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null; }
node() { echo "fp$(($1 + 1))"; }
pid_of() { cat "$DIR/$1.pid" 2>/dev/null || true; }
munge_ok() { munge -S "$SOCK" -n </dev/null 2>/dev/null | unmunge -S "$SOCK" >/dev/null 2>&1; }
ctld_ok() { timeout 5 scontrol ping 2>/dev/null | grep -q 'is UP'; }
tail_log() { log "$1 did not start; last lines of $2:"; tail -20 "$2" >&2 2>/dev/null || true; }

for b in munged munge unmunge mungekey slurmctld slurmd scontrol sinfo; do
  command -v "$b" >/dev/null || { log "$b missing (apt-get install -y slurm-wlm munge)"; exit 2; }
done
[ ${#NODE_PORTS[@]} -ge 1 ] || { log "no node ports"; exit 2; }

names=()
for i in "${!NODE_PORTS[@]}"; do names+=("$(node "$i")"); done
daemons=(munged slurmctld)
for n in "${names[@]}"; do daemons+=("slurmd-$n"); done

running=0
for d in "${daemons[@]}"; do alive "$(pid_of "$d")" && running=$((running + 1)); done
if [ "$running" = 0 ]; then
  rm -rf -- "$DIR"
fi
mkdir -p "$DIR/state" "$DIR/munge" "$DIR/munge-key" "$DIR/logs"
chmod 755 "$DIR" "$DIR/munge" # munged wants its socket's directory searchable by all
chmod 700 "$DIR/munge-key"

T0=$(date +%s%N)

# munged: a key generated for this run (mode 0400, owned by root, who runs munged).
if ! alive "$(pid_of munged)"; then
  rm -f "$DIR/munged.pid" "$SOCK"
  if [ -e "$SOCK.lock" ] && ! munge_ok; then rm -f "$SOCK.lock"; fi
  rm -f "$DIR/munge-key/munge.key"
  mungekey -c -b 1024 -k "$DIR/munge-key/munge.key"
  chmod 400 "$DIR/munge-key/munge.key"
  munged --key-file="$DIR/munge-key/munge.key" --socket="$SOCK" --pid-file="$DIR/munged.pid" \
    --log-file="$DIR/logs/munged.log" --seed-file="$DIR/munge/munged.seed" \
    </dev/null >>"$DIR/logs/munged.out" 2>&1 || { tail_log munged "$DIR/logs/munged.log"; exit 1; }
  for _ in $(seq 1 $((WAIT_S * 10))); do munge_ok && break; sleep 0.1; done
  munge_ok || { tail_log munged "$DIR/logs/munged.log"; exit 1; }
fi

# Listen on loopback only: slurmctld on SlurmctldHost's address; slurmd and
# srun on the address this host's name resolves to (when it resolves).
COMM=NoCtldInAddrAny
if getent hosts "$(hostname)" >/dev/null; then COMM+=,NoInAddrAny; fi

# The configuration: written afresh each time (same inputs, same file).
{
  echo "# Written by scripts/services/slurm-up.sh: a throwaway one-host cluster."
  echo "ClusterName=fpdedup"
  echo "SlurmctldHost=localhost(127.0.0.1)"
  echo "SlurmctldPort=$CTLD_PORT"
  echo "SlurmUser=root"
  echo "SlurmdUser=root"
  echo "AuthType=auth/munge"
  echo "CredType=cred/munge"
  echo "AuthInfo=socket=$SOCK,cred_expire=5"
  echo "StateSaveLocation=$DIR/state"
  echo "SlurmdSpoolDir=$DIR/spool-%n"
  echo "SlurmctldPidFile=$DIR/slurmctld.pid"
  echo "SlurmdPidFile=$DIR/slurmd-%n.pid"
  echo "SlurmctldLogFile=$DIR/logs/slurmctld.log"
  echo "SlurmdLogFile=$DIR/logs/slurmd-%n.log"
  echo "ProctrackType=proctrack/linuxproc"
  echo "TaskPlugin=task/none"
  echo "JobAcctGatherType=jobacct_gather/none"
  echo "AccountingStorageType=accounting_storage/none"
  echo "JobCompType=jobcomp/filetxt"
  echo "JobCompLoc=$DIR/jobcomp.txt"
  echo "SelectType=select/cons_tres"
  echo "SelectTypeParameters=CR_CPU"
  echo "SchedulerType=sched/backfill"
  echo "SchedulerParameters=sched_interval=2,bf_interval=2"
  echo "CommunicationParameters=$COMM"
  echo "MpiDefault=none"
  echo "ReturnToService=2"
  echo "MinJobAge=900"
  echo "KillWait=5"
  echo "InactiveLimit=0"
  for i in "${!NODE_PORTS[@]}"; do
    echo "NodeName=$(node "$i") NodeHostname=localhost NodeAddr=127.0.0.1 Port=${NODE_PORTS[$i]} CPUs=$CPUS State=UNKNOWN"
  done
  echo "PartitionName=fpdedup Nodes=$(IFS=,; echo "${names[*]}") Default=YES MaxTime=INFINITE State=UP"
} >"$CONF.new"
mv "$CONF.new" "$CONF"

start_ctld() {
  rm -f "$DIR/slurmctld.pid"
  if port_busy "$CTLD_PORT"; then log "port $CTLD_PORT is already in use by another process"; exit 3; fi
  slurmctld -f "$CONF" </dev/null >>"$DIR/logs/slurmctld.out" 2>&1 ||
    { tail_log slurmctld "$DIR/logs/slurmctld.log"; exit 1; }
  for _ in $(seq 1 $((WAIT_S * 10))); do ctld_ok && [ -s "$DIR/slurmctld.pid" ] && return 0; sleep 0.1; done
  tail_log slurmctld "$DIR/logs/slurmctld.log"; exit 1
}
if ! alive "$(pid_of slurmctld)" || ! ctld_ok; then start_ctld; fi

for i in "${!NODE_PORTS[@]}"; do
  n=$(node "$i"); p=${NODE_PORTS[$i]}
  if alive "$(pid_of "slurmd-$n")"; then continue; fi
  rm -f "$DIR/slurmd-$n.pid"
  if port_busy "$p"; then log "port $p (node $n) is already in use by another process"; exit 3; fi
  mkdir -p "$DIR/spool-$n"
  slurmd -f "$CONF" -N "$n" </dev/null >>"$DIR/logs/slurmd-$n.out" 2>&1 ||
    { tail_log "slurmd $n" "$DIR/logs/slurmd-$n.log"; exit 1; }
done

# Up: every node registered and usable (idle, or busy with jobs of a previous start).
nodes_ok() {
  local n st
  for n in "${names[@]}"; do
    st=$(sinfo -h -N -n "$n" -o %T 2>/dev/null | head -1)
    case "$st" in (idle|mixed|allocated|completing) ;; (*) return 1;; esac
  done
}
for _ in $(seq 1 $((WAIT_S * 10))); do
  if nodes_ok; then
    pids=("$(pid_of munged)" "$(pid_of slurmctld)")
    for n in "${names[@]}"; do pids+=("$(pid_of "slurmd-$n")"); done
    log "up: slurmctld on 127.0.0.1:$CTLD_PORT, nodes ${names[*]} on ${NODE_PORTS[*]} (pids ${pids[*]}) in $(( ($(date +%s%N) - T0) / 1000000 )) ms; SLURM_CONF=$CONF"
    echo "${pids[*]}"
    exit 0
  fi
  sleep 0.1
done
log "the nodes did not come up within ${WAIT_S}s:"
sinfo -N -o '%N %T %E' >&2 || true
for n in "${names[@]}"; do tail_log "slurmd $n" "$DIR/logs/slurmd-$n.log"; done
exit 1
