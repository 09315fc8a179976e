#!/usr/bin/env bash
# etcd-down.sh [PORT...] -- teardown for etcd-up.sh: stops each member (default
# 2391) by the PID in $SERVICES_DIR/etcd-PORT/etcd.pid (never by name):
# SIGTERM, wait up to ${STOP_WAIT_S:-30}s, then SIGKILL. A member already gone
# is success (idempotent). With PURGE=1 also removes $SERVICES_DIR/etcd-PORT.
set -uo pipefail
if [ $# -gt 0 ]; then PORTS=("$@"); else PORTS=("${ETCD_PORT:-2391}"); fi
DIR="${SERVICES_DIR:-/tmp/services}"
WAIT_S="${STOP_WAIT_S:-30}"
log() { echo "etcd-down: $*" >&2; }
alive() { kill -0 "$1" 2>/dev/null && ! grep -q '^[0-9]* (.*) Z' "/proc/$1/stat" 2>/dev/null; }
rc=0
for p in "${PORTS[@]}"; do
  pid=$(cat "$DIR/etcd-$p/etcd.pid" 2>/dev/null || true)
  case "$pid" in
    (*[!0-9]*) log "bad pidfile for $p: '$pid'"; rc=1;;
    ('') ;;
    (*)
      # Only an etcd: a stale pidfile may name a PID reused by something else.
      if alive "$pid" && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = etcd ]; then
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 1 $((WAIT_S * 10))); do alive "$pid" || break; sleep 0.1; done
        if alive "$pid"; then
          log "$pid ($p) ignored SIGTERM for ${WAIT_S}s, sending SIGKILL"
          kill -KILL "$pid" 2>/dev/null || true; sleep 0.2
        fi
        if alive "$pid"; then log "$pid ($p) still alive"; rc=1; else log "$pid ($p) stopped"; fi
      fi;;
  esac
  if [ "${PURGE:-0}" = 1 ]; then rm -rf -- "$DIR/etcd-$p"; fi
done
exit $rc
