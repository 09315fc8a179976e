package reconcile

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sync"
	"time"
	"unsafe"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/ingest"
	"github.com/fpdedup/fpdedup/internal/atomicfile"
	"github.com/fpdedup/fpdedup/reconcile/online"
)

// recordReading resolves how Records are read (o.RecordReading against
// the index; a recipe used despite a mismatch is a warning in the report)
// and whether BackfillFormat can write them. Records are keyed and hashed
// as the index was (SHA-256 for the stores keyed by it, which the index
// must then be; any hash for a bloom's index).
func recordReading(o *Options, index string, idx fpstore.Spec, rep *Report) (ingest.RecordOptions, error) {
	req := ingest.RecipeRequest{Spec: ingest.KeySpec{Format: ingest.FormatLines, Term: '\n'}}
	if o.RecordReading != nil {
		req = *o.RecordReading
	}
	spec, warnings, err := ingest.ResolveRecipe(req, []ingest.IndexRecipe{{Path: index, Spec: idx}})
	var se *ingest.SpecError
	if errors.As(err, &se) {
		return ingest.RecordOptions{}, &OptionError{Rule: BadRecordSpec, Err: se.Err}
	}
	if err != nil {
		return ingest.RecordOptions{}, err
	}
	for _, w := range warnings {
		rep.Warnings = append(rep.Warnings, w.Error())
	}
	// Refused here, before the online side is read, not at the backfill.
	if err := o.BackfillFormat.ForRecords(spec.Format); err != nil {
		return ingest.RecordOptions{}, &OptionError{Rule: BackfillRows, Err: err}
	}
	h, err := ingest.ParseHash(idx.Hash)
	if err != nil {
		return ingest.RecordOptions{}, fmt.Errorf("%s: %w", index, err)
	}
	return ingest.RecordOptions{Spec: spec, Hash: h, MaxRecord: o.MaxRecord}, nil
}

// recordsOut is what a records pass gives, each optional: the backfill of
// the records whose key is missing online, and of those keys the whole
// SHA-256 digests or the key texts (as items to write); or every key's
// text, with its fingerprint (missing nil).
type recordsOut struct {
	missing  *fpstore.Index // the keys missing online, looked up
	backfill *atomicfile.File
	digests  *[][32]byte
	keyed    *[]online.Item
	texts    func(fps []fpstore.Fingerprint, keys [][]byte) error
	onBad    string        // the policy for records without a key (Options.BadRecords unless said)
	valued   online.Valued // makes the missing keys' values of their records' fields; nil: none
}

