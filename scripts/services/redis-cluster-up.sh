#!/usr/bin/env bash
# redis-cluster-up.sh [PORT...] -- start a throwaway Redis Cluster of masters
# (no replicas) on 127.0.0.1, one redis-server per PORT (default 7391 7392
# 7393), without systemd; each node keeps its nodes.conf, pidfile and log
# under $SERVICES_DIR/redis-cluster-PORT. No persistence (no RDB, no AOF).
#
# Prints ONLY the PIDs on stdout, space-separated (diagnostics go to stderr):
#   CLUSTER_PIDS=$(bash redis-cluster-up.sh 7391 7392 7393)
#   seeds: 127.0.0.1:7391,127.0.0.1:7392,127.0.0.1:7393
#
# Idempotent: with no node of ours running it starts from scratch (old
# nodes.conf files removed) and creates the cluster with
# `redis-cli --cluster create … --cluster-replicas 0 --cluster-yes`; with
# some running (a test killed a node) it restarts the missing ones from
# their nodes.conf, so they rejoin with their slots (and no keys). Either
# way it waits for cluster_state:ok on every node. Exits 3 if a port belongs
# to someone else.
# Every node loads the RedisBloom module (BF.*) when redisbloom-module.sh
# finds one ($FPDEDUP_REDISBLOOM, or shared/redisbloom/redisbloom.so above
# the repo).
# Env: SERVICES_DIR (/tmp/services), REDIS_CLUSTER_NODE_TIMEOUT (ms, 2000),
#      REDIS_CLUSTER_WAIT_S (60), FPDEDUP_REDISBLOOM.
set -euo pipefail

if [ $# -gt 0 ]; then PORTS=("$@"); else PORTS=(7391 7392 7393); fi
DIR="${SERVICES_DIR:-/tmp/services}"
WAIT_S="${REDIS_CLUSTER_WAIT_S:-60}"
NODE_TIMEOUT="${REDIS_CLUSTER_NODE_TIMEOUT:-2000}"

log() { echo "redis-cluster-up: $*" >&2; }
base() { echo "$DIR/redis-cluster-$1"; }
cli() { local p=$1; shift; timeout 5 redis-cli -h 127.0.0.1 -p "$p" "$@" 2>/dev/null; }
ping_ok() { [ "$(cli "$1" PING)" = "PONG" ]; }
port_busy() { timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null; }
alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null && ! grep -q '^[0-9]* (.*) Z' "/proc/$1/stat" 2>/dev/null; }
pid_of() { cat "$(base "$1")/redis.pid" 2>/dev/null || true; }
ours() { local pid; pid=$(pid_of "$1"); alive "$pid" && ping_ok "$1"; }
info() { cli "$1" CLUSTER INFO | tr -d '\r' | sed -n "s/^$2://p"; }

command -v redis-server >/dev/null && command -v redis-cli >/dev/null ||
  { log "redis-server/redis-cli not installed (apt-get install -y redis-server)"; exit 2; }
[ ${#PORTS[@]} -ge 3 ] || { log "a cluster needs at least 3 masters (got ${PORTS[*]})"; exit 2; }

running=0
for p in "${PORTS[@]}"; do ours "$p" && running=$((running + 1)); done
if [ "$running" = 0 ]; then
  for p in "${PORTS[@]}"; do rm -rf -- "$(base "$p")"; done
fi

MODULE=()
mod=$(bash "$(dirname "$0")/redisbloom-module.sh") || exit 2
[ -n "$mod" ] && MODULE=(--loadmodule "$mod")

T0=$(date +%s%N)
for p in "${PORTS[@]}"; do
  if ours "$p"; then continue; fi
  rm -f "$(base "$p")/redis.pid"
  if port_busy "$p"; then log "port $p is already in use by another process"; exit 3; fi
  mkdir -p "$(base "$p")"
  redis-server --bind 127.0.0.1 --port "$p" --protected-mode yes \
    --cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout "$NODE_TIMEOUT" \
    --save '' --appendonly no --dir "$(base "$p")" --dbfilename dump-unused.rdb \
    --daemonize yes --pidfile "$(base "$p")/redis.pid" --logfile "$(base "$p")/redis.log" \
    --io-threads 1 "${MODULE[@]}" >/dev/null
  for _ in $(seq 1 $((WAIT_S * 20))); do
    ping_ok "$p" && [ -s "$(base "$p")/redis.pid" ] && break
    sleep 0.05
  done
  ping_ok "$p" || { log "node $p did not answer PING; last log lines:"; tail -20 "$(base "$p")/redis.log" >&2 || true; exit 1; }
done

if [ "$(info "${PORTS[0]}" cluster_slots_assigned)" = 0 ]; then
  seeds=()
  for p in "${PORTS[@]}"; do seeds+=("127.0.0.1:$p"); done
  redis-cli --cluster create "${seeds[@]}" --cluster-replicas 0 --cluster-yes >"$(base "${PORTS[0]}")/create.log" 2>&1 ||
    { log "redis-cli --cluster create failed:"; tail -20 "$(base "${PORTS[0]}")/create.log" >&2; exit 1; }
fi

ok() {
  local p
  for p in "${PORTS[@]}"; do
    [ "$(info "$p" cluster_state)" = ok ] || return 1
    [ "$(info "$p" cluster_known_nodes)" = "${#PORTS[@]}" ] || return 1
    [ "$(info "$p" cluster_slots_ok)" = 16384 ] || return 1
  done
}
for _ in $(seq 1 $((WAIT_S * 10))); do
  if ok; then
    pids=()
    for p in "${PORTS[@]}"; do pids+=("$(pid_of "$p")"); done
    log "up on 127.0.0.1:${PORTS[*]} (pids ${pids[*]}) in $(( ($(date +%s%N) - T0) / 1000000 )) ms"
    echo "${pids[*]}"
    exit 0
  fi
  sleep 0.1
done
log "the cluster did not reach cluster_state:ok within ${WAIT_S}s:"
for p in "${PORTS[@]}"; do log "node $p: state=$(info "$p" cluster_state) known=$(info "$p" cluster_known_nodes) slots_ok=$(info "$p" cluster_slots_ok)"; done
exit 1
