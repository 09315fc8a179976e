#!/usr/bin/env bash
# submit.sh -- submit fpdedup's scale-out to Slurm: a job array of N tasks,
# then one job that stitches their outputs (docs/SCALE-OUT.md). It prints
# the two job ids, "ARRAY STITCH", and returns at once; the jobs are
# fpdedup-day.sbatch beside this file.
#
#   submit.sh day -n N -w WORK -o DAY.fpx [-H HISTORY.fpx] [-d JOBID] FILE...
#     task I: build --partition I/N over the day's FILEs (each task reads
#     them all and keeps prefix range I); with -H, task I also merges range
#     I of HISTORY with its part (the day folded into history by range, on N
#     nodes). Then the stitch: DAY.fpx = the N parts, byte for byte what one
#     `fpdedup build -o DAY.fpx FILE...` writes; HISTORY.fpx = the N history
#     ranges, what one `merge -o HISTORY HISTORY DAY` writes.
#   submit.sh merge -n N -w WORK -o OUT.fpx [-d JOBID] IDX...
#     task I: merge --partition I/N of the IDXs; the stitch: OUT.fpx, the
#     bytes of one `fpdedup merge -o OUT.fpx IDX...` (OUT may be an IDX).
#
# N is a power of two (the prefix ranges); WORK is a directory on storage
# every node sees, one per run (it holds inputs, part-I.fpx, hist-I.fpx and
# logs/). -d JOBID starts the array after that job succeeded (afterok), e.g.
# the previous day's stitch, so days fold into history in order (their FILEs
# and IDXs are checked when the tasks run, not here). FILE and IDX must be
# readable on every node at the same path.
#
# Env: FPDEDUP (the binary the jobs run; default fpdedup on their PATH),
# FPDEDUP_BUILD_FLAGS (more build flags: record format, key), FPDEDUP_RETRIES
# (requeues of a failed task, 3), FPDEDUP_SBATCH_FLAGS (more sbatch flags
# for both jobs, e.g. "--partition=batch --cpus-per-task=8 --time=2:00:00";
# split on spaces); sbatch's own SBATCH_* variables apply too.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
usage() {
  echo "usage: submit.sh day -n N -w WORK -o DAY.fpx [-H HISTORY.fpx] [-d JOBID] FILE..." >&2
  echo "       submit.sh merge -n N -w WORK -o OUT.fpx [-d JOBID] IDX..." >&2
  exit 2
}
abs() { case "$1" in (/*) echo "$1" ;; (*) echo "$PWD/$1" ;; esac; }

verb=${1:-}
case "$verb" in (day|merge) shift ;; (*) usage ;; esac
n='' work='' out='' history='' after=''
while getopts n:w:o:H:d: opt; do
  case "$opt" in
  n) n=$OPTARG ;;
  w) work=$(abs "$OPTARG") ;;
  o) out=$(abs "$OPTARG") ;;
  H) [ "$verb" = day ] || usage; history=$(abs "$OPTARG") ;;
  d) after=$OPTARG ;;
  *) usage ;;
  esac
done
shift $((OPTIND - 1))
if [ -z "$n" ] || [ -z "$work" ] || [ -z "$out" ] || [ $# = 0 ]; then usage; fi
case "$n" in (*[!0-9]* | '' | 0) echo "submit.sh: -n must be a power of two, not '$n'" >&2; exit 2 ;; esac
[ $((n & (n - 1))) = 0 ] || { echo "submit.sh: -n must be a power of two, not $n" >&2; exit 2; }

mkdir -p "$work/logs"
if [ -z "$after" ]; then # with -d, earlier jobs may still be writing them
  for f in "$@"; do [ -r "$f" ] || { echo "submit.sh: cannot read $f" >&2; exit 2; }; done
fi
for f in "$@"; do printf '%s\0' "$(abs "$f")"; done >"$work/inputs"

read -r -a extra <<<"${FPDEDUP_SBATCH_FLAGS:-}"
dep=()
if [ -n "$after" ]; then dep=(--dependency="afterok:$after" --kill-on-invalid-dep=yes); fi
if [ "$verb" = day ]; then
  args=(build "$work" "$n" "$history")
else
  args=(merge "$work" "$n")
fi
array=$(sbatch --parsable "${extra[@]}" "${dep[@]}" --array="0-$((n - 1))" --job-name="fpdedup-$verb" \
  --output="$work/logs/%x-%A_%a.out" "$HERE/fpdedup-day.sbatch" "${args[@]}")
array=${array%%;*}
stitch=$(sbatch --parsable "${extra[@]}" --dependency="afterok:$array" --kill-on-invalid-dep=yes \
  --job-name="fpdedup-stitch" --output="$work/logs/%x-%j.out" \
  "$HERE/fpdedup-day.sbatch" stitch "$work" "$n" "$out" "$history")
stitch=${stitch%%;*}
echo "$array $stitch"