// recordsPass reads the Records inputs with the ingest record layer
// (format, key recipe and header as ro says, the same reading as build,
// query and dedup) and, for each record whose key's fingerprint is in
// out.missing, writes the record unchanged, terminator included, to the
// backfill output in input order, and collects its whole SHA-256 digest
// or its key text when asked to, and hands its fields to out.valued, if
// set, to make the value the key is written with; or gives every record's key to
// out.texts. With csv/tsv headers, the first input's header starts the
// backfill (once, as read), so it is read back with the same recipe;
// every input's header must be the first's.
func recordsPass(ctx context.Context, o *Options, ro ingest.RecordOptions, out recordsOut, st *RecordStats) (err error) {
	start := time.Now()
	defer func() { st.Seconds = time.Since(start).Seconds() }()
	describe(st, ro.Spec)
	bad, err := ingest.ParseOnBad(cmp.Or(out.onBad, o.BadRecords))
	if err != nil {
		return &OptionError{Rule: BadRecordsPolicy, Err: err}
	}
	bad.WritesRows(o.BackfillFormat)
	defer func() {
		st.Bad = bad.Count()
		if cerr := bad.Close(o.Group, err == nil); err == nil {
			err = cerr
		}
	}()
	bf := out.backfill
	r := &recordsReader{spec: ro.Spec, maxRecord: ro.MaxRecord, bad: bad, st: st, tmpDir: o.TmpDir,
		batch:   &recordBatch{missing: out.missing, hash: ro.Hash, digests: out.digests != nil, keepKeys: out.keyed != nil || out.texts != nil},
		collect: out.digests, keyed: out.keyed, texts: out.texts, maxDigests: o.Plan.Digests(), maxKeyBytes: o.Plan.KeyBytes()}
	if out.keyed != nil && out.missing != nil && len(*out.keyed) == 0 {
		// As many items as keys are missing, within the plan's bytes:
		// grown by appends, the slice is copied at each doubling, each
		// time into memory faulted in afresh.
		n := min(out.missing.Len(), uint64(max(r.maxKeyBytes, 0)/itemBytes))
		*out.keyed = make([]online.Item, 0, n)
	}
	if out.valued != nil {
		r.values = &recordValues{to: out.valued, spec: ro.Spec}
		r.values.spec.Keys, r.values.spec.Respelled = out.valued.ValueFields(), nil
	}
	if bf != nil {
		r.backfill = bufio.NewWriterSize(bf, 1<<20)
		if ro.Spec.Format == ingest.FormatParquet {
			r.rows = ingest.NewRowWriter(ingest.ReadBackWriter{Writer: r.backfill, Output: bf}, o.BackfillFormat)
			defer r.rows.Abort() // a failed run's copies stop; after Close, nothing
		}
	}
	for i, name := range o.Records {
		r.batch.input = i
		if err := r.readInput(ctx, name); err != nil {
			return err
		}
	}
	if r.rows != nil {
		if err := r.rows.Close(); err != nil {
			return backfillError(err)
		}
	}
	if r.collect != nil {
		*r.collect = sortUnique(*r.collect)
		st.Digests = int64(len(*r.collect))
	}
	if r.keyed != nil {
		*r.keyed = sortUniqueItems(*r.keyed)
		st.KeyTexts = int64(len(*r.keyed))
		packKeys(*r.keyed, r.maxKeyBytes)
	}
	if r.backfill != nil {
		if err := r.backfill.Flush(); err != nil {
			return &FileError{Op: "write", File: BackfillFile, Err: err}
		}
	}
	return nil
}

// describe records in st how the records are read.
func describe(st *RecordStats, spec ingest.KeySpec) {
	st.Format, st.Key, st.KeySep, st.Header = spec.Format.String(), spec.Keys, spec.Sep, spec.Header
	if st.Key == nil {
		st.Key = []string{}
	}
	if spec.Format == ingest.FormatLines {
		st.KeySep = ""
	}
}

// recordsReader is the state of the records pass across its inputs.
type recordsReader struct {
	spec       ingest.KeySpec
	maxRecord  int
	bad        *ingest.BadPolicy
	st         *RecordStats
	batch      *recordBatch
	header     []byte            // the first input's header, as read; nil before it
	backfill   *bufio.Writer     // nil: no backfill
	rows       *ingest.RowWriter // the backfill of Parquet records
	tmpDir     string
	collect    *[][32]byte // nil: no digests to collect
	maxDigests int64
	values     *recordValues // nil: no values to make
	// keyed collects the key texts of the keys missing online; texts is
	// given every record's key.
	keyed                 *[]online.Item
	keyBytes, maxKeyBytes int64
	texts                 func(fps []fpstore.Fingerprint, keys [][]byte) error
	sorts                 int // of collect or keyed, to make room (afterSlack)
}

// readInput reads one input, chunk by chunk.
func (r *recordsReader) readInput(ctx context.Context, name string) error {
	r.st.Inputs++
	if r.spec.Format == ingest.FormatParquet {
		return r.readParquet(ctx, name)
	}
	in, err := ingest.Open(name)
	if err != nil {
		return err
	}
	err = r.readChunks(ctx, in)
	if cerr := in.Close(); err == nil {
		err = cerr
	}
	return err
}

