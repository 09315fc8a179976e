#!/usr/bin/env bash
# bench/etcd-reconcile.sh -- `fpdedup reconcile --online etcd://…` (the
# command, whole processes) side by side with etcd's own tools and client,
# against the single member of FPDEDUP_ETCD, in the same run, interleaved:
#
#   audit:  N (10^6) keys under a prefix, the index holding the same keys:
#           reconcile's audit (one revision, pages of PAGE, merge-join)
#           against a loop of `etcdctl get START END --keys-only --rev R
#           --limit PAGE(+1)` over the same range, and one `etcdctl get
#           --prefix --keys-only` of everything, into /dev/null
#   apply:  CREATE_N (10^5) keys missing under an empty prefix: reconcile
#           --apply --records (compare-and-create, --batch 128, --conns
#           CONNS) against the same transactions sent by a bare Go loop of
#           the client at the same concurrency (reconcile/etcdkv's
#           BenchmarkCreate bare/batch); reconcile's write phase (the
#           report's apply.seconds) and its whole process
#
# Medians of RUNS (5), peak RSS (GNU time) beside --mem. The keys are
# BenchmarkScan's (u%d:d%d:%d, SHA-256), loaded once under
# /fpdedup-bench/scan/sha256/ by reconcile/etcdkv's benchmark and kept.
# The machine may be shared: the figures say so with the load average.
#
#   bash scripts/services/with-services.sh bash bench/etcd-reconcile.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH" LC_ALL=C ETCDCTL_API=3
RUNS="${RUNS:-5}" N="${N:-1000000}" PAGE="${PAGE:-10000}" CREATE_N="${CREATE_N:-100000}" CONNS="${CONNS:-4}" MEM="${MEM:-256MiB}"
: "${FPDEDUP_ETCD:?run under scripts/services/with-services.sh (FPDEDUP_ETCD)}"
for tool in etcdctl python3 /usr/bin/time; do command -v $tool >/dev/null || { echo "etcd-reconcile.sh: $tool missing" >&2; exit 2; }; done
export FPDEDUP_BENCH_SCAN_KEYS=$N FPDEDUP_BENCH_PAGE=$PAGE FPDEDUP_BENCH_CREATE_KEYS=$CREATE_N FPDEDUP_BENCH_CONNS=$CONNS FPDEDUP_BENCH_PERKEY_KEYS=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
P=/fpdedup-bench/scan/sha256/ END=/fpdedup-bench/scan/sha2560
ctl() { etcdctl --endpoints="$FPDEDUP_ETCD" --command-timeout=600s "$@"; }
now() { date +%s%N; }
ms() { echo $(( ($2 - $1) / 1000000 )); }
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

go build -o "$tmp/fpdedup" ./cmd/fpdedup
go test -c -o "$tmp/etcdkv.test" ./reconcile/etcdkv
echo "loading $N keys under $P (once)…" >&2
"$tmp/etcdkv.test" -test.run '^$' -test.benchtime 1x -test.bench '^BenchmarkScan$' >/dev/null
# The truth: the same keys, as records (one key a line) and an index.
awk -v n="$N" 'BEGIN {for (i = 0; i < n; i++) printf "u%d:d%d:%d\n", i, i % 97, 1714579200000 + i}' >"$tmp/scan.txt"
awk -v n="$CREATE_N" 'BEGIN {for (i = 0; i < n; i++) printf "u%d:d%d:%d\n", i, i % 97, 1714579200000 + i}' >"$tmp/create.txt"
"$tmp/fpdedup" build -q --hash sha256 -o "$tmp/scan.fpx" "$tmp/scan.txt"
"$tmp/fpdedup" build -q --hash sha256 -o "$tmp/create.fpx" "$tmp/create.txt"

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

: >"$tmp/audit"
for r in $(seq 1 "$RUNS"); do
  t0=$(now)
  /usr/bin/time -f %M -o "$tmp/rss" "$tmp/fpdedup" reconcile -q --mem "$MEM" --index "$tmp/scan.fpx" \
    --online "etcd://$FPDEDUP_ETCD/?prefix=$P&page=$PAGE" --report "$tmp/audit.json" || { echo "the audit did not agree" >&2; exit 1; }
  t1=$(now)
  echo "fpdedup $(ms "$t0" "$t1")" >>"$tmp/audit"
  echo "fpdedup_rss $(cat "$tmp/rss")" >>"$tmp/audit"
  t0=$(now); bash -c "$(declare -f ctl ctl_pages); P=$P END=$END PAGE=$PAGE N=$N tmp=$tmp FPDEDUP_ETCD=$FPDEDUP_ETCD ctl_pages"; t1=$(now)
  echo "etcdctl_pages $(ms "$t0" "$t1")" >>"$tmp/audit"
  t0=$(now); /usr/bin/time -f %M -o "$tmp/rss" etcdctl --endpoints="$FPDEDUP_ETCD" --command-timeout=600s get "$P" --prefix --keys-only >/dev/null; t1=$(now)
  echo "etcdctl_whole $(ms "$t0" "$t1")" >>"$tmp/audit"
  echo "etcdctl_whole_rss $(cat "$tmp/rss")" >>"$tmp/audit"
  echo "audit run $r/$RUNS done (load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
