package reconcile

import "github.com/fpdedup/fpdedup/reconcile/report"

// The report's sections are package report's; a caller of Run reads them
// through these names.
type (
	Report        = report.Report
	IndexInfo     = report.IndexInfo
	OnlineInfo    = report.OnlineInfo
	Counts        = report.Counts
	Samples       = report.Samples
	Outputs       = report.Outputs
	RecordStats   = report.RecordStats
	ApplyStats    = report.ApplyStats
	BloomReport   = report.BloomReport
	BloomShard    = report.BloomShard
	Sizing        = report.Sizing
	RebuildStats  = report.RebuildStats
	ReadBack      = report.ReadBack
	ShardReadBack = report.ShardReadBack
	Timings       = report.Timings
	Memory        = report.Memory
)
