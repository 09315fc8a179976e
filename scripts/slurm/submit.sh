#!/usr/bin/env bash
# submit.sh -- submit fpdedup's scale-out to Slurm: job arrays of N tasks,
# then one job that stitches their outputs (docs/SCALE-OUT.md). It prints
# the job ids, the stitch's last, and returns at once; the jobs are
# fpdedup-day.sbatch beside this file, each waiting for the one before
# (afterok).
#
#   submit.sh day -n N -w WORK -o DAY.fpx [-H HISTORY.fpx] [-d JOBID] FILE...
#     by prefix: task I runs build --partition I/N over all the day's FILEs
#     (each task reads them all and keeps prefix range I).
#   submit.sh day -s -n N -w WORK -o DAY.fpx [-H HISTORY.fpx] [-d JOBID] FILE...
#     by input slices (at least N FILEs): task I builds a whole-range index
#     of every N-th FILE from the I-th; then a second array, task I merging
#     prefix range I of the N slice indexes (merge --partition I/N).
#   submit.sh merge -n N -w WORK -o OUT.fpx [-H HISTORY.fpx] [-d JOBID] IDX...
#     task I: merge --partition I/N of the IDXs (a rollup of day indexes).
#
# Then the stitch: DAY.fpx (OUT.fpx) = the N parts, byte for byte what one
# `fpdedup build -o DAY.fpx FILE...` (`fpdedup merge -o OUT.fpx IDX...`)
# writes. With -H, each task of the last array also merges range I of
# HISTORY with its part, and the stitch writes HISTORY.fpx: the day folded
# into history by range on N nodes, what one `merge -o HISTORY HISTORY DAY`
# writes.
#
# N is a power of two (the prefix ranges). WORK is a directory on storage
# every node sees, one per run (it holds the input lists, the parts, the
# history ranges and logs/). -d JOBID starts the first array after that job
# succeeded, e.g. the previous day's stitch, so days fold into history in
# order (FILEs and IDXs are then checked when the tasks run, not here).
# FILE and IDX must be readable at the same path on every node.
#
# Env: FPDEDUP (the binary the jobs run; default fpdedup on their PATH),
# FPDEDUP_BUILD_FLAGS (more build flags: record format, key), FPDEDUP_RETRIES
# (requeues of a failed task, 3), FPDEDUP_SBATCH_FLAGS (more sbatch flags
# for every job, e.g. "--partition=batch --cpus-per-task=8 --time=2:00:00";
# split on spaces); sbatch's own SBATCH_* variables apply too.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
usage() {
  echo "usage: submit.sh day [-s] -n N -w WORK -o DAY.fpx [-H HISTORY.fpx] [-d JOBID] FILE..." >&2
  echo "       submit.sh merge -n N -w WORK -o OUT.fpx [-H HISTORY.fpx] [-d JOBID] IDX..." >&2
  exit 2
}
abs() { case "$1" in (/*) echo "$1" ;; (*) echo "$PWD/$1" ;; esac; }

verb=${1:-}
case "$verb" in (day | merge) shift ;; (*) usage ;; esac
n='' work='' out='' history='' after='' slices=0
while getopts sn:w:o:H:d: opt; do
  case "$opt" in
  s) [ "$verb" = day ] || usage; slices=1 ;;
  n) n=$OPTARG ;;
  w) work=$(abs "$OPTARG") ;;
  o) out=$(abs "$OPTARG") ;;
  H) history=$(abs "$OPTARG") ;;
  d) after=$OPTARG ;;
  *) usage ;;
  esac
done
shift $((OPTIND - 1))
if [ -z "$n" ] || [ -z "$work" ] || [ -z "$out" ] || [ $# = 0 ]; then usage; fi
case "$n" in (*[!0-9]* | '' | 0) echo "submit.sh: -n must be a power of two, not '$n'" >&2; exit 2 ;; esac
[ $((n & (n - 1))) = 0 ] || { echo "submit.sh: -n must be a power of two, not $n" >&2; exit 2; }
if [ "$slices" = 1 ] && [ $# -lt "$n" ]; then
  echo "submit.sh: -s needs at least N=$n files (one slice each), not $#" >&2; exit 2
fi
if [ -z "$after" ]; then # with -d, earlier jobs may still be writing them
  for f in "$@"; do [ -r "$f" ] || { echo "submit.sh: cannot read $f" >&2; exit 2; }; done
fi

mkdir -p "$work/logs"
ins=()
for f in "$@"; do ins+=("$(abs "$f")"); done
read -r -a extra <<<"${FPDEDUP_SBATCH_FLAGS:-}"
jobs=()
# sub NAME SBATCH-ARGS...: submit fpdedup-day.sbatch after the previous job.
sub() {
  local name=$1 id dep=()
  shift
  if [ ${#jobs[@]} -gt 0 ]; then after=${jobs[-1]}; fi
  if [ -n "$after" ]; then dep=(--dependency="afterok:$after" --kill-on-invalid-dep=yes); fi
  if ! id=$(sbatch --parsable "${extra[@]}" "${dep[@]}" --job-name="$name" "$@"); then
    if [ ${#jobs[@]} -gt 0 ]; then scancel "${jobs[@]}"; fi
    echo "submit.sh: sbatch failed${jobs[*]:+; cancelled jobs ${jobs[*]}}" >&2
    exit 1
  fi
  jobs+=("${id%%;*}")
}
array=(--array="0-$((n - 1))" --output="$work/logs/%x-%A_%a.out")
if [ "$verb" = merge ]; then
  printf '%s\0' "${ins[@]}" >"$work/indexes"
  sub fpdedup-merge "${array[@]}" "$HERE/fpdedup-day.sbatch" merge "$work" "$n" "$history"
elif [ "$slices" = 1 ]; then
  for ((i = 0; i < n; i++)); do
    for ((k = i; k < ${#ins[@]}; k += n)); do printf '%s\0' "${ins[$k]}"; done >"$work/inputs-$i"
    printf '%s\0' "$work/slice-$i.fpx"
  done >"$work/indexes"
  sub fpdedup-slice "${array[@]}" "$HERE/fpdedup-day.sbatch" slice "$work" "$n"
  sub fpdedup-merge "${array[@]}" "$HERE/fpdedup-day.sbatch" merge "$work" "$n" "$history"
else
  printf '%s\0' "${ins[@]}" >"$work/inputs"
  sub fpdedup-day "${array[@]}" "$HERE/fpdedup-day.sbatch" build "$work" "$n" "$history"
fi
sub fpdedup-stitch --output="$work/logs/%x-%j.out" "$HERE/fpdedup-day.sbatch" stitch "$work" "$n" "$out" "$history"
echo "${jobs[*]}"
