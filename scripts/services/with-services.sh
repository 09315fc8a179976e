#!/usr/bin/env bash
# with-services.sh CMD [ARG...] -- run CMD with a throwaway redis-server, a
# 3-master Redis Cluster, mariadbd, a one-host Slurm cluster, a single etcd
# member and a 3-member etcd cluster on loopback, then tear them all down (on
# success, failure or signal).
#
#   bash scripts/services/with-services.sh go test -count=1 ./reconcile/
#
# On a fresh Debian machine, as root, it installs redis-server, mariadb-server,
# mariadb-client, etcd-server and etcd-client first, with a policy-rc.d that keeps the packages from
# starting system services on 6379/3306. It starts Redis on
# 127.0.0.1:$REDIS_PORT (6390), a Redis Cluster of three masters on
# 127.0.0.1:$REDIS_CLUSTER_PORTS (7391 7392 7393) and MariaDB on
# 127.0.0.1:$MARIADB_PORT (3390) with redis-up.sh, redis-cluster-up.sh and
# mariadb-up.sh beside this file, and Slurm (munged, slurmctld on
# 127.0.0.1:6917, slurmd nodes fp1 and fp2 on 6918 and 6919; installed from
# slurm-wlm and munge) with slurm-up.sh, and etcd (one member on
# 127.0.0.1:$ETCD_PORT (2391), a cluster on 127.0.0.1:$ETCD_CLUSTER_PORTS
# (2393 2395 2397); peer ports are client ports + 1) with etcd-up.sh, both
# started empty, and exports for CMD:
#
#   FPDEDUP_REDIS_ADDR=127.0.0.1:6390
#   FPDEDUP_REDIS_CLUSTER=127.0.0.1:7391,127.0.0.1:7392,127.0.0.1:7393
#   FPDEDUP_MYSQL_DSN=fpdedup:fpdedup-Test-pw-7@tcp(127.0.0.1:3390)/fpdedup
#   FPDEDUP_MYSQL_READER=fpdedup_reader (may only SELECT there; the same password)
#   FPDEDUP_SERVICES_DIR=$SERVICES_DIR     (datadirs, pidfiles and logs)
#   FPDEDUP_TEST_KILL=1                    (tests may kill and restart these servers)
#   FPDEDUP_SLURM=1, SLURM_CONF=$SERVICES_DIR/slurm/slurm.conf   (sbatch, squeue, sacct -c reach the cluster)
#   FPDEDUP_ETCD=127.0.0.1:2391
#   FPDEDUP_ETCD_CLUSTER=127.0.0.1:2393,127.0.0.1:2395,127.0.0.1:2397
#
# Teardown stops the servers by the PID in their pidfiles at exit time (a test
# may have restarted one), never by name. CMD's exit status is returned.
set -uo pipefail
[ $# -gt 0 ] || { echo "usage: with-services.sh CMD [ARG...]" >&2; exit 2; }
HERE="$(cd "$(dirname "$0")" && pwd)"
REDIS_PORT="${REDIS_PORT:-6390}"
MARIADB_PORT="${MARIADB_PORT:-3390}"
read -r -a CLUSTER_PORTS <<<"${REDIS_CLUSTER_PORTS:-7391 7392 7393}"
ETCD_PORT="${ETCD_PORT:-2391}"
read -r -a ETCD_CLUSTER_PORTS <<<"${ETCD_CLUSTER_PORTS:-2393 2395 2397}"
export SERVICES_DIR="${SERVICES_DIR:-/tmp/services}"
# A password unlike the user and database names, so that tests can tell it
# never shows in messages and reports.
export DB_USER="${DB_USER:-fpdedup}" DB_NAME="${DB_NAME:-fpdedup}" DB_PASS="${DB_PASS:-fpdedup-Test-pw-7}"

log() { echo "with-services: $*" >&2; }

need=()
command -v redis-server >/dev/null || need+=(redis-server)
command -v mariadbd >/dev/null || need+=(mariadb-server)
command -v mariadb >/dev/null || need+=(mariadb-client)
{ command -v slurmctld && command -v slurmd && command -v sbatch; } >/dev/null || need+=(slurm-wlm)
command -v munged >/dev/null || need+=(munge)
command -v etcd >/dev/null || need+=(etcd-server)
command -v etcdctl >/dev/null || need+=(etcd-client)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    log "missing ${need[*]}, and cannot install them (not root on Debian)"; exit 2
  fi
  log "installing ${need[*]}"
  # Keep the packages' postinst from starting system services.
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
  fi
  apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    redis-server mariadb-server mariadb-client slurm-wlm munge etcd-server etcd-client >/dev/null || { log "apt-get install failed"; exit 2; }
fi

teardown() {
  local pid
  bash "$HERE/slurm-down.sh" 2>/dev/null
  pid=$(cat "$SERVICES_DIR/redis-$REDIS_PORT/redis.pid" 2>/dev/null || true)
  [ -n "$pid" ] && bash "$HERE/redis-down.sh" "$pid" 2>/dev/null
  bash "$HERE/redis-cluster-down.sh" "${CLUSTER_PORTS[@]}" 2>/dev/null
  pid=$(cat "$SERVICES_DIR/mariadb-$MARIADB_PORT/mysqld.pid" 2>/dev/null || true)
  [ -n "$pid" ] && bash "$HERE/mariadb-down.sh" "$pid" 2>/dev/null
  PURGE=1 bash "$HERE/etcd-down.sh" "$ETCD_PORT" "${ETCD_CLUSTER_PORTS[@]}" 2>/dev/null
  return 0
}

REDIS_PID=$(bash "$HERE/redis-up.sh" "$REDIS_PORT") || { log "redis did not start"; exit 2; }
MARIADB_PID=$(bash "$HERE/mariadb-up.sh" "$MARIADB_PORT") || { log "mariadb did not start"; teardown; exit 2; }
CLUSTER_PIDS=$(bash "$HERE/redis-cluster-up.sh" "${CLUSTER_PORTS[@]}") || { log "the redis cluster did not start"; teardown; exit 2; }
SLURM_PIDS=$(bash "$HERE/slurm-up.sh") || { log "slurm did not start"; teardown; exit 2; }
ETCD_PID=$(ETCD_FRESH=1 bash "$HERE/etcd-up.sh" "$ETCD_PORT") || { log "etcd did not start"; teardown; exit 2; }
ETCD_CLUSTER_PIDS=$(ETCD_FRESH=1 bash "$HERE/etcd-up.sh" "${ETCD_CLUSTER_PORTS[@]}") || { log "the etcd cluster did not start"; teardown; exit 2; }
trap teardown EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
log "redis pid $REDIS_PID on 127.0.0.1:$REDIS_PORT, mariadb pid $MARIADB_PID on 127.0.0.1:$MARIADB_PORT, redis cluster pids $CLUSTER_PIDS on 127.0.0.1:${CLUSTER_PORTS[*]}"
log "slurm pids $SLURM_PIDS (munged slurmctld slurmd...), SLURM_CONF=$SERVICES_DIR/slurm/slurm.conf"
log "etcd pid $ETCD_PID on 127.0.0.1:$ETCD_PORT, etcd cluster pids $ETCD_CLUSTER_PIDS on 127.0.0.1:${ETCD_CLUSTER_PORTS[*]}"

seeds=()
for p in "${CLUSTER_PORTS[@]}"; do seeds+=("127.0.0.1:$p"); done
export FPDEDUP_REDIS_ADDR="127.0.0.1:$REDIS_PORT"
export FPDEDUP_REDIS_CLUSTER="$(IFS=,; echo "${seeds[*]}")"
export FPDEDUP_MYSQL_DSN="$DB_USER:$DB_PASS@tcp(127.0.0.1:$MARIADB_PORT)/$DB_NAME"
export FPDEDUP_MYSQL_READER="${DB_USER}_reader" # may only SELECT; the same password
export FPDEDUP_SERVICES_DIR="$SERVICES_DIR"
export FPDEDUP_TEST_KILL=1
export FPDEDUP_SLURM=1 SLURM_CONF="$SERVICES_DIR/slurm/slurm.conf"
etcd_seeds=()
for p in "${ETCD_CLUSTER_PORTS[@]}"; do etcd_seeds+=("127.0.0.1:$p"); done
export FPDEDUP_ETCD="127.0.0.1:$ETCD_PORT"
export FPDEDUP_ETCD_CLUSTER="$(IFS=,; echo "${etcd_seeds[*]}")"
"$@"
