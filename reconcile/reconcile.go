package reconcile

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/ingest"
	"github.com/fpdedup/fpdedup/internal/atomicfile"
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
	// RecordOptions says how Records are read and keyed (format, key
	// recipe, header, terminator, size limit) given the index's spec,
	// whose recorded recipe it may adopt; a caller with record options of
	// its own (the CLI's, shared by build, query and dedup) resolves them
	// here. nil: lines, each line a key, refused for an index that records
	// a key recipe.
	RecordOptions func(index fpstore.Spec) (ingest.RecordOptions, error)
	// BadRecords says what a record without a key does (ingest.ParseOnBad):
	// "fail" (or ""), "skip", or "quarantine=FILE".
	BadRecords string

	Apply      bool
	DryRun     bool
	DryRunOut  io.Writer
	TTL        time.Duration
	Rate       float64 // keys/s written, 0: no limit
	ReadRate   float64 // keys/s read or probed, 0: no limit
	Batch      int
	Conns      int
	Retries    int
	Backoff    time.Duration
	Timeout    time.Duration
	Checkpoint string

	// Group, if set, holds Missing, Extra and Backfill until the caller
	// commits it (its commit point, after a Run that succeeded); without
	// one each is published as soon as it is complete.
	Group *atomicfile.Group

	Mem     int64
	TmpDir  string
	Threads int
	Samples int

	Progress *ingest.Progress // Records: online values read (optional)
	Version  string           // the tool's version, for the report
}

// Report is the figures of a run: what a caller writes as its JSON report
// (the CLI adds its error message and exit code) and makes its summary of.
type Report struct {
	Command string       `json:"command"`
	Version string       `json:"version,omitempty"`
	Started string       `json:"started"`
	Index   IndexInfo    `json:"index"`
	Online  OnlineInfo   `json:"online"`
	Mode    string       `json:"mode"`
	Counts  Counts       `json:"counts"`
	Samples Samples      `json:"samples"`
	Outputs Outputs      `json:"outputs"`
	Records *RecordStats `json:"records,omitempty"`
	Apply   *ApplyStats  `json:"apply,omitempty"`
	Missing int64        `json:"missing_online_after"` // only offline, after Apply
	Agree   bool         `json:"agree"`
	Timings Timings      `json:"timings"`
	Memory  Memory       `json:"memory"`
}

// IndexInfo describes the truth index.
type IndexInfo struct {
	Path         string   `json:"path"`
	Fingerprints uint64   `json:"fingerprints"`
	Hash         string   `json:"hash"`
	Key          []string `json:"key"`
	KeySep       string   `json:"key_sep"`
	Range        string   `json:"range"`
}

// OnlineInfo describes the online side and how it was read.
type OnlineInfo struct {
	Source       string   `json:"source"` // redacted URL
	Kind         string   `json:"kind"`
	Wide         bool     `json:"whole_digests"`
	Values       int64    `json:"values_read"`
	Distinct     int64    `json:"distinct"`
	Repeats      int64    `json:"repeats"`
	OutsideRange int64    `json:"outside_index_range"`
	Bad          int64    `json:"not_fingerprints"`
	BadSamples   []string `json:"not_fingerprint_samples"`
	Expected     int64    `json:"expected"` // COUNT(*) or SCARD, -1 unknown
	CountChecked bool     `json:"count_checked"`
	Retries      int      `json:"retries"`
	Note         string   `json:"note,omitempty"`
	Spills       int64    `json:"sorter_spills"`
	Masters      []string `json:"cluster_masters,omitempty"` // Redis Cluster: the masters scanned
}

// Samples are the first fingerprints (in order) of each side.
type Samples struct {
	OnlyOffline []string `json:"only_offline"`
	OnlyOnline  []string `json:"only_online"`
}

// Outputs are the files written.
type Outputs struct {
	Missing  string `json:"missing,omitempty"`
	Extra    string `json:"extra,omitempty"`
	Backfill string `json:"backfill,omitempty"`
}

