#!/bin/bash
# bench/cold-batch.sh IDX FROM COUNT [FPDEDUP]: one cold batch query. IDX is
# evicted from the page cache (posix_fadvise DONTNEED), then COUNT
# fingerprints of the generator (fpdedup-bench fp --seed 3, the seed the
# index was built from: present if FROM + COUNT <= its count) are queried
# at once; it prints wall time, major faults, peak RSS, the bytes the
# kernel read in (pgpgin) and the device's read requests (vda). The keys
# are standard input redirected from a file (their number known), or with
# PIPE=1 a pipe (not known: the plan learns as the batches come). Needs
# /tmp/fpb (go build -o /tmp/fpb ./cmd/fpdedup-bench). Build the index with
#   fpdedup-bench fp --count 1G --seed 3 | fpdedup build --format fp --hash xxh3 -o h1g.fpx -
idx=$1; from=$2; count=$3; fpd=${4:-fpdedup}
python3 -c "import os,sys; fd=os.open(sys.argv[1],os.O_RDONLY); os.posix_fadvise(fd,0,0,os.POSIX_FADV_DONTNEED)" "$idx"
/tmp/fpb fp --seed 3 --from $from --count $count > /tmp/cold-keys.txt
before=$(awk '/pgpgin/ {print $2}' /proc/vmstat); rb=$(awk '{print $1}' /sys/block/vda/stat)
if [ -n "$PIPE" ]; then
  cat /tmp/cold-keys.txt | /usr/bin/time -f "%e s %F majfl %M KB" $fpd query --fp --only absent "$idx" > /tmp/cold-out.txt 2>/tmp/cold-err.txt; rc=$?
else
  /usr/bin/time -f "%e s %F majfl %M KB" $fpd query --fp --only absent "$idx" < /tmp/cold-keys.txt > /tmp/cold-out.txt 2>/tmp/cold-err.txt; rc=$?
fi
after=$(awk '/pgpgin/ {print $2}' /proc/vmstat); ra=$(awk '{print $1}' /sys/block/vda/stat)
echo "from=$from count=$count rc=$rc $(tail -1 /tmp/cold-err.txt) read=$(( (after-before)/1024 )) MiB ios=$((ra-rb)) absent=$(wc -l < /tmp/cold-out.txt)"