done

: >"$tmp/apply"
for r in $(seq 1 "$RUNS"); do
  ap=/fpdedup-bench/apply/$$/$r/
  t0=$(now)
  /usr/bin/time -f %M -o "$tmp/rss" "$tmp/fpdedup" reconcile -q --mem "$MEM" --index "$tmp/create.fpx" --records "$tmp/create.txt" \
    --online "etcd://$FPDEDUP_ETCD/?prefix=$ap" --apply --batch 128 --conns "$CONNS" --report "$tmp/apply.json" || { echo "the apply did not agree" >&2; exit 1; }
  t1=$(now)
  echo "fpdedup $(ms "$t0" "$t1")" >>"$tmp/apply"
  echo "fpdedup_rss $(cat "$tmp/rss")" >>"$tmp/apply"
  echo "fpdedup_write_kps $(python3 -c 'import json,sys; print(int(json.load(open(sys.argv[1]))["apply"]["keys_per_second"]))' "$tmp/apply.json")" >>"$tmp/apply"
  [ "$(ctl get "$ap" --prefix --keys-only | grep -c .)" = "$CREATE_N" ] || { echo "apply wrote not $CREATE_N keys" >&2; exit 1; }
  # Deleted and compacted away, so that runs do not pile up history.
  rev=$(ctl del "$ap" --prefix -w json | sed -n 's/.*"revision":\([0-9]*\).*/\1/p')
  ctl compaction "$rev" >/dev/null
  "$tmp/etcdkv.test" -test.run '^$' -test.benchtime 1x -test.bench '^BenchmarkCreate$/^bare/batch$' >>"$tmp/bare"
  echo "apply run $r/$RUNS done (load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
done

m() { awk -v k="$1" '$1 == k {print $2}' "$2" | median; }
bare=$(awk '$1 ~ "^BenchmarkCreate/bare/batch(-[0-9]+)?$" {for (i = 1; i < NF; i++) if ($(i+1) == "keys/s") print $i}' "$tmp/bare" | median)
fp=$(m fpdedup "$tmp/audit") pages=$(m etcdctl_pages "$tmp/audit") whole=$(m etcdctl_whole "$tmp/audit")
ap=$(m fpdedup "$tmp/apply") wkps=$(m fpdedup_write_kps "$tmp/apply")
echo
echo "## etcd: fpdedup reconcile beside etcdctl and a bare client loop ($(date -u +%F), etcd $(etcd --version | sed -n 's/etcd Version: //p'), load $(cut -d' ' -f1-3 /proc/loadavg), medians of $RUNS, --mem $MEM)"
echo
echo "| audit of $N keys (keys only, pages of $PAGE) | ms | × etcdctl pages | × etcdctl whole | peak RSS KiB |"
echo "| --- | --- | --- | --- | --- |"
echo "| fpdedup reconcile (whole process: index, one revision, merge-join, report) | $fp | $(awk -v a="$fp" -v b="$pages" 'BEGIN {printf "%.2f", a/b}') | $(awk -v a="$fp" -v b="$whole" 'BEGIN {printf "%.2f", a/b}') | $(m fpdedup_rss "$tmp/audit") |"
echo "| etcdctl get START END --rev R --limit $PAGE, page after page | $pages | 1 | | |"
echo "| etcdctl get --prefix --keys-only > /dev/null, one response | $whole | | 1 | $(m etcdctl_whole_rss "$tmp/audit") |"
echo
echo "| --apply of $CREATE_N missing keys, $CONNS connections, transactions of 128 | keys/s | × bare loop |"
echo "| --- | --- | --- |"
echo "| fpdedup reconcile, the write phase (report apply.keys_per_second) | $wkps | $(awk -v a="$wkps" -v b="$bare" 'BEGIN {printf "%.2f", a/b}') |"
echo "| fpdedup reconcile, whole process (audit, records, writes, read back): $ap ms | $(awk -v n="$CREATE_N" -v t="$ap" 'BEGIN {printf "%.0f", n/(t/1000)}') | $(awk -v n="$CREATE_N" -v t="$ap" -v b="$bare" 'BEGIN {printf "%.2f", n/(t/1000)/b}') |"
echo "| bare clientv3 loop, the same transactions (BenchmarkCreate bare/batch) | $bare | 1 |"
echo
echo "peak RSS of the apply: $(m fpdedup_rss "$tmp/apply") KiB"
