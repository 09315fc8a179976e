package reconcile

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/ingest"
	"github.com/fpdedup/fpdedup/internal/atomicfile"
	"github.com/fpdedup/fpdedup/internal/memplan"
	"github.com/fpdedup/fpdedup/reconcile/bitmapbloom"
	"github.com/fpdedup/fpdedup/reconcile/etcdkeys"
	"github.com/fpdedup/fpdedup/reconcile/online"
)

// Options configure Run.
type Options struct {
	Index        string  // the truth index
	Target       *Target // the online side (ParseURL)
	Password     string  // never printed
	Probe        bool    // look each offline fingerprint up online instead of reading the online side
	OnlineFormat string  // file: "fp" (hex fingerprints) or "key" (keys, hashed with SHA-256)

	Missing, Extra string // indexes to write (optional)
	Records        []string
	Backfill       string
	// BackfillFormat is how the backfill writes Parquet records' rows (as
	// read, or converted to text: ingest.RowFormat).
	BackfillFormat ingest.RowFormat
	// RecordReading says how Records are read and keyed (nil: lines, each
	// line a key), completed and checked against the index's recorded key
	// recipe by ingest.ResolveRecipe, so that records read as the index was
	// built give its fingerprints; with its Assume set, a recipe that
	// differs is used anyway and Report.Warnings says so.
	RecordReading *ingest.RecipeRequest
	// MaxRecord bounds a record's bytes (0: no limit); a longer one is bad.
	MaxRecord int
	// BadRecords says what a record without a key does (ingest.ParseOnBad):
	// "fail" (or ""), "skip", or "quarantine=FILE".
	BadRecords string

	Apply     bool
	DryRun    bool
	DryRunOut io.Writer
	TTL       time.Duration
	// Value is the template of the values Apply writes with each key of
	// an etcd prefix ("": the empty value): JSON with $field of the key's
	// record (etcdkeys.CheckValue; README "etcd").
	Value    string
	Rate     float64 // keys/s written, 0: no limit
	ReadRate float64 // keys/s read or probed, 0: no limit
	Batch    int
	Conns    int
	Retries  int
	Backoff  time.Duration
	Timeout  time.Duration
	// Waiting, if set, is told of every retry (a silent server takes
	// (1+Retries) × Timeout plus the backoffs to give up).
	Waiting    func(Wait)
	Checkpoint string

	// Group, if set, holds Missing, Extra and Backfill until the caller
	// commits it (its commit point, after a Run that succeeded); without
	// one each is published as soon as it is complete.
	Group *atomicfile.Group

	// Rebuild lists the bloom shards to rebuild from the truth (after the
	// audit): each written whole beside the live one, then ORed with it
	// and swapped in, atomically on its node. Not with Apply.
	Rebuild []uint64

	// TargetFPR is the false-positive rate a bloom audit sizes the L2 for
	// (0: DefaultTargetFPR; RedisBloom filters: each its own error rate).
	TargetFPR float64

	// RebuildCapacity and RebuildError are BF.RESERVE's capacity and
	// error rate for RedisBloom filters rebuilt (0: the live filter's).
	RebuildCapacity uint64
	RebuildError    float64

	Mem int64
	// Plan is the run's shares of Mem (MemoryPlan's); zero: Run makes it.
	Plan    memplan.Plan
	TmpDir  string
	Threads int
	Samples int

	Progress *ingest.Progress // Records: online values read (optional)
	Version  string           // the tool's version, for the report
}

func (o *Options) check() error {
	t := o.Target
	if o.Batch < 1 {
		o.Batch = 1000
	}
	if o.Conns < 1 {
		o.Conns = 1
	}
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	if o.Backoff <= 0 {
		o.Backoff = 250 * time.Millisecond
	}
	if o.Samples < 0 {
		o.Samples = 0
	}
	if o.TmpDir == "" {
		o.TmpDir = os.TempDir()
	}
	if o.DryRunOut == nil {
		o.DryRunOut = io.Discard
	}
	switch o.OnlineFormat {
	case "", "fp":
	case "key":
		if t.Kind != File {
			return &OptionError{Rule: KeysNotFromFile}
		}
	default:
		return &OptionError{Rule: UnknownOnlineFormat, Value: o.OnlineFormat}
	}
	if o.TTL != 0 && t.Kind != RedisKeys {
		return &OptionError{Rule: TTLNotRedisKeys, Target: t.Redacted, Value: t.Kind.String()}
	}
	if o.TTL < 0 {
		return &OptionError{Rule: NegativeTTL}
	}
	if o.Probe && t.Kind == File {
		return &OptionError{Rule: ProbeFile}
	}
	if o.Probe && t.Kind == Etcd {
		return &OptionError{Rule: ProbeEtcd}
	}
	if err := o.checkValue(); err != nil {
		return err
	}
	if o.Probe && t.Kind == RedisBF {
		return &OptionError{Rule: ProbeRedisBF}
	}
	if t.Kind == RedisBF {
		if err := o.checkRedisBF(); err != nil {
			return err
		}
	}
	if o.writes() && t.Kind == File {
		return &OptionError{Rule: ApplyToFile, Target: t.Redacted}
	}
	if o.Backfill != "" && len(o.Records) == 0 {
		return &OptionError{Rule: BackfillWithoutRecords}
	}
	if len(o.Records) > 0 && o.Backfill == "" && !o.writes() && !o.keyTexts() {
		return &OptionError{Rule: RecordsUnused}
	}
	if _, err := ingest.ParseOnBad(o.BadRecords); err != nil {
		return &OptionError{Rule: BadRecordsPolicy, Err: err}
	}
	if o.Checkpoint != "" && !o.Apply {
		return &OptionError{Rule: CheckpointWithoutApply}
	}
	if o.Extra != "" && (o.Probe || t.Kind == RedisBloom || t.Kind == RedisBF) {
		return &OptionError{Rule: ExtraNotListed}
	}
	if o.TargetFPR < 0 || o.TargetFPR >= 1 {
		return &OptionError{Rule: BadTargetFPR}
	}
	if o.TargetFPR != 0 && t.Kind != RedisBloom && t.Kind != RedisBF {
		return &OptionError{Rule: TargetFPRNotBloom}
	}
	if (o.RebuildCapacity != 0 || o.RebuildError != 0) && (t.Kind != RedisBF || len(o.Rebuild) == 0) {
		return &OptionError{Rule: RebuildParamsNotBF}
	}
	if len(o.Rebuild) > 0 {
		if err := o.checkRebuild(); err != nil {
			return err
		}
	}
	if o.Rate < 0 || o.ReadRate < 0 {
		return &OptionError{Rule: NegativeRate}
	}
	return nil
}

