#!/usr/bin/env bash
# etcd-reconcile.sh: `fpdedup reconcile --online etcd://…` (whole
# processes) side by side with etcd's own tools and client, on a single
# etcd member that fpdedup-bench starts (its data in the run's work
# directory; Debian's etcd-server and etcd-client), interleaved, each row
# checked: the audit of KEYS keys (SHA-256 hex under a prefix) beside one
# `etcdctl get --prefix --keys-only` and etcdctl page by page at the same
# page size and revision; --apply of CREATE missing keys (compare-and-create,
# 128 keys a transaction, 4 connections) beside a bare loop of etcd's Go
# client sending the same transactions, every key read back after each.
# Issue 45's targets are judged in the report. A preset of fpdedup-bench:
#
#   bench/etcd-reconcile.sh [KEYS=1000000 [CREATE=100000]]
#
# = fpdedup-bench --jobs etcd-audit,etcd-apply --etcd-keys KEYS
#   --etcd-create CREATE, the report in bench/results/etcd-<UTC time>/; the
#   tables are also printed here. Environment: FPDEDUP, NOTE (lib.sh), RUNS
#   (default 3), PAGE (10000), MEM (256MiB).
set -euo pipefail
usage="bench/etcd-reconcile.sh [KEYS=1000000 [CREATE=100000]]"
(($# <= 2)) || { echo "usage: $usage" >&2; exit 2; }
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_count "$usage" "${1:-1000000}"
bench_count "$usage" "${2:-100000}"
bench_run etcd --jobs etcd-audit,etcd-apply --etcd-keys "${1:-1000000}" --etcd-create "${2:-100000}" \
	--runs "${RUNS:-3}" --etcd-page "${PAGE:-10000}" --etcd-mem "${MEM:-256MiB}"
sed -n '/^## etcd-audit:/,/^## Charts/p' "$bench_out/report.md" | grep -v '^## Charts'
