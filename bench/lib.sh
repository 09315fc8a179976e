# shellcheck shell=bash
# The scripts that source this set peers_dir and results_dir, and read
# notes, checks, load_before, work, BT, fp and fp_missing.
# shellcheck disable=SC2034,SC2154
# lib.sh -- the setup the side-by-side scripts (foundation.sh, dedup.sh,
# merge.sh) share; sourced, not run. Each script parses its own arguments,
# sets here, peers_dir and results_dir, then calls bench_init and
# bench_fpdedup.

log() { printf '%s: %s\n' "$bench_name" "$*" >&2; }
die() {
	log "$*"
	exit 2
}
have() { command -v "$1" >/dev/null 2>&1; }

# bench_init NAME: the tools every script needs, a work directory removed
# whatever happens (the EXIT trap runs on INT and TERM too, with the
# conventional codes), the notes and checks of the report, the load before
# the run, and benchtool built as $BT.
bench_init() {
	bench_name=$1
	have go || die "go is not on PATH"
	have hyperfine || die "hyperfine is not installed: run bench/peers.sh as root"
	mkdir -p "$peers_dir" "$results_dir"
	work=$(mktemp -d "${TMPDIR:-/tmp}/fpdedup-$bench_name.XXXXXX")
	trap 'rm -rf -- "$work"' EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	notes=()
	checks=()
	load_before=$(cut -d' ' -f1-3 /proc/loadavg)
	log "building bench/benchtool"
	go build -o "$work/benchtool" ./bench/benchtool
	BT="$work/benchtool"
}

# bench_fpdedup required|optional: the tool under test as $fp: $FPDEDUP, or built
# from this tree. If it does not build, with "required" the script stops;
# otherwise $fp is empty, $fp_missing says why, and the script still
# measures the peers.
bench_fpdedup() {
	fp=""
	fp_missing=""
	if [[ -n ${FPDEDUP:-} ]]; then
		[[ -x $FPDEDUP ]] || die "FPDEDUP=$FPDEDUP is not an executable"
		fp=$(cd "$(dirname "$FPDEDUP")" && pwd)/$(basename "$FPDEDUP")
		notes+=("fpdedup binary from FPDEDUP=$FPDEDUP, not built from this tree.")
		return
	fi
	log "building fpdedup"
	if go build -o "$peers_dir/fpdedup" ./cmd/fpdedup 2>"$work/build.log"; then
		fp="$peers_dir/fpdedup"
		return
	fi
	local why
	why=$(grep -v '^#' "$work/build.log" | head -n1 | cut -c1-160)
	[[ ${1:-} != required ]] || die "go build ./cmd/fpdedup failed: ${why:-no output}"
	fp_missing="missing: go build ./cmd/fpdedup failed: ${why:-no output}"
	notes+=("fpdedup did not build (${why:-no output}); its rows are missing.")
	log "$fp_missing"
}

# bench_report [ARGS...]: writes the report of the rows (job_of, name_of,
# status_of, rss_of, answer_of, cmd_of and, when set, anon_of) with the
# meta file $work/meta and hyperfine's hf_files, through benchtool report
# (ARGS are passed on), to $results_dir/$bench_name-$stamp.{md,json}.
# Commands show the temporary directory as $WORK and the repository as a
# relative path.
bench_report() {
	local i c out
	for i in "${!job_of[@]}"; do
		c=${cmd_of[i]//"$work"/\$WORK}
		printf '%s\t%s\t%s\t%s\t%s\t%s\n' "${job_of[i]}" "${name_of[i]}" "${status_of[i]}" \
			"${rss_of[i]:-}" "${answer_of[i]:-}" "${c//"$root/"/}"
	done >"$work/rows.tsv"
	local anon=()
	if declare -p anon_of &>/dev/null; then
		for i in "${!job_of[@]}"; do
			printf '%s\t%s\t%s\n' "${job_of[i]}" "${name_of[i]}" "${anon_of[i]:-}"
		done >"$work/anon.tsv"
		anon=(--anon "$work/anon.tsv")
	fi
	"$here/peers.sh" --check >"$work/peers.txt" 2>&1 || true
	out="$results_dir/$bench_name-$stamp"
	"$BT" report --meta "$work/meta" --rows "$work/rows.tsv" "${anon[@]}" \
		"${hf_files[@]}" "$@" --peers "$work/peers.txt" \
		--md "$out.md" --json "$out.json"
	log "wrote $out.md and $out.json"
}

# bench_meta_notes: the meta lines of the notes (with $NOTE) and checks.
bench_meta_notes() {
	local k
	if [[ -n ${NOTE:-} ]]; then
		notes+=("$NOTE")
	fi
	if ((${#notes[@]})); then
		echo "note=${notes[*]}"
	fi
	for k in "${!checks[@]}"; do
		printf 'check.%03d=%s\n' "$k" "${checks[k]}"
	done
}

# bench_plan FACTOR: what the generator promises for $records lines of
# $seed: $distinct, the count the answers are checked against, and
# $plan_bytes, which tell whether the file `fpdedup bench gen` wrote is the
# same data. Stops unless FACTOR times the file's size is free in $work.
bench_plan() {
	local plan free_kb need_kb
	plan=$("$BT" gen --records "$records" --seed "$seed" --format lines --plan)
	distinct=$(sed -nE 's/.*"distinct":([0-9]+).*/\1/p' <<<"$plan")
	plan_bytes=$(sed -nE 's/.*"bytes":([0-9]+).*/\1/p' <<<"$plan")
	free_kb=$(df -Pk "$work" | awk 'NR == 2 { print $4 }')
	need_kb=$((plan_bytes * $1 / 1024))
	((free_kb >= need_kb)) || die "need ~$((need_kb / 1024)) MiB free in $work, have $((free_kb / 1024)) MiB: use fewer RECORDS"
}