// Timings are wall-clock seconds per phase.
type Timings struct {
	Compare          float64 `json:"compare_seconds"`
	OnlineRead       float64 `json:"online_read_seconds"`
	Records          float64 `json:"records_seconds"`
	Apply            float64 `json:"apply_seconds"`
	Total            float64 `json:"total_seconds"`
	KeysPerSecond    float64 `json:"keys_per_second"` // max(offline, online) keys compared per second
	OnlinePerSecond  float64 `json:"online_values_per_second"`
	OfflinePerSecond float64 `json:"offline_keys_per_second"`
}

// Memory is the process's memory at the end: peak RSS, and the current
// anonymous and file-backed (mapped indexes) parts.
type Memory struct {
	PeakRSS int64 `json:"peak_rss_bytes"`
	Anon    int64 `json:"rss_anon_bytes"`
	File    int64 `json:"rss_file_bytes"`
	Budget  int64 `json:"budget_bytes"`
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
	if o.Rate < 0 || o.ReadRate < 0 {
		return &OptionError{Rule: NegativeRate}
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
		err = run(ctx, &o, rep)
	}
	if ctx.Err() != nil {
		err = cancelled(ctx, &o, rep, err)
	}
	rep.Timings.Total = time.Since(start).Seconds()
	rep.Memory = readMemory(o.Mem)
	if err != nil {
		keep := ""
		if o.Target != nil {
			keep = o.Target.Redacted
		}
		err = scrub(err, o.Password, keep)
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
	if as := rep.Apply; as != nil && !o.DryRun && as.Written > 0 {
		// Cancelled after the apply returned, or as it returned with
		// another error: keys were written all the same.
		return &ApplyInterruptedError{Target: o.Target.Redacted, Written: as.Written, Checkpoint: o.Checkpoint,
			CheckpointSaved: o.Checkpoint != "" && !as.CheckpointRemoved, CheckpointLast: as.CheckpointLast,
			Cause: context.Cause(ctx), ctxErr: ctx.Err()}
	}
	return interrupted(ctx, err)
}

func run(ctx context.Context, o *Options, rep *Report) error {
	t := o.Target
	x, err := fpstore.Open(o.Index)
	if err != nil {
		return err
	}
	defer x.Close()
	spec := x.Spec()
	rep.Index = IndexInfo{Path: o.Index, Fingerprints: x.Len(), Hash: spec.Hash, Key: spec.Key, KeySep: spec.KeySep, Range: x.Range().String()}
	if rep.Index.Key == nil {
		rep.Index.Key = []string{}
	}
	if spec.Hash != ingest.SHA256.String() {
		return &WrongHashError{Index: o.Index, Hash: spec.Hash}
	}
	var ro ingest.RecordOptions
	if len(o.Records) > 0 {
		if ro, err = recordReading(o, o.Index, spec); err != nil {
			return err
		}
	}

	src, err := open(ctx, o)
	if err != nil {
		return err
	}
	defer src.Close()
	if wide, known := src.Wide(); known {
		rep.Online.Wide = wide
		if wide && (o.Apply || o.DryRun) && len(o.Records) == 0 {
			return &NeedRecordsError{Target: t.Redacted}
		}
	}

	// Outputs of the comparison. The missing fingerprints are needed as an
	// index by the records pass and by Apply even when not asked for.
	tmpDir := ""
	defer func() {
		if tmpDir != "" {
			os.RemoveAll(tmpDir)
		}
	}()
	missingPath := o.Missing
	var spl *spool
	if missingPath == "" && len(o.Records) == 0 && (o.Apply || o.DryRun) {
		if spl, err = newSpool(o.TmpDir); err != nil {
			return err
		}
		defer spl.close()
	}
	if missingPath == "" && len(o.Records) > 0 {
		if tmpDir, err = os.MkdirTemp(o.TmpDir, "fpdedup-reconcile-*"); err != nil {
			return &FileError{Op: "make a temp directory in", File: TempDir, Err: err}
		}
		missingPath = filepath.Join(tmpDir, "missing.fpx")
	}
	wopts := fpstore.WriterOptions{Spec: spec, Range: x.Range(), Threads: o.Threads, Group: o.Group}
	var mw, ew *fpstore.Writer
	abort := func() {
		if mw != nil {
			mw.Abort()
		}
		if ew != nil {
			ew.Abort()
		}
	}
	if missingPath != "" {
		mopts := wopts
		if o.Missing == "" {
			mopts.Group = nil // the records pass's own, in tmpDir
		}
		if mw, err = fpstore.Create(missingPath, mopts); err != nil {
			return err
		}
	}
	if o.Extra != "" {
		if ew, err = fpstore.Create(o.Extra, wopts); err != nil {
			abort()
			return err
		}
	}
	// (A nil *Writer in an interface is not a nil interface.)
	var madd, eadd adder
	switch {
	case mw != nil:
		madd = mw
	case spl != nil:
		madd = spl
	}
	if ew != nil {
		eadd = ew
	}
	missing, extra := newSink(o.Samples, madd), newSink(o.Samples, eadd)

	st := &ReadStats{limiter: newPacer(o.ReadRate)}
	chk := &checker{rng: x.Range(), what: t.Redacted}
	cmpStart := time.Now()
	var both int64
	if o.Probe {
		rep.Mode = "probe"
		err = probeJoin(ctx, newCursorReader(x), src, o, st, &both, missing)
		rep.Timings.OnlineRead = time.Since(cmpStart).Seconds()
		if err != nil {
			err = fmt.Errorf("probing %s failed after %d keys were answered (%d retries in all, at most %d per batch): %w", t.Redacted, both+missing.n, st.Retries, o.Retries, err)
			if retryable(err) {
				err = fmt.Errorf("%w; nothing was published, rerun to probe again", err)
			}
		}
	} else {
		var sorter *fpstore.Sorter
		if src.Sorted() {
			rep.Mode = "merge-join"
		} else {
			rep.Mode = "sort-merge-join"
			sorter = fpstore.NewSorter(o.TmpDir, max(o.Mem/2, 16<<20))
			defer sorter.Close()
		}
		on := startProducer(ctx, func(ctx context.Context, emit func([]fpstore.Fingerprint) error) error {
			chk.downstrm = emit
			progress := func(b []fpstore.Fingerprint) error {
				if o.Progress != nil {
					o.Progress.Records.Store(st.Values.Load())
				}
				return chk.emit(b)
			}
			if sorter == nil {
				err := src.Read(ctx, st, progress)
				rep.Timings.OnlineRead = time.Since(cmpStart).Seconds()
				return err
			}
			col, err := sorter.NewCollector(1)
			if err != nil {
				return err
			}
			defer col.Free()
			err = src.Read(ctx, st, func(b []fpstore.Fingerprint) error {
				if o.Progress != nil {
					o.Progress.Records.Store(st.Values.Load())
				}
				return col.Add(b)
			})
			rep.Timings.OnlineRead = time.Since(cmpStart).Seconds()
			if err != nil {
				return err
			}
			return sorter.Emit([]*fpstore.Collector{col}, o.Threads, chk.emit)
		})
		err = mergeJoin(ctx, newCursorReader(x), on, &both, missing, extra)
		if err != nil {
			on.stop()
		} else {
			_, err = on.next() // the producer's own error, if any
		}
		if sorter != nil {
			rep.Online.Spills = sorter.Spills()
		}
	}
	if err == nil {
		err = missing.flush()
	}
	if err == nil {
		err = extra.flush()
	}
	rep.Timings.Compare = time.Since(cmpStart).Seconds()
	rep.Online.Values = st.Values.Load()
	rep.Online.Bad, rep.Online.BadSamples = st.Bad, st.BadSamples
	if rep.Online.BadSamples == nil {
		rep.Online.BadSamples = []string{}
	}
	rep.Online.Expected, rep.Online.CountChecked, rep.Online.Retries, rep.Online.Note = st.Expected, st.Checked, st.Retries, st.Note
	rep.Online.Masters = st.Masters
	rep.Online.Distinct, rep.Online.Repeats, rep.Online.OutsideRange = chk.distinct, chk.repeats, chk.outside
	rep.Counts = Counts{Both: both, OnlyOffline: missing.n, OnlyOnline: extra.n}
	rep.Samples = Samples{OnlyOffline: missing.samples, OnlyOnline: extra.samples}
	if o.Probe {
		rep.Counts.OnlyOnline = -1
		rep.Online.Distinct = -1
	}
	if t.Kind == RedisSet && !o.Probe && st.Expected >= 0 {
		// SSCAN returns every member present for the whole scan at least
		// once; SCARD was taken before it. A difference means the set
		// changed meanwhile (or members are not fingerprints).
		if got := chk.distinct + chk.outside + st.Bad; got != st.Expected && err == nil {
			rep.Online.Note = fmt.Sprintf("SCARD said %d members before the scan, %d distinct were read: the set changed during the scan?", st.Expected, got)
		}
	}
	rep.Missing = missing.n
	secs := max(rep.Timings.Compare, 1e-9)
	rep.Timings.OnlinePerSecond = float64(rep.Online.Values) / secs
	rep.Timings.OfflinePerSecond = float64(x.Len()) / secs
	rep.Timings.KeysPerSecond = float64(max(int64(x.Len()), rep.Online.Values)) / secs
	if err != nil {
		abort()
		return err
	}
	if mw != nil {
		if _, err := mw.Commit(); err != nil {
			abort()
			return err
		}
		missingPath = mw.Name() // a group publishes it at the end: read it where it is
		mw = nil
		if o.Missing != "" {
			rep.Outputs.Missing = o.Missing
		}
	}
	if ew != nil {
		if _, err := ew.Commit(); err != nil {
			return err
		}
		ew = nil
		rep.Outputs.Extra = o.Extra
	}

	wide, known := src.Wide()
	rep.Online.Wide = wide
	if (o.Apply || o.DryRun) && missing.n > 0 {
		if !known && t.Kind != MySQL {
			return fmt.Errorf("%s is empty, so the width of its key names is unknown: add &hex=32 or &hex=64 to the URL", t.Redacted)
		}
		if wide && len(o.Records) == 0 {
			return &NeedRecordsError{Target: t.Redacted}
		}
	}

	// The records pass: backfill, and the whole digests Apply needs.
	var mx *fpstore.Index
	if missingPath != "" {
		if mx, err = fpstore.Open(missingPath); err != nil {
			return err
		}
		defer mx.Close()
	}
	var digests [][32]byte
	if len(o.Records) > 0 {
		rs := &RecordStats{Backfill: o.Backfill}
		rep.Records = rs
		var bf *atomicfile.File
		if o.Backfill != "" {
			if bf, err = atomicfile.Create(o.Backfill); err != nil {
				return err
			}
			defer bf.Abort()
		}
		var collect *[][32]byte
		if wide && (o.Apply || o.DryRun) {
			collect = &digests
		}
		err := recordsPass(ctx, o, ro, mx, bf, collect, rs)
		rep.Timings.Records = rs.Seconds
		if err != nil {
			return err
		}
		if bf != nil {
			if err := o.Group.Finish(bf); err != nil {
				return err
			}
			rep.Outputs.Backfill = o.Backfill
		}
	}

	if o.Apply || o.DryRun {
		as := &ApplyStats{DryRun: o.DryRun, Target: t.Redacted, Checkpoint: o.Checkpoint}
		rep.Apply = as
		ck := &Checkpoint{}
		if o.Checkpoint != "" {
			if ck, err = loadCheckpoint(o.Checkpoint, o.Index, x.Len(), t.Redacted); err != nil {
				return err
			}
		}
		if err := apply(ctx, o, rep, src, ck, mx, spl, wide, digests); err != nil {
			return err
		}
	}
	rep.Agree = rep.Missing == 0 && rep.Counts.OnlyOnline <= 0 && rep.Online.Bad == 0
	return nil
}

// apply writes the missing keys online (or prints them, DryRun).
func apply(ctx context.Context, o *Options, rep *Report, src Source, ck *Checkpoint, mx *fpstore.Index, spl *spool, wide bool, digests [][32]byte) error {
	t, as := o.Target, rep.Apply
	if missing := rep.Counts.OnlyOffline; missing > 0 {
		a := &applier{src: src, o: o, ck: ck, st: as, pace: newPacer(o.Rate)}
		var items func(emit func([]Item) error) error
		if wide {
			as.NotInRecords = missing - countFingerprints(digests)
			items = func(emit func([]Item) error) error {
				b := make([]Item, 0, 4096)
				for _, d := range digests {
					b = append(b, Item{FP: fpstore.FromBytes(d[:16]), Full: d, HasFull: true})
					if len(b) == cap(b) {
						if err := emit(b); err != nil {
							return err
						}
						b = b[:0]
					}
				}
				return emit(b)
			}
		} else {
			items = func(emit func([]Item) error) error {
				var cr batchReader
				if mx != nil {
					cr = newCursorReader(mx)
				} else {
					var err error
					if cr, err = spl.reader(); err != nil {
						return err
					}
				}
				b := make([]Item, 0, 8192)
				for {
					fps, err := cr.next()
					if err != nil || fps == nil {
						return err
					}
					b = b[:0]
					for _, fp := range fps {
						b = append(b, Item{FP: fp})
					}
					if err := emit(b); err != nil {
						return err
					}
				}
			}
		}
		err := a.run(ctx, items)
		rep.Timings.Apply = as.Seconds
		var ie *ApplyInterruptedError
		if errors.As(err, &ie) {
			return err
		}
		if err != nil {
			if ctx.Err() != nil {
				return interrupted(ctx, err)
			}
			return &WriteError{Target: t.Redacted, Err: err, Retries: as.Retries, MaxRetries: o.Retries, Written: as.Written,
				Checkpoint: o.Checkpoint, CheckpointLast: ck.Last}
		}
		if !o.DryRun {
			rep.Missing = missing - as.Written
		}
	}
	if !o.DryRun && o.Checkpoint != "" {
		// Done: nothing is left to resume.
		if err := os.Remove(o.Checkpoint); err == nil {
			as.CheckpointRemoved = true
		} else if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("apply done, but %w", &FileError{Op: "remove", File: CheckpointFile, Err: err})
		}
	}
	return nil
}