func (r *recordsReader) readChunks(ctx context.Context, in *ingest.Input) error {
	cr := ingest.NewFormatChunkReader(in, in.Name, r.spec.Format, r.spec.Term, 1<<20, r.maxRecord)
	var keyer *ingest.Keyer
	for first := true; ; first = false {
		c, err := cr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			var re *ingest.RecordError
			if errors.As(err, &re) && errors.Is(err, ingest.ErrRecordTooLong) {
				// Its bytes were never held: counted, not quarantined.
				r.st.Records++
				if herr := r.bad.Handle(re, nil); herr != nil {
					return herr
				}
				continue
			}
			return err
		}
		err = r.readChunk(c, in.Name, first, &keyer)
		cr.Release(c)
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return context.Cause(ctx)
		}
	}
}

// readChunk keys a chunk's records and keeps those whose key is missing
// online. The first chunk of an input starts with its header, if any,
// from which the keyer is made.
func (r *recordsReader) readChunk(c *ingest.Chunk, name string, first bool, keyer **ingest.Keyer) error {
	r.st.Bytes += int64(len(c.Data))
	data := c.Data
	line, recNo := c.FirstLine, c.FirstRecord
	if first {
		var hdr []byte
		if r.spec.Header {
			var err error
			if hdr, err = r.readHeader(data, name); err != nil {
				return err
			}
			data = data[len(hdr):]
			line += int64(ingest.CountLines(hdr))
		}
		var err error
		if *keyer, err = ingest.NewKeyer(r.spec, hdr); err != nil {
			return ingest.InInput(err, name)
		}
		if r.values != nil {
			if r.values.keyer, err = ingest.NewKeyer(r.values.spec, hdr); err != nil {
				return fmt.Errorf("the value's fields: %w", ingest.InInput(err, name))
			}
		}
	}
	if r.spec.Header && !first {
		recNo-- // data records are numbered without the header
	}
	if err := r.batch.run(data, r.spec, *keyer, first && !r.spec.Header, name, line, recNo, r.bad, r.st); err != nil {
		return err
	}
	if err := r.values.keep(r.batch, name); err != nil {
		return err
	}
	return r.keep()
}

// readParquet reads one Parquet input, row group by row group: its key
// columns to decide, then the rows whose keys are missing online copied to
// the backfill (a Parquet file of the first input's schema).
func (r *recordsReader) readParquet(ctx context.Context, name string) (err error) {
	f, size, err := ingest.OpenSeekable(name, nil, r.tmpDir, nil)
	var se *ingest.SpoolError
	if errors.As(err, &se) {
		return &FileError{Op: "spool standard input to", File: TempDir, Err: se.Err}
	}
	if err != nil {
		return err
	}
	defer f.Close()
	limit := 4 * int64(r.maxRecord)
	open := ingest.OpenParquet
	if r.rows != nil || r.bad.Quarantines() {
		open = ingest.OpenParquetRows // its rows are copied: counted up front
	}
	p, err := open(name, f, size, limit)
	if err != nil {
		return err
	}
	defer p.Close()
	if r.rows != nil {
		// A failed run's copies stop before f and p close, not after.
		defer func() {
			if err != nil {
				r.rows.Abort()
			}
		}()
	}
	if err := r.bad.ParquetSource(r.batch.input, p, f, size, limit); err != nil {
		return err
	}
	cols, err := p.KeyColumns(r.spec)
	if err != nil {
		return ingest.InInput(err, name)
	}
	keyer, err := ingest.NewKeyer(r.spec, nil)
	if err != nil {
		return ingest.InInput(err, name)
	}
	if r.rows != nil {
		if err := r.rows.Schema(p); err != nil {
			return err
		}
	}
	for g := range p.RowGroups() {
		err := p.Chunks(g, cols, 1<<20, func(c *ingest.Chunk) error {
			r.batch.rowGroup = c.RowGroup
			if err := r.batch.run(c.Data, r.spec, keyer, false, name, c.FirstLine, c.FirstRecord, r.bad, r.st); err != nil {
				return err
			}
			if err := r.keep(); err != nil {
				return err
			}
			if r.rows != nil && len(r.batch.hits) > 0 {
				rows := make([]int64, len(r.batch.hits))
				for i, h := range r.batch.hits {
					rows[i] = r.batch.rows[h]
				}
				if err := r.rows.Write(p, g, rows); err != nil {
					return backfillError(err)
				}
				r.st.Written += int64(len(rows))
			}
			return ctx.Err()
		})
		if err != nil {
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			return err
		}
		r.st.Bytes += p.RowGroupBytes(g)
	}
	if r.rows != nil {
		// The rows are copied from f, closed when this returns.
		if err := r.rows.Commit(); err != nil {
			return backfillError(err)
		}
	}
	return nil
}

