#!/usr/bin/env bash
# foundation.sh: fpdedup build and query side by side with their peers
# (sort -u, DuckDB, the bloom CLI, mawk/gawk; cat and zstd -dc as floors),
# the issues' first targets. A preset of fpdedup-bench:
#
#   bench/foundation.sh [RECORDS=10000000] [RUNS=5]
#
# = fpdedup-bench --jobs build,query-present,query-absent --records RECORDS
#   --runs RUNS, the report (report.md, report.json, charts) in
#   bench/results/foundation-<UTC time>/. Run bench/peers.sh (as root)
#   first: a peer that is not installed is reported as missing, never
#   dropped. Environment: FPDEDUP, NOTE (lib.sh), SEED (default 1).
set -euo pipefail
usage="bench/foundation.sh [RECORDS=10000000] [RUNS=5]"
(($# <= 2)) || { echo "usage: $usage" >&2; exit 2; }
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_count "$usage" "${1:-10000000}"
bench_count "$usage" "${2:-5}"
bench_run foundation --jobs build,query-present,query-absent \
	--records "${1:-10000000}" --runs "${2:-5}" --seed "${SEED:-1}"
