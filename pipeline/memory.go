package pipeline

import "github.com/fpdedup/fpdedup/ingest"

// How each job shares --mem (its Mem) out. The tables, blooms and sorters
// live outside the Go heap (huge pages) and size themselves from their
// share; the Go heap's soft limit, which the caller sets while the job
// runs, is the share left to it: without one it would count the whole of
// Mem as its own.

// minHeap is the least heap limit a job runs under: the fixed buffers
// (chunks in flight, a run being written) need it whatever Mem is.
const minHeap = 16 << 20

// dedupParts is how many equal parts Dedup shares Mem into: the exact
// tables, the blooms of the bounded mode, the Go heap, what does not grow
// with the data (a run being written, chunks in flight) and, with Record,
// its sorter.
func dedupParts(o DedupOptions) int64 {
	if o.Record != "" {
		return 5
	}
	return 4
}

// HeapLimit is the Go heap's share of o.Mem while Dedup runs.
func (o DedupOptions) HeapLimit() int64 {
	return max(o.Mem/dedupParts(o), minHeap) + parquetHeap(o.Records)
}

// parquetHeap is what reading Parquet holds on the Go heap beside a job's
// share of Mem: a row group's decoded key values and a page of each column
// at most, bounded by the reader's limit (read_parquet.go, four times
// MaxRecord), and a copy's pages. Without it in the heap limit the
// collector ran without pause (673 collections instead of 12 for a 1M-row
// file at --mem 256MiB, 3.6x the time).
func parquetHeap(r ingest.RecordOptions) int64 {
	if r.Spec.Format != ingest.FormatParquet {
		return 0
	}
	return 4 * int64(r.MaxRecord)
}

// HeapLimit is the Go heap's share of o.Mem while Count runs: what its key
// table (three quarters) leaves.
func (o CountOptions) HeapLimit() int64 { return max(o.Mem/4, minHeap) + parquetHeap(o.Records) }

// HeapLimit is the Go heap's share of o.Mem while Replay runs: a quarter
// of what the simulated blooms leave, as the exact seen-set shares it,
// and the RedisBloom filters' share (they live on the Go heap).
func (o ReplayOptions) HeapLimit() int64 {
	h := max((o.Mem-ReplayBloomBytes(o))/4, minHeap)
	if o.RedisBloom != nil {
		h += replayFilterShare(o)
	}
	return h
}
