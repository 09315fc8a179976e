package pipeline

import (
	"github.com/fpdedup/fpdedup/ingest"
	"github.com/fpdedup/fpdedup/internal/memplan"
)

// Each job's shares of its Mem (--mem) are its memplan.Plan, made here
// from its options: the tables, blooms and sorters, which live outside the
// Go heap (huge pages, mmap), size themselves from their share, and the
// caller sets the Go heap's soft limit from the same Plan while the job
// runs.

// parquetPlan is what a job's records say of its Parquet row groups.
func parquetPlan(r ingest.RecordOptions) memplan.Parquet {
	return memplan.Parquet{Parquet: r.Spec.Format == ingest.FormatParquet, MaxRecord: int64(r.MaxRecord)}
}

// Plan is Dedup's share of o.Mem, with KeepLast that of its two passes.
func (o DedupOptions) Plan() memplan.Plan {
	j := memplan.DedupJob{Mem: o.Mem, Record: o.Record != "", Against: o.Against != nil, Parquet: parquetPlan(o.Records)}
	if o.KeepLast {
		return memplan.KeepLast(j)
	}
	return memplan.Dedup(j)
}

// planned is o's Plan, its read buffers given to the --against indexes:
// what Dedup and KeepLast run in.
func (o DedupOptions) planned() memplan.Plan {
	p := o.Plan()
	if o.Against != nil {
		o.Against.ShareReadBuffers(p.ReadBuffers)
	}
	return p
}

// Plan is Count's share of o.Mem.
func (o CountOptions) Plan() memplan.Plan {
	return memplan.Count(memplan.CountJob{Mem: o.Mem, Parquet: parquetPlan(o.Records)})
}

// Plan is Build's share of o.Mem, and how its index writer runs in it.
func (o BuildOptions) Plan() memplan.BuildPlan {
	threads, _, _ := runDefaults(o.Threads, nil, nil)
	return memplan.Build(memplan.BuildJob{Mem: o.Mem, Threads: threads, SegmentBytes: segmentMemory, Parquet: parquetPlan(o.Records)})
}

// Plan is Replay's share of o.Mem.
func (o ReplayOptions) Plan() memplan.Plan { return memplan.Replay(o.planJob()) }

func (o ReplayOptions) planJob() memplan.ReplayJob {
	j := memplan.ReplayJob{Mem: o.Mem, L1Bytes: replayL1Bytes(o), RedisBloom: o.RedisBloom != nil, MaxRecord: int64(o.Records.MaxRecord)}
	if o.L2 != nil {
		for _, b := range o.L2.Bits {
			j.L2Bytes += l2Bytes(o.L2.Shards, b)
		}
	}
	return j
}
