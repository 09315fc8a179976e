# shellcheck shell=bash
# lib.sh: what the preset scripts (foundation.sh, dedup.sh, merge.sh,
# mem.sh) share; sourced, not run. Each is one run of fpdedup-bench, the one
# benchmark harness, with its jobs chosen: the measuring, the checks, the
# report and the charts are all fpdedup-bench's.

# bench_run NAME ARGS...: builds fpdedup and fpdedup-bench from this tree
# (what make bench builds) into a temporary directory, removed at the end,
# and runs fpdedup-bench ARGS with its report in
# bench/results/NAME-<UTC time>/ ($bench_out). Environment:
#   FPDEDUP=path  measure this fpdedup binary instead of building one
#   NOTE=text     a line added to the report's notes (e.g. what else ran)
bench_run() {
	local name=$1 here root bin fp
	shift
	here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
	root=$(cd "$here/.." && pwd)
	export PATH="/usr/local/go/bin:$PATH"
	bin=$(mktemp -d "${TMPDIR:-/tmp}/fpdedup-$name.XXXXXX")
	# shellcheck disable=SC2064 # $bin is fixed now
	trap "rm -rf -- '$bin'" EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	(cd "$root" && go build -o "$bin/fpdedup-bench" ./cmd/fpdedup-bench)
	if [[ -n ${FPDEDUP:-} ]]; then
		fp=$FPDEDUP
	else
		fp=$bin/fpdedup
		(cd "$root" && CGO_ENABLED=0 go build -o "$fp" ./cmd/fpdedup) # as make build builds it
	fi
	bench_out=$root/bench/results/$name-$(date -u +%Y-%m-%dT%H%M%SZ)
	local note=()
	if [[ -n ${NOTE:-} ]]; then
		note=(--note "$NOTE")
	fi
	(cd "$root" && "$bin/fpdedup-bench" --fpdedup "$fp" --out "$bench_out" "${note[@]}" "$@")
}

# bench_count NAME VALUE: VALUE when it is a positive whole number, else
# the usage message of the script NAME and exit 2.
bench_count() {
	if [[ ! $2 =~ ^[1-9][0-9]*$ ]]; then
		echo "usage: $1 (counts are whole numbers, got '$2')" >&2
		exit 2
	fi
}
