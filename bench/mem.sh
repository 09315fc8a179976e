#!/usr/bin/env bash
# mem.sh: what --mem bounds, measured (issue 10, item 11). For each command
# and each --mem it runs fpdedup once under benchtool rss (the anonymous
# resident memory of the process, RssAnon, sampled every millisecond: the
# kernel keeps no anonymous peak, so it is a lower bound) and reports the
# peak and its excess over --mem. The README's --mem sentence quotes the
# largest excess.
#
#   bench/mem.sh [RECORDS=10000000]
#
# Jobs on RECORDS generated events (38% repeats): dedup (in memory below
# its table budget, bounded beyond it), dedup --record, build, merge of two
# halves, query of the events against an index. Output: a markdown table on
# stdout and in bench/results/mem-<UTC time>.md.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
records=${1:-10000000}
mems=(16MiB 64MiB 256MiB 1GiB)

work=$(mktemp -d "${TMPDIR:-/tmp}/fpdedup-mem.XXXXXX")
trap 'rm -rf -- "$work"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
go build -o "$work/benchtool" ./bench/benchtool
go build -o "$work/fpdedup" ./cmd/fpdedup
fp=$work/fpdedup
"$fp" bench gen -q --records "$records" -o "$work/ev.txt"
head -n $((records / 2)) "$work/ev.txt" >"$work/a.txt"
tail -n +$((records / 2 + 1)) "$work/ev.txt" >"$work/b.txt"
"$fp" build -q -o "$work/a.fpx" "$work/a.txt"
"$fp" build -q -o "$work/b.fpx" "$work/b.txt"
"$fp" build -q -o "$work/ev.fpx" "$work/ev.txt"

mib() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }
tomib() { case $1 in *GiB) echo $((${1%GiB} * 1024)) ;; *MiB) echo "${1%MiB}" ;; esac; }

out=bench/results/mem-$(date -u +%Y-%m-%dT%H%M%SZ).md
{
	echo "# Anonymous memory against --mem ($records records, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg) before)"
	echo
	echo "| command | --mem | peak anonymous RSS (MiB) | over --mem (MiB) |"
	echo "| --- | ---: | ---: | ---: |"
} >"$work/table"
worst=-1000000
for mem in "${mems[@]}"; do
	for job in dedup "dedup --record" build merge query; do
		case $job in
		dedup) cmd=("$fp" --mem "$mem" dedup -q --tmpdir "$work" -o "$work/out.txt" "$work/ev.txt") ;;
		"dedup --record") cmd=("$fp" --mem "$mem" dedup -q --tmpdir "$work" --record "$work/r.fpx" -o "$work/out.txt" "$work/ev.txt") ;;
		build) cmd=("$fp" --mem "$mem" build -q --tmpdir "$work" -o "$work/o.fpx" "$work/ev.txt") ;;
		merge) cmd=("$fp" --mem "$mem" merge -q -o "$work/m.fpx" "$work/a.fpx" "$work/b.fpx") ;;
		query) cmd=(sh -c "\"$fp\" --mem $mem query --count \"$work/ev.fpx\" < \"$work/ev.txt\" >/dev/null") ;;
		esac
		"$work/benchtool" rss --every 1ms -o "$work/peak" -- "${cmd[@]}" >/dev/null
		peak=$(cat "$work/peak")
		over=$(awk -v p="$peak" -v m="$(tomib "$mem")" 'BEGIN { printf "%.1f", p / 1024 - m }')
		echo "| $job | $mem | $(mib "$peak") | $over |" >>"$work/table"
		worst=$(awk -v a="$worst" -v b="$over" 'BEGIN { print (b > a ? b : a) }')
	done
done
{
	echo
	echo "Largest excess over --mem: $worst MiB (benchtool rss, RssAnon sampled every 1 ms)."
} >>"$work/table"
cp "$work/table" "$out"
cat "$out"
