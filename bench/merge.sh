#!/usr/bin/env bash
# merge.sh: fpdedup merge and the scale-out side by side with their peers
# and floors: the union of the indexes of two halves of the events
# (against LC_ALL=C sort -m -u of their hex dumps), the stitch of the 4
# partitions of one key set and a k-way merge of 4 overlapping indexes,
# and building the index of the keys once or as 4 partitions (two at a
# time, and one alone: what each machine of a 4-way scale-out does). Every
# output is checked against a single build, byte for byte. A preset of
# fpdedup-bench:
#
#   bench/merge.sh [KEYS=50000000] [RUNS=3]
#
# = fpdedup-bench --jobs merge,merge-partitions,build-partitions --records
#   KEYS --runs RUNS (KEYS events for the halves, KEYS random fingerprints
#   for the scale-out), the report in bench/results/merge-<UTC time>/.
#   fpdedup-bench checks the free space first (KEYS=50M needs ~25 GB).
#   Environment: FPDEDUP, NOTE (lib.sh), SEED (default 1).
set -euo pipefail
usage="bench/merge.sh [KEYS=50000000] [RUNS=3]"
(($# <= 2)) || { echo "usage: $usage" >&2; exit 2; }
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_count "$usage" "${1:-50000000}"
bench_count "$usage" "${2:-3}"
bench_run merge --jobs merge,merge-partitions,build-partitions \
	--records "${1:-50000000}" --runs "${2:-3}" --seed "${SEED:-1}"
