#!/usr/bin/env bash
# foundation.sh: fpdedup build and query side by side with their peers
# (DESIGN section 7), one hyperfine run per job so every row of a table saw
# the same machine state, reported as ratios to fpdedup.
#
#   bench/foundation.sh [RECORDS=10000000] [RUNS=5]
#
# Run bench/peers.sh (as root) first: a peer that is not installed is reported
# as "missing", never dropped. The data (RECORDS lines from the bench
# generator, 38% repeats) lives in a temporary directory under $TMPDIR,
# removed at the end however the script ends.
#
# Output: the markdown report on stdout and in
# bench/results/foundation-<UTC time>.md, the raw figures (hyperfine's JSON
# included) beside it as .json; hyperfine's progress goes to stderr.
#
# Environment:
#   FPDEDUP=path   use this fpdedup binary instead of building ./cmd/fpdedup
#   SEED=n         generator seed (default 1)
#   SORT_MEM=size  sort -S (default 8G: sort -u then runs in memory, its best case)
#   NOTE=text      a line added to the report (e.g. what else ran)
set -euo pipefail

usage() {
	echo "usage: bench/foundation.sh [RECORDS=10000000] [RUNS=5]" >&2
	exit 2
}
(($# <= 2)) || usage
records=${1:-10000000}
runs=${2:-5}
[[ $records =~ ^[1-9][0-9]*$ ]] || usage
[[ $runs =~ ^[1-9][0-9]*$ ]] || usage

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
cd "$root"
peers_dir="$here/.peers"
results_dir="$here/results"
seed=${SEED:-1}
sort_mem=${SORT_MEM:-8G}
stamp=$(date -u +%Y-%m-%dT%H%M%SZ)

# shellcheck source=bench/lib.sh
source "$here/lib.sh"
bench_init foundation
# Until it builds, fpdedup's rows are "missing" and the peers are still
# measured.
bench_fpdedup optional

# The data, its zstd copy and the index: ~1.5x the file; sort -u spills to
# $TMPDIR too when the file exceeds SORT_MEM. Ask for 3x.
bench_plan 3

data="$work/events.txt"
generator=""
if [[ -n $fp ]]; then
	log "generating $records records with fpdedup bench gen"
	if "$fp" bench gen --records "$records" --seed "$seed" --format lines -o "$data" 2>"$work/gen.log"; then
		generator="fpdedup bench gen"
	else
		why=$(head -n1 "$work/gen.log" | cut -c1-160)
		notes+=("fpdedup bench gen failed (${why:-no message}); data from bench/benchtool gen.")
	fi
fi
if [[ -z $generator ]]; then
	log "generating $records records with bench/benchtool gen"
	"$BT" gen --records "$records" --seed "$seed" --format lines -o "$data"
	generator="bench/benchtool gen"
fi
bytes=$(stat -c %s "$data")
if [[ $bytes != "$plan_bytes" ]]; then
	# Not the data bench.Generate plans (the CLI's defaults differ): count
	# the distinct lines the slow, sure way rather than trust the plan.
	log "generated $bytes bytes, the plan says $plan_bytes: counting distinct lines with sort -u"
	distinct=$(LC_ALL=C sort -u -S "$sort_mem" "$data" | wc -l)
	notes+=("$generator wrote $bytes bytes where bench.Generate plans $plan_bytes for the same options; distinct counted with sort -u.")
fi
if have zstd; then
	zstd -q -T0 -3 -o "$data.zst" "$data"
fi

# The rows. A command is a bash command line (hyperfine --shell bash runs
# it as the untimed run does); paths are quoted with printf %q.
q() { printf '%q' "$1"; }
D=$(q "$data")
W=$(q "$work")
FP=$(q "$fp")
IDX="$W/index.fpx"
BLOOM="$W/filter.bloom"
job_of=()
name_of=()
status_of=()
cmd_of=()
needs_of=() # a file that must exist before the row can run (made by an earlier row)
add() { # job name missing-or-empty needs-file command
	job_of+=("$1")
	name_of+=("$2")
	status_of+=("$3")
	needs_of+=("$4")
	cmd_of+=("$5")
}
need() { # command: "" when installed, else the missing status
	if have "$1"; then echo ""; else echo "missing: $1 not installed (bench/peers.sh)"; fi
}
duck_missing=""
if ! have node; then
	duck_missing="missing: node not installed (bench/peers.sh)"
elif [[ ! -f $peers_dir/node_modules/@duckdb/node-api/package.json ]]; then
	duck_missing="missing: @duckdb/node-api not in bench/.peers (bench/peers.sh)"
fi

# build: an exact set of every line's key (the bloom is approximate, the
# awks also write the unique lines).
add build "fpdedup build" "$fp_missing" "" "$FP build -o $IDX $D"
add build "floor: cat + dd conv=fsync of the index" "$fp_missing" "$work/index.fpx" \
	"cat $D > /dev/null && dd if=/dev/zero of=$W/floor.out bs=1M count=\$(stat -c %s $IDX) iflag=count_bytes conv=fsync status=none"
add build "floor: cat" "" "" "cat $D > /dev/null"
add build "floor: zstd -dc" "$(need zstd)" "" "zstd -dc $D.zst > /dev/null"
add build "sort -u" "" "" "LC_ALL=C sort -u -S $sort_mem --parallel=2 $D > /dev/null"
add build "duckdb count(DISTINCT hash(l))" "$duck_missing" "" "node $(q "$here/duckdb-distinct.mjs") $D"
add build "duckdb count(DISTINCT l)" "$duck_missing" "" "node $(q "$here/duckdb-distinct.mjs") --exact $D"
add build "bloom create + insert (p=0.004)" "$(need bloom)" "" \
	"rm -f $BLOOM && bloom create -p 0.004 -n $distinct $BLOOM && bloom insert $BLOOM < $D"
add build "mawk '!s[\$0]++'" "$(need mawk)" "" "mawk '!s[\$0]++' $D > /dev/null"
add build "gawk '!s[\$0]++'" "$(need gawk)" "" "gawk '!s[\$0]++' $D > /dev/null"
# query: every line looked up; all are present.
add query "fpdedup query" "$fp_missing" "$work/index.fpx" "$FP query $IDX < $D > /dev/null"
add query "floor: cat" "" "" "cat $D > /dev/null"
add query "floor: zstd -dc" "$(need zstd)" "" "zstd -dc $D.zst > /dev/null"
add query "bloom check" "$(need bloom)" "$work/filter.bloom" "bloom check $BLOOM < $D > /dev/null"

rss_of=()
answer_of=()
# run_once runs row i untimed: its peak RSS (GNU time %M: the largest
# process of the command line), whether it works at all, and what it printed.
# Only rows that work go to hyperfine, which would abort the whole job on
# one failure.
run_once() {
	local i=$1 rc=0
	rss_of[i]=""
	answer_of[i]=""
	[[ -z ${status_of[i]} ]] || return 0
	if [[ -n ${needs_of[i]} && ! -e ${needs_of[i]} ]]; then
		status_of[i]="missing: no $(basename "${needs_of[i]}") (the row that makes it did not run)"
		return 0
	fi
	log "untimed run: ${name_of[i]}"
	if [[ -x /usr/bin/time ]]; then
		/usr/bin/time -f %M -o "$work/rss.$i" bash -c "${cmd_of[i]}" >"$work/out.$i" 2>"$work/err.$i" || rc=$?
		# On failure GNU time writes a status line first: %M is the last.
		rss_of[i]=$(tail -n1 "$work/rss.$i" 2>/dev/null | tr -dc 0-9)
	else
		bash -c "${cmd_of[i]}" >"$work/out.$i" 2>"$work/err.$i" || rc=$?
	fi
	if ((rc != 0)); then
		local why
		why=$(head -c 160 "$work/err.$i" | tr '\n\t|' '   ')
		status_of[i]="failed: exit $rc${why:+: $why}"
		log "${name_of[i]}: ${status_of[i]}"
		return 0
	fi
	status_of[i]=ok
	# A command that prints a count (DuckDB) has it checked.
	local first
	first=$(head -n1 "$work/out.$i")
	if [[ $first =~ ^[0-9]+$ ]]; then
		answer_of[i]=$first
	fi
}

hf_files=()
for job in build query; do
	hf=()
	for i in "${!job_of[@]}"; do
		[[ ${job_of[i]} == "$job" ]] || continue
		run_once "$i"
		if [[ $job == build && ${name_of[i]} == "fpdedup build" && ${status_of[i]} == ok ]]; then
			# The index's key count is fpdedup build's answer.
			if "$fp" inspect --json "$work/index.fpx" >"$work/inspect.json" 2>"$work/inspect.err"; then
				answer_of[i]=$(tr -d '\n' <"$work/inspect.json" | sed -nE 's/.*"fingerprints"[[:space:]]*:[[:space:]]*([0-9]+).*/\1/p')
			else
				notes+=("fpdedup inspect --json failed: $(head -n1 "$work/inspect.err" | cut -c1-160)")
				: >"$work/inspect.json"
			fi
		fi
		if [[ ${status_of[i]} == ok ]]; then
			hf+=(-n "${name_of[i]}" "${cmd_of[i]}")
		fi
	done
	if ((${#hf[@]} == 0)); then
		continue
	fi
	log "hyperfine: job $job, $((${#hf[@]} / 3)) commands, $runs runs each"
	if hyperfine --shell bash --runs "$runs" --style basic \
		--export-json "$work/hf-$job.json" "${hf[@]}" >&2; then
		hf_files+=(--hyperfine "$job=$work/hf-$job.json")
	else
		notes+=("hyperfine failed on job $job: its rows are not timed.")
	fi
done

index_bytes=""
if [[ -f $work/index.fpx ]]; then
	index_bytes=$(stat -c %s "$work/index.fpx")
fi

# Facts about the run, for the report's header and the raw JSON.
{
	echo "date=$stamp"
	echo "records=$records"
	echo "distinct=$distinct"
	echo "bytes=$bytes"
	echo "seed=$seed"
	echo "format=lines"
	echo "generator=$generator"
	echo "runs=$runs"
	echo "cpu=$(sed -nE 's/^model name[[:space:]]*:[[:space:]]*//p' /proc/cpuinfo | head -n1 | tr -s ' ')"
	echo "cores=$(nproc)"
	echo "mem=$(awk '/^MemTotal:/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)"
	echo "kernel=Linux $(uname -r)"
	echo "tmpdir=$(dirname "$work")"
	echo "tmpfs=$(df -PT "$work" | awk 'NR == 2 { print $2 }')"
	echo "commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' (tracked files modified)')"
	echo "load_before=$load_before"
	echo "index_bytes=$index_bytes"
	echo "ref.build=fpdedup build"
	echo "ref.query=fpdedup query"
	echo "title.build=an exact set of the distinct lines (bloom: approximate)"
	echo "title.query=look every line up (all present)"
	bench_meta_notes
} >"$work/meta"
inspect_arg=()
if [[ -s $work/inspect.json ]]; then
	inspect_arg=(--inspect "$work/inspect.json")
fi
bench_report "${inspect_arg[@]}"
