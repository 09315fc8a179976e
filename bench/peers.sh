#!/usr/bin/env bash
# peers.sh: install the tools fpdedup-bench measures fpdedup against on
# Debian 12, as root. Idempotent: run it before every benchmark; it only
# installs what is missing, then prints each peer's version or "missing".
#
#   bench/peers.sh            install and report
#   bench/peers.sh --check    report only (no apt, no npm)
#   bench/peers.sh --duckdb   DuckDB only (node, npm and the package): the
#                             oracle scripts/duckdb-oracle.sh checks
#                             Parquet against in the tests
#
# Exit 0 when every peer is there, 1 when any is missing (the benchmark still
# runs, and reports those rows as "missing"), 2 on usage errors.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
peers="$here/.peers"
# Pinned so that figures from different days compare: a DuckDB upgrade is a
# deliberate change of this line, noted with the results it moves.
duckdb_version=${DUCKDB_NODE_API_VERSION:-1.5.6-r.1}

check_only=false
duckdb_only=false
case "${1:-}" in
"") ;;
--check) check_only=true ;;
--duckdb) duckdb_only=true ;;
*)
	echo "usage: bench/peers.sh [--check | --duckdb]" >&2
	exit 2
	;;
esac

# Debian package -> the command it must provide. xxhash gives xxh128sum,
# which checks fingerprints by hand (README "Fingerprints"); time gives GNU
# /usr/bin/time for peak RSS; golang-github-dcso-bloom-cli is the bloom CLI.
apt_pkgs=(zstd xxhash mawk gawk golang-github-dcso-bloom-cli time fio nodejs npm)
if $duckdb_only; then
	apt_pkgs=(nodejs npm)
fi
declare -A apt_cmd=(
	[zstd]=zstd [xxhash]=xxh128sum [mawk]=mawk
	[gawk]=gawk [golang-github-dcso-bloom-cli]=bloom [time]=/usr/bin/time
	[fio]=fio [nodejs]=node [npm]=npm
)

installed=()
failed=()

have() { command -v "$1" >/dev/null 2>&1; }

duckdb_installed_version() {
	local pj="$peers/node_modules/@duckdb/node-api/package.json"
	[[ -f $pj ]] || return 1
	node -e 'process.stdout.write(require(process.argv[1]).version)' "$pj" 2>/dev/null
}

if ! $check_only; then
	if [[ $(id -u) -ne 0 ]]; then
		echo "peers.sh: not root: skipping apt-get, reporting only" >&2
	else
		missing_pkgs=()
		for p in "${apt_pkgs[@]}"; do
			have "${apt_cmd[$p]}" || missing_pkgs+=("$p")
		done
		if ((${#missing_pkgs[@]})); then
			export DEBIAN_FRONTEND=noninteractive
			apt-get update -qq
			# Install those the archive has one by one, so one missing
			# name does not stop the rest.
			for p in "${missing_pkgs[@]}"; do
				cand=$(apt-cache policy "$p" 2>/dev/null | awk '/Candidate:/ {print $2}')
				if [[ -z $cand || $cand == "(none)" ]]; then
					echo "peers.sh: apt has no package $p" >&2
					failed+=("$p")
				elif apt-get install -y -qq --no-install-recommends "$p" >/dev/null; then
					installed+=("$p=$cand")
				else
					echo "peers.sh: apt-get install $p failed" >&2
					failed+=("$p")
				fi
			done
		fi
	fi

	# DuckDB through npm: the prebuilt engine ships inside the registry
	# package (@duckdb/node-bindings-linux-x64), into bench/.peers only.
	if have npm && [[ $(duckdb_installed_version || true) != "$duckdb_version" ]]; then
		mkdir -p "$peers"
		if npm install --prefix "$peers" --no-audit --no-fund --silent \
			"@duckdb/node-api@$duckdb_version" >/dev/null; then
			installed+=("@duckdb/node-api=$duckdb_version")
		else
			echo "peers.sh: npm install @duckdb/node-api@$duckdb_version failed" >&2
			failed+=("@duckdb/node-api")
		fi
	fi
fi

# The report: one line per peer, its version or "missing".
missing=0
report() { # name, version-or-empty
	if [[ -n $2 ]]; then
		printf '%-10s %s\n' "$1" "$2"
	else
		printf '%-10s missing\n' "$1"
		missing=1
	fi
}
ver() { # command, args...: first line of its version output, or empty
	have "$1" || return 0
	"$@" 2>&1 | head -n1 || true
}
echo "== peers"
if $duckdb_only; then
	dv=$(duckdb_installed_version || true)
	report duckdb "${dv:+@duckdb/node-api $dv}"
	((${#failed[@]} == 0)) || echo "== could not install: ${failed[*]}"
	exit "$missing"
fi
report zstd "$(ver zstd --version)"
report xxh128sum "$(ver xxh128sum --version)"
report mawk "$(ver mawk -W version)"
report gawk "$(ver gawk --version)"
report bloom "$(ver bloom --version)"
report time "$(ver /usr/bin/time --version)"
report sort "$(ver sort --version)"
report node "$(ver node --version)"
dv=$(duckdb_installed_version || true)
report duckdb "${dv:+@duckdb/node-api $dv}"
if ((${#installed[@]})); then
	echo "== installed now: ${installed[*]}"
fi
if ((${#failed[@]})); then
	echo "== could not install: ${failed[*]}"
	missing=1
fi
exit "$missing"
