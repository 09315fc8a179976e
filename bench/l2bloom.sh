#!/usr/bin/env bash
# bench/l2bloom.sh [N] [SHARDS] [BITS] -- fpdedup reconcile against the L2
# bloom, side by side with the bare Redis work it does, on the same server in
# the same run (N truth keys, default 10M; SHARDS shards of BITS bits, default
# 16 of 2^26 (128 MiB in all), k=3):
#
#   audit:    the bare read, redis-cli --pipe of the same pipelined GETRANGE
#             chunks of 512 KiB, plus the bare in-memory bit tests of the
#             truth (go test -bench BenchmarkBloomBitTests: Scan, positions,
#             K bits, nothing else), against reconcile (the whole audit)
#   --apply:  redis-cli --pipe of as many SETBITs at random places of the
#             shards (one connection, pipelined whole), against reconcile
#             --apply of the missing keys (redis-benchmark cannot: its
#             __rand_int__ is zero-padded, which SETBIT refuses as an offset)
#   rebuild:  redis-cli --pipe of SETRANGE chunks of 512 KiB writing as many
#             bytes, against reconcile --rebuild-shard all
#
# The bloom online holds 90% of the truth's keys (set by --apply of an index
# of them). Figures are whole-process wall times, medians of $RUNS (default
# 5, interleaved), as ratios bare/fpdedup (1.00: as fast as the bare work),
# with the server's own usec per call (INFO commandstats). Needs a Redis:
#
#   bash scripts/services/with-services.sh bash bench/l2bloom.sh
#
# It uses database 14 and empties it at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH" LC_ALL=C
N="${1:-10000000}"
SHARDS="${2:-16}"
BITS="${3:-67108864}"
K=3
RUNS="${RUNS:-5}"
: "${FPDEDUP_REDIS_ADDR:?run under scripts/services/with-services.sh (FPDEDUP_REDIS_ADDR)}"
for tool in redis-cli; do command -v $tool >/dev/null || { echo "l2bloom.sh: $tool missing" >&2; exit 2; }; done
R_HOST=${FPDEDUP_REDIS_ADDR%:*}; R_PORT=${FPDEDUP_REDIS_ADDR##*:}
RDB=14
redis_() { redis-cli -h "$R_HOST" -p "$R_PORT" -n "$RDB" "$@"; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"; redis_ FLUSHDB >/dev/null 2>&1 || true' EXIT
F="${FPDEDUP_BIN:-$tmp/fpdedup}"
[ -n "${FPDEDUP_BIN:-}" ] || go build -o "$F" ./cmd/fpdedup
go test -c -o "$tmp/reconcile.test" ./reconcile

now() { date +%s.%N; }
med() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
ratio() { echo "$1 / $2" | bc -l | awk '{printf "%.2f", $1}'; }
SHARD_BYTES=$(( (BITS + 7) / 8 ))
TOTAL=$(( SHARD_BYTES * SHARDS ))
URL="redis://$FPDEDUP_REDIS_ADDR/$RDB?bloom=bb:{*}&shards=$SHARDS&bits=$BITS&k=$K"
fresh() { # empty shards of the full length
  redis_ FLUSHDB >/dev/null
  for s in $(seq 0 $((SHARDS - 1))); do redis_ SETBIT "bb:{$s}" $((BITS - 1)) 0 >/dev/null; done
}
usec() { # the server's usec per call of $1 since the last CONFIG RESETSTAT
  redis_ INFO commandstats | tr -d '\r' | sed -n "s/^cmdstat_$1:.*usec_per_call=\([0-9.]*\).*/\1/p"
}

echo "== $N truth keys; $SHARDS shards of $BITS bits, k=$K ($(numfmt --to=iec $TOTAL)B); $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), THP $(sed 's/.*\[\(.*\)\].*/\1/' /sys/kernel/mm/transparent_hugepage/enabled)"
seq 1 "$N" | sed 's/^/k/' > "$tmp/keys.txt"
"$F" build -q -o "$tmp/truth.fpx" "$tmp/keys.txt"
awk 'NR % 10 != 3' "$tmp/keys.txt" > "$tmp/online.txt"
"$F" build -q -o "$tmp/online.fpx" "$tmp/online.txt"
fresh
"$F" reconcile -q --index "$tmp/online.fpx" --online "$URL" --apply >/dev/null

# The bare read: the same GETRANGE chunks, pipelined by redis-cli --pipe.
CHUNK=524288
: > "$tmp/getrange.resp"
for s in $(seq 0 $((SHARDS - 1))); do
  k="bb:{$s}"
  for ((off = 0; off < SHARD_BYTES; off += CHUNK)); do
    end=$(( off + CHUNK - 1 < SHARD_BYTES - 1 ? off + CHUNK - 1 : SHARD_BYTES - 1 ))
    printf '*4\r\n$8\r\nGETRANGE\r\n$%d\r\n%s\r\n$%d\r\n%d\r\n$%d\r\n%d\r\n' ${#k} "$k" ${#off} "$off" ${#end} "$end" >> "$tmp/getrange.resp"
  done
done
# The bare write: SETRANGE chunks of as many bytes, into keys of their own.
head -c $CHUNK /dev/zero | tr '\0' '\125' > "$tmp/payload"
setranges() { # KEY: a shard's SETRANGE chunks into KEY, as RESP on stdout
  local k=$1 off n
  for ((off = 0; off < SHARD_BYTES; off += CHUNK)); do
    n=$(( SHARD_BYTES - off < CHUNK ? SHARD_BYTES - off : CHUNK ))
    printf '*4\r\n$8\r\nSETRANGE\r\n$%d\r\n%s\r\n$%d\r\n%d\r\n$%d\r\n' ${#k} "$k" ${#off} "$off" "$n"
    head -c "$n" "$tmp/payload"
    printf '\r\n'
  done
}
: > "$tmp/setrange.resp"
for s in $(seq 0 $((SHARDS - 1))); do setranges "bare:{$s}" >> "$tmp/setrange.resp"; done
# The bare work of the rebuild's design: the same SETRANGE chunks into a new
# key, then BITOP OR of the live shard into it and RENAME over it (what the
# swap script does, without the script).
: > "$tmp/swap.resp"
for s in $(seq 0 $((SHARDS - 1))); do
  k="bare:{$s}:rebuild" live="bb:{$s}" dst="bare:{$s}"
  setranges "$k" >> "$tmp/swap.resp"
  printf '*5\r\n$5\r\nBITOP\r\n$2\r\nOR\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n' ${#k} "$k" ${#k} "$k" ${#live} "$live" >> "$tmp/swap.resp"
  printf '*3\r\n$6\r\nRENAME\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n' ${#k} "$k" ${#dst} "$dst" >> "$tmp/swap.resp"
done
"$F" reconcile -q --index "$tmp/truth.fpx" --online "$URL" --report "$tmp/a.json" || [ $? = 1 ]
MISSING=$(sed -n 's/.*"only_offline": *\([0-9]*\).*/\1/p' "$tmp/a.json" | head -1)
echo "missing online: $MISSING keys ($((MISSING * K)) SETBITs for --apply)"
awk -v n=$((MISSING * K)) -v shards="$SHARDS" -v bits="$BITS" 'BEGIN {
  srand(1)
  for (i = 0; i < n; i++) {
    k = "bare:{" int(rand() * shards) "}"; o = int(rand() * bits) ""
    printf "*4\r\n$6\r\nSETBIT\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n$1\r\n1\r\n", length(k), k, length(o), o
  }
}' > "$tmp/setbit.resp"

declare -A T
run() { # name, command...: one timed run, appended to T[name]
  local name=$1; shift
  redis_ CONFIG RESETSTAT >/dev/null
  local t0; t0=$(now)
  "$@" >/dev/null 2>"$tmp/err" || [ $? = 1 ] || { cat "$tmp/err" >&2; exit 2; }
  T[$name]+="$(echo "$(now) - $t0" | bc) "
  case $name in
    bare-read) U[getrange]=$(usec getrange) ;;
    audit) U[audit-getrange]=$(usec getrange) ;;
    bare-setbit) U[setbit]=$(usec setbit) ;;
    apply) U[apply-setbit]=$(usec setbit) ;;
    bare-setrange) U[setrange]=$(usec setrange) ;;
    bare-swap) U[swap-setrange]=$(usec setrange); U[swap-bitop]=$(usec bitop) ;;
    rebuild) U[rebuild-setrange]=$(usec setrange); U[evalsha]=$(usec evalsha); U[rebuild-bitop]=$(usec bitop) ;;
  esac
}
declare -A U
bittests() {
  FPDEDUP_BENCH_INDEX="$tmp/truth.fpx" FPDEDUP_BENCH_L2="shards=$SHARDS,bits=$BITS,k=$K" \
    "$tmp/reconcile.test" -test.run XXX -test.bench BloomBitTests -test.benchtime 1x | sed -n 's/.* \([0-9.]*\) ns\/key.*/\1/p' > "$tmp/bt"
}
for s in $(seq 0 $((SHARDS - 1))); do redis_ COPY "bb:{$s}" "saved:{$s}" REPLACE >/dev/null; done
reset_online() { # back to the 90% bloom, for --apply
  for s in $(seq 0 $((SHARDS - 1))); do redis_ COPY "saved:{$s}" "bb:{$s}" REPLACE >/dev/null; done
}
for i in $(seq "$RUNS"); do
  for job in $(printf '%s\n' read audit bits setbit apply setrange swap rebuild | shuf); do
    case $job in
      read) run bare-read bash -c "redis-cli -h $R_HOST -p $R_PORT -n $RDB --pipe < $tmp/getrange.resp" ;;
      audit) run audit "$F" reconcile -q --index "$tmp/truth.fpx" --online "$URL" ;;
      bits) bittests; T[bits]+="$(echo "$(cat "$tmp/bt") * $N / 1000000000" | bc -l) " ;;
      setbit) run bare-setbit bash -c "redis-cli -h $R_HOST -p $R_PORT -n $RDB --pipe < $tmp/setbit.resp" ;;
      apply) reset_online; run apply "$F" reconcile -q --index "$tmp/truth.fpx" --online "$URL" --apply --report "$tmp/apply.json" ;;
      setrange) redis_ DEL $(for s in $(seq 0 $((SHARDS - 1))); do echo "bare:{$s}"; done) >/dev/null
                run bare-setrange bash -c "redis-cli -h $R_HOST -p $R_PORT -n $RDB --pipe < $tmp/setrange.resp" ;;
      swap) redis_ DEL $(for s in $(seq 0 $((SHARDS - 1))); do echo "bare:{$s}"; done) >/dev/null
            run bare-swap bash -c "redis-cli -h $R_HOST -p $R_PORT -n $RDB --pipe < $tmp/swap.resp" ;;
      rebuild) run rebuild "$F" reconcile -q --index "$tmp/truth.fpx" --online "$URL" --rebuild-shard all --report "$tmp/rebuild.json" ;;
    esac
  done
