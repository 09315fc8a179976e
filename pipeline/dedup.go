package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/ingest"
	"github.com/fpdedup/fpdedup/internal/atomicfile"
	"github.com/fpdedup/fpdedup/internal/prefetch"
)

// DedupOptions configure Dedup.
type DedupOptions struct {
	Inputs         []string // none: stdin
	Records        ingest.RecordOptions
	Against        *fpstore.Set // keys already seen, or nil
	EmitDuplicates bool         // write the records that are not first occurrences instead
	// Record, when set, is where the fingerprints of the first occurrences
	// that are in no Against index are published as an index (only when
	// Dedup succeeds).
	Record     string
	RecordSpec fpstore.Spec
	// Duplicates, when set, gets the records that out does not (the
	// duplicates, or with EmitDuplicates the first occurrences), in input
	// order, a csv/tsv header first.
	Duplicates io.Writer
	// Check stops at the first record whose key was seen before (or is in
	// Against) with a *DuplicateError, writing nothing.
	Check bool
	// KeepLast keeps each key's last occurrence instead of its first, in
	// the order those last occurrences come (two passes: see tally).
	KeepLast bool
	Threads  int
	Mem      int64
	TmpDir   string
	Progress *ingest.Progress
	// Group, if set, publishes Record at the command's commit point.
	Group *atomicfile.Group
	// Stdin and Spool: see readOptions (tests, and --check's second look).
	Stdin io.Reader
	Spool io.Writer

	rows *parquetRows // Parquet inputs: their rows' copy (Dedup sets it)
}

// DedupStats are the figures of a dedup run.
type DedupStats struct {
	Mode             string `json:"mode"`
	Records          int64  `json:"records"`
	Emitted          int64  `json:"emitted"`
	FirstOccurrences int64  `json:"first_occurrences"`
	Duplicates       int64  `json:"duplicates"`
	InAgainst        int64  `json:"in_against"`
	Distinct         int64  `json:"distinct_in_input"`
	Bytes            int64  `json:"bytes"` // read from the inputs as stored (compressed); see ingest.Progress.RawBytes
	BadRecords       int64  `json:"bad_records"`
	TableBytes       int64  `json:"table_bytes"`
	// The bounded (lsm) mode's figures: runs on disk, the bloom's probes,
	// how many it answered alone (certainly new), its false positives, and
	// its measured false-positive rate next to the blocked-bloom formula's
	// at its final fill.
	Runs                 int     `json:"runs,omitempty"`
	BloomBytes           int64   `json:"bloom_bytes,omitempty"`
	FilterProbes         int64   `json:"filter_probes,omitempty"`
	FilterAnswered       int64   `json:"filter_answered_alone,omitempty"`
	FilterFalsePositives int64   `json:"filter_false_positives,omitempty"`
	FilterFPRInRun       float64 `json:"filter_fpr_in_run,omitempty"`
	FilterFPRMeasured    float64 `json:"filter_fpr_measured,omitempty"`
	FilterFPRFormula     float64 `json:"filter_fpr_formula,omitempty"`
	Recorded             uint64  `json:"recorded,omitempty"`
	Seconds              float64 `json:"seconds"`
}

// Record states within a chunk.
const (
	stateUnknown uint8 = iota
	stateNew
	stateDup
	stateAgainst // seen in an --against index
)

// dedupChunk is one chunk on its way through the pipeline: parsed and
// hashed by any worker, marked by every shard owner in input order, then
// written in input order.
type dedupChunk struct {
	job    chunkJob
	recs   [][2]int32 // start and end offsets of each good record in job.chunk.Data
	fps    []fpstore.Fingerprint
	state  []uint8
	err    error
	parsed chan struct{}
	marked chan struct{}
	owners atomic.Int32 // shard owners still to mark this chunk
	bufs   *chunkBuffers
	pos    []recordPos // where each record is: with --check and for a row copy only
}

