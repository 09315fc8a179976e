// Package ingest turns input files into records and records into
// fingerprints:
//
//   - inputs: stdin as "-", gzip and zstd detected by magic bytes, other
//     compressed formats refused, a regular file that changes while it is
//     read refused; --files0-from lists (open.go, detect.go, files0.go);
//   - records and keys: lines, csv (RFC 4180), tsv and jsonl, cut into
//     record-aligned chunks for parallel workers, keyed by --key fields with
//     hand-written scanners (records.go, csv.go, tsv.go, jsonl.go, keys.go,
//     chunks.go); what to do with a bad record (badpolicy.go);
//   - fingerprints: XXH3-128 or SHA-256/128 of the key bytes (fingerprint.go).
//
// It implements the one definition of records, keys and fingerprints that
// every command shares: bytes are hashed as read, nothing is normalised, a
// final record without its terminator is still a record, and a record over
// the size limit is an error, never truncated (README "Fingerprints"). Errors
// name the input and, for a bad record, read "FILE:LINE: record N: reason".
// The jobs built on records (build, query, dedup) are package pipeline.
//
// Concurrency: a Keyer, a ChunkReader and an Input each belong to one
// goroutine; a BadPolicy and a Progress are safe for concurrent use.
package ingest
