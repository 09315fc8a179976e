package reconcile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/ingest"
	"github.com/fpdedup/fpdedup/internal/atomicfile"
	"github.com/fpdedup/fpdedup/reconcile/report"
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
	Rate      float64 // keys/s written, 0: no limit
	ReadRate  float64 // keys/s read or probed, 0: no limit
	Batch     int
	Conns     int
	Retries   int
	Backoff   time.Duration
	Timeout   time.Duration
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
	// (0: DefaultTargetFPR).
	TargetFPR float64

	Mem     int64
	TmpDir  string
	Threads int
	Samples int

	Progress *ingest.Progress // Records: online values read (optional)
	Version  string           // the tool's version, for the report

	hang *hangup // Run's: its connections, closed when its context is done
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
		return &OptionError{Rule: TTLNotRedisKeys}
	}
	if o.TTL < 0 {
		return &OptionError{Rule: NegativeTTL}
	}
	if o.Probe && t.Kind == File {
		return &OptionError{Rule: ProbeFile}
	}
	if o.writes() && t.Kind == File {
		return &OptionError{Rule: ApplyToFile, Target: t.Redacted}
	}
	if o.Backfill != "" && len(o.Records) == 0 {
		return &OptionError{Rule: BackfillWithoutRecords}
	}
	if len(o.Records) > 0 && o.Backfill == "" && !o.writes() {
		return &OptionError{Rule: RecordsUnused}
	}
	if _, err := ingest.ParseOnBad(o.BadRecords); err != nil {
		return &OptionError{Rule: BadRecordsPolicy, Err: err}
	}
	if o.Checkpoint != "" && !o.Apply {
		return &OptionError{Rule: CheckpointWithoutApply}
	}
	if o.Extra != "" && (o.Probe || t.Kind == RedisBloom) {
		return &OptionError{Rule: ExtraNotListed}
	}
	if o.TargetFPR < 0 || o.TargetFPR >= 1 {
		return &OptionError{Rule: BadTargetFPR}
	}
	if o.TargetFPR != 0 && t.Kind != RedisBloom {
		return &OptionError{Rule: TargetFPRNotBloom}
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

func (o *Options) checkRebuild() error {
	t := o.Target
	switch {
	case t.Kind != RedisBloom:
		return &OptionError{Rule: RebuildNotBloom}
	case o.Apply || o.Probe:
		return &OptionError{Rule: RebuildWithApply}
	case t.Cluster && !hashTagHoldsShard(t.BloomKeys):
		return &OptionError{Rule: RebuildNeedsHashTag, Value: string(t.BloomKeys)}
	}
	for _, s := range o.Rebuild {
		if s >= t.Bloom.Shards {
			return &OptionError{Rule: RebuildShardRange, Value: fmt.Sprint(s), Target: fmt.Sprint(t.Bloom.Shards)}
		}
	}
	if need := t.Bloom.ShardBytes() + 64<<20; o.Mem < need {
		return &OptionError{Rule: RebuildNeedsMem, Value: fmt.Sprint(need)}
	}
	return nil
}

// writes: the run writes the missing keys online, or prints what it would
// write (DryRun).
func (o *Options) writes() bool { return o.Apply || o.DryRun }

// Run reconciles the index with the online side. The report is returned
// filled as far as the run got, also with an error. The password never
// appears in the error or the report. Options that do not go together are
// an *OptionError; errors.go lists the other typed and sentinel errors. A
// run whose ctx is done when it ends never returns nil: once Apply has
// written (or was writing) keys online the error is an
// *ApplyInterruptedError (keys written, checkpoint, target); otherwise it
// wraps context.Cause(ctx) and ctx.Err(), so errors.Is(err,
// context.Canceled) holds and errors.As finds the cause's type.
func Run(ctx context.Context, o Options) (*Report, error) {
	start := time.Now()
	rep := &Report{Command: "reconcile", Version: o.Version, Started: start.UTC().Format(time.RFC3339), Memory: Memory{Budget: o.Mem}}
	var err error
	if o.Target != nil {
		rep.Online.Source, rep.Online.Kind = o.Target.Redacted, o.Target.Kind.String()
		err = o.check()
	} else {
		err = &OptionError{Rule: NoTarget}
	}
	if err == nil {
		o.hang = newHangup(ctx)
		err = run(ctx, &o, rep)
		o.hang.stop()
	}
	if ctx.Err() != nil {
		err = cancelled(ctx, &o, rep, err)
	}
	rep.Timings.Total = time.Since(start).Seconds()
	rep.Memory = report.ReadMemory(o.Mem)
	if err != nil {
		keep := ""
		if o.Target != nil {
			keep = o.Target.Redacted
		}
		err = Scrub(err, o.Password, keep)
	}
	return rep, err
}

// cancelled is the error of a run whose context is done, whatever the
// run itself returned (nil included: a part that stopped early must never
// pass for a complete run). Once Apply has written keys it is an
// *ApplyInterruptedError; otherwise it wraps the context's cause and
// ctx.Err() (errors.Is(err, context.Canceled)), and what the run stopped
// with.
func cancelled(ctx context.Context, o *Options, rep *Report, err error) error {
	var ie *ApplyInterruptedError
	if errors.As(err, &ie) {
		return err
	}
	if rs := rep.Rebuild; rs != nil && !o.DryRun && rs.Swapped > 0 {
		return &ApplyInterruptedError{Target: o.Target.Redacted, Rebuilt: rs.Swapped, Rebuild: int64(len(rs.Shards)),
			Cause: context.Cause(ctx), ctxErr: ctx.Err()}
	}
	if as := rep.Apply; as != nil && !o.DryRun && as.Written > 0 {
		// Cancelled after the apply returned, or as it returned with
		// another error: keys were written all the same.
		return &ApplyInterruptedError{Target: o.Target.Redacted, Written: as.Written, Checkpoint: o.Checkpoint,
			CheckpointSaved: o.Checkpoint != "" && !as.CheckpointRemoved, CheckpointLast: as.CheckpointLast,
			Cause: context.Cause(ctx), ctxErr: ctx.Err()}
	}
	return interrupted(ctx, err)
}

// run is the reconciliation, in its phases: open the index and the online
// side; compare them (the differences go to their indexes or a spool);
// read the records (backfill, whole digests); write the missing keys.
func run(ctx context.Context, o *Options, rep *Report) error {
	x, err := openIndex(o, rep)
	if err != nil {
		return err
	}
	defer x.Close()
	var ro ingest.RecordOptions
	if len(o.Records) > 0 {
		if ro, err = recordReading(o, o.Index, x.Spec(), rep); err != nil {
			return err
		}
	}
	src, err := open(ctx, o)
	if err != nil {
		return err
	}
	defer src.Close()
	if wide, known := src.Wide(); known {
		// Said before the comparison, when the source knows already.
		rep.Online.Wide = wide
		if wide && o.writes() && len(o.Records) == 0 {
			return &NeedRecordsError{Target: o.Target.Redacted}
		}
	}

	d, err := newDifferences(o, x)
	if err != nil {
		return err
	}
	defer d.close()
	if err := compare(ctx, o, x, src, d, rep); err != nil {
		return err
	}
	if err := d.commit(o, rep); err != nil {
		return err
	}
	wide, err := keyWidth(o, src, rep)
	if err != nil {
		return err
	}

	var missing *fpstore.Index
	if d.missingPath != "" {
		if missing, err = fpstore.Open(d.missingPath); err != nil {
			return err
		}
		defer missing.Close()
	}
	var digests [][32]byte
	if len(o.Records) > 0 {
		if digests, err = readRecords(ctx, o, ro, missing, wide, rep); err != nil {
			return err
		}
	}
	if o.writes() && len(o.Rebuild) == 0 {
		if err := applyMissing(ctx, o, rep, src, x, missing, d.spool, wide, digests); err != nil {
			return err
		}
	}
	if len(o.Rebuild) > 0 {
		if err := rebuildShards(ctx, o, rep, src.(*bloomSource), x); err != nil {
			return err
		}
	}
	// The shards a rebuild names are not audited: held once it is done,
	// and, in a dry run, the work it would do.
	pending := o.DryRun && len(o.Rebuild) > 0
	rep.Agree = rep.Missing == 0 && rep.Counts.OnlyOnline <= 0 && rep.Online.Bad == 0 && !pending && rep.ReadBack.Holds()
	return nil
}

// openIndex opens the truth index, describes it in the report, and
// refuses one whose fingerprints are not SHA-256 ones.
func openIndex(o *Options, rep *Report) (*fpstore.Index, error) {
	x, err := fpstore.Open(o.Index)
	if err != nil {
		return nil, err
	}
	spec := x.Spec()
	rep.Index = IndexInfo{Path: o.Index, Fingerprints: x.Len(), Hash: spec.Hash, Key: spec.Key, KeySep: spec.KeySep, Range: x.Range().String()}
	if rep.Index.Key == nil {
		rep.Index.Key = []string{}
	}
	// A bloom's bits come from the index's own fingerprints, whatever
	// their hash; a key store is named by SHA-256 digests.
	if spec.Hash != ingest.SHA256.String() && o.Target.Kind != RedisBloom {
		x.Close()
		return nil, &WrongHashError{Index: o.Index, Hash: spec.Hash, Key: spec.Key, KeySep: spec.KeySep}
	}
	return x, nil
}

// keyWidth is whether the online side names keys by whole 32-byte digests,
// as read: writing the missing keys must know, and computes whole digests
// from the records.
func keyWidth(o *Options, src Source, rep *Report) (wide bool, err error) {
	wide, known := src.Wide()
	rep.Online.Wide = wide
	if o.writes() && rep.Counts.OnlyOffline > 0 {
		if !known && o.Target.Kind != MySQL {
			return false, fmt.Errorf("%s is empty, so the width of its key names is unknown: add &hex=32 or &hex=64 to the URL", o.Target.Redacted)
		}
		if wide && len(o.Records) == 0 {
			return false, &NeedRecordsError{Target: o.Target.Redacted}
		}
	}
	return wide, nil
}

// readRecords is the records pass: the backfill (published with the
// group), and, when the online side holds whole digests and keys are to
// be written, those digests, sorted and distinct.
func readRecords(ctx context.Context, o *Options, ro ingest.RecordOptions, missing *fpstore.Index, wide bool, rep *Report) ([][32]byte, error) {
	rs := &RecordStats{Backfill: o.Backfill}
	rep.Records = rs
	var backfill *atomicfile.File
	if o.Backfill != "" {
		var err error
		if backfill, err = atomicfile.Create(o.Backfill); err != nil {
			return nil, err
		}
		defer backfill.Abort()
	}
	var digests [][32]byte
	var collect *[][32]byte
	if wide && o.writes() {
		collect = &digests
	}
	err := recordsPass(ctx, o, ro, missing, backfill, collect, rs)
	rep.Timings.Records = rs.Seconds
	if err != nil {
		return nil, err
	}
	if backfill != nil {
		if err := o.Group.Finish(backfill); err != nil {
			return nil, err
		}
		rep.Outputs.Backfill = o.Backfill
	}
	return digests, nil
}

func open(ctx context.Context, o *Options) (Source, error) {
	switch o.Target.Kind {
	case RedisKeys, RedisSet:
		return openRedis(ctx, o.Target, o)
	case MySQL:
		return openMySQL(ctx, o.Target, o)
	case File:
		return &fileSource{t: o.Target, o: o, keys: o.OnlineFormat == "key"}, nil
	case RedisBloom:
		return openBloom(ctx, o.Target, o)
	}
	return nil, fmt.Errorf("unknown online kind %v", o.Target.Kind)
}

// Scrub keeps the password out of err's text, and out of any saying of it
// (Scrubbed.Scrub), as it is and in the forms a URL encodes it in (query,
// path, user info), keeping what errors.Is and errors.As see. keep (the
// redacted URL, which holds no password) is left as it is even if the
// password happens to occur in it.
func Scrub(err error, password, keep string) error {
	if password == "" {
		return err
	}
	forms := passwordForms(password)
	msg := err.Error()
	if !slices.ContainsFunc(forms, func(f string) bool { return strings.Contains(msg, f) }) {
		return err
	}
	return Scrubbed{err: err, forms: forms, keep: keep}
}

// passwordForms are the password as it is and percent-encoded as a URL's
// query, path and user info encode it, longest first (so that no form is
// left half replaced inside a longer one), each once.
func passwordForms(pw string) []string {
	user := strings.TrimPrefix(url.UserPassword("", pw).String(), ":") // the encoded password
	forms := []string{pw, url.QueryEscape(pw), strings.ReplaceAll(url.QueryEscape(pw), "+", "%20"), url.PathEscape(pw), user}
	slices.SortStableFunc(forms, func(a, b string) int { return len(b) - len(a) })
	return slices.Compact(forms)
}

// Scrubbed is an error whose text held the password: Error and Scrub say
// it with the password, in every form, replaced by *****.
type Scrubbed struct {
	err   error
	forms []string
	keep  string
}

func (s Scrubbed) Error() string { return s.Scrub(s.err.Error()) }
func (s Scrubbed) Unwrap() error { return s.err }

// Scrub removes the password from msg, a saying of the wrapped error.
func (s Scrubbed) Scrub(msg string) string {
	const mark = "\x00url\x00"
	if s.keep != "" {
		msg = strings.ReplaceAll(msg, s.keep, mark)
	}
	for _, f := range s.forms {
		msg = strings.ReplaceAll(msg, f, "*****")
	}
	if s.keep != "" {
		msg = strings.ReplaceAll(msg, mark, s.keep)
	}
	return msg
}
