#!/usr/bin/env bash
# ab.sh: interleaved A/B timing of whole commands, for a change's before
# and after on a noisy machine: run i of every command comes before run
# i+1 of any, so a neighbour's burst hurts all alike, and each round
# runs them in another order (see below). Prints each
# command's median, min and max wall time and its ratio to the first.
#
#   bench/ab.sh [-n RUNS] [-o OUT] [-w WARM] 'CMD A' 'CMD B' ...
#
# -n runs per command (default 7, after one untimed warm-up each); -o where
# each command's stdout goes (default /dev/null; "pipe" sends it through
# cat, as into a pipeline); -w a command run, untimed, before every run
# (fpdedup-bench warm: every command then starts from memory the host has
# just backed, see below). Commands run under bash -c; their exit
# status is not checked (query exits 1 when a key is absent). Check the load
# (uptime) first: the figures are only worth what the machine's quiet is.
set -euo pipefail
runs=7 out=/dev/null warm=
while getopts n:o:w: opt; do
	case $opt in
	n) runs=$OPTARG ;;
	o) out=$OPTARG ;;
	w) warm=$OPTARG ;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))
if (($# == 0)); then
	echo "usage: bench/ab.sh [-n RUNS] [-o /dev/null|pipe] [-w WARM] 'CMD A' 'CMD B' ..." >&2
	exit 2
fi
echo "load: $(cut -d' ' -f1-3 /proc/loadavg); $runs interleaved runs each" >&2
declare -A times
run() { # run CMD: its wall time in ms
	local t0 t1
	if [[ -n $warm ]]; then
		bash -c "$warm" >/dev/null || true
	fi
	t0=$(date +%s%N)
	if [[ $out == pipe ]]; then
		bash -c "$1" | cat >/dev/null || true
	else
		bash -c "$1" >"$out" || true # query's "absent" is exit 1
	fi
	t1=$(date +%s%N)
	echo $(((t1 - t0) / 1000000))
}
cmds=("$@")
for c in "$@"; do run "$c" >/dev/null; done
# Each round runs the commands in a new order (a shuffle seeded by the
# round: the same orders every time), so that no command always runs right
# after the same one. In this VM that matters: memory a process frees is
# handed back to the host within seconds, and a process that maps fresh huge
# pages right after another one freed its own finds them backed (count:
# 1.1 s, 0.3 s of sys) where after a peer or a pause it waits for the host
# (5 s, 6 s of sys). (Rotating the order is not enough: it keeps each
# command's predecessor.)
order() { # order ROUND N: 0..N-1 shuffled
	awk -v seed="$1" -v n="$2" 'BEGIN {
		srand(seed + 1)
		for (k = 0; k < n; k++) p[k] = k
		for (k = n - 1; k > 0; k--) { r = int(rand() * (k + 1)); t = p[k]; p[k] = p[r]; p[r] = t }
		for (k = 0; k < n; k++) print p[k]
	}'
}
for ((i = 0; i < runs; i++)); do
	while read -r j; do
		c=${cmds[$j]}
		times[$c]+="$(run "$c") "
	done < <(order "$i" ${#cmds[@]})
done
first=
for c in "$@"; do
	read -r med lo hi < <(tr ' ' '\n' <<<"${times[$c]}" | grep . | sort -n |
		awk '{v[NR]=$1} END {print v[int((NR+1)/2)], v[1], v[NR]}')
	first=${first:-$med}
	awk -v m="$med" -v lo="$lo" -v hi="$hi" -v f="$first" -v c="$c" \
		'BEGIN {printf "%7d ms (%d-%d)  %.2fx  %s\n", m, lo, hi, m/f, c}'
done
