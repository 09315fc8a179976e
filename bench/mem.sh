#!/usr/bin/env bash
# mem.sh: what --mem bounds, measured. Each command that reads data
# (dedup, dedup --record, dedup --keep last, count, build, merge of two
# halves, query, replay, the Parquet dedup and count, reconcile of an
# export file, decompression bombs) runs once under each --mem of 16MiB,
# 64MiB, 256MiB and 1GiB on RECORDS generated events; under
# scripts/services/with-services.sh ($FPDEDUP_REDIS_ADDR) reconcile
# against Redis keys (audit, --apply), a bitmap bloom (audit,
# --rebuild-shard all) and RedisBloom filters (audit) too, in database 13.
# Its anonymous resident memory (RssAnon, summed over its processes)
# sampled every millisecond, and by the command itself (--stats-json): the
# kernel keeps no anonymous peak, so each figure is a lower bound. Each row
# is judged against the bound the README and --help state; the README's
# --mem sentence quotes the largest excess. A preset of fpdedup-bench:
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
