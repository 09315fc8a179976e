// Package ingest turns input files into records and records into fingerprints,
// and runs the pipelines built on them:
//
//   - inputs: stdin as "-", gzip and zstd detected by magic bytes, other
//     compressed formats refused; --files0-from lists (open.go, detect.go,
//     files0.go);
//   - records and keys: lines, csv (RFC 4180), tsv and jsonl, cut into
//     record-aligned chunks for parallel workers, keyed by --key fields with
//     hand-written scanners (records.go, csv.go, tsv.go, jsonl.go, keys.go,
//     chunks.go), read with headers and --on-bad (records_read.go);
//   - fingerprints: XXH3-128 or SHA-256/128 of the key bytes (fingerprint.go);
//   - pipelines: Build (fingerprints sorted into an index), Query (answers in
//     input order, ordered.go) and Dedup (first occurrences in input order
//     through a sharded exact seen-set, seen.go, with a bounded mode of runs
//     on disk and a blocked bloom in RAM, seen_lsm.go, bloom.go).
//
// It implements the one definition of records, keys and fingerprints that
// every command shares (DESIGN section 2): bytes are hashed as read, nothing is
// normalised, a final record without its terminator is still a record, and a
// record over the size limit is an error, never truncated. Errors name the
// input and, for a bad record, read "FILE:LINE: record N: reason".
//
// Concurrency: the pipelines start their own goroutines and return when all
// have stopped; a Keyer, a ChunkReader and a seen-set shard each belong to one
// goroutine.
package ingest
