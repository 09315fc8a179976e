package reconcile

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/ingest"
	"github.com/fpdedup/fpdedup/internal/atomicfile"
	"github.com/fpdedup/fpdedup/reconcile/apply"
	"github.com/fpdedup/fpdedup/reconcile/bitmapbloom"
	"github.com/fpdedup/fpdedup/reconcile/etcdkeys"
	"github.com/fpdedup/fpdedup/reconcile/exportfile"
	"github.com/fpdedup/fpdedup/reconcile/join"
	"github.com/fpdedup/fpdedup/reconcile/mysqltable"
	"github.com/fpdedup/fpdedup/reconcile/online"
	"github.com/fpdedup/fpdedup/reconcile/redisbloom"
	"github.com/fpdedup/fpdedup/reconcile/rediskeys"
	"github.com/fpdedup/fpdedup/reconcile/report"
)

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
		if o.Plan.Job == "" {
			o.Plan = MemoryPlan(o)
		}
	} else {
		err = &OptionError{Rule: NoTarget}
	}
	if err == nil {
		h := online.NewHangup(ctx)
		err = run(ctx, &o, o.config(h), rep)
		h.Stop()
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
		return online.ApplyInterrupted(ctx, ApplyInterruptedError{Target: o.Target.Redacted, Rebuilt: rs.Swapped, Rebuild: int64(len(rs.Shards))})
	}
	if as := rep.Apply; as != nil && !o.DryRun && as.Written > 0 {
		// Cancelled after the apply returned, or as it returned with
		// another error: keys were written all the same.
		return online.ApplyInterrupted(ctx, ApplyInterruptedError{Target: o.Target.Redacted, Written: as.Written, Checkpoint: o.Checkpoint,
			CheckpointSaved: o.Checkpoint != "" && !as.CheckpointRemoved, CheckpointLast: as.CheckpointLast})
	}
	return online.Interrupted(ctx, err)
}

// run is the reconciliation, in its phases: open the index and the online
// side; compare them (the differences go to their indexes or a spool);
// read the records (backfill, whole digests); write the missing keys.
func run(ctx context.Context, o *Options, cfg *online.Config, rep *Report) error {
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
	src, err := open(ctx, o, cfg, ro)
	if err != nil {
		return err
	}
	defer src.Close()
	if r, ok := src.(online.Reporter); ok {
		defer r.Report(rep) // however the run ends
	}
	valued, err := valuedSource(o, src, ro)
	if err != nil {
		return err
	}
	if wide, known := src.Wide(); known {
		// Said before the comparison, when the source knows already.
		rep.Online.Wide = wide
		if wide && o.writes() && len(o.Records) == 0 {
			return &NeedRecordsError{Target: o.Target.Redacted}
		}
	}

	d, err := compare(ctx, o, cfg, x, src, rep)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Commit(rep); err != nil {
		return err
	}
	wide, err := keyWidth(o, src, rep)
	if err != nil {
		return err
	}

	var missing *fpstore.Index
	if p := d.MissingPath(); p != "" {
		if missing, err = fpstore.Open(p); err != nil {
			return err
		}
		defer missing.Close()
	}
	// Values made of the records' fields are kept by whole digest: the
	// keys to write come from the records then, whatever their width.
	fromRecords := wide || valued != nil
	var digests [][32]byte
	var keyed []online.Item
	if len(o.Records) > 0 && (o.Backfill != "" || o.writes()) {
		var kept bool
		if mi, ok := src.(online.MissingItemer); ok && o.Backfill == "" && !fromRecords && !quarantines(o) {
			if keyed, kept, err = mi.MissingItems(ctx, afterSlack(o.Plan.KeyBytes())); err != nil {
				return err
			}
		}
		if !kept {
			if digests, keyed, err = readRecords(ctx, o, ro, missing, fromRecords, valued, rep); err != nil {
				return err
			}
			if r, ok := src.(online.Router); ok {
				online.RouteItems(keyed, r)
			}
		}
	}
	if o.writes() && len(o.Rebuild) == 0 {
		if bad, good := rep.Online.Bad, rep.Online.Values-rep.Online.Bad; bad > 0 && bad >= good {
			return &SuspectTargetError{Target: o.Target.Redacted, Bad: bad, Values: rep.Online.Values, Samples: rep.Online.BadSamples}
		}
		ao := apply.Options{Index: o.Index, Checkpoint: o.Checkpoint, DryRun: o.DryRun, DryRunOut: o.DryRunOut, Rate: o.Rate}
		if err := apply.Missing(ctx, cfg, ao, rep, src, x, missing, d.Spool(), fromRecords, digests, keyed); err != nil {
			return err
		}
	}
	if len(o.Rebuild) > 0 {
		var placed *apply.Placement
		if !o.DryRun {
			if placed, err = apply.Place(ctx, cfg.Target, src, "--rebuild-shard"); err != nil {
				return err
			}
		}
		if err := rebuild(ctx, o, cfg, rep, src, x); err != nil {
			return err
		}
		if rep.Rebuild != nil {
			if err := placed.Unmoved(ctx, rep.Rebuild.Swapped); err != nil {
				return err
			}
		}
	}
	// The shards a rebuild names are not audited: held once it is done,
	// and, in a dry run, the work it would do.
	pending := o.DryRun && len(o.Rebuild) > 0
	// Keys no record gave the text of were not audited: nothing is said
	// of them, so the sides are not said to agree.
	unaudited := rep.RedisBloom != nil && rep.RedisBloom.Unaudited > 0
	rep.Agree = rep.Missing == 0 && rep.Counts.OnlyOnline <= 0 && rep.Online.Bad == 0 && !pending && !unaudited && rep.ReadBack.Holds()
	return nil
}