// checkValue checks the value template before anything is opened: an
// etcd target's, for writes, and its fields to be had from the records.
func (o *Options) checkValue() error {
	if o.Value == "" {
		return nil
	}
	switch {
	case o.Target.Kind != Etcd:
		return &OptionError{Rule: ValueNotEtcd}
	case !o.writes():
		return &OptionError{Rule: ValueUnused}
	}
	fields, err := etcdkeys.CheckValue(o.Value)
	if err != nil {
		return &OptionError{Rule: BadValue, Err: err}
	}
	if len(fields) > 0 && len(o.Records) == 0 {
		return &OptionError{Rule: ValueNeedsRecords, Value: "$" + strings.Join(fields, ", $")}
	}
	return nil
}

func (o *Options) checkRebuild() error {
	t := o.Target
	switch {
	case t.Kind == RedisBF:
		return o.checkRebuildBF()
	case t.Kind != RedisBloom:
		return &OptionError{Rule: RebuildNotBloom}
	case o.Apply || o.Probe:
		return &OptionError{Rule: RebuildWithApply}
	case t.Redis.Cluster && !bitmapbloom.HashTagHoldsShard(t.Bloom.Keys):
		return &OptionError{Rule: RebuildNeedsHashTag, Value: string(t.Bloom.Keys)}
	}
	for _, s := range o.Rebuild {
		if s >= t.Bloom.Shards {
			return &OptionError{Rule: RebuildShardRange, Value: fmt.Sprint(s), Target: fmt.Sprint(t.Bloom.Shards)}
		}
	}
	if need := memplan.RebuildMemNeeded(t.Bloom.ShardBytes()); o.Mem < need {
		return &OptionError{Rule: RebuildNeedsMem, Value: fmt.Sprint(need)}
	}
	return nil
}

// writes: the run writes the missing keys online, or prints what it would
// write (DryRun).
func (o *Options) writes() bool { return o.Apply || o.DryRun }

// config is what the parts of the run beneath the facade read of o, once
// check has filled in its defaults; h closes the run's connections.
func (o *Options) config(h *online.Hangup) *online.Config {
	return &online.Config{Target: o.Target.Redacted, Password: o.Password, Probe: o.Probe,
		Batch: o.Batch, Conns: o.Conns, Retries: o.Retries, Backoff: o.Backoff, Timeout: o.Timeout, Waiting: o.Waiting,
		ReadRate: o.ReadRate, Plan: o.Plan, TmpDir: o.TmpDir, Threads: o.Threads, Samples: o.Samples, Progress: o.Progress, Hangup: h}
}

// MemoryPlan is the run's shares of o.Mem (memplan.Reconcile), as Run
// takes them: a caller that bounds the process's memory (the Go heap's
// limit) declares it before Run. A bitmap bloom's plan counts the truth
// index's keys, and records read as Parquet hold their row groups beside
// the plan: the index is opened for its header, and an index that cannot
// be is Run's error to report (its plan then counts no keys).
func MemoryPlan(o Options) memplan.Plan {
	j := memplan.ReconcileJob{Mem: o.Mem, MaxRecord: int64(o.MaxRecord), Rebuild: len(o.Rebuild) > 0}
	if t := o.Target; t != nil {
		switch t.Kind {
		case RedisBloom:
			j.Store = memplan.BitmapBloom
		case RedisBF:
			j.Store = memplan.RedisBloom
		case RedisKeys, File:
			j.Unsorted = !o.Probe
		case Etcd:
			j.Etcd = true
		}
	}
	var parquet bool
	if j.Store == memplan.BitmapBloom || len(o.Records) > 0 {
		if x, err := fpstore.Open(o.Index); err == nil {
			j.IndexKeys = int64(x.Len())
			if len(o.Records) > 0 {
				ro, err := recordReading(&o, o.Index, x.Spec(), &Report{})
				parquet = err == nil && ro.Spec.Format == ingest.FormatParquet
			}
			x.Close()
		}
	}
	p := memplan.Reconcile(j)
	if parquet {
		p.RowGroups = memplan.ReaderLimit(p.MaxRecord)
	}
	return p
}
