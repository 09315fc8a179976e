#!/usr/bin/env bash
# bench/parquet.sh [ROWS] -- fpdedup reading Parquet keys, side by side
# with DuckDB on the same file in the same run. ROWS (default 10M) events
# are written by DuckDB (bench/duckdb-parquet.mjs gen: zstd, ~38% repeated
# keys user_id, device_id, ts TIMESTAMP_MS); then, interleaved in shuffled
# order, $RUNS times (default 5):
#
#   duckdb:  SELECT count(DISTINCT (user_id, device_id, ts)) on all cores
#   build:   fpdedup build --key user_id,device_id,ts (an index of the keys)
#   count:   fpdedup count of the same keys (each printed once, two passes)
#   ddedup:  DuckDB's dedup: each key's first row, every column, in file
#            order (QUALIFY row_number() ... = 1), written as zstd Parquet
#   dedup:   fpdedup dedup -o OUT.parquet of the same
#   ccount, cbuild: fpdedup count and build of the same keys from the CSV of
#            the same rows (exported by DuckDB, ts as its stored integer)
#
# Wall time and peak RSS (GNU time), medians, and ratios DuckDB/fpdedup
# (above 1.00: fpdedup is faster); for count and build also Parquet/CSV
# (the issue's target: at most 1.5). The distinct count of both is checked
# equal, and the builds from Parquet and from CSV hold the same
# fingerprints. Needs bench/peers.sh (DuckDB from npm). Set THP to always for
# every process around it when comparing (README "Performance").
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH" LC_ALL=C
ROWS="${1:-10000000}"
RUNS="${RUNS:-5}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
F="${FPDEDUP_BIN:-$tmp/fpdedup}"
[ -n "${FPDEDUP_BIN:-}" ] || go build -o "$F" ./cmd/fpdedup
P="$tmp/events.parquet"
node bench/duckdb-parquet.mjs gen "$ROWS" "$P"
echo "parquet.sh: $ROWS rows, $(stat -c %s "$P") bytes; uptime: $(uptime)"

C="$tmp/events.csv"
node bench/duckdb-parquet.mjs csv "$P" "$C"
want=$(node bench/duckdb-parquet.mjs distinct "$P")
"$F" build -q --key user_id,device_id,ts -o "$tmp/k.fpx" "$P"
got=$("$F" inspect "$tmp/k.fpx" | awk '$1 == "fingerprints" {print $2}')
[ "$got" = "$want" ] || { echo "parquet.sh: fpdedup holds $got keys, DuckDB counts $want" >&2; exit 1; }
"$F" build -q --format csv --header --key user_id,device_id,ts -o "$tmp/c.fpx" "$C"
cmp -s <("$F" dump "$tmp/k.fpx") <("$F" dump "$tmp/c.fpx") || { echo "parquet.sh: the builds from Parquet and from its CSV differ" >&2; exit 1; }

timed() { # name cmd...: appends "name seconds kb" to $tmp/times
	local name=$1; shift
	/usr/bin/time -f "$name %e %M" -a -o "$tmp/times" "$@" > /dev/null
}
for r in $(seq "$RUNS"); do
	for job in $(printf '%s\n' duckdb build count ddedup dedup cbuild ccount | shuf); do
		case $job in
		duckdb) timed duckdb node bench/duckdb-parquet.mjs distinct "$P" ;;
		build) timed build "$F" build -q --key user_id,device_id,ts -o "$tmp/k.fpx" "$P" ;;
		count) timed count "$F" count -q --key user_id,device_id,ts -o /dev/null "$P" ;;
		ddedup) timed ddedup node bench/duckdb-parquet.mjs dedup "$P" "$tmp/d.parquet" ;;
		dedup) timed dedup "$F" dedup -q --key user_id,device_id,ts -o "$tmp/f.parquet" "$P" ;;
		cbuild) timed cbuild "$F" build -q --format csv --header --key user_id,device_id,ts -o "$tmp/c.fpx" "$C" ;;
		ccount) timed ccount "$F" count -q --format csv --header --key user_id,device_id,ts -o /dev/null "$C" ;;
		esac
	done
	echo "parquet.sh: run $r of $RUNS done" >&2
done
# The two dedups wrote the same rows: every column's key text, in order.
"$F" count -q --key user_id,device_id,ts,amount,event -o "$tmp/f.rows" "$tmp/f.parquet"
"$F" count -q --key user_id,device_id,ts,amount,event -o "$tmp/d.rows" "$tmp/d.parquet"
cmp -s "$tmp/f.rows" "$tmp/d.rows" || { echo "parquet.sh: fpdedup dedup and DuckDB's kept other rows" >&2; exit 1; }
echo "parquet.sh: both dedups kept the same $(wc -l < "$tmp/f.rows") rows, in the same order"
med() { awk -v j="$1" -v f="$2" '$1 == j {print $f}' "$tmp/times" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# Ratios: build and count against DuckDB's distinct count, dedup against
# DuckDB's dedup.
printf '%-8s %8s %10s %8s %8s\n' job 'wall s' 'RSS MiB' 'duckdb/x' 'x/csv'
for j in duckdb build count ddedup dedup cbuild ccount; do
	w=$(med "$j" 2); m=$(med "$j" 3)
	case $j in ddedup | dedup) d=$(med ddedup 2) ;; *) d=$(med duckdb 2) ;; esac
	case $j in build | count) c=$(printf '%.2f' "$(echo "$w / $(med "c$j" 2)" | bc -l)") ;; *) c=- ;; esac
	printf '%-8s %8.2f %10.0f %8.2f %8s\n' "$j" "$w" "$(echo "$m / 1024" | bc -l)" "$(echo "$d / $w" | bc -l)" "$c"
done