// Dedup writes to out each record whose key was not seen earlier in the
// input nor in opts.Against, in input order, bytes unchanged (or, with
// EmitDuplicates, the others).
//
// Parsing and hashing run on all threads; the exact seen-set is sharded by
// fingerprint bits, one goroutine owning each shard, and chunks reach the
// owners in input order, so "first" is the first in the input.
func Dedup(ctx context.Context, opts DedupOptions, out io.Writer) (DedupStats, error) {
	start := time.Now()
	opts.Threads, opts.Inputs, opts.Progress = runDefaults(opts.Threads, opts.Inputs, opts.Progress)
	if opts.KeepLast {
		return dedupKeepLast(ctx, opts, out)
	}
	st := DedupStats{Mode: "memory"}

	// The tables, the blooms of the bounded mode and, with --record, its
	// sorter take their shares of the plan; the Go heap's soft limit (set
	// by the caller) its own. What does not grow with the data comes on
	// top: a run being written (~36 MiB), chunks in flight, the --record
	// writer's segment buffers (made once the tables are freed) and the
	// runtime (bench/mem.sh measures the whole).
	plan := opts.planned()
	rec, err := newRecorder(opts, plan.Sorter)
	if err != nil {
		return st, err
	}
	defer rec.close()
	shards, err := newSeenSet(opts, plan.Tables, plan.SeenBlooms)
	for _, s := range shards {
		defer s.free()
	}
	if err != nil {
		return st, err
	}

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	headers := newHeaders()
	if opts.Records.Spec.Format == ingest.FormatParquet && !opts.Check {
		// Parquet rows are copied, not their bytes: the inputs stay
		// open until the copy is done.
		opts.rows = newParquetRows(out, opts.Duplicates, opts.Records.Rows)
		defer opts.rows.close()
	}
	toWrite, wg := startDedupStages(ctx, cancel, &opts, headers, shards)
	counts, err := writeInOrder(ctx, cancel, &opts, headers, rec, toWrite, out)
	wg.Wait()
	if err == nil {
		err = context.Cause(ctx)
	}
	if err == nil && opts.rows != nil {
		err = opts.rows.finish()
	}
	st.Records = counts.first + counts.dups + counts.inAgainst
	st.FirstOccurrences, st.Duplicates, st.InAgainst, st.Emitted = counts.first, counts.dups, counts.inAgainst, counts.emitted
	st.Distinct = counts.first
	st.BadRecords = opts.Records.OnBad.Count()
	st.Bytes = opts.Progress.RawBytes.Load()
	st.addSeenSet(shards)
	if err != nil {
		return st, err
	}
	// The seen-set is done with: its memory goes back before the --record
	// writer's segment buffers (three of 16 MiB) are made, so the two never
	// add up.
	for _, s := range shards {
		s.free()
	}
	if st.Recorded, err = rec.finish(opts.Threads); err != nil {
		return st, err
	}
	st.Seconds = time.Since(start).Seconds()
	return st, nil
}

// recorder collects the fingerprints of the first occurrences for
// --record (DedupOptions.Record) and writes them as an index at the end;
// a nil recorder records nothing.
type recorder struct {
	w *fpstore.Writer
	s *fpstore.Sorter
	c *fpstore.Collector
}

