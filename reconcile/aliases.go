package reconcile

import (
	"github.com/fpdedup/fpdedup/reconcile/apply"
	"github.com/fpdedup/fpdedup/reconcile/bitmapbloom"
	"github.com/fpdedup/fpdedup/reconcile/etcdkeys"
	"github.com/fpdedup/fpdedup/reconcile/etcdkv"
	"github.com/fpdedup/fpdedup/reconcile/exportfile"
	"github.com/fpdedup/fpdedup/reconcile/join"
	"github.com/fpdedup/fpdedup/reconcile/mysqltable"
	"github.com/fpdedup/fpdedup/reconcile/online"
	"github.com/fpdedup/fpdedup/reconcile/redisbloom"
	"github.com/fpdedup/fpdedup/reconcile/redisconn"
	"github.com/fpdedup/fpdedup/reconcile/rediskeys"
	"github.com/fpdedup/fpdedup/reconcile/report"
)

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
	EtcdReport    = report.EtcdReport
	Timings       = report.Timings
	Memory        = report.Memory
)

// An audit of RedisBloom filters, in the report.
type (
	RedisBloomReport    = report.RedisBloomReport
	RedisBloomShard     = report.RedisBloomShard
	RedisBloomSubFilter = report.RedisBloomSubFilter
)

// RedisBloomType is the TYPE of a RedisBloom filter's key.
const RedisBloomType = redisbloom.ModuleType

// The errors every part of a run may return are package online's (their
// constants too, below); the retry a caller hears of (Options.Waiting).
type (
	FileError             = online.FileError
	FileRole              = online.FileRole
	ApplyInterruptedError = online.ApplyInterruptedError
	URLError              = online.URLError
	Wait                  = online.Wait
)

// The files a run reads and writes besides its outputs' indexes.
const (
	CheckpointFile = online.CheckpointFile // Options.Checkpoint
	TempDir        = online.TempDir        // Options.TmpDir
	BackfillFile   = online.BackfillFile   // Options.Backfill
)

// RebuildRerun says what rerunning an interrupted rebuild does.
const RebuildRerun = online.RebuildRerun

// The comparison's and the writes' errors are packages join's and apply's.
type (
	ProbeError             = join.ProbeError
	CheckpointError        = apply.CheckpointError
	CheckpointProblem      = apply.CheckpointProblem
	WriteError             = apply.WriteError
	ReadBackError          = apply.ReadBackError
	MovedError             = apply.MovedError
	UnsavedCheckpointError = apply.UnsavedCheckpointError
	// Checkpoint is the file Options.Checkpoint names.
	Checkpoint = apply.Checkpoint
)

// ErrUnsorted: a source said to be sorted is not in fingerprint order.
var ErrUnsorted = join.ErrUnsorted

// The problems of a checkpoint file.
const (
	NotACheckpoint = apply.NotACheckpoint // not a checkpoint of this format version
	OtherRun       = apply.OtherRun       // written for another index or online side
	BadLast        = apply.BadLast        // its last fingerprint is not 32 hex digits
)

// The Redis stores' errors are packages redisconn's (a reply refused),
// rediskeys' and bitmapbloom's.
type (
	ReplyError        = redisconn.ReplyError
	ReplyProblem      = redisconn.ReplyProblem
	ScanBoundError    = rediskeys.ScanBoundError
	ProbeWideError    = rediskeys.ProbeWideError
	BloomKeyError     = bitmapbloom.BloomKeyError
	RebuiltShortError = bitmapbloom.RebuiltShortError
)

// RedisBloom filters' errors are package redisbloom's: a shard's key that
// is not a filter, a dump that lies, a filter changed while it was read, a
// rebuild refused because items arrived, a memory budget too small.
type (
	FilterKeyError     = redisbloom.FilterKeyError
	FilterDumpError    = redisbloom.DumpError
	FilterChangedError = redisbloom.ChangedError
	FilterArrivedError = redisbloom.ArrivedError
	AuditMemError      = redisbloom.MemError
	RebuildMemError    = redisbloom.RebuildMemError
	RebuiltWrongError  = redisbloom.RebuiltWrongError
	NoParamsError      = redisbloom.NoParamsError
	UncoveredError     = redisbloom.UncoveredError
)

// The problems of a reply (ReplyError).
const (
	BulkTooLong   = redisconn.BulkTooLong   // a bulk string longer than any key name, field or filter chunk Run reads
	ReplyTooLarge = redisconn.ReplyTooLarge // more declared in one reply than a reply may hold
	ReplyTooDeep  = redisconn.ReplyTooDeep  // arrays nested deeper than any reply Run reads
	LineTooLong   = redisconn.LineTooLong   // a simple string, error or integer longer than any Redis sends
	NotRESP       = redisconn.NotRESP       // a byte that cannot begin or continue a RESP2 reply
)

// DefaultTargetFPR is the bloom audit's sizing rate when Options.TargetFPR
// is 0.
const DefaultTargetFPR = bitmapbloom.DefaultTargetFPR

// QuietRedisLogs drops go-redis's own log lines, which it prints to
// stderr through one logger for the whole process: what failed reaches
// the caller as Run's error, once. Run never changes that logger itself;
// a command line whose stderr is for its summary and its one error calls
// this once, before Run. Not safe to call while go-redis clients are in
// use.
func QuietRedisLogs() { redisconn.QuietRedisLogs() }

// MySQL's and the file export's errors are packages mysqltable's and
// exportfile's.
type (
	BadServerError      = mysqltable.BadServerError
	ServerProblem       = mysqltable.ServerProblem
	SlowServerError     = mysqltable.SlowServerError
	NotFingerprintError = exportfile.NotFingerprintError
)

// The problems a BadServerError names.
const (
	PacketTooLarge = mysqltable.PacketTooLarge // one logical packet over the bound
	TooManyColumns = mysqltable.TooManyColumns // a result of more columns than any query asks for
	MalformedReply = mysqltable.MalformedReply // a packet the driver cannot parse
	TooManyRows    = mysqltable.TooManyRows    // more rows than COUNT(*) or the row estimate allow
	ExtraResults   = mysqltable.ExtraResults   // more result sets after the rows of one SELECT
)

// ErrNoPath: ParseURL was given "file:" without a path.
var ErrNoPath = exportfile.ErrNoPath

// CountMode says when a MySQL read is checked against COUNT(*)
// (Target.MySQL.Count).
type CountMode = mysqltable.CountMode

// The count modes (&count=auto|1|0).
const (
	CountAuto   = mysqltable.CountAuto   // when the table is small enough for it to be cheap
	CountAlways = mysqltable.CountAlways // always
	CountNever  = mysqltable.CountNever  // never
)

// etcd's errors are packages etcdkeys' (the audit, the values) and
// etcdkv's (the client: members unreachable, credentials refused, a
// revision compacted, a template or a field refused).
type (
	SnapshotError      = etcdkeys.SnapshotError
	ValueError         = etcdkeys.ValueError
	TooManyValuesError = etcdkeys.TooManyValuesError
	EtcdDialError      = etcdkv.DialError
	CompactedError     = etcdkv.CompactedError
	TemplateError      = etcdkv.TemplateError
	FieldError         = etcdkv.FieldError
	EtcdLimitError     = etcdkv.LimitError
)

// ErrEtcdAuth: etcd refused the user, the password or the permission to
// read the prefix.
var ErrEtcdAuth = etcdkv.ErrAuth
