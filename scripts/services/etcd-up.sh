#!/usr/bin/env bash
# etcd-up.sh [PORT...] -- start a throwaway etcd (Debian's etcd-server 3.4) on
# 127.0.0.1 without systemd: one member per client PORT (default 2391), its
# peer port PORT+1. One PORT is a single-member cluster; several are one
# cluster of that many members (e.g. 2393 2395 2397, peers 2394 2396 2398).
# Each member keeps its data dir, pidfile and log under
# $SERVICES_DIR/etcd-PORT.
#
# Prints ONLY the PIDs on stdout, space-separated (diagnostics go to stderr):
#   ETCD_PID=$(bash etcd-up.sh 2391)
#   ETCD_CLUSTER_PIDS=$(bash etcd-up.sh 2393 2395 2397)
#
# Idempotent: with every member of ours alive and healthy it only prints the
# PIDs. With some alive (a test killed one) it restarts the missing ones
# from their data dirs, so they rejoin the cluster with what they had
# committed (etcd is durable: a killed member keeps its data). With none
# alive it restarts them all from their data dirs if those were made for
# exactly these ports, else (or with ETCD_FRESH=1) it starts a new, empty
# cluster. Either way it waits until every member answers `endpoint
# health` (a quorum read). A stale pidfile is ignored; exits 3 if a client
# or peer port belongs to someone else, 2 if etcd is not installed.
# Env: SERVICES_DIR (/tmp/services), ETCD_FRESH (0), ETCD_WAIT_S (60),
#      ETCD_HEARTBEAT_MS (100), ETCD_ELECTION_MS (1000).
set -euo pipefail

if [ $# -gt 0 ]; then PORTS=("$@"); else PORTS=("${ETCD_PORT:-2391}"); fi
DIR="${SERVICES_DIR:-/tmp/services}"
WAIT_S="${ETCD_WAIT_S:-60}"

log() { echo "etcd-up: $*" >&2; }
base() { echo "$DIR/etcd-$1"; }
alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null && ! grep -q '^[0-9]* (.*) Z' "/proc/$1/stat" 2>/dev/null; }
port_busy() { timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null; }
pid_of() { cat "$(base "$1")/etcd.pid" 2>/dev/null || true; }
healthy() { ETCDCTL_API=3 timeout 5 etcdctl --endpoints="127.0.0.1:$1" --dial-timeout=1s --command-timeout=2s endpoint health >/dev/null 2>&1; }
running() { local pid; pid=$(pid_of "$1"); alive "$pid" && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = etcd ]; }

for b in etcd etcdctl; do
  command -v "$b" >/dev/null || { log "$b missing (apt-get install -y etcd-server etcd-client)"; exit 2; }
done
for p in "${PORTS[@]}"; do
  case "$p" in (*[!0-9]*|'') log "bad port '$p'"; exit 2;; esac
done

# The cluster's identity: its members' names and peer URLs, the same text
# on every start, so a data dir made for another set of ports is not reused.
initial=()
for p in "${PORTS[@]}"; do initial+=("m$p=http://127.0.0.1:$((p + 1))"); done
INITIAL=$(IFS=,; echo "${initial[*]}")

up=0
for p in "${PORTS[@]}"; do running "$p" && up=$((up + 1)); done
fresh=0
if [ "$up" = 0 ]; then
  if [ "${ETCD_FRESH:-0}" = 1 ]; then fresh=1; fi
  for p in "${PORTS[@]}"; do
    [ "$(cat "$(base "$p")/cluster" 2>/dev/null)" = "$INITIAL" ] || fresh=1
  done
  if [ "$fresh" = 1 ]; then
    for p in "${PORTS[@]}"; do rm -rf -- "$(base "$p")"; done
  fi
fi

T0=$(date +%s%N)
for p in "${PORTS[@]}"; do
  if running "$p"; then continue; fi
  b=$(base "$p")
  rm -f "$b/etcd.pid"
  for q in "$p" $((p + 1)); do
    if port_busy "$q"; then log "port $q is already in use by another process"; exit 3; fi
  done
  mkdir -p "$b"
  echo "$INITIAL" >"$b/cluster"
  # etcd does not fork: run it detached (setsid, stdio to its log) so
  # $(...) callers do not wait for it. Without job control setsid execs
  # etcd in place, so $! is etcd's PID. A data dir that exists makes etcd
  # ignore the --initial-* flags and restart from its WAL.
  setsid etcd --name "m$p" --data-dir "$b/data" \
    --listen-client-urls "http://127.0.0.1:$p" --advertise-client-urls "http://127.0.0.1:$p" \
    --listen-peer-urls "http://127.0.0.1:$((p + 1))" --initial-advertise-peer-urls "http://127.0.0.1:$((p + 1))" \
    --initial-cluster "$INITIAL" --initial-cluster-token "fpdedup-etcd-${PORTS[0]}" --initial-cluster-state new \
    --heartbeat-interval "${ETCD_HEARTBEAT_MS:-100}" --election-timeout "${ETCD_ELECTION_MS:-1000}" \
    --quota-backend-bytes $((8 << 30)) --logger zap --log-outputs stderr \
    </dev/null >>"$b/etcd.log" 2>&1 &
  echo $! >"$b/etcd.pid"
done

ok() {
  local p
  for p in "${PORTS[@]}"; do running "$p" && healthy "$p" || return 1; done
}
for _ in $(seq 1 $((WAIT_S * 10))); do
  if ok; then
    pids=()
    for p in "${PORTS[@]}"; do pids+=("$(pid_of "$p")"); done
    log "up on 127.0.0.1:${PORTS[*]} (pids ${pids[*]}) in $(( ($(date +%s%N) - T0) / 1000000 )) ms"
    echo "${pids[*]}"
    exit 0
  fi
  for p in "${PORTS[@]}"; do
    running "$p" && continue
    log "member $p exited; last lines of $(base "$p")/etcd.log:"; tail -20 "$(base "$p")/etcd.log" >&2 || true
    exit 1
  done
  sleep 0.1
done
log "etcd on ${PORTS[*]} was not healthy within ${WAIT_S}s"
for p in "${PORTS[@]}"; do log "member $p: last log line: $(tail -1 "$(base "$p")/etcd.log" 2>/dev/null)"; done
exit 1
