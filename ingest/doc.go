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
//   - Parquet: a file's rows are its records, and a row's key is the text
//     of its typed key columns (parquet.go, the one definition; DESIGN
//     "Parquet keys"), resolved by name or position (parquet_schema.go).
//     Untrusted bytes are bounded before the library (parquet-go) sees
//     them: the footer and its memory (parquet_footer.go, over
//     internal/thriftscan), each page decoded first as far as its counts
//     (parquet_pages.go). Rows reach the pipeline as frames of their key
//     texts (frames.go, parquet_keytext.go), read at any offset, so stdin
//     is spooled (seekable.go); they are written back unchanged, or as
//     text, by RowWriter (parquet_write.go, rows_text.go), and a bad row is
//     a place in its file, copied to the quarantine at the commit point
//     (badrows.go). The tests' damaged files are made by internal/pqcraft;
//     the pipeline's Parquet reading is pipeline/read_parquet.go;
//   - fingerprints: XXH3-128 or SHA-256/128 of the key bytes (fingerprint.go,
//     xxh3patch.go); the key recipe an index records (recipe.go).
//
// It implements the one definition of records, keys and fingerprints that
// every command shares: bytes are hashed as read, nothing is normalised, a
// final record without its terminator is still a record, and a record over
// the size limit is an error, never truncated (README "Fingerprints"). Errors
// name the input and, for a bad record, read "FILE:LINE: record N: reason".
// The jobs built on records (build, query, dedup, count, replay) are
// package pipeline.
//
// Concurrency: a Keyer, a ChunkReader and an Input each belong to one
// goroutine; a BadPolicy and a Progress are safe for concurrent use.
package ingest
