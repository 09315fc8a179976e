#!/usr/bin/env bash
# dedup.sh: fpdedup dedup side by side with its peers (issue 3, Performance),
# one hyperfine run per job so every row of a table saw the same machine
# state, reported as ratios to fpdedup.
#
#   bench/dedup.sh [RECORDS=10000000] [RUNS=3]
#
# Jobs, on RECORDS generated events (38% repeats):
#   lines  the events as lines: fpdedup dedup, the same under --mem
#          (bounded mode), LC_ALL=C sort -u, DuckDB SELECT DISTINCT l,
#          gawk and mawk '!s[$0]++'; floors cat and zstd -dc.
#   csv    the same events as CSV with a header: fpdedup dedup --format csv
#          keyed by user_id,device_id,timestamp_ms against DuckDB's
#          SELECT DISTINCT * FROM read_csv(…); floor cat.
#   zstd   that CSV zstd-compressed: fpdedup dedup on the .zst against
#          zstd -dc alone (and DuckDB reading the .zst).
# Every row writes the records it keeps to stdout, which hyperfine drains
# through a pipe (--output=pipe: no tool can take a /dev/null shortcut).
#
# Each row runs once untimed first, under GNU time (peak total RSS, %M: the
# largest process; file-backed pages such as an mmapped input count) and
# benchtool rss (the command's anonymous RSS, sampled every 10 ms: the kernel
# keeps no anonymous peak, so it is a lower bound), with its output kept to
# count the records it wrote against the generator's exact distinct count.
# Outside the timing the script checks that the bounded run's output (on the
# file and on piped stdin) is byte-identical to the in-memory run's and to
# awk '!s[$0]++', and that the CSV and .zst runs keep the same records.
#
# Run bench/peers.sh (as root) first: a peer that is not installed is reported
# as "missing", never dropped. The data lives in a temporary directory under
# $TMPDIR, removed at the end however the script ends.
#
# Output: the markdown report on stdout and in bench/results/dedup-<UTC
# time>.md, the raw figures (hyperfine's JSON included) beside it as .json;
# hyperfine's progress goes to stderr.
#
# Environment:
#   FPDEDUP=path      use this fpdedup binary instead of building ./cmd/fpdedup
#   SEED=n            generator seed (default 1)
#   SORT_MEM=size     sort -S (default 8G: sort -u then runs in memory, its best case)
#   BOUNDED_MEM=size  fpdedup --mem of the bounded row (default 128MiB; MiB or GiB)
#   NOTE=text         a line added to the report (e.g. what else ran)
set -euo pipefail