func newRecorder(opts DedupOptions, budget int64) (*recorder, error) {
	if opts.Record == "" {
		return nil, nil
	}
	w, err := fpstore.Create(opts.Record, fpstore.WriterOptions{Spec: opts.RecordSpec, Threads: 1, Group: opts.Group})
	if err != nil {
		return nil, err
	}
	r := &recorder{w: w, s: fpstore.NewSorter(opts.TmpDir, budget)}
	if r.c, err = r.s.NewCollector(1); err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

func (r *recorder) add(fp []fpstore.Fingerprint) error {
	if r == nil {
		return nil
	}
	return r.c.Add(fp)
}

// finish sorts what was collected into the index (published with the
// writer's group) and returns how many fingerprints it holds.
func (r *recorder) finish(threads int) (uint64, error) {
	if r == nil {
		return 0, nil
	}
	err := r.s.Emit([]*fpstore.Collector{r.c}, threads, func(fps []fpstore.Fingerprint) error {
		return r.w.Add(fps...)
	})
	if err != nil {
		return 0, err
	}
	return r.w.Commit()
}

func (r *recorder) close() {
	if r == nil {
		return
	}
	if r.c != nil {
		r.c.Free()
	}
	r.s.Close()
	r.w.Abort()
}

// newSeenSet makes the shards of the exact seen-set, one per thread
// (rounded up to a power of two), sized from the input's estimated record
// count within the tables' share, each with its part of the blooms'
// share. The shards made are returned even on error, to be freed.
func newSeenSet(opts DedupOptions, tables, blooms int64) ([]*shardSet, error) {
	nshards := 1
	for nshards < opts.Threads {
		nshards *= 2
	}
	est, err := estimateRecords(opts.Inputs, opts.Records.Spec.Format)
	if err != nil {
		return nil, err
	}
	perShard := tables / int64(nshards)
	slots := min(est/int64(nshards), perShard/16)
	var shards []*shardSet
	for range nshards {
		t, err := newSeenShard(int(slots), perShard)
		if err != nil {
			return shards, err
		}
		shards = append(shards, &shardSet{table: t, tmpDir: opts.TmpDir, bloomMax: blooms / int64(nshards)})
	}
	return shards, nil
}

// startDedupStages starts the reader, the sequencer, the parsers (one per
// thread) and the shard owners, and returns the chunks in input order for
// the writer, and the group to wait for once they are drained.
func startDedupStages(ctx context.Context, cancel context.CancelCauseFunc, opts *DedupOptions, headers *Headers, shards []*shardSet) (<-chan *dedupChunk, *sync.WaitGroup) {
	nshards := len(shards)
	jobs := make(chan chunkJob, opts.Threads)
	go func() {
		defer close(jobs)
		if err := readChunks(ctx, readOptions{Inputs: opts.Inputs, Records: opts.Records, Progress: opts.Progress, Headers: headers, Stdin: opts.Stdin, Spool: opts.Spool, SpoolDir: opts.TmpDir, Rows: opts.rows}, jobs); err != nil {
			cancel(err)
		}
	}()

	// Sequencer: chunks in input order, to the parsers, the shard owners
	// and the writer. The buffered channels bound the chunks in flight.
	inFlight := 4 * opts.Threads
	toParse := make(chan *dedupChunk, inFlight)
	toWrite := make(chan *dedupChunk, inFlight)
	toOwners := make([]chan *dedupChunk, nshards)
	for i := range toOwners {
		toOwners[i] = make(chan *dedupChunk, inFlight)
	}
	go func() {
		defer close(toParse)
		defer close(toWrite)
		defer func() {
			for _, c := range toOwners {
				close(c)
			}
		}()
		for job := range jobs {
			c := &dedupChunk{job: job, parsed: make(chan struct{}), marked: make(chan struct{})}
			c.owners.Store(int32(nshards))
			toWrite <- c
			for _, o := range toOwners {
				o <- c
			}
			toParse <- c
		}
	}()

	wg := &sync.WaitGroup{}
	for w := 0; w < opts.Threads; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := dedupParser{opts: opts, rw: newRecordWorker(&opts.Records, headers)}
			for c := range toParse {
				if ctx.Err() == nil {
					c.err = p.parse(c)
				}
				close(c.parsed)
			}
		}()
	}
	for i := range shards {
		wg.Add(1)
		go func(me uint64, s *shardSet, in <-chan *dedupChunk) {
			defer wg.Done()
			for c := range in {
				<-c.parsed
				if c.err == nil && ctx.Err() == nil {
					if err := markShard(s, me, uint64(nshards-1), c); err != nil {
						c.err = err
					}
				}
				if c.owners.Add(-1) == 0 {
					close(c.marked)
				}
			}
		}(uint64(i), shards[i], toOwners[i])
	}
	return toWrite, wg
}

// dedupCounts are what the writer saw.
type dedupCounts struct {
	first, dups, inAgainst, emitted int64
}

