#!/usr/bin/env bash
# fuzz.sh -- run every fuzz target of the repository (every `func FuzzX` in
# a *_test.go file), one after the other, each starting from its committed
# corpus (the f.Add seeds and PKG/testdata/fuzz/FuzzX/: seeds and the
# crashers of earlier runs, kept as regression inputs), and print a table
# of what each did.
#
#   scripts/fuzz.sh short            3000 executions each (CI: the corpus, and a
#                                    short look past it; 28 targets ~3 min)
#   scripts/fuzz.sh long [DURATION]  DURATION each (default 1h), e.g. 3m
#
# Why short counts executions: with a duration, Go's fuzzing coordinator can
# fail a target with a bare "context deadline exceeded" and no input when
# its deadline fires (it compares the parent context's error with the
# child's before the cancel has reached the child: golang/go#75804, fixed
# in Go 1.27; seen here in CI on FuzzCSVChunks, 88772 execs, nothing saved).
# A count sets no deadline. Once the toolchain is 1.27, deadline_race can
# go and short mode can have a duration again (a count does not cap a slow
# target's time). Short mode is CI's regression check of the corpus and a
# short look past it; finding what lies further is long mode's (each
# target's instrumented build is already a third of its short run).
# In long mode that bare failure, with no input written and nothing else in
# the log's FAIL block, is reported as "deadline race" and is not a finding.
#
# Environment: FUZZ_ONLY, a regexp of PKG.FuzzX to run (default all);
# FUZZ_PARALLEL, fuzz workers (default: short mode, the machine's cores, at
# most 2, at the end of CI's servers lane; long mode 1, beside other work);
# FUZZ_LOGS, where the logs go (default a new temp dir).
#
# Short mode minimizes an input for at most 10 executions: the fuzzer
# minimizes every new interesting input too, not only a failing one, and
# in CI those inputs are thrown away with the machine. With a 5s or 1s
# budget a target that found a hundred new inputs spent nearly all its
# time minimizing them (FuzzChecksummedOpen, fresh cache, 20000 execs:
# 89s at 1s, 12s at 10x; 22-182s across CI runs at 5s). A failing input is
# still written; minimize it further with a long run.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"

usage() { echo "usage: scripts/fuzz.sh short | long [DURATION]" >&2; exit 2; }
mode=${1:-}
case "$mode" in
  short) [ $# -eq 1 ] || usage; fuzztime=3000x; minimize=10x; niceness=0; workers=$(( $(nproc) < 2 ? 1 : 2 )) ;;
  long) [ $# -le 2 ] || usage; fuzztime=${2:-1h}; minimize=30s; niceness=10; workers=1 ;;
  *) usage ;;
esac
parallel=${FUZZ_PARALLEL:-$workers}
logs=${FUZZ_LOGS:-$(mktemp -d "${TMPDIR:-/tmp}/fpdedup-fuzz.XXXXXX")}
mkdir -p "$logs"

# PKG NAME per target, in a stable order.
mapfile -t targets < <(
  grep -rn --include='*_test.go' --exclude-dir=.git --exclude-dir=vendor -E '^func Fuzz[A-Za-z0-9_]*\(' . |
    sed -E 's#^\./(.*)/[^/]+_test\.go:[0-9]+:func (Fuzz[A-Za-z0-9_]*)\(.*#\1 \2#' | sort -u)
[ ${#targets[@]} -gt 0 ] || { echo "fuzz.sh: no fuzz targets found" >&2; exit 1; }

# deadline_race LOG: the target failed only with the coordinator's own
# deadline: the FAIL line is followed by "context deadline exceeded" alone
# (no panic, no t.Error output, no input written).
deadline_race() {
  local said
  said=$(awk '/^--- FAIL: /{f=1; next} f && NF' "$1" |
    grep -v -E '^FAIL([[:space:]].*)?$|^exit status [0-9]+$' | sed 's/^[[:space:]]*//' | sort -u)
  [ "$said" = "context deadline exceeded" ] && ! grep -q 'Failing input written' "$1"
}

interrupted=0
trap 'interrupted=1' INT TERM
rows=()
failed=0
echo "fuzz.sh: ${#targets[@]} targets, $fuzztime each, $parallel worker(s); logs in $logs" >&2
for t in "${targets[@]}"; do
  pkg=${t% *} name=${t#* }
  if [ -n "${FUZZ_ONLY:-}" ] && ! [[ "$pkg.$name" =~ $FUZZ_ONLY ]]; then
    continue
  fi
  log="$logs/${pkg//\//_}.$name.log"
  echo "fuzz.sh: $pkg $name ..." >&2
  start=$SECONDS
  status=0
  # -timeout 0: the test binary's default 10m alarm would end a long run.
  nice -n "$niceness" go test -run '^$' -fuzz "^$name\$" -fuzztime "$fuzztime" -fuzzminimizetime "$minimize" \
    -parallel "$parallel" -timeout 0 "./$pkg" >"$log" 2>&1 || status=$?
  wall=$((SECONDS - start))
  # The last progress line has the total: "fuzz: elapsed: 6s, execs: 41234 (6872/sec), ...".
  execs=$(grep -o 'execs: [0-9]*' "$log" | tail -n 1 | cut -d' ' -f2 || true)
  result=ok
  if [ "$status" -ne 0 ]; then
    prev_failed=$failed
    failed=1
    crasher=$(sed -n 's#.*Failing input written to \([^ ]*\).*#\1#p' "$log" | tail -n 1)
    if [ -n "$crasher" ]; then
      result="FAIL: $pkg/$crasher"
    elif deadline_race "$log"; then
      failed=$prev_failed
      result="ok (deadline race at the end, no input: not a finding)"
    elif [ "$interrupted" = 1 ]; then
      result="interrupted"
    else
      result="FAIL (no input saved; see $log)"
    fi
    echo "---- $pkg $name: exit $status; the end of $log:" >&2
    tail -n 40 "$log" >&2
  fi
  rows+=("$(printf '%-10s %-20s %8s %7ss %12s  %s' "$pkg" "$name" "$fuzztime" "$wall" "${execs:-0}" "$result")")
  [ "$interrupted" = 0 ] || break
done

printf '\n%-10s %-20s %8s %8s %12s  %s\n' package target fuzztime wall execs result
for r in "${rows[@]}"; do
  echo "$r"
done
exit $((failed | interrupted))
