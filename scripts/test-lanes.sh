#!/usr/bin/env bash
# test-lanes.sh DUCKDB_DONE -- test.sh's go test, -race, DuckDB and fuzz
# steps, run under scripts/services/with-services.sh in two lanes at once:
#
#   servers: go test ./reconcile/..., then again under -race -short, then
#            every fuzz target (fuzz.sh short);
#   rest:    go test of every other package, then -race -short of those
#            that run goroutines, then Parquet against DuckDB
#            (duckdb-oracle.sh, once DUCKDB_DONE exists: test.sh's DuckDB
#            install has ended).
#
# Why two lanes: reconcile's tests take turns with the servers
# (internal/serverlock: they kill and restart them), one test at a time
# across packages, and spend much of that turn waiting on a server (a
# failover, a restart, a timeout). Run alone, that chain left the machine's
# cores idle much of its time; beside the CPU-bound packages it fills them.
# The servers lane ends its tests first, so the fuzzing, which needs
# nothing but the cores, follows them there.
# Each lane's lines start with its name; a lane stops at its first failing
# step, the other goes on, and the exit status is 1 if either failed.
#
# go test starts a lane's packages in the order named: the longest first,
# or the last one to start ends the lane alone on one core. The servers
# lane pairs an etcd package (etcd's lock) with the others' (the other
# servers' lock), which run beside each other. Timeouts are for a loaded
# 2-core machine, not go test's 10-minute default. fpdedup-bench, the
# benchmark harness and not the product, is not run under -race.
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
[ $# -eq 1 ] || { echo "usage: scripts/test-lanes.sh DUCKDB_DONE" >&2; exit 2; }
duckdb_done=$1
T0=${TEST_SH_T0:-$(date +%s)}
step() { echo "== $* (at $(($(date +%s) - T0))s)"; }
gotest() { go test -count=1 -timeout 25m ${GOTEST_FLAGS:-} "$@"; }

servers_first="./reconcile/mysqltable/ ./reconcile/etcdkeys/ ./reconcile/bitmapbloom/ ./reconcile/etcdkv/ ./reconcile/rediskeys/ ./reconcile/ ./reconcile/redisbloom/"
rest_first="./cmd/fpdedup/ ./fpstore/ ./cmd/fpdedup-bench/ ./ingest/"
mod=$(go list -m)
mapfile -t rest < <(go list ./... | grep -v -E "^$mod/reconcile(/|$)")
[ ${#rest[@]} -gt 0 ] || { echo "test-lanes: go list found no packages" >&2; exit 1; }

servers_lane() {
  set -e
  step "go test ./reconcile/... (real Redis, Redis Cluster, MariaDB, etcd)"
  gotest $servers_first ./reconcile/...
  step "go test -race -short ./reconcile/... (the fpdedup they run is built with -race too)"
  gotest -race -short $servers_first ./reconcile/...
  step "fuzz: every target from its committed corpus, a short look past it"
  bash scripts/fuzz.sh short
  step "servers lane done"
}

rest_lane() {
  set -e
  step "go test of every other package"
  gotest $rest_first "${rest[@]}"
  step "go test -race -short (cmd/fpdedup, fpstore, ingest, internal, pipeline)"
  gotest -race -short ./cmd/fpdedup/ ./fpstore/ ./ingest/ ./internal/... ./pipeline/
  step "Parquet against DuckDB, live (scripts/duckdb-oracle.sh)"
  while [ ! -e "$duckdb_done" ]; do sleep 1; done
  bash scripts/duckdb-oracle.sh
  step "rest lane done"
}

# lane NAME FUNC: FUNC's output, each line led by [NAME]; FUNC's status.
lane() {
  "$2" 2>&1 | sed -u "s/^/[$1] /"
  return "${PIPESTATUS[0]}"
}

lane servers servers_lane &
servers=$!
lane rest rest_lane &
rest_pid=$!
status=0
wait "$servers" || { status=1; echo "test-lanes: the servers lane failed (its [servers] lines say where)"; }
wait "$rest_pid" || { status=1; echo "test-lanes: the rest lane failed (its [rest] lines say where)"; }
exit $status