done
m() { printf '%s\n' ${T[$1]} | med; }
read_=$(m bare-read); bits=$(m bits); audit=$(m audit)
setbit=$(m bare-setbit); apply=$(m apply); setrange=$(m bare-setrange); swap=$(m bare-swap); rebuild=$(m rebuild)
ref=$(echo "$read_ + $bits" | bc -l)
applyw=$(sed -n 's/.*"apply_seconds": *\([0-9.e+-]*\).*/\1/p' "$tmp/apply.json")
printf '\n%-72s %9s %7s %s\n' job seconds ratio "server usec/call"
row() { printf '%-72s %9.3f %7s %s\n' "$1" "$2" "${3:-}" "${4:-}"; }
row "bare: redis-cli --pipe GETRANGE $(numfmt --to=iec $TOTAL)B in 512 KiB chunks" "$read_" "" "GETRANGE ${U[getrange]}"
row "bare: in-memory bit tests of $N keys (BenchmarkBloomBitTests)" "$bits"
row "bare: the two together" "$ref" 1.00
row "fpdedup reconcile (the audit, whole process)" "$audit" "$(ratio "$ref" "$audit")" "GETRANGE ${U[audit-getrange]}"
row "bare: redis-cli --pipe of $((MISSING * K)) SETBITs at random places" "$setbit" 1.00 "SETBIT ${U[setbit]}"
row "fpdedup reconcile --apply of $MISSING keys (whole process)" "$apply" "$(ratio "$setbit" "$apply")" "SETBIT ${U[apply-setbit]}"
row "  of which the writes (apply_seconds, last run)" "$applyw" "$(ratio "$setbit" "$applyw")"
row "bare: redis-cli --pipe SETRANGE $(numfmt --to=iec $TOTAL)B in 512 KiB chunks" "$setrange" 1.00 "SETRANGE ${U[setrange]}"
row "bare: the same, then BITOP OR the live shard in and RENAME (the swap)" "$swap" "" "SETRANGE ${U[swap-setrange]}, BITOP ${U[swap-bitop]}"
row "fpdedup reconcile --rebuild-shard all (build, write, swap; whole process)" "$rebuild" "$(ratio "$setrange" "$rebuild")" "SETRANGE ${U[rebuild-setrange]}, EVALSHA ${U[evalsha]}, BITOP ${U[rebuild-bitop]}"
rbw=$(sed -n '/"rebuild": {/,/^  }/ s/.*"seconds": *\([0-9.e+-]*\).*/\1/p' "$tmp/rebuild.json")
row "  of which the rebuild (rebuild.seconds, last run)" "$rbw" "$(ratio "$setrange" "$rbw")"
row "  against the bare SETRANGE + BITOP OR + RENAME" "$rebuild" "$(ratio "$swap" "$rebuild")"
echo "(ratios: bare seconds / fpdedup seconds, medians of $RUNS interleaved runs; >= 0.80 is the target)"