// backfillError is a failure of the Parquet backfill's writing: a damaged
// input's row or one past the memory allowed (a *ingest.ParquetError or
// *ingest.ParquetMemError, kept as it is) or the output's.
func backfillError(err error) error {
	var pe *ingest.ParquetError
	var me *ingest.ParquetMemError
	if errors.As(err, &pe) || errors.As(err, &me) {
		return err
	}
	return &FileError{Op: "write", File: BackfillFile, Err: err}
}

// readHeader takes the header that starts data: the first input's starts
// the backfill; any other input's must be the same.
func (r *recordsReader) readHeader(data []byte, name string) ([]byte, error) {
	var hdr []byte
	ingest.SplitFormat(data, r.spec.Format, r.spec.Term, func(rec []byte) bool { hdr = rec; return false })
	if r.header == nil {
		r.header = append([]byte{}, hdr...)
		if r.backfill != nil {
			if _, err := r.backfill.Write(r.header); err != nil {
				return nil, &FileError{Op: "write", File: BackfillFile, Err: err}
			}
		}
	} else if !ingest.SameHeader(r.header, hdr) {
		return nil, fmt.Errorf("%s:1: header differs from the first input's (%q vs %q); headed inputs must share one header", name, r.spec.TrimEnd(hdr), r.spec.TrimEnd(r.header))
	}
	return hdr, nil
}

// keep writes the batch's records whose key is missing online to the
// backfill, and collects their whole digests or key texts; or gives every
// key to texts.
func (r *recordsReader) keep() error {
	p := r.batch
	if r.texts != nil {
		return r.texts(p.fps, p.kept)
	}
	for _, i := range p.hits {
		r.st.Missing++
		if r.backfill != nil && r.rows == nil {
			if _, err := r.backfill.Write(p.recs[i]); err != nil {
				return &FileError{Op: "write", File: BackfillFile, Err: err}
			}
			r.st.Written++
		}
		if r.collect != nil {
			if int64(len(*r.collect)) >= r.maxDigests {
				*r.collect = sortUnique(*r.collect)
				r.sorts++
				if fit := afterSlack(r.maxDigests); int64(len(*r.collect)) > fit {
					return &TooManyDigestsError{Max: fit}
				}
			}
			*r.collect = append(*r.collect, p.digs[i])
		}
		if r.keyed != nil {
			if r.keyBytes += int64(len(p.kept[i])) + itemBytes; r.keyBytes > r.maxKeyBytes {
				*r.keyed = sortUniqueItems(*r.keyed)
				r.sorts++
				r.keyBytes = 0
				for _, it := range *r.keyed {
					r.keyBytes += int64(len(it.Key)) + itemBytes
				}
				if fit := afterSlack(r.maxKeyBytes); r.keyBytes > fit {
					return &TooManyKeyTextsError{Max: fit}
				}
			}
			*r.keyed = append(*r.keyed, online.Item{FP: p.fps[i], Key: bytes.Clone(p.kept[i])})
		}
	}
	return nil
}

