package join

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/internal/atomicfile"
	"github.com/fpdedup/fpdedup/reconcile/online"
	"github.com/fpdedup/fpdedup/reconcile/report"
)

// Differences are where the comparison puts what only one side holds. The
// missing fingerprints (only offline) go to an index, Outputs.Missing or
// a temporary one the records pass looks records up in, or else, when
// only Apply needs them, to a spool; the extra ones (only online) to
// Outputs.Extra. Each side's sink counts them and keeps the first as
// samples.
type Differences struct {
	out          Outputs
	tmpDir       string          // holds the temporary missing index; "" none
	missingPath  string          // the missing index, once committed; "" when there is none
	missingIndex *fpstore.Writer // nil when none, or once committed
	// throughIndex is Outputs.Missing when it is written through (a
	// device, a FIFO), which cannot be read back: the missing set is then
	// also kept as if there were no Outputs.Missing.
	throughIndex *fpstore.Writer
	extraIndex   *fpstore.Writer
	spool        *Spool
	missing      *sink
	extra        *sink
}

// Outputs say where the Differences go and who reads them after.
type Outputs struct {
	Missing, Extra string            // the indexes to write (optional)
	Group          *atomicfile.Group // holds Missing and Extra until the caller commits it; nil: published when complete
	// Records: the records pass looks the missing keys up, so they are
	// kept as an index (a temporary one without Missing).
	Records bool
	// Writes: the missing keys are written online (or printed), so they
	// are kept (a spool, without Missing or Records).
	Writes bool
}

// NewDifferences makes the outputs the run needs. Close undoes what was
// not committed, whatever happened.
func NewDifferences(o *online.Config, out Outputs, x *fpstore.Index) (_ *Differences, err error) {
	d := &Differences{out: out}
	defer func() {
		if err != nil {
			d.Close()
		}
	}()
	missingPath := out.Missing
	opts := fpstore.WriterOptions{Spec: x.Spec(), Range: x.Range(), Threads: o.Threads, Group: out.Group}
	if missingPath != "" {
		if _, through, _ := atomicfile.Resolve(missingPath); through {
			if d.throughIndex, err = fpstore.Create(missingPath, opts); err != nil {
				return nil, err
			}
			missingPath = ""
		}
	}
	if missingPath == "" && !out.Records && out.Writes {
		if d.spool, err = newSpool(o.TmpDir); err != nil {
			return nil, err
		}
	}
	if missingPath == "" && out.Records {
		if d.tmpDir, err = os.MkdirTemp(o.TmpDir, "fpdedup-reconcile-*"); err != nil {
			return nil, &online.FileError{Op: "make a temp directory in", File: online.TempDir, Err: err}
		}
		missingPath = filepath.Join(d.tmpDir, "missing.fpx")
	}
	if missingPath != "" {
		missingOpts := opts
		if missingPath != out.Missing {
			missingOpts.Group = nil // the records pass's own, in tmpDir
		}
		if d.missingIndex, err = fpstore.Create(missingPath, missingOpts); err != nil {
			return nil, err
		}
	}
	if out.Extra != "" {
		if d.extraIndex, err = fpstore.Create(out.Extra, opts); err != nil {
			return nil, err
		}
	}
	// (A nil *Writer in an interface is not a nil interface.)
	var toMissing, toExtra adder
	switch {
	case d.missingIndex != nil:
		toMissing = d.missingIndex
	case d.spool != nil:
		toMissing = d.spool
	}
	if d.throughIndex != nil {
		toMissing = tee{d.throughIndex, toMissing}
	}
	if d.extraIndex != nil {
		toExtra = d.extraIndex
	}
	d.missing, d.extra = newSink(o.Samples, toMissing), newSink(o.Samples, toExtra)
	return d, nil
}

