#!/usr/bin/env bash
# slurm-down.sh -- teardown for slurm-up.sh. Cancels every job of that
# cluster (it is ours alone; scancel reaches it through its own slurm.conf)
# and waits up to ${STOP_WAIT_S:-30}s for them to end, so no job step
# outlives its slurmd; then stops each slurmd, slurmctld and munged by the
# PID in its pidfile under $SERVICES_DIR/slurm (never by name): SIGTERM,
# wait, then SIGKILL. A daemon already gone is success (idempotent). With
# PURGE=1 also removes $SERVICES_DIR/slurm.
# Env: SERVICES_DIR (/tmp/services), STOP_WAIT_S (30).
set -uo pipefail
DIR="${SERVICES_DIR:-/tmp/services}/slurm"
WAIT_S="${STOP_WAIT_S:-30}"
export SLURM_CONF="$DIR/slurm.conf"

log() { echo "slurm-down: $*" >&2; }
alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null && ! grep -q '^[0-9]* (.*) Z' "/proc/$1/stat" 2>/dev/null; }
stop() { # NAME PIDFILE
  local pid
  pid=$(cat "$2" 2>/dev/null || true)
  case "$pid" in (*[!0-9]*|'') return 0;; esac
  alive "$pid" || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 $((WAIT_S * 10))); do alive "$pid" || break; sleep 0.1; done
  if alive "$pid"; then
    log "$1 ($pid) ignored SIGTERM for ${WAIT_S}s, sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true; sleep 0.2
  fi
  alive "$pid" && { log "$1 ($pid) still alive"; return 1; }
  log "$1 ($pid) stopped"
}

rc=0
ctld=$(cat "$DIR/slurmctld.pid" 2>/dev/null || true)
if [ -s "$SLURM_CONF" ] && alive "$ctld" && command -v squeue >/dev/null; then
  jobs=$(timeout 10 squeue -h -o %A 2>/dev/null | sort -u | tr '\n' ' ')
  if [ -n "${jobs// /}" ]; then
    log "cancelling jobs $jobs"
    # shellcheck disable=SC2086 # one job id a word
    timeout 10 scancel --full $jobs 2>/dev/null || true
    for _ in $(seq 1 $((WAIT_S * 10))); do
      [ -z "$(timeout 10 squeue -h -o %A 2>/dev/null)" ] && break
      sleep 0.1
    done
    [ -z "$(timeout 10 squeue -h -o %A 2>/dev/null)" ] || { log "jobs still listed after ${WAIT_S}s"; rc=1; }
  fi
fi
for f in "$DIR"/slurmd-*.pid; do
  [ -e "$f" ] || continue
  n=${f##*/slurmd-}; stop "slurmd ${n%.pid}" "$f" || rc=1
done
stop slurmctld "$DIR/slurmctld.pid" || rc=1
stop munged "$DIR/munged.pid" || rc=1
if [ "${PURGE:-0}" = 1 ]; then rm -rf -- "$DIR"; fi
exit $rc
