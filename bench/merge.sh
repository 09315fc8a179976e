#!/usr/bin/env bash
# merge.sh: fpdedup merge and the partitioned build side by side with their
# peers and floors (issue 6, Performance), one hyperfine run per job so every
# row of a table saw the same machine state, reported as ratios to fpdedup.
#
#   bench/merge.sh [KEYS=50000000] [RUNS=3]
#
# Jobs, on random 128-bit fingerprints (bench/benchtool fp, deterministic;
# indexes made with fpdedup build --format fp, the fast way):
#   merge       the union of two KEYS-key indexes sharing OVERLAP% of their
#               keys: fpdedup merge against LC_ALL=C sort -m -u of the same
#               fingerprints as sorted hex (fpdedup dump, made beforehand),
#               and the floor: cat of the inputs + dd conv=fsync of an output
#               of the merged index's size (fpdedup also rebuilds the filters,
#               which the floor does not).
#   partitions  merging the 4 disjoint partitions of one KEYS-key set (build
#               --partition I/4, each made once) against a k-way merge of 4
#               overlapping indexes of KEYS/4 keys each (the same total).
#   build       building the index of those KEYS fingerprints (a hex file)
#               once, against 4 partition builds run two at a time
#               (xargs -P2) and one partition build alone (what each machine
#               of a 4-way scale-out does); user+sys is the CPU.
# GB/s is each row's input bytes (the indexes; sort's hex; build's hex) over
# its median wall time.
#
# Each row runs once untimed first, under GNU time (peak total RSS, %M: the
# largest process; merge's mmapped inputs count) and benchtool rss (the
# command's anonymous RSS, sampled every 10 ms: a lower bound), and the
# outputs are checked outside the timing: key counts (fpdedup inspect), the
# two-way merge against sort -m -u, the merged partitions and the partition
# builds against the single build, byte for byte.
#
# With KEYS=50M the data is ~16 GB under $TMPDIR: the script checks df first
# and scales KEYS down, with a message, when space is short. Everything lives
# in a temporary directory removed at the end however the script ends. Run
# bench/peers.sh (as root) first.
#
# Output: the markdown report on stdout and in bench/results/merge-<UTC
# time>.md, the raw figures (hyperfine's JSON included) beside it as .json;
# hyperfine's progress goes to stderr.
#
# Environment:
#   FPDEDUP=path  use this fpdedup binary instead of building ./cmd/fpdedup
#   SEED=n        fingerprint seed (default 1)
#   OVERLAP=pct   keys shared by neighbouring inputs (default 20)
#   NOTE=text     a line added to the report (e.g. what else ran)
set -euo pipefail

