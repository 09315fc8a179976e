#!/bin/sh
# Regenerates the compressed fixtures with the real tools, so that detection
# is tested on what those tools write (not on what our tests think they write).
# Run from this directory: sh gen.sh
set -eu
printf 'u1:d1:1700000000000\n\nCRLF\r\nnul\000byte\nbad\377utf8\n\357\273\277bom\nno final newline' > lines.txt
gzip -9nc lines.txt > lines.txt.gz
zstd -q -19 -c lines.txt > lines.txt.zst
pzstd -q -p 2 -c lines.txt > lines.txt.pzst      # starts with a skippable frame
xz -c lines.txt > lines.txt.xz
bzip2 -c lines.txt > lines.txt.bz2
: | bzip2 -c > empty.bz2                          # end-of-stream magic only
lz4 -q -c lines.txt > lines.txt.lz4
lz4 -q -l -c lines.txt > lines.txt.lz4legacy
rm -f lines.txt.zip && zip -q lines.txt.zip lines.txt