usage() {
	echo "usage: bench/dedup.sh [RECORDS=10000000] [RUNS=3]" >&2
	exit 2
}
(($# <= 2)) || usage
records=${1:-10000000}
runs=${2:-3}
[[ $records =~ ^[1-9][0-9]*$ ]] || usage
[[ $runs =~ ^[1-9][0-9]*$ ]] || usage

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
cd "$root"
peers_dir="$here/.peers"
results_dir="$here/results"
seed=${SEED:-1}
sort_mem=${SORT_MEM:-8G}
bounded_mem=${BOUNDED_MEM:-128MiB}
stamp=$(date -u +%Y-%m-%dT%H%M%SZ)
# The CSV key, by header names (the same as --key 1,2,3).
csv_key=user_id,device_id,timestamp_ms

# shellcheck source=bench/lib.sh
source "$here/lib.sh"
bench_name=dedup
[[ $bounded_mem =~ ^([1-9][0-9]*)(MiB|GiB)$ ]] || die "BOUNDED_MEM=$bounded_mem: want a number of MiB or GiB, e.g. 128MiB"
bounded_kb=$((BASH_REMATCH[1] * 1024))
[[ ${BASH_REMATCH[2]} == GiB ]] && bounded_kb=$((bounded_kb * 1024))

bench_init dedup
# Until it builds, fpdedup's rows are "missing" and the peers are still
# measured.
bench_fpdedup optional

# Lines and CSV (~1x each), their zstd copies, up to five kept outputs of
# ~0.6x each, sort -u spilling when the file exceeds SORT_MEM: ask for 6x.
bench_plan 6

data="$work/events.txt"
csv="$work/events.csv"
generator=""
if [[ -n $fp ]]; then
	log "generating $records records (lines, csv) with fpdedup bench gen"
	if "$fp" bench gen --records "$records" --seed "$seed" --format lines -o "$data" 2>"$work/gen.log" &&
		"$fp" bench gen --records "$records" --seed "$seed" --format csv -o "$csv" 2>>"$work/gen.log"; then
		generator="fpdedup bench gen"
	else
		why=$(head -n1 "$work/gen.log" | cut -c1-160)
		notes+=("fpdedup bench gen failed (${why:-no message}); data from bench/benchtool gen.")
	fi
fi
if [[ -z $generator ]]; then
	log "generating $records records (lines, csv) with bench/benchtool gen"
	"$BT" gen --records "$records" --seed "$seed" --format lines -o "$data"
	"$BT" gen --records "$records" --seed "$seed" --format csv -o "$csv"
	generator="bench/benchtool gen"
fi
bytes=$(stat -c %s "$data")
csv_bytes=$(stat -c %s "$csv")
if [[ $bytes != "$plan_bytes" ]]; then
	# Not the data bench.Generate plans (the CLI's defaults differ): count
	# the distinct lines the slow, sure way rather than trust the plan.
	log "generated $bytes bytes, the plan says $plan_bytes: counting distinct lines with sort -u"
	distinct=$(LC_ALL=C sort -u -S "$sort_mem" "$data" | wc -l)
	notes+=("$generator wrote $bytes bytes where bench.Generate plans $plan_bytes for the same options; distinct counted with sort -u.")
fi
zst_bytes=""
if have zstd; then
	zstd -q -T0 -3 -o "$data.zst" "$data"
	zstd -q -T0 -3 -o "$csv.zst" "$csv"
	zst_bytes=$(stat -c %s "$csv.zst")
fi

# The rows. A command is a bash command line (hyperfine --shell bash runs
# it as the untimed run does); paths are quoted with printf %q.
q() { printf '%q' "$1"; }
D=$(q "$data")
C=$(q "$csv")
FP=$(q "$fp")
DUCK="node $(q "$here/duckdb-dedup.mjs")"
job_of=()
name_of=()
status_of=()
cmd_of=()
needs_of=() # a file that must exist before the row can run
count_of=() # how to count its output: lines, csv (minus the header), or "" (not counted)
add() { # job name missing-or-empty needs-file count command
	job_of+=("$1")
	name_of+=("$2")
	status_of+=("$3")
	needs_of+=("$4")
	count_of+=("$5")
	cmd_of+=("$6")
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
zstd_missing=$(need zstd)

# lines: keep one copy of each distinct line (fpdedup and awk: the first,
# in input order; sort -u and DuckDB: in their own order).
add lines "fpdedup dedup" "$fp_missing" "" lines "$FP dedup $D"
add lines "fpdedup --mem $bounded_mem dedup" "$fp_missing" "" lines "$FP --mem $bounded_mem dedup $D"
add lines "floor: cat" "" "" "" "cat $D"
add lines "floor: zstd -dc" "$zstd_missing" "" "" "zstd -dc $D.zst"
add lines "sort -u" "" "" lines "LC_ALL=C sort -u -S $sort_mem --parallel=2 $D"
add lines "duckdb SELECT DISTINCT l" "$duck_missing" "" lines "$DUCK $D"
add lines "gawk '!s[\$0]++'" "$(need gawk)" "" lines "gawk '!s[\$0]++' $D"
add lines "mawk '!s[\$0]++'" "$(need mawk)" "" lines "mawk '!s[\$0]++' $D"
# csv: distinct rows by the key columns (DuckDB: by all of them, the same
# rows for this data).
add csv "fpdedup dedup --format csv" "$fp_missing" "" csv "$FP dedup --format csv --header --key $csv_key $C"
add csv "floor: cat" "" "" "" "cat $C"
add csv "duckdb SELECT DISTINCT * FROM read_csv" "$duck_missing" "" csv "$DUCK --csv $C"
# zstd: the same, decompressing.
fp_zst_missing=$fp_missing
[[ -n $fp_zst_missing ]] || fp_zst_missing=$zstd_missing
add zstd "fpdedup dedup --format csv (.zst)" "$fp_zst_missing" "" csv "$FP dedup --format csv --header --key $csv_key $C.zst"
add zstd "floor: zstd -dc" "$zstd_missing" "" "" "zstd -dc $C.zst"
duck_zst_missing=$duck_missing
[[ -n $duck_zst_missing ]] || duck_zst_missing=$zstd_missing
add zstd "duckdb read_csv (.zst)" "$duck_zst_missing" "" csv "$DUCK --csv $C.zst"

rss_of=()
anon_of=()
answer_of=()
# run_once runs row i untimed: its peak RSS (GNU time %M) and sampled peak
# anonymous RSS (benchtool rss), whether it works at all, and, for a row
# whose output is counted, the records it wrote, its output kept in
# $work/out.$i for the checks. Only rows that work go to hyperfine, which
# would abort the whole job on one failure.
run_once() {
	local i=$1 rc=0 out=/dev/null
	rss_of[i]=""
	anon_of[i]=""
	answer_of[i]=""
	[[ -z ${status_of[i]} ]] || return 0
	if [[ -n ${needs_of[i]} && ! -e ${needs_of[i]} ]]; then
		status_of[i]="missing: no $(basename "${needs_of[i]}") (the row that makes it did not run)"
		return 0
	fi
	[[ -z ${count_of[i]} ]] || out="$work/out.$i"
	log "untimed run: ${job_of[i]}: ${name_of[i]}"
	local timer=()
	[[ ! -x /usr/bin/time ]] || timer=(/usr/bin/time -f %M -o "$work/rss.$i")
	"$BT" rss -o "$work/anon.$i" -- "${timer[@]}" bash -c "${cmd_of[i]}" >"$out" 2>"$work/err.$i" || rc=$?
	# On failure GNU time writes a status line first: %M is the last.
	rss_of[i]=$(tail -n1 "$work/rss.$i" 2>/dev/null | tr -dc 0-9 || true)
	anon_of[i]=$(tr -dc 0-9 <"$work/anon.$i" 2>/dev/null || true)
	if ((rc != 0)); then
		local why
		why=$(head -c 160 "$work/err.$i" | tr '\n\t|' '   ')
		status_of[i]="failed: exit $rc${why:+: $why}"
		log "${name_of[i]}: ${status_of[i]}"
		rm -f -- "$work/out.$i"
		return 0
	fi
	status_of[i]=ok
	case ${count_of[i]} in
	lines) answer_of[i]=$(wc -l <"$out") ;;
	csv) answer_of[i]=$(($(wc -l <"$out") - 1)) ;;
	esac
}

# out_of NAME JOB: the kept output of that row, or "" when it did not run.
out_of() {
	local i
	for i in "${!name_of[@]}"; do
		if [[ ${name_of[i]} == "$1" && ${job_of[i]} == "$2" && ${status_of[i]} == ok && -f $work/out.$i ]]; then
			echo "$work/out.$i"
			return 0
		fi
	done
	echo ""
}
# drop_outputs JOB [KEEP]: remove the kept outputs of JOB's rows but KEEP.
drop_outputs() {
	local i
	for i in "${!job_of[@]}"; do
		if [[ ${job_of[i]} == "$1" && $work/out.$i != "${2:-}" ]]; then
			rm -f -- "$work/out.$i"
		fi
	done
}
# same A B WHAT: a check line comparing two outputs byte for byte.
same() {
	if [[ -z $1 || -z $2 ]]; then
		checks+=("$3: not checked (a run is missing or failed)")
	elif cmp -s -- "$1" "$2"; then
		checks+=("$3: identical")
	else
		checks+=("$3: **DIFFERENT** ($(cmp -- "$1" "$2" 2>&1 | head -n1 | sed "s|$work/||g"))")
	fi
}

hf_files=()
for job in lines csv zstd; do
	hf=()
	for i in "${!job_of[@]}"; do
		[[ ${job_of[i]} == "$job" ]] || continue
		run_once "$i"
		if [[ ${status_of[i]} == ok ]]; then
			hf+=(-n "${name_of[i]}" "${cmd_of[i]}")
		fi
	done

	# The checks, outside the timing, while this job's outputs are kept.
	case $job in
	lines)
		mem_out=$(out_of "fpdedup dedup" lines)
		bounded_out=$(out_of "fpdedup --mem $bounded_mem dedup" lines)
		awk_ref=$(out_of "gawk '!s[\$0]++'" lines)
		awk_name="gawk '!s[\$0]++'"
		if [[ -z $awk_ref ]]; then
			awk_ref=$(out_of "mawk '!s[\$0]++'" lines)
			awk_name="mawk '!s[\$0]++'"
		fi
		if [[ -z $awk_ref && -n $mem_out ]] && have awk; then
			log "check: awk '!s[\$0]++' for a reference"
			awk '!s[$0]++' "$data" >"$work/awk.out"
			awk_ref="$work/awk.out"
			awk_name="awk '!s[\$0]++'"
		fi
		same "$mem_out" "$awk_ref" "fpdedup dedup output vs $awk_name"
		same "$bounded_out" "$mem_out" "fpdedup --mem $bounded_mem dedup FILE output vs fpdedup dedup (in memory)"
		if [[ -n $fp && -z $fp_missing ]]; then
			# Once more on the file and once on piped stdin (no size
			# to pre-size from), with --stats-json for the mode.
			for how in "the file" "a pipe"; do
				log "check: fpdedup --mem $bounded_mem dedup --stats-json, input from $how"
				rc=0
				if [[ $how == "the file" ]]; then
					"$fp" --mem "$bounded_mem" dedup --stats-json "$work/bounded.json" "$data" >"$work/check.out" 2>"$work/check.err" || rc=$?
				else
					# shellcheck disable=SC2002 # a pipe, not a seekable file, is the point
					cat "$data" | "$fp" --mem "$bounded_mem" dedup --stats-json "$work/bounded.json" >"$work/check.out" 2>"$work/check.err" || rc=$?
				fi
				if ((rc != 0)); then
					checks+=("fpdedup --mem $bounded_mem dedup, input from $how, failed: exit $rc: $(head -n1 "$work/check.err" | cut -c1-160)")
					continue
				fi
				mode=$(tr -d '\n' <"$work/bounded.json" | sed -nE 's/.*"mode"[[:space:]]*:[[:space:]]*"([^"]*)".*/\1/p')
				table=$(tr -d '\n' <"$work/bounded.json" | sed -nE 's/.*"table_bytes"[[:space:]]*:[[:space:]]*([0-9]+).*/\1/p')
				line="fpdedup --mem $bounded_mem dedup, input from $how: mode ${mode:-?}${table:+, seen-set $(((table + 524288) / 1048576)) MiB} (--stats-json)"
				if [[ $mode == memory ]]; then
					line+="; the input fits in $bounded_mem, so the bounded path was not exercised (more RECORDS or a smaller BOUNDED_MEM would)"
				fi
				checks+=("$line")
				# Bounded mode reports its bloom's measured false
				# positive rate against the formula on stderr.
				bloom=$(grep -m1 'bounded mode' "$work/check.err" | cut -c1-300 || true)
				if [[ -n $bloom ]]; then
					checks+=("input from $how, fpdedup said: $bloom")
				fi
				if [[ $how == "a pipe" ]]; then
					same "$work/check.out" "$mem_out" "cat FILE | fpdedup --mem $bounded_mem dedup (stdin) output vs fpdedup dedup (in memory)"
				fi
			done
			rm -f -- "$work/check.out"
		fi
		# Anonymous memory against the targets: 32 bytes per distinct
		# key + 64 MiB in memory, --mem + 64 MiB bounded.
		for i in "${!job_of[@]}"; do
			[[ ${job_of[i]} == lines && ${status_of[i]} == ok && -n ${anon_of[i]} ]] || continue
			case ${name_of[i]} in
			"fpdedup dedup") bound=$((distinct * 32 / 1024 + 65536)) what="32 B × $distinct distinct + 64 MiB" ;;
			"fpdedup --mem $bounded_mem dedup") bound=$((bounded_kb + 65536)) what="$bounded_mem + 64 MiB" ;;
			*) continue ;;
			esac
			verdict=within
			((anon_of[i] <= bound)) || verdict="**OVER**"
			checks+=("${name_of[i]}: sampled peak anonymous RSS $(((anon_of[i] + 512) / 1024)) MiB, $verdict the target $what = $(((bound + 512) / 1024)) MiB (GNU time's total peak: $(((${rss_of[i]:-0} + 512) / 1024)) MiB)")
		done
		# The CSV check needs the lines output: keep it, drop the rest.
		drop_outputs lines "$mem_out"
		rm -f -- "$work/awk.out"
		;;
	csv)
		csv_out=$(out_of "fpdedup dedup --format csv" csv)
		if [[ -n $csv_out && -n $mem_out && -f $mem_out ]]; then
			tail -n +2 "$csv_out" >"$work/csv-body.out"
			same "$work/csv-body.out" "$mem_out" "fpdedup dedup --format csv output without its header vs fpdedup dedup of the lines"
			rm -f -- "$work/csv-body.out"
		else
			same "" "" "fpdedup dedup --format csv output vs the lines'"
		fi
		drop_outputs lines
		drop_outputs csv "$csv_out"
		;;
	zstd)
		same "$(out_of "fpdedup dedup --format csv (.zst)" zstd)" "$csv_out" "fpdedup dedup --format csv on the .zst vs on the plain CSV"
		drop_outputs csv
		drop_outputs zstd
		;;
	esac

	if ((${#hf[@]} > 0)); then
		log "hyperfine: job $job, $((${#hf[@]} / 3)) commands, $runs runs each"
		if hyperfine --shell bash --runs "$runs" --style basic --output=pipe \
			--export-json "$work/hf-$job.json" "${hf[@]}" >&2; then
			hf_files+=(--hyperfine "$job=$work/hf-$job.json")
		else
			notes+=("hyperfine failed on job $job: its rows are not timed.")
		fi
	fi
done

commas() { sed -E ':a;s/([0-9])([0-9]{3})($|[^0-9])/\1,\2\3/;ta' <<<"$1"; }
mb() { awk -v b="$1" 'BEGIN { printf "%.0f MB", b / 1e6 }'; }
summary="$(commas "$records") records (seed $seed, generated by $generator): $(commas "$distinct") distinct; lines $(mb "$bytes"), CSV $(mb "$csv_bytes")${zst_bytes:+, CSV.zst $(mb "$zst_bytes")}. Every row's stdout goes through a pipe that hyperfine drains (--output=pipe)."
# Facts about the run, for the report's header and the raw JSON.
{
	echo "bench=dedup"
	echo "summary=$summary"
	echo "date=$stamp"
	echo "records=$records"
	echo "distinct=$distinct"
	echo "bytes=$bytes"
	echo "csv_bytes=$csv_bytes"
	echo "csv_zst_bytes=$zst_bytes"
	echo "seed=$seed"
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
	echo "load_after=$(cut -d' ' -f1-3 /proc/loadavg)"
	echo "ref.lines=fpdedup dedup"
	echo "ref.csv=fpdedup dedup --format csv"
	echo "ref.zstd=fpdedup dedup --format csv (.zst)"
	echo "title.lines=keep one copy of each distinct line (fpdedup, awk: the first, in input order; sort -u, DuckDB: their own order)"
	echo "title.csv=distinct records of the CSV by $csv_key (DuckDB: SELECT DISTINCT *, typed columns)"
	echo "title.zstd=the same CSV, zstd-compressed (fpdedup and DuckDB decompress it themselves)"
	notes+=("Peak RSS is GNU time's %M (total, the largest process); peak anon is benchtool rss's sampled sum of RssAnon over the command's processes (a lower bound; the kernel keeps no anonymous peak).")
	bench_meta_notes
} >"$work/meta"
# shellcheck disable=SC2119 # no arguments to pass on
bench_report