func countFingerprints(d [][32]byte) int64 {
	var n int64
	for i := range d {
		if i == 0 || [16]byte(d[i][:16]) != [16]byte(d[i-1][:16]) {
			n++
		}
	}
	return n
}

func open(ctx context.Context, o *Options) (Source, error) {
	switch o.Target.Kind {
	case RedisKeys, RedisSet:
		return openRedis(ctx, o.Target, o)
	case MySQL:
		return openMySQL(ctx, o.Target, o)
	case File:
		return &fileSource{t: o.Target, o: o, keys: o.OnlineFormat == "key"}, nil
	}
	return nil, fmt.Errorf("unknown online kind %v", o.Target.Kind)
}

// scrub removes the password from an error's text, keeping what errors.Is
// and errors.As see. keep (the redacted URL, which holds no password) is
// left as it is even if the password happens to occur in it.
func scrub(err error, password, keep string) error {
	if password == "" || !strings.Contains(err.Error(), password) {
		return err
	}
	const mark = "\x00url\x00"
	msg := err.Error()
	if keep != "" {
		msg = strings.ReplaceAll(msg, keep, mark)
	}
	msg = strings.ReplaceAll(msg, password, "*****")
	if keep != "" {
		msg = strings.ReplaceAll(msg, mark, keep)
	}
	return scrubbed{msg: msg, err: err}
}

type scrubbed struct {
	msg string
	err error
}

func (s scrubbed) Error() string { return s.msg }
func (s scrubbed) Unwrap() error { return s.err }

// marshal indents and keeps & < > as they are (URLs read better).
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// readMemory reads peak RSS and the current anonymous and file-backed RSS
// from /proc/self/status (Linux; zeros elsewhere).
func readMemory(budget int64) Memory {
	m := Memory{Budget: budget}
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return m
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) < 1 {
			continue
		}
		kb, _ := strconv.ParseInt(f[0], 10, 64)
		switch k {
		case "VmHWM":
			m.PeakRSS = kb << 10
		case "RssAnon":
			m.Anon = kb << 10
		case "RssFile":
			m.File = kb << 10
		}
	}
	return m
}
