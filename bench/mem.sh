#!/usr/bin/env bash
# mem.sh: what --mem bounds, measured. Each command (dedup, dedup --record,
# build, merge of two halves, query) runs once under each --mem of 16MiB,
# 64MiB, 256MiB and 1GiB on RECORDS generated events, its anonymous
# resident memory (RssAnon, summed over its processes) sampled every
# millisecond: the kernel keeps no anonymous peak, so each figure is a
# lower bound. The README's --mem sentence quotes the largest excess over
# --mem. A preset of fpdedup-bench:
#
#   bench/mem.sh [RECORDS=10000000]
#
# = fpdedup-bench --jobs mem --records RECORDS, the report in
#   bench/results/mem-<UTC time>/; the table is also printed here.
#   Environment: FPDEDUP, NOTE (lib.sh), MEM_SWEEP (default
#   16MiB,64MiB,256MiB,1GiB).
set -euo pipefail
usage="bench/mem.sh [RECORDS=10000000]"
(($# <= 1)) || { echo "usage: $usage" >&2; exit 2; }
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_count "$usage" "${1:-10000000}"
bench_run mem --jobs mem --records "${1:-10000000}" --mem-sweep "${MEM_SWEEP:-16MiB,64MiB,256MiB,1GiB}"
sed -n '/^## mem:/,/^Largest excess/p' "$bench_out/report.md"
