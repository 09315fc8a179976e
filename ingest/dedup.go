package ingest

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fpdedup/fpdedup/fpstore"
)

// DedupOptions configure Dedup.
type DedupOptions struct {
	Inputs         []string // none: stdin
	Term           byte     // lines: '\n' or 0 (-z)
	Hash           Hash
	Against        *fpstore.Set // keys already seen, or nil
	EmitDuplicates bool         // write the records that are not first occurrences instead
	// Record, when set, is where the fingerprints of the first occurrences
	// that are in no Against index are published as an index (only when
	// Dedup succeeds).
	Record     string
	RecordSpec fpstore.Spec
	Threads    int
	Mem        int64
	TmpDir     string
	MaxRecord  int
	Progress   *Progress
}

// DedupStats are the figures of a dedup run.
type DedupStats struct {
	Mode             string  `json:"mode"`
	Records          int64   `json:"records"`
	Emitted          int64   `json:"emitted"`
	FirstOccurrences int64   `json:"first_occurrences"`
	Duplicates       int64   `json:"duplicates"`
	InAgainst        int64   `json:"in_against"`
	Distinct         int64   `json:"distinct_in_input"`
	Bytes            int64   `json:"bytes"`
	TableBytes       int64   `json:"table_bytes"`
	Recorded         uint64  `json:"recorded,omitempty"`
	Seconds          float64 `json:"seconds"`
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
	recs   []int32 // end offset of each record in job.chunk.Data
	fps    []fpstore.Fingerprint
	state  []uint8
	err    error
	parsed chan struct{}
	marked chan struct{}
	owners atomic.Int32 // shard owners still to mark this chunk
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
	if opts.Threads <= 0 {
		opts.Threads = runtime.GOMAXPROCS(0)
	}
	if len(opts.Inputs) == 0 {
		opts.Inputs = []string{"-"}
	}
	if opts.Progress == nil {
		opts.Progress = &Progress{}
	}
	st := DedupStats{Mode: "memory"}

	var recWriter *fpstore.Writer
	var recSorter *fpstore.Sorter
	var recCollector *fpstore.Collector
	if opts.Record != "" {
		w, err := fpstore.Create(opts.Record, fpstore.WriterOptions{Spec: opts.RecordSpec, Threads: 1})
		if err != nil {
			return st, err
		}
		defer w.Abort()
		recWriter = w
		recSorter = fpstore.NewSorter(opts.TmpDir, opts.Mem/4)
		defer recSorter.Close()
		if recCollector, err = recSorter.NewCollector(1); err != nil {
			return st, err
		}
		defer recCollector.Free()
	}

	nshards := 1
	for nshards < opts.Threads {
		nshards *= 2
	}
	tableBudget := opts.Mem / 2
	shards := make([]*seenShard, nshards)
	est := estimateRecords(opts.Inputs)
	for i := range shards {
		s, err := newSeenShard(int(est/int64(nshards)), tableBudget/int64(nshards))
		if err != nil {
			return st, err
		}
		defer s.free()
		shards[i] = s
	}

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	jobs := make(chan chunkJob, opts.Threads)
	go func() {
		defer close(jobs)
		if err := readChunks(ctx, readOptions{opts.Inputs, opts.Term, opts.MaxRecord, opts.Progress}, jobs); err != nil {
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

	var wg sync.WaitGroup
	for w := 0; w < opts.Threads; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := dedupParser{opts: &opts}
			for c := range toParse {
				if ctx.Err() == nil {
					c.err = p.parse(c)
				}
				close(c.parsed)
			}
		}()
	}
	shardBits := uint(0)
	for 1<<shardBits < nshards {
		shardBits++
	}
	for i := range shards {
		wg.Add(1)
		go func(me uint64, s *seenShard, in <-chan *dedupChunk) {
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

	var err error
	var first, dups, inAgainst, emitted int64
	buf := make([]byte, 0, 1<<20)
	for c := range toWrite {
		<-c.marked
		if err == nil {
			err = c.err
		}
		if err == nil && ctx.Err() == nil {
			data := c.job.chunk.Data
			prev := int32(0)
			buf = buf[:0]
			for i, end := range c.recs {
				s := c.state[i]
				keep := s == stateNew
				switch s {
				case stateNew:
					first++
					if recCollector != nil {
						if err = recCollector.Add(c.fps[i : i+1]); err != nil {
							break
						}
					}
				case stateDup:
					dups++
				case stateAgainst:
					inAgainst++
				}
				if keep != opts.EmitDuplicates {
					buf = append(buf, data[prev:end]...)
					emitted++
				}
				prev = end
			}
			if err == nil && len(buf) > 0 {
				if _, werr := out.Write(buf); werr != nil {
					err = werr
					cancel(err)
				}
			}
		}
		c.job.rd.Release(c.job.chunk)
	}
	wg.Wait()
	if err == nil {
		err = context.Cause(ctx)
	}
	st.Records = first + dups + inAgainst
	st.FirstOccurrences, st.Duplicates, st.InAgainst, st.Emitted = first, dups, inAgainst, emitted
	st.Distinct = first
	st.Bytes = opts.Progress.RawBytes.Load()
	for _, s := range shards {
		st.TableBytes += s.bytes()
	}
	if err != nil {
		return st, err
	}
	if recWriter != nil {
		err := recSorter.Emit([]*fpstore.Collector{recCollector}, opts.Threads, func(fps []fpstore.Fingerprint) error {
			return recWriter.Add(fps...)
		})
		if err != nil {
			return st, err
		}
		if st.Recorded, err = recWriter.Commit(); err != nil {
			return st, err
		}
	}
	st.Seconds = time.Since(start).Seconds()
	return st, nil
}

// dedupParser splits and hashes chunks; one per goroutine.
type dedupParser struct {
	opts  *DedupOptions
	found []bool
	tmp   []bool
}

func (p *dedupParser) parse(c *dedupChunk) error {
	data := c.job.chunk.Data
	c.recs = c.recs[:0]
	c.fps = c.fps[:0]
	off := int32(0)
	SplitRecords(data, p.opts.Term, func(rec []byte) bool {
		off += int32(len(rec)) + 1
		c.recs = append(c.recs, off)
		c.fps = append(c.fps, p.opts.Hash.Sum(rec))
		return true
	})
	c.state = make([]uint8, len(c.recs))
	p.opts.Progress.Records.Add(int64(len(c.recs)))
	if p.opts.Against != nil {
		if cap(p.found) < len(c.fps) {
			p.found, p.tmp = make([]bool, len(c.fps)), make([]bool, len(c.fps))
		}
		found := p.found[:len(c.fps)]
		if err := p.opts.Against.ContainsBatch(c.fps, found, p.tmp[:len(c.fps)]); err != nil {
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
// fingerprints fall in shard me, in input order.
func markShard(s *seenShard, me, mask uint64, c *dedupChunk) error {
	const group = 16
	var idx [group]int
	for base := 0; base < len(c.fps); {
		n := 0
		for ; base < len(c.fps) && n < group; base++ {
			if c.fps[base].Hi&mask == me && c.state[base] == stateUnknown {
				idx[n] = base
				n++
			}
		}
		if s.needsRoom(n) {
			grown, err := s.grow()
			if err != nil {
				return err
			}
			if !grown {
				return fmt.Errorf("the distinct keys outgrew --mem (%d fingerprints in the seen-set); raise --mem", s.count)
			}
		}
		var sink uint64
		for _, i := range idx[:n] {
			sink += s.slots[s.home(c.fps[i])*slotsPerBucket].Hi
		}
		_ = sink
		for _, i := range idx[:n] {
			if s.insert(c.fps[i]) {
				c.state[i] = stateNew
			} else {
				c.state[i] = stateDup
			}
		}
	}
	return nil
}

// estimateRecords guesses the record count from the input sizes and a
// sample's average record length, to size the seen-set once; 1M when
// unknown (stdin), growing as needed.
func estimateRecords(inputs []string) int64 {
	var total int64
	for _, name := range inputs {
		st, err := os.Stat(name)
		if name == "-" || err != nil || !st.Mode().IsRegular() {
			return 1 << 20
		}
		total += st.Size()
	}
	in, err := Open(inputs[0])
	if err != nil {
		return 1 << 20
	}
	defer in.Close()
	sample := make([]byte, 1<<20)
	n, _ := io.ReadFull(in, sample)
	lines := 0
	for _, b := range sample[:n] {
		if b == '\n' {
			lines++
		}
	}
	if lines == 0 || in.Compression != CompressionNone {
		return max(total/64, 1<<20)
	}
	avg := n / lines
	return max(total/int64(max(avg, 1)), 1<<16)
}