// compare makes the comparison into new Differences. A source whose read
// turned out not to be one snapshot (an etcd revision compacted under it)
// asks for it again: what was joined is thrown away and the comparison
// made again from the start, as often as the source allows. Outputs
// written through (a pipe) cannot be taken back: then it fails.
func compare(ctx context.Context, o *Options, cfg *online.Config, x *fpstore.Index, src online.Source, rep *Report) (*join.Differences, error) {
	for {
		d, err := join.NewDifferences(cfg, join.Outputs{Missing: o.Missing, Extra: o.Extra, Group: o.Group, Records: len(o.Records) > 0, Writes: o.writes()}, x)
		if err != nil {
			return nil, err
		}
		err = join.Compare(ctx, cfg, x, src, d, rep)
		if err == nil {
			return d, nil
		}
		d.Close()
		var again *online.ReadAgainError
		if !errors.As(err, &again) || ctx.Err() != nil {
			return nil, err
		}
		for _, out := range []string{o.Missing, o.Extra} {
			if _, through, _ := atomicfile.Resolve(out); out != "" && through {
				return nil, fmt.Errorf("%w (%s is written through as the comparison goes, so it cannot be made again)", again.Err, out)
			}
		}
	}
}

// valuedSource is src when its values are made of the records' fields,
// which are then checked to be had: nil when every key gets one value.
func valuedSource(o *Options, src online.Source, ro ingest.RecordOptions) (online.Valued, error) {
	v, ok := src.(online.Valued)
	if !ok || !o.writes() || len(v.ValueFields()) == 0 {
		return nil, nil
	}
	if len(o.Records) == 0 {
		return nil, &OptionError{Rule: ValueNeedsRecords, Value: "$" + strings.Join(v.ValueFields(), ", $")}
	}
	if f := ro.Spec.Format; f == ingest.FormatLines || f == ingest.FormatParquet {
		return nil, &OptionError{Rule: ValueFieldsFormat, Value: f.String()}
	}
	return v, nil
}

// rebuild rebuilds the bloom shards Options.Rebuild names.
func rebuild(ctx context.Context, o *Options, cfg *online.Config, rep *Report, src online.Source, x *fpstore.Index) error {
	switch b := src.(type) {
	case *bitmapbloom.Source:
		ro := bitmapbloom.RebuildOptions{Shards: o.Rebuild, DryRun: o.DryRun, DryRunOut: o.DryRunOut}
		return bitmapbloom.Rebuild(ctx, cfg, ro, rep, b, x)
	case *redisbloom.Source:
		return b.Rebuild(ctx, redisbloom.RebuildOptions{DryRun: o.DryRun, DryRunOut: o.DryRunOut}, rep)
	}
	return fmt.Errorf("BUG: a rebuild of %T", src)
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
	// A bloom's bits come from the index's own fingerprints (or the key
	// texts), whatever their hash; a key store is named by SHA-256 digests.
	if spec.Hash != ingest.SHA256.String() && o.Target.Kind != RedisBloom && o.Target.Kind != RedisBF {
		x.Close()
		return nil, &WrongHashError{Index: o.Index, Hash: spec.Hash, Key: spec.Key, KeySep: spec.KeySep}
	}
	return x, nil
}

