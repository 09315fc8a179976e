#!/bin/bash
# bench/cold-plan.sh IDX RUNS COUNT FPDEDUP...: cold batch queries of COUNT
# fresh present keys (bench/cold-batch.sh, each run's keys new to the host's
# cache too), with each FPDEDUP binary or wrapper in shuffled order each
# round, keys from a file and (PIPES=1) through a pipe; prints every run
# and the median wall time of each. Set the device rates of all of them
# alike (--device-rates, FPDEDUP_DEVICE) to compare plans, not measures.
# THP is set to "always" for every process while it runs (as root), and
# restored after. FROM sets the first key (default 600000000): give each
# run of this script keys no earlier run asked for.
idx=$1; runs=$2; count=$3; shift 3
here=$(dirname "$0")
thp=/sys/kernel/mm/transparent_hugepage/enabled
if [ -w $thp ]; then
  was=$(sed 's/.*\[\(.*\)\].*/\1/' $thp)
  echo always > $thp
  trap 'echo $was > $thp' EXIT
fi
echo "== $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), THP $(sed 's/.*\[\(.*\)\].*/\1/' $thp)"
from=${FROM:-600000000}
log=$(mktemp)
for r in $(seq "$runs"); do
  for b in $(printf '%s\n' "$@" | shuf); do
    for mode in file ${PIPES:+pipe}; do
      from=$((from + count))
      line=$(PIPE=$([ $mode = pipe ] && echo 1) bash "$here/cold-batch.sh" "$idx" $from "$count" "$b")
      echo "$(basename "$b") $mode $line" | tee -a "$log"
    done
  done
done
for b in "$@"; do
  for mode in file ${PIPES:+pipe}; do
    awk -v b="$(basename "$b")" -v m=$mode '$1==b && $2==m {print $6}' "$log" | sort -g |
      awk -v b="$(basename "$b")" -v m=$mode '{w[NR]=$1} END {printf "%-14s %-4s median %.2f s (min %.2f, max %.2f, %d runs)\n", b, m, w[int((NR+1)/2)], w[1], w[NR], NR}'
  done
done
rm -f "$log"
