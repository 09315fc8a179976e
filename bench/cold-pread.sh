#!/bin/bash
# bench/cold-pread.sh [KEYS] [ROUNDS]: cold lookups through the mapping and
# with pread (fpstore's BenchmarkColdPaths: an index of KEYS random keys,
# default 10^7, its segments open and pread's directories read, dropped from
# the page cache before each batch of 10^3, 10^4 and 10^5 keys; single
# lookups one after another, each of a key whose pages no lookup read),
# side by side with fio's 4 KiB random reads of the index file itself
# (read-only, O_DIRECT: the device alone, on the same blocks; a file fio
# writes itself is partly in the host's cache of the VM's disk), at depth 1
# and depth 32, ROUNDS rounds (default 3) of fio then the benchmark. It prints the load before and
# after each round, every figure, and the ratios the issue asks for (47):
# a single cold lookup's time over fio's depth-1 latency (mean over mean,
# median over median: 100 lookups a round), and a cold
# batch's keys (and pages read) a second over fio's depth-32 IOPS, for
# each path. (In a small index a batch's keys share pages: its keys a
# second can pass the IOPS; the pages read a second cannot.)
#
# The machine's load decides the absolute figures: compare ratios within a
# round, and run it idle for the figures themselves. TMPDIR must be on the
# disk measured (not tmpfs): the index and fio's file are made there.
# Needs fio and go (bench/peers.sh installs fio, as root).
set -euo pipefail
keys=${1:-10000000}
rounds=${2:-3}
here=$(cd "$(dirname "$0")/.." && pwd)
dir=$(mktemp -d "${TMPDIR:-/tmp}/cold-pread.XXXXXX")
trap 'rm -rf "$dir"' EXIT
load() { cut -d' ' -f1-3 /proc/loadavg; }
echo "== $(nproc) cores, $keys keys in $dir ($(df --output=source "$dir" | tail -1))"
# $FPDEDUP_BENCH_INDEX: an index of as many keys kept from an earlier run.
export FPDEDUP_BENCH_KEYS=$keys FPDEDUP_BENCH_INDEX=${FPDEDUP_BENCH_INDEX:-$dir/bench.fpx} TMPDIR=$dir
fio_iops() { # depth -> "iops mean-latency-µs median-completion-latency-µs"
  fio --name=r --filename="$FPDEDUP_BENCH_INDEX" --readonly --rw=randread --bs=4k --direct=1 \
    --ioengine=libaio --iodepth="$1" --time_based --runtime=5 --output-format=json |
    jq -r '.jobs[0].read | "\(.iops) \(.lat_ns.mean / 1000) \(.clat_ns.percentile["50.000000"] / 1000)"'
}
(cd "$here" && go test -c -o "$dir/fpstore.test" ./fpstore)
echo "-- the index of $keys keys: $( (cd "$dir" && ./fpstore.test -test.run XXX -test.bench 'ColdPaths/^keys=1$/^pread$' -test.benchtime 1x >/dev/null) && du -h "$FPDEDUP_BENCH_INDEX" | cut -f1)"
for r in $(seq "$rounds"); do
  echo "-- round $r, load $(load)"
  read -r iops1 lat1 p50 < <(fio_iops 1)
  read -r iops32 lat32 _ < <(fio_iops 32)
  printf 'fio 4k randread: depth 1 %.0f IOPS, %.1f µs mean, %.1f µs median; depth 32 %.0f IOPS, %.1f µs mean\n' "$iops1" "$lat1" "$p50" "$iops32" "$lat32"
  # Single lookups 100 a round (one slow read of the device moves the
  # mean of a few), batches 10.
  (cd "$dir" && ./fpstore.test -test.run XXX -test.bench 'ColdPaths/^keys=1$' -test.benchtime 100x &&
    ./fpstore.test -test.run XXX -test.bench 'ColdPaths/^keys=[0-9]{4,}$' -test.benchtime 10x) |
    grep '^BenchmarkColdPaths' | tee "$dir/bench.txt"
  awk -v lat1="$lat1" -v p50="$p50" -v iops32="$iops32" '
    { split($1, a, "/"); n = a[2]; sub("keys=", "", n); path = a[3]; sub("-[0-9]+$", "", path)
      for (i = 2; i < NF; i++) { if ($(i+1) == "ns/key") ns = $i; if ($(i+1) == "pages/key") pk = $i; if ($(i+1) == "p50-ns/key") med = $i }
      if (n == 1) printf "  1 key, %-11s %8.0f µs mean = %5.2fx fio depth-1 mean; %6.0f µs median = %5.2fx its median; %.2f pages\n", path, ns / 1000, ns / 1000 / lat1, med / 1000, med / 1000 / p50, pk
      else printf "  %6d keys, %-11s %8.0f keys/s = %5.2f of fio depth-32 IOPS; %.2f pages a key, pages read a second %5.2f of its IOPS\n", n, path, 1e9 / ns, 1e9 / ns / iops32, pk, 1e9 / ns * pk / iops32 }' "$dir/bench.txt"
  echo "-- load after round $r: $(load)"
done