// keyWidth is whether the online side names keys by whole 32-byte digests,
// as read: writing the missing keys must know, and computes whole digests
// from the records.
func keyWidth(o *Options, src online.Source, rep *Report) (wide bool, err error) {
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
// group), and, when keys are to be written, those the online side names
// by their whole digests or their key texts (RedisBloom filters), sorted
// by fingerprint and distinct.
func readRecords(ctx context.Context, o *Options, ro ingest.RecordOptions, missing *fpstore.Index, wide bool, valued online.Valued, rep *Report) ([][32]byte, []online.Item, error) {
	rs := &RecordStats{Backfill: o.Backfill}
	rep.Records = rs
	out := recordsOut{missing: missing}
	if o.Backfill != "" {
		var err error
		if out.backfill, err = atomicfile.Create(o.Backfill); err != nil {
			return nil, nil, err
		}
		defer out.backfill.Abort()
	}
	var digests [][32]byte
	var keyed []online.Item
	switch {
	case wide && o.writes():
		out.digests = &digests
	case o.Target.Kind == RedisBF && o.writes():
		keyed = []online.Item{} // not nil: the items come from here, none found or not
		out.keyed = &keyed
	}
	out.valued = valued
	err := recordsPass(ctx, o, ro, out, rs)
	rep.Timings.Records += rs.Seconds
	if err != nil {
		return nil, nil, err
	}
	if out.backfill != nil {
		if err := o.Group.Finish(out.backfill); err != nil {
			return nil, nil, err
		}
		rep.Outputs.Backfill = o.Backfill
	}
	return digests, keyed, nil
}

// quarantines reports whether o sends bad records to a quarantine file:
// the records pass after the audit writes it.
func quarantines(o *Options) bool {
	bad, _ := ingest.ParseOnBad(o.BadRecords)
	return bad.Quarantines()
}

// keyTexts is the records pass of an audit of RedisBloom filters whose
// items or router need the key texts: every record's key, with its
// fingerprint, to fn. A record without a key is dealt with as
// Options.BadRecords says, but for a quarantine, which the records pass
// after the audit writes when there is one (the same records again).
func keyTexts(ctx context.Context, o *Options, ro ingest.RecordOptions, fn func([]fpstore.Fingerprint, [][]byte) error) error {
	out := recordsOut{texts: fn}
	if quarantines(o) && (o.Backfill != "" || o.writes()) {
		out.onBad = "skip"
	}
	return recordsPass(ctx, o, ro, out, &RecordStats{})
}

func open(ctx context.Context, o *Options, cfg *online.Config, ro ingest.RecordOptions) (online.Source, error) {
	switch o.Target.Kind {
	case RedisKeys, RedisSet:
		return rediskeys.Open(ctx, o.Target.Redis, o.Target.Keys, cfg, o.TTL)
	case MySQL:
		return mysqltable.Open(ctx, o.Target.MySQL, cfg)
	case File:
		return exportfile.Open(o.Target.Path, o.Target.Redacted, o.OnlineFormat == "key"), nil
	case RedisBloom:
		return bitmapbloom.Open(ctx, o.Target.Redis, o.Target.Bloom, cfg, bitmapbloom.Options{Rebuild: o.Rebuild, TargetFPR: o.TargetFPR})
	case Etcd:
		return etcdkeys.Open(ctx, o.Target.Etcd, cfg, o.Value)
	case RedisBF:
		bo := redisbloom.Options{TargetFPR: o.TargetFPR, Capacity: o.RebuildCapacity, Error: o.RebuildError}
		for _, s := range o.Rebuild {
			bo.Rebuild = append(bo.Rebuild, int(s))
		}
		if o.keyTexts() {
			bo.KeyTexts = func(ctx context.Context, fn func([]fpstore.Fingerprint, [][]byte) error) error {
				return keyTexts(ctx, o, ro, fn)
			}
		}
		return redisbloom.Open(ctx, o.Target.Redis, o.Target.BF, cfg, bo)
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