// Commit finishes the indexes (published at the command's commit point
// when they are outputs of a Group), and names them in the report.
func (d *Differences) Commit(rep *report.Report) error {
	if d.missingIndex != nil {
		if _, err := d.missingIndex.Commit(); err != nil {
			return err
		}
		d.missingPath = d.missingIndex.Name() // a group publishes it at the end: read it where it is
		d.missingIndex = nil
		if d.out.Missing != "" {
			rep.Outputs.Missing = d.out.Missing
		}
	}
	if d.throughIndex != nil {
		if _, err := d.throughIndex.Commit(); err != nil {
			return err
		}
		d.throughIndex = nil
		rep.Outputs.Missing = d.out.Missing
	}
	if d.extraIndex != nil {
		if _, err := d.extraIndex.Commit(); err != nil {
			return err
		}
		d.extraIndex = nil
		rep.Outputs.Extra = d.out.Extra
	}
	return nil
}

// MissingPath is the missing index once committed, where the records pass
// reads it; "" when there is none.
func (d *Differences) MissingPath() string { return d.missingPath }

// Spool is where the missing keys were kept for Apply without an index;
// nil when they are in one.
func (d *Differences) Spool() *Spool { return d.spool }

// Close aborts the indexes not committed and removes the temporary files.
func (d *Differences) Close() {
	if d.missingIndex != nil {
		d.missingIndex.Abort()
	}
	if d.throughIndex != nil {
		d.throughIndex.Abort()
	}
	if d.extraIndex != nil {
		d.extraIndex.Abort()
	}
	if d.spool != nil {
		d.spool.close()
	}
	if d.tmpDir != "" {
		os.RemoveAll(d.tmpDir)
	}
}

// comparison reads the online side and joins it with the index, in one of
// three modes: probe (each offline fingerprint looked up online),
// merge-join (a sorted source) or sort-merge-join (an unsorted one, through
// the external sorter).
type comparison struct {
	o       *online.Config
	index   *fpstore.Index
	src     online.Source
	audited bool // the source was audited (online.Auditor): what only it holds is not known
	d       *Differences
	rep     *report.Report
	stats   *online.ReadStats
	checked *checker // the online stream, in range, in order, without repeats
	both    int64
	start   time.Time
}

// Compare runs the comparison and puts its figures in the report: a
// probe (o.Probe), an audit (an online.Auditor) or a join.
func Compare(ctx context.Context, o *online.Config, x *fpstore.Index, src online.Source, d *Differences, rep *report.Report) error {
	c := &comparison{o: o, index: x, src: src, d: d, rep: rep,
		stats:   &online.ReadStats{Pace: online.NewPacer(o.ReadRate)},
		checked: &checker{rng: x.Range(), what: o.Target},
		start:   time.Now()}
	a, audit := src.(online.Auditor)
	var err error
	switch {
	case o.Probe:
		err = c.probe(ctx)
	case audit:
		c.audited = true
		if err = a.Audit(ctx, x, c.stats, &c.both, c.d.missing.add, rep); err == nil {
			c.rep.Timings.OnlineRead = time.Since(c.start).Seconds()
		}
	default:
		err = c.join(ctx)
	}
	if err == nil {
		err = d.missing.flush()
	}
	if err == nil {
		err = d.extra.flush()
	}
	rep.Timings.Compare = time.Since(c.start).Seconds()
	c.report(err)
	return err
}

// probe looks each offline fingerprint up online.
func (c *comparison) probe(ctx context.Context) error {
	c.rep.Mode = "probe"
	err := probeJoin(ctx, NewCursorReader(c.index), c.src, c.o, c.stats, &c.both, c.d.missing)
	c.rep.Timings.OnlineRead = time.Since(c.start).Seconds()
	if err == nil {
		return nil
	}
	return &ProbeError{Target: c.o.Target, Answered: c.both + c.d.missing.n, Retries: c.stats.Retries, PerBatch: c.o.Retries, Retryable: c.src.Retryable(err), Err: err}
}