// packKeys copies the key texts of its, sorted and distinct, into one
// block in their order, when the copy fits the limit beside the texts it
// replaces, and leaves those to the collector: ten million small objects,
// scattered over the heap, cost the writes that read them in fingerprint
// order a cache miss each, and the collector's marking seconds.
func packKeys(its []online.Item, limit int64) {
	n := int64(0)
	for i := range its {
		n += int64(len(its[i].Key))
	}
	if int64(len(its))*itemBytes+2*n > limit {
		return
	}
	block := make([]byte, 0, n)
	for i := range its {
		k := len(block)
		block = append(block, its[i].Key...)
		its[i].Key = block[k:len(block):len(block)]
	}
}

// afterSlack is what may be left of a limit of n once the digests or key
// texts collected have been sorted and their repeats dropped: a sixteenth
// of it stays free, so that the next sort comes that much later. Without
// it, a collection that stayed just under its limit was sorted again at
// every key after, quadratic in a run of repeats.
func afterSlack(n int64) int64 { return n - n/16 }

// itemBytes is what an item to write takes besides its key text.
const itemBytes = int64(unsafe.Sizeof(online.Item{}))

// recordBatch keys the records of one chunk and looks their fingerprints
// up in the missing index.
type recordBatch struct {
	missing  *fpstore.Index // nil: every record is a hit
	hash     ingest.Hash    // the index's
	digests  bool           // keep whole SHA-256 digests (digs)
	keepKeys bool           // keep the key texts (kept: copies in arena)
	fps      []fpstore.Fingerprint
	digs     [][32]byte
	arena    []byte
	ends     []int
	kept     [][]byte
	recs     [][]byte // aliases the chunk: valid until it is released
	rows     []int64  // the records' numbers
	lines    []int64  // the lines they start on
	// rowGroup is the 1-based row group of a Parquet chunk, for messages.
	rowGroup int
	input    int // the input's number among the records, for a Parquet row's quarantine
	found    []bool
	hits     []int // indexes of the records whose key is missing online
}

// run keys every record of data (firstBOM: the first may start with a
// BOM to skip), a bad record going to bad; line and recNo are where data
// starts, for messages. The records it keeps alias data.
func (p *recordBatch) run(data []byte, spec ingest.KeySpec, keyer *ingest.Keyer, firstBOM bool, name string, line, recNo int64, bad *ingest.BadPolicy, st *RecordStats) error {
	p.fps, p.digs, p.recs, p.rows, p.lines, p.hits = p.fps[:0], p.digs[:0], p.recs[:0], p.rows[:0], p.lines[:0], p.hits[:0]
	p.arena, p.ends = p.arena[:0], p.ends[:0]
	oneLine := spec.Format == ingest.FormatLines && spec.Term == '\n'
	var err error
	ingest.SplitFormat(data, spec.Format, spec.Term, func(rec []byte) bool {
		st.Records++
		key, kerr := keyer.Key(rec, firstBOM && recNo == 1)
		if kerr != nil {
			if err = bad.Handle(&ingest.RecordError{Name: name, Line: line, Record: recNo, RowGroup: p.rowGroup, Input: p.input, Err: kerr}, rec); err != nil {
				return false
			}
		} else {
			if p.hash == ingest.SHA256 || p.digests {
				d := sha256.Sum256(key)
				if p.hash == ingest.SHA256 {
					p.fps = append(p.fps, fpstore.FromBytes(d[:16]))
				}
				if p.digests {
					p.digs = append(p.digs, d)
				}
			}
			if p.hash != ingest.SHA256 {
				p.fps = append(p.fps, p.hash.Sum(key))
			}
			if p.keepKeys {
				p.arena = append(p.arena, key...)
				p.ends = append(p.ends, len(p.arena))
			}
			p.recs = append(p.recs, rec)
			p.rows = append(p.rows, recNo)
			p.lines = append(p.lines, line)
		}
		if oneLine {
			line++
		} else {
			line += int64(ingest.CountLines(rec))
		}
		recNo++
		return true
	})
	if err != nil {
		return err
	}
	if p.keepKeys {
		// Sliced once the arena no longer moves.
		p.kept = p.kept[:0]
		start := 0
		for _, end := range p.ends {
			p.kept = append(p.kept, p.arena[start:end:end])
			start = end
		}
	}
	if p.missing == nil || p.missing.Len() == 0 || len(p.fps) == 0 {
		return nil
	}
	if cap(p.found) < len(p.fps) {
		p.found = make([]bool, len(p.fps))
	}
	p.found = p.found[:len(p.fps)]
	if err := p.missing.ContainsBatch(p.fps, p.found); err != nil {
		return err
	}
	for i, ok := range p.found {
		if ok {
			p.hits = append(p.hits, i)
		}
	}
	return nil
}