usage() {
	echo "usage: bench/merge.sh [KEYS=50000000] [RUNS=3]" >&2
	exit 2
}
(($# <= 2)) || usage
keys=${1:-50000000}
runs=${2:-3}
[[ $keys =~ ^[1-9][0-9]*$ ]] || usage
[[ $runs =~ ^[1-9][0-9]*$ ]] || usage

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
cd "$root"
peers_dir="$here/.peers"
results_dir="$here/results"
seed=${SEED:-1}
overlap=${OVERLAP:-20}
parts=4
stamp=$(date -u +%Y-%m-%dT%H%M%SZ)

# shellcheck source=bench/lib.sh
source "$here/lib.sh"
bench_name=merge
if [[ ! $overlap =~ ^[0-9]+$ ]] || ((overlap >= 100)); then
	die "OVERLAP=$overlap: want a percentage, 0 to 99"
fi
bench_init merge
# The tool under test makes the data too (build --format fp, dump): without
# it there is nothing to measure.
bench_fpdedup required

# Disk: per key, the two indexes (~17.4 B each) and their hex dumps (33 B
# each), the merged output and the floor's file of its size, the hex of the
# partition set, its partitions, the overlapping indexes, their merges, the
# single and partitioned builds: ~300 bytes, and an output being replaced
# exists twice for a moment. Ask for 350 B/key and 1 GiB to spare; scale
# KEYS down to what fits rather than fill the disk.
per_key=350
free_kb=$(df -Pk "$work" | awk 'NR == 2 { print $4 }')
fit=$(((free_kb - 1048576) * 1024 / per_key))
if ((keys > fit)); then
	((fit >= 100000)) || die "need ~$((keys * per_key / 1048576 + 1024)) MiB free in $work for KEYS=$keys, have $((free_kb / 1024)) MiB"
	scaled=$((fit / 1000000 * 1000000))
	((scaled > 0)) || scaled=$((fit / 100000 * 100000))
	log "only $((free_kb / 1024)) MiB free in $work: KEYS=$keys needs ~$((keys * per_key / 1048576 + 1024)) MiB; scaling down to KEYS=$scaled"
	notes+=("Scaled down from KEYS=$keys to $scaled: $((free_kb / 1024)) MiB free under $(dirname "$work").")
	keys=$scaled
fi

# The key sets. Fingerprint i of a seed is a pure function of (seed, i), so
# ranges overlap exactly: a = [0, K), b = [K - K*OVERLAP/100, ...) share
# K*OVERLAP/100; the overlapping quarter indexes o0..o3 step by
# (K/4)(1 - OVERLAP/100).
b_from=$((keys - keys * overlap / 100))
union_ab=$((b_from + keys))
quarter=$((keys / parts))
step=$((quarter - quarter * overlap / 100))
union_o=$((quarter + (parts - 1) * step))

inspect_count() { # index: its fingerprint count, or "" when inspect fails
	"$fp" inspect --json "$1" 2>/dev/null | tr -d '\n' |
		sed -nE 's/.*"fingerprints"[[:space:]]*:[[:space:]]*([0-9]+).*/\1/p' || true
}
size() { stat -c %s "$1"; }

log "making two indexes of $keys fingerprints, $overlap% shared"
"$BT" fp --seed "$seed" --from 0 --count "$keys" | "$fp" -q build --format fp --hash xxh3 -o "$work/a.fpx"
"$BT" fp --seed "$seed" --from "$b_from" --count "$keys" | "$fp" -q build --format fp --hash xxh3 -o "$work/b.fpx"
log "dumping them as sorted hex for sort -m"
"$fp" dump "$work/a.fpx" >"$work/a.hex"
"$fp" dump "$work/b.fpx" >"$work/b.hex"
log "making $keys fingerprints as hex, its $parts partitions, and $parts overlapping indexes of $quarter"
"$BT" fp --seed "$((seed + 1))" --count "$keys" -o "$work/all.hex"
part_files=()
for ((i = 0; i < parts; i++)); do
	"$fp" -q build --format fp --hash xxh3 --partition "$i/$parts" -o "$work/p$i.fpx" "$work/all.hex"
	part_files+=("$work/p$i.fpx")
done
over_files=()
for ((i = 0; i < parts; i++)); do
	"$BT" fp --seed "$((seed + 2))" --from "$((i * step))" --count "$quarter" |
		"$fp" -q build --format fp --hash xxh3 -o "$work/o$i.fpx"
	over_files+=("$work/o$i.fpx")
done
ab_bytes=$(($(size "$work/a.fpx") + $(size "$work/b.fpx")))
hex_bytes=$(($(size "$work/a.hex") + $(size "$work/b.hex")))
all_hex_bytes=$(size "$work/all.hex")
part_bytes=0
for f in "${part_files[@]}"; do part_bytes=$((part_bytes + $(size "$f"))); done
over_bytes=0
for f in "${over_files[@]}"; do over_bytes=$((over_bytes + $(size "$f"))); done
p0_count=$(inspect_count "$work/p0.fpx")

# The rows. A command is a bash command line (hyperfine --shell bash runs
# it as the untimed run does); paths are quoted with printf %q.
q() { printf '%q' "$1"; }
W=$(q "$work")
FP=$(q "$fp")
qlist() { # files: quoted, space-separated
	local f out=""
	for f in "$@"; do out+=" $(q "$f")"; done
	echo "${out# }"
}
PARTS=$(qlist "${part_files[@]}")
OVERS=$(qlist "${over_files[@]}")
# The floor's write: an output of FILE's size, fsynced, as merge publishes.
dd_like() { echo "dd if=/dev/zero of=$W/floor.out bs=1M count=\$(stat -c %s $1) iflag=count_bytes conv=fsync status=none"; }
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

add merge "fpdedup merge" "" "" "$FP merge -o $W/ab.fpx $W/a.fpx $W/b.fpx"
add merge "floor: cat inputs + dd conv=fsync of the output's size" "" "$work/ab.fpx" \
	"cat $W/a.fpx $W/b.fpx > /dev/null && $(dd_like "$W/ab.fpx")"
add merge "sort -m -u (dump hex)" "" "" "LC_ALL=C sort -m -u $W/a.hex $W/b.hex > /dev/null"
add partitions "fpdedup merge $parts disjoint partitions" "" "" "$FP merge -o $W/parts.fpx $PARTS"
add partitions "fpdedup merge $parts overlapping indexes" "" "" "$FP merge -o $W/kway.fpx $OVERS"
add partitions "floor: cat partitions + dd conv=fsync of the output's size" "" "$work/parts.fpx" \
	"cat $PARTS > /dev/null && $(dd_like "$W/parts.fpx")"
add build "fpdedup build" "" "" "$FP build --format fp --hash xxh3 -o $W/single.fpx $W/all.hex"
add build "fpdedup build --partition I/$parts ×$parts, 2 at a time" "" "" \
	"printf '%s\\n' $(seq -s ' ' 0 $((parts - 1))) | xargs -P2 -I{} $FP build --format fp --hash xxh3 --partition {}/$parts -o $W/bp{}.fpx $W/all.hex"
add build "fpdedup build --partition 0/$parts alone" "" "" "$FP build --format fp --hash xxh3 --partition 0/$parts -o $W/one.fpx $W/all.hex"
add build "floor: cat" "" "" "cat $W/all.hex > /dev/null"

rss_of=()
anon_of=()
answer_of=()
# run_once runs row i untimed: its peak RSS (GNU time %M) and sampled peak
# anonymous RSS (benchtool rss), and whether it works at all. Only rows
# that work go to hyperfine, which would abort the whole job on one failure.
run_once() {
	local i=$1 rc=0
	rss_of[i]=""
	anon_of[i]=""
	answer_of[i]=""
	[[ -z ${status_of[i]} ]] || return 0
	if [[ -n ${needs_of[i]} && ! -e ${needs_of[i]} ]]; then
		status_of[i]="missing: no $(basename "${needs_of[i]}") (the row that makes it did not run)"
		return 0
	fi
	log "untimed run: ${job_of[i]}: ${name_of[i]}"
	local timer=()
	[[ ! -x /usr/bin/time ]] || timer=(/usr/bin/time -f %M -o "$work/rss.$i")
	"$BT" rss -o "$work/anon.$i" -- "${timer[@]}" bash -c "${cmd_of[i]}" >/dev/null 2>"$work/err.$i" || rc=$?
	# On failure GNU time writes a status line first: %M is the last.
	rss_of[i]=$(tail -n1 "$work/rss.$i" 2>/dev/null | tr -dc 0-9 || true)
	anon_of[i]=$(tr -dc 0-9 <"$work/anon.$i" 2>/dev/null || true)
	if ((rc != 0)); then
		local why
		why=$(head -c 160 "$work/err.$i" | tr '\n\t|' '   ')
		status_of[i]="failed: exit $rc${why:+: $why}"
		log "${name_of[i]}: ${status_of[i]}"
		return 0
	fi
	status_of[i]=ok
	# The key count of what the row made is its answer.
	case ${name_of[i]} in
	"fpdedup merge") answer_of[i]=$(inspect_count "$work/ab.fpx") ;;
	"fpdedup merge $parts disjoint partitions") answer_of[i]=$(inspect_count "$work/parts.fpx") ;;
	"fpdedup merge $parts overlapping indexes") answer_of[i]=$(inspect_count "$work/kway.fpx") ;;
	"fpdedup build") answer_of[i]=$(inspect_count "$work/single.fpx") ;;
	"fpdedup build --partition 0/$parts alone") answer_of[i]=$(inspect_count "$work/one.fpx") ;;
	"fpdedup build --partition I/$parts ×$parts, 2 at a time")
		local n sum=0 j
		for ((j = 0; j < parts; j++)); do
			n=$(inspect_count "$work/bp$j.fpx")
			[[ -n $n ]] || return 0
			sum=$((sum + n))
		done
		answer_of[i]=$sum
		;;
	esac
}