// join merge-joins the online stream, read on another goroutine, with the
// index's cursor.
func (c *comparison) join(ctx context.Context) error {
	var sorter *fpstore.Sorter
	if c.src.Sorted() {
		c.rep.Mode = "merge-join"
	} else {
		c.rep.Mode = "sort-merge-join"
		sorter = fpstore.NewSorter(c.o.TmpDir, c.o.Plan.Sorter)
		defer sorter.Close()
	}
	online := startProducer(ctx, func(ctx context.Context, emit func([]fpstore.Fingerprint) error) error {
		c.checked.downstream = emit
		return c.readOnline(ctx, sorter)
	})
	err := mergeJoin(ctx, NewCursorReader(c.index), online, &c.both, c.d.missing, c.d.extra)
	if err != nil {
		online.stop()
	} else {
		_, err = online.Next() // the producer's own error, if any
	}
	if sorter != nil {
		c.rep.Online.Spills = sorter.Spills()
	}
	return err
}

// readOnline reads the online side into the checker: at once from a
// sorted source, else through the sorter once the whole side is read.
func (c *comparison) readOnline(ctx context.Context, sorter *fpstore.Sorter) error {
	progress := func() {
		if c.o.Progress != nil {
			c.o.Progress.Records.Store(c.stats.Values.Load())
		}
	}
	if sorter == nil {
		err := c.src.Read(ctx, c.stats, func(b []fpstore.Fingerprint) error {
			progress()
			return c.checked.emit(b)
		})
		c.rep.Timings.OnlineRead = time.Since(c.start).Seconds()
		return err
	}
	col, err := sorter.NewCollector(1)
	if err != nil {
		return err
	}
	defer col.Free()
	err = c.src.Read(ctx, c.stats, func(b []fpstore.Fingerprint) error {
		progress()
		return col.Add(b)
	})
	c.rep.Timings.OnlineRead = time.Since(c.start).Seconds()
	if err != nil {
		return err
	}
	return sorter.Emit([]*fpstore.Collector{col}, c.o.Threads, c.checked.emit)
}

// report puts the comparison's counts, samples and reading figures in the
// report, as far as it got (err: how it ended).
func (c *comparison) report(err error) {
	rep, st, chk := c.rep, c.stats, c.checked
	rep.Online.Values = st.Values.Load()
	rep.Online.Bad, rep.Online.BadSamples = st.Bad, st.BadSamples
	if rep.Online.BadSamples == nil {
		rep.Online.BadSamples = []string{}
	}
	rep.Online.Expected, rep.Online.CountChecked, rep.Online.Retries, rep.Online.Note = st.Expected, st.Checked, st.Retries, st.Note
	rep.Online.Masters = st.Masters
	rep.Online.Distinct, rep.Online.Repeats, rep.Online.OutsideRange = chk.distinct, chk.repeats, chk.outside
	missing, extra := c.d.missing, c.d.extra
	rep.Counts = report.Counts{Both: c.both, OnlyOffline: missing.n, OnlyOnline: extra.n}
	rep.Samples = report.Samples{OnlyOffline: missing.samples, OnlyOnline: extra.samples}
	if c.o.Probe || c.audited {
		// What only the online side holds is not known: a probe asks of
		// the offline keys alone, and a bloom holds bits, not keys.
		rep.Counts.OnlyOnline = -1
		rep.Online.Distinct = -1
	}
	if st.CheckDistinct != nil && err == nil {
		// A store that said how many distinct values it holds.
		if note := st.CheckDistinct(chk.distinct + chk.outside + st.Bad); note != "" {
			rep.Online.Note = note
		}
	}
	rep.Missing = missing.n
	secs := max(rep.Timings.Compare, 1e-9)
	rep.Timings.OnlinePerSecond = float64(rep.Online.Values) / secs
	rep.Timings.OfflinePerSecond = float64(c.index.Len()) / secs
	rep.Timings.KeysPerSecond = float64(max(int64(c.index.Len()), rep.Online.Values)) / secs
}

// tee adds to both adders; b may be nil.
type tee struct{ a, b adder }

func (t tee) Add(fps ...fpstore.Fingerprint) error {
	if err := t.a.Add(fps...); err != nil || t.b == nil {
		return err
	}
	return t.b.Add(fps...)
}
