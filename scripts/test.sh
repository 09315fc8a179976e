#!/usr/bin/env bash
# test.sh -- every test of the project: gofmt, vet, staticcheck, a tidy
# go.mod, the generated code, go test ./... (unit, property, end-to-end CLI
# scripts, fault injection, fuzz corpora), the packages with goroutines again
# under -race, Parquet checked live against DuckDB (scripts/duckdb-oracle.sh)
# and every fuzz target for a few seconds (scripts/fuzz.sh).
# On a fresh Debian machine as root it installs what the tests use first
# (xxhash for the hash goldens against xxh128sum, zstd, flatc to check the
# generated code, node and npm for DuckDB). Run from anywhere; CI (.ci/run) calls exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
# Each step says when it started (seconds since test.sh began), so a slow
# CI run shows where its time went.
export TEST_SH_T0=${TEST_SH_T0:-$(date +%s)}
phase() { echo "== $* (at $(( $(date +%s) - TEST_SH_T0 ))s)"; }

need=()
for tool in xxh128sum:xxhash zstd:zstd flatc:flatbuffers-compiler node:nodejs; do
  command -v "${tool%%:*}" >/dev/null || need+=("${tool#*:}")
done
if [ ${#need[@]} -gt 0 ] || ! command -v npm >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "test.sh: installing ${need[*]:-} (and npm if nodejs lacks it)" >&2
    apt-get update -q >/dev/null
    if [ ${#need[@]} -gt 0 ]; then
      DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null
    fi
    # Debian's nodejs comes without npm (NodeSource's has it): installed
    # here, before with-services.sh's apt runs, never beside it.
    command -v npm >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends npm >/dev/null ||
      echo "test.sh: npm did not install: the DuckDB oracle will fail" >&2
  else
    echo "test.sh: missing ${need[*]:-} npm? (tests that need them are skipped)" >&2
  fi
fi

# DuckDB (npm) for the Parquet oracle: fetched meanwhile, when npm is
# here (else duckdb-oracle.sh says why it cannot run); the oracle waits
# for duckdb_done.
duckdb_log=$(mktemp "${TMPDIR:-/tmp}/fpdedup-duckdb.XXXXXX")
duckdb_done=$duckdb_log.done
trap 'rm -f "$duckdb_log" "$duckdb_done"' EXIT
if command -v npm >/dev/null; then
  { bash bench/peers.sh --duckdb >"$duckdb_log" 2>&1 || cat "$duckdb_log" >&2; touch "$duckdb_done"; } &
else
  touch "$duckdb_done"
fi

phase "gofmt"
bad=$(gofmt -l $(git ls-files '*.go'))
[ -z "$bad" ] || { echo "gofmt would change: $bad"; exit 1; }
phase "go vet"
go vet ./...
phase "staticcheck"
go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
if [ -d .git ]; then
  phase "go mod tidy changes nothing"
  go mod tidy
  git diff --exit-code -- go.mod go.sum || { echo "go.mod/go.sum were not tidy: run go mod tidy and commit the result"; exit 1; }
fi
if command -v flatc >/dev/null && [ -d .git ]; then
  phase "generated code matches schema/fpx.fbs"
  go generate ./schema
  git diff --quiet -- schema || { git diff --stat -- schema; echo "schema/*.go were not what flatc generates from fpx.fbs: regenerated them; commit the result"; exit 1; }
fi
phase "go test, -race, Parquet against DuckDB and fuzz, in two lanes (scripts/test-lanes.sh)"
# with-services.sh installs redis-server, mariadb-server, etcd-server and
# slurm-wlm from Debian when missing (as root), starts them on loopback
# (Redis on 6390, its Cluster on 7391-7393, MariaDB on 3390, etcd on 2391
# and its 3-member cluster on 2393/2395/2397, Slurm), exports
# FPDEDUP_REDIS_ADDR / FPDEDUP_REDIS_CLUSTER / FPDEDUP_MYSQL_DSN /
# FPDEDUP_ETCD / FPDEDUP_ETCD_CLUSTER / SLURM_CONF, runs the lanes and
# tears down.
bash scripts/services/with-services.sh bash scripts/test-lanes.sh "$duckdb_done"
phase "done"
