#!/usr/bin/env bash
# demo.sh -- build fpdedup and run its main jobs (dedup, count, check,
# build, query, inspect, verify) on the bundled example
# (testdata/example/events.txt: 2000 login/payment events, 1240 distinct).
# Needs only Go; no server. Leaves its files in ${DEMO_DIR:-demo-out} (in the
# checkout: a shared /tmp directory made by another user would refuse them).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
out="${DEMO_DIR:-demo-out}"
mkdir -p "$out" bin
out=$(cd "$out" && pwd)
# The first build downloads the modules and compiles them: minutes on a
# fresh machine, so say so and show what go is doing.
echo "demo: building bin/fpdedup (go build; the first time it downloads and compiles the dependencies, a few minutes on 2 cores)..." >&2
# Static, as make build builds it (Makefile).
if ! CGO_ENABLED=0 go build -v -o bin/fpdedup ./cmd/fpdedup 2>&1 | tee "$out/build.log" |
  awk '/^go: downloading/ { print "demo:   " $0 > "/dev/stderr"; next }
       { n++; if (n % 20 == 1) printf "demo:   compiling %s (%d packages so far)\n", $0, n > "/dev/stderr" }'; then
  echo "demo: go build failed:" >&2
  cat "$out/build.log" >&2
  exit 1
fi
echo "demo: built $(bin/fpdedup --version); now the jobs, on $(wc -l < testdata/example/events.txt) events of testdata/example/events.txt, outputs in $out" >&2
fp=bin/fpdedup
events=testdata/example/events.txt
key=$(sed -n 2p "$events")

step() { printf '\n$ %s\n' "$*"; "$@"; }
# The main job: keep each record's first occurrence, in input order.
step "$fp" dedup -o "$out/unique.txt" --record "$out/day1.fpx" "$events"
printf '$ wc -l unique.txt; same as awk '"'"'!s[$0]++'"'"'?\n'
wc -l < "$out/unique.txt"
awk '!s[$0]++' "$events" | cmp - "$out/unique.txt" && echo "identical to awk"
# The keys seen most often, with their counts (= awk + uniq -c), and a
# uniqueness check that fails on the first repeat.
step "$fp" count --top 3 "$events"
step "$fp" dedup --check "$events" || echo "(exit 1: a key repeats)"
# Tomorrow's run against today's fingerprints writes nothing new here.
step "$fp" dedup --against "$out/day1.fpx" -o "$out/new.txt" "$events"
step "$fp" build -o "$out/events.fpx" "$events"
step "$fp" query "$out/events.fpx" "$key" 'u1,dnope,1,login,0.00' || true
echo "(exit 1: one key is absent)"
printf '\n$ %s\n' "$fp query --count $out/events.fpx < $events"
"$fp" query --count "$out/events.fpx" < "$events"
step "$fp" inspect "$out/events.fpx"
step "$fp" verify "$out/events.fpx"
printf '\n$ printf %%s KEY | xxh128sum   # the same fingerprint, from a standard tool\n'
printf %s "$key" | { command -v xxh128sum >/dev/null && xxh128sum || echo "(xxh128sum not installed: apt-get install xxhash)"; }
printf '$ fpdedup dump | grep\n'
"$fp" dump "$out/events.fpx" | grep "$(printf %s "$key" | { command -v xxh128sum >/dev/null && xxh128sum | cut -c1-32 || "$fp" dump "$out/events.fpx" | head -1; })"
