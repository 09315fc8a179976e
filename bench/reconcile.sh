#!/usr/bin/env bash
# bench/reconcile.sh [N] -- fpdedup reconcile side by side with the bare
# export tools on the same servers, in the same run, on N keys (default 1M):
#
#   MariaDB: `mariadb --quick -e 'SELECT fp FROM t ORDER BY fp' >/dev/null`
#            vs reconcile (streamed SELECT + merge-join) vs reconcile --probe
#   Redis:   `redis-cli --scan --count 1000 --pattern 'PREFIX*' | wc -l`
#            vs reconcile (SCAN + external sort + merge-join) vs --probe
#   --apply: N missing keys written with SET NX vs redis-benchmark's
#            pipelined SET NX (4 connections, pipelines of 1000) on the same server
#
# The online side holds 90% of the index's keys and 1% extras. Figures are
# whole-process wall times (medians of $RUNS, default 3) as keys/s, and the
# ratio to the bare tool; peak RSS comes from the report. Needs a Redis and a
# MariaDB: run it under the services wrapper,
#
#   bash scripts/services/with-services.sh bash bench/reconcile.sh 1000000
#
# which exports FPDEDUP_REDIS_ADDR and FPDEDUP_MYSQL_DSN. It uses Redis
# database 12 and table fpdedup_bench, and empties both at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH" LC_ALL=C
N="${1:-1000000}"
RUNS="${RUNS:-3}"
: "${FPDEDUP_REDIS_ADDR:?run under scripts/services/with-services.sh (FPDEDUP_REDIS_ADDR)}"
: "${FPDEDUP_MYSQL_DSN:?run under scripts/services/with-services.sh (FPDEDUP_MYSQL_DSN)}"
for tool in redis-cli redis-benchmark mariadb; do command -v $tool >/dev/null || { echo "reconcile.sh: $tool missing" >&2; exit 2; }; done