hf_files=()
for job in merge partitions build; do
	hf=()
	for i in "${!job_of[@]}"; do
		[[ ${job_of[i]} == "$job" ]] || continue
		run_once "$i"
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
rm -f -- "$work/floor.out"

# The checks, outside the timing.
same() { # A B WHAT: a check line comparing two files byte for byte
	if [[ ! -f $1 || ! -f $2 ]]; then
		checks+=("$3: not checked (a run is missing or failed)")
	elif cmp -s -- "$1" "$2"; then
		checks+=("$3: identical")
	else
		checks+=("$3: **DIFFERENT** ($(cmp -- "$1" "$2" 2>&1 | head -n1 | sed "s|$work/||g"))")
	fi
}
if [[ -f $work/ab.fpx ]]; then
	log "check: fpdedup dump of the merge against sort -m -u"
	if cmp -s <("$fp" dump "$work/ab.fpx") <(LC_ALL=C sort -m -u "$work/a.hex" "$work/b.hex"); then
		checks+=("fpdedup dump of the two-way merge vs LC_ALL=C sort -m -u of the dumps: identical")
	else
		checks+=("fpdedup dump of the two-way merge vs LC_ALL=C sort -m -u of the dumps: **DIFFERENT**")
	fi
fi
same "$work/parts.fpx" "$work/single.fpx" "merge of the $parts partitions vs the single build of the same keys"
for ((j = 0; j < parts; j++)); do
	same "$work/bp$j.fpx" "$work/p$j.fpx" "partition build $j/$parts run two at a time vs made alone beforehand"
