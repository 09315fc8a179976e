#!/usr/bin/env bash
# bench/scale-partitions.sh [KEYS] [PARTS] -- a set larger than the machine's
# memory as the partitions a job array builds: KEYS (default 3G) random
# fingerprints of seed 3 (fpdedup-bench fp), built as PARTS (default 4) prefix
# partitions, one build after the other (fp --partition I/N | build
# --partition I/N), then queried together as one set (query --fp --index P0
# --index P1 ...): batches of 10^3, 10^4 and 10^5 present and absent keys,
# each run with keys no earlier run asked for, the partitions dropped from the
# page cache first (the host caches the VM's disk: repeated keys would measure
# it). A warm row is not taken: the set is larger than the memory.
#
# Prints, for each batch: the median of $RUNS runs (default 3) of wall time,
# ns a key, the device's completed reads a key (/proc/diskstats) and major
# faults; and each build's wall time and peak RSS. Needs about 17.5 bytes a
# key free in $WORK (default a directory under /work, else $TMPDIR), which it
# removes at the end. Set THP to always around it when comparing (README
# "Performance").
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH" LC_ALL=C
KEYS="${1:-3G}"
PARTS="${2:-4}"
RUNS="${RUNS:-3}"
base=${WORK:-$( [ -d /work ] && echo /work || echo "${TMPDIR:-/tmp}")}
tmp=$(mktemp -d "$base/scale-partitions.XXXXXX"); trap 'rm -rf "$tmp"' EXIT
F="${FPDEDUP_BIN:-$tmp/fpdedup}"
B="${FPDEDUP_BENCH_BIN:-$tmp/fpdedup-bench}"
[ -n "${FPDEDUP_BIN:-}" ] || go build -o "$F" ./cmd/fpdedup
[ -n "${FPDEDUP_BENCH_BIN:-}" ] || go build -o "$B" ./cmd/fpdedup-bench
n=$(numfmt --from=si "$KEYS")
need=$(( n * 35 / 2 ))
free=$(( $(df --output=avail -B1 "$tmp" | tail -1) ))
[ "$free" -gt "$need" ] || { echo "scale-partitions.sh: $KEYS keys need about $((need / 1000000000)) GB free in $tmp, there are $((free / 1000000000))" >&2; exit 1; }
dev=$(df --output=source "$tmp" | tail -1); dev=${dev#/dev/}
reads() { awk -v d="$dev" '$3 == d {print $4}' /proc/diskstats; }
echo "scale-partitions.sh: $KEYS keys as $PARTS partitions in $tmp (device $dev); uptime: $(uptime)"

idx=()
for i in $(seq 0 $((PARTS - 1))); do
	p="$tmp/p$i.fpx"
	/usr/bin/time -f "build $i/$PARTS: %e s, peak RSS %M KiB" -o "$tmp/build.time" \
		sh -c "\"$B\" fp --seed 3 --count $KEYS --partition $i/$PARTS | \"$F\" build -q --format fp --hash xxh3 --partition $i/$PARTS -o \"$p\" -"
	echo "$(cat "$tmp/build.time"); $("$F" inspect "$p" | awk '$1 == "fingerprints" {print $2}') keys, $(stat -c %s "$p") bytes"
	idx+=(--index "$p")
done

next=0 # the fingerprints asked for so far: each run asks for new ones
printf '%-8s %-8s %10s %12s %12s %10s\n' batch keys 'wall s' 'ns/key' 'reads/key' 'majflt'
for k in 1000 10000 100000; do
	for kind in present absent; do
		: > "$tmp/runs"
		for r in $(seq "$RUNS"); do
			from=$(( next % (n - k + 1) ))
			next=$(( next + k ))
			[ "$kind" = present ] || from=$(( from + n + (1 << 40) ))
			"$B" fp --seed 3 --from "$from" --count "$k" -o "$tmp/keys.hex"
			for i in $(seq 0 $((PARTS - 1))); do dd if="$tmp/p$i.fpx" iflag=nocache count=0 status=none; done
			before=$(reads)
			set +e
			/usr/bin/time -f "%e %F" -o "$tmp/q.time" "$F" query --fp --only absent -q "${idx[@]}" < "$tmp/keys.hex" > "$tmp/absent"
			rc=$?
			set -e
			after=$(reads)
			got=$(wc -l < "$tmp/absent")
			if { [ "$kind" = present ] && { [ $rc -ne 0 ] || [ "$got" -ne 0 ]; }; } || { [ "$kind" = absent ] && { [ $rc -ne 1 ] || [ "$got" -ne "$k" ]; }; }; then
				echo "scale-partitions.sh: $k $kind keys: exit $rc, $got absent" >&2
				exit 1
			fi
			read -r wall majflt < <(tail -1 "$tmp/q.time") # after GNU time's "exited with non-zero status"
			echo "$wall $majflt $((after - before))" >> "$tmp/runs"
		done
		sort -g "$tmp/runs" | awk -v k="$k" -v kind="$kind" '{w[NR]=$1; f[NR]=$2; r[NR]=$3}
			END {m=int((NR+1)/2); printf "%-8s %-8s %10.2f %12.0f %12.2f %10d\n", k, kind, w[m], w[m]*1e9/k, r[m]/k, f[m]}'
	done
done
