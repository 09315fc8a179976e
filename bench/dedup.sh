#!/usr/bin/env bash
# dedup.sh: fpdedup dedup side by side with its peers: lines (against sort
# -u, DuckDB SELECT DISTINCT, mawk/gawk '!s[$0]++'), the same under a
# bounded --mem (against sort -u -S), CSV keyed by
# user_id,device_id,timestamp_ms (against DuckDB read_csv, awk on the key
# columns) and that CSV zstd-compressed (against zstd -dc). Every output is
# checked: record counts against the generator's, bytes against fpdedup's
# in-memory run and awk's. A preset of fpdedup-bench:
#
#   bench/dedup.sh [RECORDS=10000000] [RUNS=3]
#
# = fpdedup-bench --jobs dedup-lines,dedup-bounded,dedup-csv,dedup-zstd
#   --bounded-mem BOUNDED_MEM --records RECORDS --runs RUNS, the report in
#   bench/results/dedup-<UTC time>/. Environment: FPDEDUP, NOTE (lib.sh),
#   SEED (default 1), BOUNDED_MEM (default 128MiB).
set -euo pipefail
usage="bench/dedup.sh [RECORDS=10000000] [RUNS=3]"
(($# <= 2)) || { echo "usage: $usage" >&2; exit 2; }
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_count "$usage" "${1:-10000000}"
bench_count "$usage" "${2:-3}"
bench_run dedup --jobs dedup-lines,dedup-bounded,dedup-csv,dedup-zstd --bounded-mem "${BOUNDED_MEM:-128MiB}" \
	--records "${1:-10000000}" --runs "${2:-3}" --seed "${SEED:-1}"