done
same "$work/one.fpx" "$work/p0.fpx" "partition build 0/$parts alone vs made beforehand"
# Anonymous memory of merge: the target is under 64 MiB.
for i in "${!job_of[@]}"; do
	[[ ${name_of[i]} == "fpdedup merge"* && ${status_of[i]} == ok && -n ${anon_of[i]} ]] || continue
	verdict="under"
	((anon_of[i] < 65536)) || verdict="**NOT under**"
	checks+=("${name_of[i]}: sampled peak anonymous RSS $(((anon_of[i] + 512) / 1024)) MiB, $verdict the 64 MiB target (GNU time's total peak, mmapped inputs included: $(((${rss_of[i]:-0} + 512) / 1024)) MiB)")
done

commas() { sed -E ':a;s/([0-9])([0-9]{3})($|[^0-9])/\1,\2\3/;ta' <<<"$1"; }
mb() { awk -v b="$1" 'BEGIN { printf "%.0f MB", b / 1e6 }'; }
summary="Random 128-bit fingerprints (seed $seed, bench/benchtool fp). merge: two indexes of $(commas "$keys") keys sharing $overlap% ($(mb "$ab_bytes") of .fpx, $(mb "$hex_bytes") as hex dumps), union $(commas "$union_ab"). partitions and build: $(commas "$keys") keys ($(mb "$all_hex_bytes") of hex), $parts partitions ($(mb "$part_bytes")) or $parts overlapping indexes of $(commas "$quarter") keys ($(mb "$over_bytes"), union $(commas "$union_o"))."
# Facts about the run, for the report's header and the raw JSON.
{
	echo "bench=merge"
	echo "summary=$summary"
	echo "date=$stamp"
	echo "keys=$keys"
	echo "overlap_percent=$overlap"
	echo "seed=$seed"
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
	echo "ref.merge=fpdedup merge"
	echo "ref.partitions=fpdedup merge $parts disjoint partitions"
	echo "ref.build=fpdedup build"
	echo "title.merge=the union of two $(commas "$keys")-key indexes (the floor does not rebuild the filters, fpdedup does)"
	echo "title.partitions=$parts disjoint partitions (build --partition) vs a k-way merge of $parts overlapping indexes, the same total keys"
	echo "title.build=index $(commas "$keys") hex fingerprints once, or as $parts partitions (a scale-out's machines), on $(nproc) cores; user+sys is the CPU"
	echo "distinct.merge=$union_ab"
	echo "distinct.partitions=$keys"
	echo "expect.partitions.fpdedup merge $parts overlapping indexes=$union_o"
	echo "distinct.build=$keys"
	echo "expect.build.fpdedup build --partition 0/$parts alone=$p0_count"
	echo "gbps_bytes.merge=$ab_bytes"
	echo "gbps_bytes.merge.sort -m -u (dump hex)=$hex_bytes"
	echo "gbps_bytes.partitions=$part_bytes"
	echo "gbps_bytes.partitions.fpdedup merge $parts overlapping indexes=$over_bytes"
	echo "gbps_bytes.build=$all_hex_bytes"
	notes+=("GB/s is each row's input bytes over its median (the indexes; sort: the hex dumps; build: the hex file, read once per process).")
	notes+=("Peak RSS is GNU time's %M (total, the largest process); peak anon is benchtool rss's sampled sum of RssAnon over the command's processes (a lower bound; the kernel keeps no anonymous peak).")
	bench_meta_notes
} >"$work/meta"
# shellcheck disable=SC2119 # no arguments to pass on
bench_report