# DSN user:pass@tcp(host:port)/db
MY_USER=${FPDEDUP_MYSQL_DSN%%:*}; rest=${FPDEDUP_MYSQL_DSN#*:}
MY_PASS=${rest%%@tcp(*}; rest=${rest#*@tcp(}
MY_HOSTPORT=${rest%%)*}; MY_DB=${rest#*)/}
MY_HOST=${MY_HOSTPORT%:*}; MY_PORT=${MY_HOSTPORT##*:}
R_HOST=${FPDEDUP_REDIS_ADDR%:*}; R_PORT=${FPDEDUP_REDIS_ADDR##*:}
RDB=12
export FPDEDUP_MYSQL_PASSWORD="$MY_PASS"
mysql_() { MYSQL_PWD="$MY_PASS" mariadb --no-defaults -h "$MY_HOST" -P "$MY_PORT" -u "$MY_USER" "$MY_DB" "$@"; }
redis_() { redis-cli -h "$R_HOST" -p "$R_PORT" -n "$RDB" "$@"; }

tmp=$(mktemp -d); trap 'rm -rf "$tmp"; redis_ FLUSHDB >/dev/null 2>&1 || true; mysql_ -e "DROP TABLE IF EXISTS fpdedup_bench" 2>/dev/null || true' EXIT
F="${FPDEDUP_BIN:-$tmp/fpdedup}"   # FPDEDUP_BIN: a binary built already
[ -n "${FPDEDUP_BIN:-}" ] || go build -o "$F" ./cmd/fpdedup

now() { date +%s.%N; }
# median of RUNS wall times of "$@" (stdout discarded)
timeit() {
  local ts=()
  for _ in $(seq "$RUNS"); do
    local t0; t0=$(now); "$@" >/dev/null 2>"$tmp/err" || [ $? = 1 ] || { cat "$tmp/err" >&2; exit 2; }
    ts+=("$(echo "$(now) - $t0" | bc)")
  done
  printf '%s\n' "${ts[@]}" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'
}
rate() { echo "$1 / $2" | bc -l | awk '{ if ($1 >= 1e6) printf "%.2fM", $1/1e6; else printf "%.0fk", $1/1e3 }'; }
ratio() { echo "$1 / $2" | bc -l | awk '{printf "%.2f", $1}'; }
peak() { sed -n 's/.*"peak_rss_bytes": *\([0-9]*\).*/\1/p' "$1" | awk '{printf "%.0f MiB", $1/1048576}'; }

echo "== data: $N keys offline, 90% of them online, 1% extras (machine: $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg))"
seq 1 "$N" | sed 's/^/k/' > "$tmp/keys.txt"
"$F" build -q --hash sha256 -o "$tmp/truth.fpx" "$tmp/keys.txt"
awk 'NR % 10 != 3' "$tmp/keys.txt" > "$tmp/online.txt"
seq 1 $((N / 100)) | sed 's/^/x/' >> "$tmp/online.txt"
"$F" build -q --hash sha256 -o "$tmp/online.fpx" "$tmp/online.txt"
ONLINE=$(wc -l < "$tmp/online.txt")

mysql_ -e "DROP TABLE IF EXISTS fpdedup_bench; CREATE TABLE fpdedup_bench (fp BINARY(16) NOT NULL PRIMARY KEY) ENGINE=InnoDB;
  INSERT INTO fpdedup_bench SELECT UNHEX(LEFT(SHA2(CONCAT('k', seq), 256), 32)) FROM seq_1_to_$N WHERE seq % 10 <> 3;
  INSERT INTO fpdedup_bench SELECT UNHEX(LEFT(SHA2(CONCAT('x', seq), 256), 32)) FROM seq_1_to_$((N / 100));"
redis_ FLUSHDB >/dev/null
"$F" dump "$tmp/online.fpx" | awk '{printf "*3\r\n$3\r\nSET\r\n$35\r\ndd:%s\r\n$1\r\n1\r\n", $1}' | redis_ --pipe >/dev/null
echo "MariaDB rows: $(mysql_ -N -e 'SELECT COUNT(*) FROM fpdedup_bench'), Redis keys: $(redis_ DBSIZE)"

MYURL="mysql://$MY_USER@$MY_HOSTPORT/$MY_DB?table=fpdedup_bench&column=fp"
RURL="redis://$FPDEDUP_REDIS_ADDR/$RDB?match=dd:*"
printf '\n%-58s %9s %10s %7s %s\n' job seconds keys/s ratio "peak RSS"
row() { printf '%-58s %9.3f %10s %7s %s\n' "$1" "$2" "$(rate "$3" "$2")" "$4" "${5:-}"; }

bare=$(timeit mysql_ --quick -N -e 'SELECT fp FROM fpdedup_bench ORDER BY fp')
row "mariadb --quick SELECT fp ORDER BY fp > /dev/null" "$bare" "$ONLINE" 1.00
t=$(timeit "$F" reconcile -q --index "$tmp/truth.fpx" --online "$MYURL" --report "$tmp/my.json")
row "reconcile mysql (merge-join, COUNT(*) check)" "$t" "$ONLINE" "$(ratio "$bare" "$t")" "$(peak "$tmp/my.json")"
t=$(timeit "$F" reconcile -q --index "$tmp/truth.fpx" --online "$MYURL&count=0" --report "$tmp/my0.json")
row "reconcile mysql (merge-join, &count=0)" "$t" "$ONLINE" "$(ratio "$bare" "$t")" "$(peak "$tmp/my0.json")"
t=$(timeit "$F" reconcile -q --index "$tmp/truth.fpx" --online "$MYURL" --probe --report "$tmp/myp.json")
row "reconcile mysql --probe (IN of 1000, 8 conns)" "$t" "$N" "$(ratio "$bare" "$t")" "$(peak "$tmp/myp.json")"

# Debian's redis-cli 7.0 has no --count (its --scan asks COUNT 10); newer
# ones do. The reference is then the plain --scan, and the report's own
# online_read_seconds shows the bare SCAN loop inside reconcile.
if redis-cli --scan --count 1000 --pattern 'no-such-key:*' -h "$R_HOST" -p "$R_PORT" >/dev/null 2>&1; then
  bare=$(timeit bash -c "set -o pipefail; redis-cli -h $R_HOST -p $R_PORT -n $RDB --scan --count 1000 --pattern 'dd:*' | wc -l")
  row "redis-cli --scan --count 1000 | wc -l" "$bare" "$ONLINE" 1.00
else
  bare=$(timeit bash -c "set -o pipefail; redis-cli -h $R_HOST -p $R_PORT -n $RDB --scan --pattern 'dd:*' | wc -l")
  row "redis-cli --scan | wc -l (no --count in this redis-cli: COUNT 10)" "$bare" "$ONLINE" 1.00
fi
t=$(timeit "$F" reconcile -q --index "$tmp/truth.fpx" --online "$RURL" --report "$tmp/r.json")
row "reconcile redis (SCAN 1000, sort, merge-join)" "$t" "$ONLINE" "$(ratio "$bare" "$t")" "$(peak "$tmp/r.json")"
rt=$(sed -n 's/.*"online_read_seconds": *\([0-9.e+-]*\).*/\1/p' "$tmp/r.json")
row "  of which the SCAN loop (online_read_seconds, last run)" "$rt" "$ONLINE" "$(ratio "$bare" "$rt")"
t=$(timeit "$F" reconcile -q --index "$tmp/truth.fpx" --online "$RURL&count=5000" --report "$tmp/r5.json")
row "reconcile redis (SCAN 5000, sort, merge-join)" "$t" "$ONLINE" "$(ratio "$bare" "$t")" "$(peak "$tmp/r5.json")"
t=$(timeit "$F" reconcile -q --index "$tmp/truth.fpx" --online "$RURL" --probe --report "$tmp/rp.json")
row "reconcile redis --probe (EXISTS pipelines, 8 conns)" "$t" "$N" "$(ratio "$bare" "$t")" "$(peak "$tmp/rp.json")"

# --apply of N missing keys into an empty database, against redis-benchmark's
# pipelined SET NX on the same server (4 connections, pipelines of 1000).
RUNS_APPLY=1
redis_ FLUSHDB >/dev/null
t0=$(now)
redis-benchmark -h "$R_HOST" -p "$R_PORT" --dbnum "$RDB" -c 4 -P 1000 -n "$N" -r 1000000000 -q SET "bk:__rand_int__" 1 NX >/dev/null
bare=$(echo "$(now) - $t0" | bc)
row "redis-benchmark SET NX -c 4 -P 1000" "$bare" "$N" 1.00
redis_ FLUSHDB >/dev/null
t0=$(now)
"$F" reconcile -q --index "$tmp/truth.fpx" --online "$RURL&hex=32" --apply --report "$tmp/apply.json" || [ $? = 1 ]
t=$(echo "$(now) - $t0" | bc)
row "reconcile --apply, whole run (SET NX, 8 conns, batch 1000)" "$t" "$N" "$(ratio "$bare" "$t")" "$(peak "$tmp/apply.json")"
at=$(sed -n 's/.*"apply_seconds": *\([0-9.e+-]*\).*/\1/p' "$tmp/apply.json")
row "  of which the writes (apply phase)" "$at" "$N" "$(ratio "$bare" "$at")"
echo "Redis keys after --apply: $(redis_ DBSIZE) (want $N)"
