package ingest

import "sync/atomic"

// Progress is read by a display while a job runs.
type Progress struct {
	RawBytes atomic.Int64 // compressed bytes read, comparable with file sizes
	Records  atomic.Int64
	Total    atomic.Int64 // sum of input file sizes, -1 if unknown
}