// writeInOrder takes the marked chunks in input order, writes the records
// to keep (the first input's header once, first), hands the first
// occurrences to rec, and returns the counts and the first error; it
// drains every chunk whatever happens, so the stages can stop.
func writeInOrder(ctx context.Context, cancel context.CancelCauseFunc, opts *DedupOptions, headers *Headers, rec *recorder, toWrite <-chan *dedupChunk, out io.Writer) (dedupCounts, error) {
	var n dedupCounts
	var err error
	buf := make([]byte, 0, 1<<20)
	var side []byte
	wroteHeader := !opts.Records.Spec.Header
	for c := range toWrite {
		<-c.marked
		if err == nil {
			err = c.err
		}
		if err == nil && ctx.Err() == nil && opts.rows != nil {
			if err = writeRows(opts, rec, c, &n); err != nil {
				cancel(err)
			}
		} else if err == nil && ctx.Err() == nil {
			data := c.job.chunk.Data
			buf, side = buf[:0], side[:0]
			if !wroteHeader {
				// The first input's header, once, as read.
				buf = append(buf, headers.First()...)
				if opts.Duplicates != nil {
					side = append(side, headers.First()...)
				}
				wroteHeader = true
			}
		records:
			for i, r := range c.recs {
				s := c.state[i]
				keep := s == stateNew
				if opts.Check && !keep {
					err = &DuplicateError{Name: c.job.name, Line: c.pos[i].line, Record: c.pos[i].record, FP: c.fps[i], InAgainst: s == stateAgainst, Rows: c.job.chunk.RowGroup > 0}
					cancel(err)
					break records
				}
				switch s {
				case stateNew:
					n.first++
					// A failed spill (ENOSPC in --tmpdir) ends the run: the
					// next record's add must not hide it.
					if aerr := rec.add(c.fps[i : i+1]); aerr != nil {
						err = fmt.Errorf("cannot collect the first occurrences' fingerprints: %w", aerr)
						cancel(err)
						break records
					}
				case stateDup:
					n.dups++
				case stateAgainst:
					n.inAgainst++
				}
				if keep != opts.EmitDuplicates {
					buf = append(buf, data[r[0]:r[1]]...)
					n.emitted++
				} else if opts.Duplicates != nil {
					side = append(side, data[r[0]:r[1]]...)
				}
			}
			if err == nil && len(buf) > 0 {
				if _, werr := out.Write(buf); werr != nil {
					err = werr
					cancel(err)
				}
			}
			if err == nil && len(side) > 0 {
				if _, werr := opts.Duplicates.Write(side); werr != nil {
					err = werr
					cancel(err)
				}
			}
			if err == nil && c.job.chunk.Stalled {
				// The input has paused: what it decided goes out now.
				if err = flushAll(out, opts.Duplicates); err != nil {
					cancel(err)
				}
			}
		}
		c.job.rd.Release(c.job.chunk)
		recycle(c)
	}
	return n, err
}

// writeRows is writeInOrder's work for a chunk of Parquet rows: their
// numbers, kept or set aside, to the rows' copy.
func writeRows(opts *DedupOptions, rec *recorder, c *dedupChunk, n *dedupCounts) error {
	var keep, side []int64
	for i := range c.recs {
		s := c.state[i]
		switch s {
		case stateNew:
			n.first++
			if err := rec.add(c.fps[i : i+1]); err != nil {
				return fmt.Errorf("cannot collect the first occurrences' fingerprints: %w", err)
			}
		case stateDup:
			n.dups++
		case stateAgainst:
			n.inAgainst++
		}
		if (s == stateNew) != opts.EmitDuplicates {
			keep = append(keep, c.pos[i].record)
			n.emitted++
		} else if opts.Duplicates != nil {
			side = append(side, c.pos[i].record)
		}
	}
	return opts.rows.write(c.job.chunk, keep, side)
}

// addSeenSet adds the seen-set's figures: its memory and, in the bounded
// mode, its runs and its blooms' probes and false positives, measured and
// by the formula at their final fill.
func (st *DedupStats) addSeenSet(shards []*shardSet) {
	var keys, blocks int
	for _, s := range shards {
		st.TableBytes += s.table.bytes()
		if s.bloom != nil {
			st.Mode = "lsm"
			st.Runs += len(s.runs)
			st.FilterProbes += s.probes
			st.FilterAnswered += s.rejected
			st.FilterFalsePositives += s.falsePos
			st.BloomBytes += int64(len(s.bloom.mem))
			keys += s.bloom.keys
			blocks += len(s.bloom.blocks)
		}
	}
	if st.Mode == "lsm" {
		if newKeys := st.FilterAnswered + st.FilterFalsePositives; newKeys > 0 {
			st.FilterFPRInRun = float64(st.FilterFalsePositives) / float64(newKeys)
		}
		// The formula is for the final fill, so the measurement is too:
		// random fingerprints (absent but with chance 2^-128) probed
		// against the final blooms, from a fixed seed.
		st.FilterFPRFormula = fpstore.BloomFPR(keys, blocks)
		st.FilterFPRMeasured = measureBloomFPR(shards, uint64(len(shards)-1), fprProbes)
	}
}

