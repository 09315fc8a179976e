#!/usr/bin/env bash
# mariadb-up.sh [PORT] -- start a throwaway MariaDB (mariadbd) on 127.0.0.1:PORT as root,
# without systemd, with its own datadir and socket under $SERVICES_DIR/mariadb-PORT.
# Creates database $DB_NAME and user $DB_USER@127.0.0.1 / @localhost (password $DB_PASS),
# and ${DB_USER}_reader@127.0.0.1 who may only SELECT there (the same password).
# Idempotent: if our instance on PORT already answers, re-applies the (idempotent) SQL, which
# also sets the user's password to $DB_PASS, and prints its PID. Prints ONLY the PID on stdout; diagnostics go to stderr:
#   MARIADB_PID=$(bash mariadb-up.sh 3390)
#   DSN: fpdedup:fpdedup@tcp(127.0.0.1:3390)/fpdedup
# Env: SERVICES_DIR (/tmp/services), DB_NAME/DB_USER/DB_PASS (fpdedup), MARIADB_WAIT_S (60),
#      MARIADB_BUFFER_POOL (256M).
set -euo pipefail

PORT="${1:-${MARIADB_PORT:-3390}}"
BASE="${SERVICES_DIR:-/tmp/services}/mariadb-$PORT"
DATA="$BASE/data"
SOCK="$BASE/mysqld.sock"
PIDFILE="$BASE/mysqld.pid"
LOG="$BASE/error.log"
DB_NAME="${DB_NAME:-fpdedup}"; DB_USER="${DB_USER:-fpdedup}"; DB_PASS="${DB_PASS:-fpdedup}"
WAIT_S="${MARIADB_WAIT_S:-60}"

log() { echo "mariadb-up: $*" >&2; }
alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null; }
port_busy() { timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$PORT" 2>/dev/null; }
ping_ok() { timeout 5 mariadb-admin --no-defaults --socket="$SOCK" -uroot --connect-timeout=1 ping >/dev/null 2>&1; }
sql() { mariadb --no-defaults --socket="$SOCK" -uroot -e "$1"; }
setup_sql() {
  sql "CREATE DATABASE IF NOT EXISTS \`$DB_NAME\`;
       CREATE USER IF NOT EXISTS '$DB_USER'@'127.0.0.1' IDENTIFIED BY '$DB_PASS';
       CREATE USER IF NOT EXISTS '$DB_USER'@'localhost' IDENTIFIED BY '$DB_PASS';
       ALTER USER '$DB_USER'@'127.0.0.1' IDENTIFIED BY '$DB_PASS';
       ALTER USER '$DB_USER'@'localhost' IDENTIFIED BY '$DB_PASS';
       GRANT ALL PRIVILEGES ON \`$DB_NAME\`.* TO '$DB_USER'@'127.0.0.1';
       GRANT ALL PRIVILEGES ON \`$DB_NAME\`.* TO '$DB_USER'@'localhost';
       CREATE USER IF NOT EXISTS '${DB_USER}_reader'@'127.0.0.1' IDENTIFIED BY '$DB_PASS';
       ALTER USER '${DB_USER}_reader'@'127.0.0.1' IDENTIFIED BY '$DB_PASS';
       GRANT SELECT ON \`$DB_NAME\`.* TO '${DB_USER}_reader'@'127.0.0.1';"
}

for b in mariadbd mariadb-install-db mariadb mariadb-admin; do
  command -v "$b" >/dev/null || { log "$b missing (apt-get install -y mariadb-server mariadb-client)"; exit 2; }
done
mkdir -p "$BASE"

# Already running (ours)?
if [ -s "$PIDFILE" ]; then
  OLD=$(cat "$PIDFILE")
  if alive "$OLD" && ping_ok; then setup_sql; log "already running on 127.0.0.1:$PORT"; echo "$OLD"; exit 0; fi
  log "stale pidfile ($OLD), removing"; rm -f "$PIDFILE" "$SOCK"
fi
if port_busy; then log "port $PORT already in use by another process"; exit 3; fi

T0=$(date +%s%N)
# (Re)initialise the datadir unless a previous init completed (marker written only on success).
if [ ! -f "$BASE/.initialized" ]; then
  rm -rf -- "$DATA"; mkdir -p "$DATA"
  mariadb-install-db --no-defaults --user=root --datadir="$DATA" --auth-root-authentication-method=socket \
    --skip-test-db >"$BASE/install-db.log" 2>&1 || { log "mariadb-install-db failed:"; tail -20 "$BASE/install-db.log" >&2; exit 1; }
  touch "$BASE/.initialized"
  log "datadir initialised in $(( ($(date +%s%N) - T0) / 1000000 )) ms"
fi

# mariadbd does not fork: run it detached (setsid, stdio closed) so $(...) callers do not hang.
# Durability knobs are relaxed on purpose: this is a throwaway test server.
setsid mariadbd --no-defaults --user=root --datadir="$DATA" \
  --bind-address=127.0.0.1 --port="$PORT" --socket="$SOCK" --pid-file="$PIDFILE" \
  --log-error="$LOG" --skip-name-resolve --skip-log-bin --max-connections=200 \
  --innodb-buffer-pool-size="${MARIADB_BUFFER_POOL:-256M}" --innodb-log-file-size=256M \
  --innodb-flush-log-at-trx-commit=2 --sync-binlog=0 --innodb-doublewrite=0 \
  --character-set-server=utf8mb4 --collation-server=utf8mb4_bin \
  </dev/null >>"$BASE/stdout.log" 2>&1 &
LAUNCH=$!

for _ in $(seq 1 $((WAIT_S * 10))); do
  if ping_ok && [ -s "$PIDFILE" ]; then
    PID=$(cat "$PIDFILE"); setup_sql
    log "up on 127.0.0.1:$PORT (socket $SOCK) pid=$PID in $(( ($(date +%s%N) - T0) / 1000000 )) ms"
    echo "$PID"; exit 0
  fi
  if ! alive "$LAUNCH" && [ ! -s "$PIDFILE" ]; then break; fi
  sleep 0.1
done
log "mariadbd did not come up within ${WAIT_S}s; last error-log lines:"; tail -30 "$LOG" >&2 || true
exit 1
