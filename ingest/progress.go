package ingest

import "sync/atomic"

// Progress is read by a display while a job runs.
type Progress struct {
	// RawBytes counts the bytes read from the inputs as stored: a gzip or
	// zstd input's compressed bytes, whether it was named or read from
	// standard input, so that it compares with file sizes and with Total.
	// The jobs' Stats.Bytes (--stats-json's "bytes") is its final value.
	RawBytes atomic.Int64
	Records  atomic.Int64
	Total    atomic.Int64 // sum of input file sizes, -1 if unknown
}