// chunkBuffers are a chunk's per-record arrays, recycled once the chunk is
// written: allocating them per chunk makes GC and its preemptions a large
// share of a dedup's CPU time (pprof: runtime.asyncPreempt).
type chunkBuffers struct {
	recs  [][2]int32
	fps   []fpstore.Fingerprint
	state []uint8
	pos   []recordPos // only with Check or a row copy
}

var chunkBufferPool = sync.Pool{New: func() any { return new(chunkBuffers) }}

func (c *dedupChunk) takeBuffers(n int, withPos bool) {
	b := chunkBufferPool.Get().(*chunkBuffers)
	if cap(b.recs) < n {
		b.recs = make([][2]int32, 0, n+n/8)
		b.fps = make([]fpstore.Fingerprint, 0, n+n/8)
		b.state = make([]uint8, 0, n+n/8)
	}
	if withPos && cap(b.pos) < n {
		b.pos = make([]recordPos, 0, n+n/8)
	}
	c.recs, c.fps = b.recs[:0], b.fps[:0]
	c.state, c.pos = b.state[:0], b.pos[:0]
	c.bufs = b
}

func recycle(c *dedupChunk) {
	if b := c.bufs; b != nil {
		// Appends may have grown them: keep what they are now.
		b.recs, b.fps, b.state, b.pos = c.recs[:0], c.fps[:0], c.state[:0], c.pos[:0]
		clear(b.state[:cap(b.state)])
		chunkBufferPool.Put(b)
		c.bufs = nil
	}
}

// dedupParser keys and hashes chunks; one per goroutine.
type dedupParser struct {
	opts  *DedupOptions
	rw    *recordWorker
	found []bool
	look  fpstore.Lookups
}

func (p *dedupParser) parse(c *dedupChunk) error {
	data := c.job.chunk.Data
	n := c.job.chunk.Records
	withPos := p.opts.Check || p.opts.rows != nil // where the record is: messages, and the row a copy reads
	c.takeBuffers(n, withPos)
	err := p.rw.eachAt(c.job, func(rec []byte, fp fpstore.Fingerprint, at recordPos) error {
		start := int32(cap(data) - cap(rec)) // rec is a slice of data
		c.recs = append(c.recs, [2]int32{start, start + int32(len(rec))})
		c.fps = append(c.fps, fp)
		if withPos {
			c.pos = append(c.pos, at)
		}
		return nil
	})
	if err != nil {
		return err
	}
	c.state = c.state[:len(c.recs)]
	p.opts.Progress.Records.Add(int64(len(c.recs)))
	if p.opts.Against != nil {
		if cap(p.found) < len(c.fps) {
			p.found = make([]bool, len(c.fps))
		}
		found := p.found[:len(c.fps)]
		if err := containsBatch(p.opts.Against, p.opts.Progress, c.job.chunk, c.fps, found, &p.look); err != nil {
			return err
		}
		for i, f := range found {
			if f {
				c.state[i] = stateAgainst
			}
		}
	}
	return nil
}

// markShard decides new or duplicate for the records of c whose
// fingerprints fall in shard me, in input order, a group at a time. In
// memory mode the next group's home buckets are prefetched while this
// group is decided, so that their misses overlap with each other and with
// the probes.
func markShard(l *shardSet, me, mask uint64, c *dedupChunk) error {
	var idx [2][markGroup]int
	var addrs [markGroup]uintptr
	base := 0
	// collect fills buf with the indexes of the next group's records.
	collect := func(buf *[markGroup]int) int {
		n := 0
		for ; base < len(c.fps) && n < markGroup; base++ {
			if c.fps[base].Hi&mask == me && c.state[base] == stateUnknown {
				buf[n] = base
				n++
			}
		}
		if l.bloom == nil {
			s := l.table
			for j, i := range buf[:n] {
				addrs[j] = uintptr(unsafe.Pointer(&s.slots[s.home(c.fps[i])*slotsPerBucket]))
			}
			prefetch.Addrs(addrs[:n])
		}
		return n
	}
	cur := 0
	for n := collect(&idx[cur]); n > 0; {
		g := idx[cur][:n]
		cur ^= 1
		next := collect(&idx[cur])
		if s := l.table; l.bloom == nil && !s.needsRoom(n) {
			for _, i := range g {
				c.state[i] = stateDup
				if s.insert(c.fps[i]) {
					c.state[i] = stateNew
				}
			}
		} else {
			for _, i := range g {
				isNew, err := l.insert(c.fps[i])
				if err != nil {
					return err
				}
				c.state[i] = stateDup
				if isNew {
					c.state[i] = stateNew
				}
			}
		}
		n = next
	}
	return nil
}