// sortUniqueItems sorts items by fingerprint and keeps one of each (one
// key text a fingerprint: items of one fingerprint are one key's). Not a
// stable sort: its merges by rotation move the large items O(n log² n)
// times. Fingerprints are hashes, spread evenly over their range: the
// items are split in place by their leading bits into a range per core
// (splitItems), each sorted on its own goroutine.
func sortUniqueItems(its []online.Item) []online.Item {
	parts := [][]online.Item{its}
	if len(its) >= minSortShare {
		parts = splitItems(its, 0, runtime.GOMAXPROCS(0), parts[:0])
	}
	var wg sync.WaitGroup
	for _, part := range parts {
		wg.Go(func() { slices.SortFunc(part, func(a, b online.Item) int { return a.FP.Compare(b.FP) }) })
	}
	wg.Wait()
	return slices.CompactFunc(its, func(a, b online.Item) bool { return a.FP == b.FP })
}

// minSortShare is the fewest items worth a core of their own to sort.
const minSortShare = 1 << 15

// splitItems splits its, whose fingerprints all share their first depth
// bits, in place by the next bit into up to n ranges, one after the other
// in fingerprint order, and appends them to parts.
func splitItems(its []online.Item, depth uint, n int, parts [][]online.Item) [][]online.Item {
	if n < 2 || depth == 64 || len(its) < 2*minSortShare {
		return append(parts, its)
	}
	bit := uint64(1) << (63 - depth)
	lo, hi := 0, len(its)
	for lo < hi {
		if its[lo].FP.Hi&bit == 0 {
			lo++
			continue
		}
		hi--
		its[lo], its[hi] = its[hi], its[lo]
	}
	parts = splitItems(its[:lo], depth+1, n/2, parts)
	return splitItems(its[lo:], depth+1, n-n/2, parts)
}

func sortUnique(d [][32]byte) [][32]byte {
	slices.SortFunc(d, func(a, b [32]byte) int { return bytes.Compare(a[:], b[:]) })
	return slices.Compact(d)
}

// recordValues hands the fields of the records whose keys are missing
// online to the source that makes their values of them, before any write:
// a record whose fields do not fit the value ends the run, naming it.
type recordValues struct {
	to     online.Valued
	spec   ingest.KeySpec // the records' recipe, its keys the value's fields
	keyer  *ingest.Keyer  // of the input being read (its header)
	fields [][]byte
}

// keep makes the values of the batch's hits (a nil r: none to make).
func (r *recordValues) keep(p *recordBatch, name string) error {
	if r == nil {
		return nil
	}
	for _, i := range p.hits {
		bad := func(err error) error {
			return &ingest.RecordError{Name: name, Line: p.lines[i], Record: p.rows[i], Err: fmt.Errorf("the value: %w", err)}
		}
		// The first record of an input may start with a BOM (no header:
		// records are numbered from 1 at the input's start).
		if _, err := r.keyer.Key(p.recs[i], !r.spec.Header && p.rows[i] == 1); err != nil {
			return bad(err)
		}
		r.fields = r.fields[:0]
		for j := range r.spec.Keys {
			r.fields = append(r.fields, r.keyer.Item(j))
		}
		if err := r.to.KeepValue(p.digs[i], r.fields); err != nil {
			return bad(err)
		}
	}
	return nil
}
