#!/usr/bin/env bash
# bench/etcd.sh -- reconcile/etcdkv (the etcd store, before any command uses
# it) side by side with etcd's own tools and client, against the single
# member of FPDEDUP_ETCD, in the same run, interleaved:
#
#   scan:    10^6 keys (N) under a prefix read keys-only at one revision in
#            pages of PAGE (10000): BenchmarkScan's time per scan, and its
#            whole process, against a loop of `etcdctl get START END
#            --keys-only --rev R --limit PAGE(+1)` over the same range (each
#            page starting at the last key of the one before), and one
#            `etcdctl get --prefix --keys-only` of everything at once
#   create:  10^5 missing keys (CREATE_N) by CONNS (4) writers: Create's
#            flat compare-and-create transactions of 128 keys against a bare
#            Go loop of the client sending the same transactions; and on
#            2000 keys one key a transaction, both ways (BenchmarkCreate)
#
# Medians of RUNS (5), with peak RSS (GNU time). The machine may be shared:
# the figures say so with the load average. The 10^6 keys stay under
# /fpdedup-bench/scan/ between runs (loaded by Create the first time).
#
#   bash scripts/services/with-services.sh bash bench/etcd.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH" LC_ALL=C ETCDCTL_API=3
RUNS="${RUNS:-5}" N="${N:-1000000}" PAGE="${PAGE:-10000}" CREATE_N="${CREATE_N:-100000}" CONNS="${CONNS:-4}"
: "${FPDEDUP_ETCD:?run under scripts/services/with-services.sh (FPDEDUP_ETCD)}"
for tool in etcdctl /usr/bin/time; do command -v $tool >/dev/null || { echo "etcd.sh: $tool missing" >&2; exit 2; }; done
export FPDEDUP_BENCH_SCAN_KEYS=$N FPDEDUP_BENCH_PAGE=$PAGE FPDEDUP_BENCH_CREATE_KEYS=$CREATE_N FPDEDUP_BENCH_CONNS=$CONNS
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
P=/fpdedup-bench/scan/sha256/ END=/fpdedup-bench/scan/sha2560
ctl() { etcdctl --endpoints="$FPDEDUP_ETCD" --command-timeout=600s "$@"; }
now() { date +%s%N; }
ms() { echo $(( ($2 - $1) / 1000000 )); }
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

go test -c -o "$tmp/etcdkv.test" ./reconcile/etcdkv
bench() { "$tmp/etcdkv.test" -test.run '^$' -test.benchtime 1x -test.bench "$@"; }
echo "loading $N keys under $P (once)…" >&2
bench '^BenchmarkScan$' >/dev/null

# The etcdctl loop: pages of PAGE keys; after the first, each starts at
# the last key read (so asks PAGE+1 and drops that one).
ctl_pages() {
  local rev start=$P limit=$PAGE keys=0 got last
  rev=$(ctl get "$P" -w json --limit=1 --keys-only | sed -n 's/.*"revision":\([0-9]*\).*/\1/p')
  while :; do
    ctl get "$start" "$END" --keys-only --rev="$rev" --limit="$limit" >"$tmp/page"
    got=$(( $(wc -l <"$tmp/page") / 2 ))
    [ "$limit" = "$PAGE" ] || got=$((got - 1))
    keys=$((keys + got))
    [ "$got" -ge "$PAGE" ] || break
    last=$(tail -2 "$tmp/page" | head -1)
    start=$last limit=$((PAGE + 1))
  done
  [ "$keys" = "$N" ] || { echo "etcdctl pages read $keys keys, not $N" >&2; exit 1; }
}

: >"$tmp/scan"
for r in $(seq 1 "$RUNS"); do
  t0=$(now); /usr/bin/time -f %M -o "$tmp/rss" "$tmp/etcdkv.test" -test.run '^$' -test.benchtime 1x -test.bench '^BenchmarkScan$' >"$tmp/ours"; t1=$(now)
  ns=$(awk '/^BenchmarkScan/ {print $3}' "$tmp/ours")
  echo "ours_scan $((ns / 1000000))" >>"$tmp/scan"
  echo "ours_process $(ms "$t0" "$t1")" >>"$tmp/scan"
  echo "ours_rss $(cat "$tmp/rss")" >>"$tmp/scan"
  t0=$(now); /usr/bin/time -f %M -o "$tmp/rss" bash -c "$(declare -f ctl ctl_pages); P=$P END=$END PAGE=$PAGE N=$N tmp=$tmp FPDEDUP_ETCD=$FPDEDUP_ETCD ctl_pages"; t1=$(now)
  echo "etcdctl_pages $(ms "$t0" "$t1")" >>"$tmp/scan"
  t0=$(now); /usr/bin/time -f %M -o "$tmp/rss" etcdctl --endpoints="$FPDEDUP_ETCD" --command-timeout=600s get "$P" --prefix --keys-only >/dev/null; t1=$(now)
  echo "etcdctl_whole $(ms "$t0" "$t1")" >>"$tmp/scan"
  echo "etcdctl_whole_rss $(cat "$tmp/rss")" >>"$tmp/scan"
  echo "scan run $r/$RUNS done (load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
done

: >"$tmp/create"
for r in $(seq 1 "$RUNS"); do
  bench '^BenchmarkCreate$' >>"$tmp/create"
  echo "create run $r/$RUNS done (load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
done

m() { awk -v k="$1" '$1 == k {print $2}' "$tmp/scan" | median; }
mc() { awk -v k="$1" '$1 ~ "^BenchmarkCreate/"k"(-[0-9]+)?$" {for (i = 1; i < NF; i++) if ($(i+1) == "keys/s") print $i}' "$tmp/create" | median; }
echo
echo "## etcd: reconcile/etcdkv beside etcdctl and a bare client loop ($(date -u +%F), etcd $(etcd --version | sed -n 's/etcd Version: //p'), load $(cut -d' ' -f1-3 /proc/loadavg), medians of $RUNS)"
echo
echo "| scan of $N keys, keys only, pages of $PAGE | ms | peak RSS KiB |"
echo "| --- | --- | --- |"
echo "| etcdkv Scanner (in process) | $(m ours_scan) | $(m ours_rss) (the test binary) |"
echo "| etcdkv Scanner (whole test process, with its dial) | $(m ours_process) | |"
echo "| etcdctl get START END --rev R --limit $PAGE, page after page | $(m etcdctl_pages) | |"
echo "| etcdctl get --prefix --keys-only, one response | $(m etcdctl_whole) | $(m etcdctl_whole_rss) |"
echo
echo "| compare-and-create, $CONNS writers | keys/s |"
echo "| --- | --- |"
echo "| etcdkv Create, flat transactions of 128 keys ($CREATE_N keys) | $(mc etcdkv/batch) |"
echo "| bare clientv3 loop, the same transactions | $(mc bare/batch) |"
echo "| etcdkv Create, one key a transaction (${FPDEDUP_BENCH_PERKEY_KEYS:-2000} keys) | $(mc etcdkv/perkey) |"
echo "| bare clientv3 loop, one key a transaction | $(mc bare/perkey) |"
