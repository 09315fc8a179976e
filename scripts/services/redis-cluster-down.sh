#!/usr/bin/env bash
# redis-cluster-down.sh [PORT...] -- teardown for redis-cluster-up.sh: stops
# each node by the PID in its pidfile (never by name) with redis-down.sh
# (SIGTERM, wait, SIGKILL). A node already gone is success. With PURGE=1
# also removes $SERVICES_DIR/redis-cluster-PORT.
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
if [ $# -gt 0 ]; then PORTS=("$@"); else PORTS=(7391 7392 7393); fi
DIR="${SERVICES_DIR:-/tmp/services}"
rc=0
for p in "${PORTS[@]}"; do
  pid=$(cat "$DIR/redis-cluster-$p/redis.pid" 2>/dev/null || true)
  if [ -n "$pid" ]; then bash "$HERE/redis-down.sh" "$pid" || rc=1; fi
  if [ "${PURGE:-0}" = 1 ]; then rm -rf -- "$DIR/redis-cluster-$p"; fi
done
exit $rc
