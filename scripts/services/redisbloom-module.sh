#!/usr/bin/env bash
# redisbloom-module.sh -- print the RedisBloom module the test servers load
# (redis-up.sh, redis-cluster-up.sh: --loadmodule), or nothing when there is
# none: $FPDEDUP_REDISBLOOM when set (an error if it names no file), else
# shared/redisbloom/redisbloom.so in the nearest directory above this script
# that holds one (CI has ../shared beside the clone). The servers start
# without it when there is none; the tests against the module then skip,
# or fail when $CI is set (internal/rbloom/rbloomtest, reconciletest).
set -euo pipefail
if [ -n "${FPDEDUP_REDISBLOOM:-}" ]; then
  [ -f "$FPDEDUP_REDISBLOOM" ] || { echo "redisbloom-module: FPDEDUP_REDISBLOOM=$FPDEDUP_REDISBLOOM is no file" >&2; exit 2; }
  echo "$FPDEDUP_REDISBLOOM"; exit 0
fi
dir="$(cd "$(dirname "$0")" && pwd)"
while :; do
  if [ -f "$dir/shared/redisbloom/redisbloom.so" ]; then echo "$dir/shared/redisbloom/redisbloom.so"; exit 0; fi
  [ "$dir" = / ] && break
  dir="$(dirname "$dir")"
done
echo "redisbloom-module: no shared/redisbloom/redisbloom.so above $(dirname "$0") and FPDEDUP_REDISBLOOM is not set: the servers start without RedisBloom" >&2
