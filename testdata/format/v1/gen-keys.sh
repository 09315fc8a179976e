#!/bin/bash
# Writes keys.txt, the input of the v1 fixtures (see README.md). Deterministic:
# no randomness, no locale dependence. Kept for the record only: keys.txt is
# committed and frozen, do not regenerate it.
set -eu
export LC_ALL=C
{
	# 1990 distinct event-like keys, user_id:device_id:timestamp_ms.
	awk 'BEGIN { for (i = 1; i <= 1990; i++) printf "u%d:d%d:%d\n", (i * 7919) % 10007, (i * 104729) % 997, 1700000000000 + i * 1237 }'
	# Keys whose bytes a normalising reader would change; each is a key as is.
	printf '\n'                             # the empty key
	printf 'crlf-key\r\n'                   # the \r belongs to the key
	printf '\357\273\277bom-key\n'          # a UTF-8 BOM belongs to the key
	printf 'tab\tkey\n'
	printf 'na\303\257ve-utf8\n'
	printf 'invalid-\377-utf8\n'
	printf ' leading and trailing spaces \n'
	# Repeats: the index holds distinct fingerprints.
	awk 'BEGIN { for (i = 1; i <= 10; i++) printf "u%d:d%d:%d\n", (i * 7919) % 10007, (i * 104729) % 997, 1700000000000 + i * 1237 }'
	printf '\n'
	# A final record without its terminator is a record.
	printf 'no-final-newline'
} > keys.txt
