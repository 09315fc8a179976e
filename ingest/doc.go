// Package ingest turns input files into records and records into fingerprints:
// it opens inputs (stdin as "-", gzip and zstd detected by magic bytes, other
// compressed formats refused), reads --files0-from lists, cuts streams into
// record-aligned chunks for parallel workers, and hashes keys with XXH3-128 or
// SHA-256/128.
//
// It implements the one definition of records, keys and fingerprints that
// every command shares (DESIGN section 2): bytes are hashed as read, nothing is
// normalised, a final record without its terminator is still a record, and a
// record over the size limit is an error, never truncated. Errors name the
// input and, for a bad record, read "FILE:LINE: record N: reason".
package ingest