// markGroup is how many records markShard prefetches ahead.
const markGroup = 16

// estimateRecords guesses the record count from the input sizes and a
// sample's average record length, to size the seen-set once; 1M when
// unknown (stdin), growing as needed. A first input that cannot be opened
// or read is the run's error now: reading it again later would fail too.
func estimateRecords(inputs []string, f ingest.Format) (int64, error) {
	if f == ingest.FormatParquet {
		return estimateRows(inputs), nil
	}
	var total int64
	for _, name := range inputs {
		st, err := os.Stat(name)
		if name == "-" || err != nil || !st.Mode().IsRegular() {
			return 1 << 20, nil
		}
		total += st.Size()
	}
	in, err := ingest.Open(inputs[0])
	if err != nil {
		return 0, err
	}
	defer in.Close()
	sample := make([]byte, 1<<20)
	n, err := io.ReadFull(in, sample)
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		return 0, err
	}
	lines := 0
	for _, b := range sample[:n] {
		if b == '\n' {
			lines++
		}
	}
	if lines == 0 || in.Compression != ingest.CompressionNone {
		return max(total/64, 1<<20), nil
	}
	avg := n / lines
	return max(total/int64(max(avg, 1)), 1<<16), nil
}

// fprProbes is how many random probes measure the blooms' final
// false-positive rate: enough for ±3% at 0.5%.
const fprProbes = 1 << 20

func measureBloomFPR(shards []*shardSet, mask uint64, probes int) float64 {
	r := rand.New(rand.NewPCG(0x626c6f6f6d, 0x66707221))
	pass, n := 0, 0
	for i := 0; i < probes; i++ {
		fp := fpstore.Fingerprint{Hi: r.Uint64(), Lo: r.Uint64()}
		s := shards[fp.Hi&mask]
		if s.bloom == nil {
			continue
		}
		n++
		if s.bloom.mayContain(fp) {
			pass++
		}
	}
	if n == 0 {
		return 0
	}
	return float64(pass) / float64(n)
}

// FindFirst fills in where a --check's repeated key first occurred: it
// reads the inputs again (stdin from its spool, opts.Stdin) up to the first
// record with that key. Only what came before the repeat is read.
func FindFirst(ctx context.Context, opts DedupOptions, dup *DuplicateError) error {
	if dup.InAgainst {
		return nil
	}
	opts.Threads, opts.Inputs, opts.Progress = runDefaults(1, opts.Inputs, &ingest.Progress{})
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	ro := readOptions{Inputs: opts.Inputs, Records: opts.Records, Progress: opts.Progress, Headers: newHeaders(), Stdin: opts.Stdin}
	ro.Records.OnBad, _ = ingest.ParseOnBad("skip") // counted on the first pass
	jobs := make(chan chunkJob, 1)
	go func() {
		defer close(jobs)
		if err := readChunks(ctx, ro, jobs); err != nil {
			cancel(err)
		}
	}()
	w := newRecordWorker(&ro.Records, ro.Headers)
	errFound := errors.New("found")
	for job := range jobs {
		if ctx.Err() == nil {
			err := w.eachAt(job, func(_ []byte, fp fpstore.Fingerprint, at recordPos) error {
				if fp != dup.FP {
					return nil
				}
				dup.FirstName, dup.FirstLine = job.name, at.line
				return errFound
			})
			if err != nil {
				cancel(err)
			}
		}
		job.rd.Release(job.chunk)
	}
	if err := context.Cause(ctx); err != nil && !errors.Is(err, errFound) {
		return err
	}
	return nil
}
