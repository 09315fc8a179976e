#!/usr/bin/env bash
# duckdb-oracle.sh -- fpdedup's Parquet commands checked live against
# DuckDB (scripts/duckdb-oracle.mjs says what is checked): DuckDB writes
# the inputs and reads back what fpdedup writes. DuckDB comes from npm
# (bench/peers.sh --duckdb, which installs node and npm from apt as root);
# test.sh starts that install early and runs this after go test.
#
#   bash scripts/duckdb-oracle.sh      (FPDEDUP_BIN: check that binary)
#
# As root (CI) a DuckDB that cannot be installed is a failure; otherwise
# the check is skipped, saying so. Exit 1 when fpdedup and DuckDB differ.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
if ! bash bench/peers.sh --duckdb >/dev/null 2>&1 || ! command -v node >/dev/null; then
  if [ "$(id -u)" = 0 ]; then
    echo "duckdb-oracle: DuckDB could not be installed (bench/peers.sh --duckdb):" >&2
    bash bench/peers.sh --duckdb >&2 || true
    exit 1
  fi
  echo "duckdb-oracle: skipped: no DuckDB (run bench/peers.sh --duckdb as root)" >&2
  exit 0
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/fpdedup-oracle.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
F="${FPDEDUP_BIN:-$tmp/fpdedup}"
[ -n "${FPDEDUP_BIN:-}" ] || go build -o "$F" ./cmd/fpdedup
node scripts/duckdb-oracle.mjs "$F" "$tmp"
