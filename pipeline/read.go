package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/ingest"
)

// readOptions say what readChunks reads.
type readOptions struct {
	Inputs   []string
	Records  ingest.RecordOptions
	Progress *ingest.Progress
	// Headers receives each input's header record (csv/tsv --header),
	// checked identical to the first; nil when there is none.
	Headers *Headers
	// Stdin, when set, is read instead of the process's stdin for "-";
	// Spool, when set, gets a copy of the raw bytes of "-" as they are
	// read, for a second pass over them; SpoolDir is the temporary
	// directory it is in, named by the *TmpDirError of a failed write.
	Stdin    io.Reader
	Spool    io.Writer
	SpoolDir string
	// TmpDir takes the spool of a Parquet input that is not a regular
	// file (SpoolDir when unset).
	TmpDir string
	// Rows, when set, keeps Parquet inputs open for a copy of their rows.
	Rows *parquetRows
	// ExtraKeys are Parquet columns framed after the key's (replay's time).
	ExtraKeys []string
	// Flush, when set, is called once the output of a chunk cut because
	// its input stalled (ingest.Chunk.Stalled) has been emitted: what the
	// input decided so far goes out now, as a pipe from tail -f expects.
	Flush func() error
}

// stallWait is how long a pipe or terminal may be silent before the
// records read so far are handed on: far below what a person or a
// follower of a log notices, far above the gaps of a producer that is
// merely slower than the reader (which then still fills whole chunks).
const stallWait = 10 * time.Millisecond

// flushAll flushes each of ws that buffers in the process (a
// bufio.Writer): what a stalled input decided goes out of it.
func flushAll(ws ...io.Writer) error {
	for _, w := range ws {
		if f, ok := w.(interface{ Flush() error }); ok {
			if err := f.Flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

// Headers holds the header of headed inputs: the first is kept (dedup
// writes it once); later ones must be identical.
type Headers struct {
	mu    sync.Mutex
	first []byte
	ready chan struct{}
	once  sync.Once
}

func newHeaders() *Headers { return &Headers{ready: make(chan struct{})} }

// First waits for and returns the first input's header (nil if the input
// ended before one was read).
func (h *Headers) First() []byte {
	<-h.ready
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.first
}

func (h *Headers) set(name string, hdr []byte) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.first == nil {
		h.first = append([]byte{}, hdr...)
		h.once.Do(func() { close(h.ready) })
		return nil
	}
	if !ingest.SameHeader(h.first, hdr) {
		csv := ingest.KeySpec{Format: ingest.FormatCSV}
		return fmt.Errorf("%s:1: header differs from the first input's (%q vs %q); headed inputs must share one header", name, csv.TrimEnd(hdr), csv.TrimEnd(h.first))
	}
	return nil
}

func (h *Headers) done() { h.once.Do(func() { close(h.ready) }) }

// chunkJob is one chunk of one input on its way to a worker.
type chunkJob struct {
	in     int // input index
	name   string
	rd     *ingest.ChunkReader
	chunk  *ingest.Chunk
	skip   int  // leading bytes of Data that are the header, not records
	header bool // the input has a header (record numbers exclude it)
}

// records is the job's data past its header, with the physical line and
// the record number (data records are numbered without the header) of its
// first record.
func (job chunkJob) records() (data []byte, line, recNo int64) {
	c := job.chunk
	line, recNo = c.FirstLine, c.FirstRecord
	if job.skip > 0 {
		line += int64(ingest.CountLines(c.Data[:job.skip]))
		recNo++
	}
	if job.header {
		recNo--
	}
	return c.Data[job.skip:], line, recNo
}

// readChunks opens the inputs one after another and cuts them into chunks
// at record boundaries of the format, peeling each input's header off.
func readChunks(ctx context.Context, opts readOptions, jobs chan<- chunkJob) error {
	if opts.Headers != nil {
		defer opts.Headers.done()
	}
	// A read error in the middle of a too-long record must not leave the
	// workers' Handle waiting for its last piece.
	defer opts.Records.OnBad.Overlong(nil, true)
	var total int64
	stdin := false
	for _, name := range opts.Inputs {
		if name == "-" && stdin {
			continue // read once: a second "-" finds it at its end
		}
		stdin = stdin || name == "-"
		switch size := opts.inputSize(name); {
		case size >= 0 && total >= 0:
			total += size
		case name == "-":
			total = -1
		}
	}
	opts.Progress.Total.Store(total)
	spec := opts.Records.Spec
	var before int64
	for i, name := range opts.Inputs {
		if spec.Format == ingest.FormatParquet {
			if err := readParquet(ctx, opts, i, name, jobs, &before); err != nil {
				return err
			}
			continue
		}
		in, spool, err := opts.open(name)
		if err != nil {
			return spool.failed(err)
		}
		rd := ingest.NewFormatChunkReader(in, in.Name, spec.Format, spec.Term, 1<<20, opts.Records.MaxRecord)
		rd.Overlong = opts.Records.OnBad.Overlong
		rd.Idle = func() bool { return in.Idle(stallWait) }
		first := true
		for {
			c, err := rd.Next()
			opts.Progress.RawBytes.Store(before + in.RawRead())
			if err != nil {
				var re *ingest.RecordError
				if errors.As(err, &re) && errors.Is(err, ingest.ErrRecordTooLong) && opts.Records.OnBad.Tolerates() {
					// Its bytes went to quarantine as the reader passed them.
					if err := opts.Records.OnBad.CountOverlong(re); err != nil {
						in.Close()
						return err
					}
					continue
				}
				in.Close()
				if errors.Is(err, io.EOF) {
					break
				}
				return spool.failed(err)
			}
			job := chunkJob{in: i, name: in.Name, rd: rd, chunk: c, header: spec.Header}
			if first && spec.Header {
				var hdr []byte
				ingest.SplitFormat(c.Data, spec.Format, spec.Term, func(rec []byte) bool { hdr = rec; return false })
				if err := opts.Headers.set(in.Name, hdr); err != nil {
					in.Close()
					return err
				}
				job.skip = len(hdr)
			}
			first = false
			select {
			case jobs <- job:
			case <-ctx.Done():
				in.Close()
				return nil
			}
		}
		before += in.RawRead()
	}
	return nil
}

// open opens one input; "-" is read from opts.Stdin when set (a spool of
// an earlier pass) and copied to opts.Spool when set, through the returned
// *stdinSpool (nil when there is none).
func (opts readOptions) open(name string) (*ingest.Input, *stdinSpool, error) {
	if name != "-" || opts.Stdin == nil && opts.Spool == nil {
		in, err := ingest.Open(name)
		return in, nil, err
	}
	var r io.Reader = os.Stdin
	if opts.Stdin != nil {
		r = opts.Stdin
	}
	var spool *stdinSpool
	if opts.Spool != nil {
		spool = &stdinSpool{r: r, w: opts.Spool, dir: opts.SpoolDir}
		r = spool
	}
	in, err := ingest.NewInput("-", r)
	return in, spool, err
}

// stdinSpool is io.TeeReader from stdin to its spool that keeps a failed
// write apart: ingest.Input takes whatever its reader returns for a read
// error of the input ("-: cannot read"), when the fault is the temporary
// directory's (full, read-only). readChunks returns the *TmpDirError
// instead (failed).
type stdinSpool struct {
	r   io.Reader
	w   io.Writer
	dir string
	err atomic.Pointer[TmpDirError] // the first failed write
}

func (s *stdinSpool) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if n > 0 {
		if _, werr := s.w.Write(p[:n]); werr != nil {
			te := &TmpDirError{Dir: s.dir, Err: fmt.Errorf("cannot write the spool of standard input: %w", werr)}
			s.err.CompareAndSwap(nil, te)
			return n, te
		}
	}
	return n, err
}

// failed is err, or the spool's write error when that is what stopped the
// input.
func (s *stdinSpool) failed(err error) error {
	if s != nil {
		if te := s.err.Load(); te != nil {
			return te
		}
	}
	return err
}

// recordWorker keys and fingerprints the records of chunks; one per
// goroutine (its Keyer keeps scratch space).
type recordWorker struct {
	opts    *ingest.RecordOptions
	headers *Headers
	keyer   *ingest.Keyer
}

func newRecordWorker(opts *ingest.RecordOptions, headers *Headers) *recordWorker {
	return &recordWorker{opts: opts, headers: headers}
}

// each calls fn for every record of the chunk (the raw bytes, terminator
// included, and the fingerprint of its key), in order. A bad record is an
// error naming file, line and record under --on-bad fail; otherwise it is
// counted (and quarantined) and fn is not called for it.
func (w *recordWorker) each(job chunkJob, fn func(rec []byte, fp fpstore.Fingerprint) error) error {
	return w.eachAt(job, func(rec []byte, fp fpstore.Fingerprint, _ recordPos) error { return fn(rec, fp) })
}

// recordPos is where a record is: its input (the index among the inputs),
// the physical line it starts on, and its 1-based number in that input.
type recordPos struct {
	in           int
	line, record int64
}

// order is a number that grows with the record's position in the whole
// input, the same on every pass over it.
func (p recordPos) order() uint64 { return uint64(p.in)<<40 | uint64(p.record) }

// eachAt is each, telling fn where each record is.
func (w *recordWorker) eachAt(job chunkJob, fn func(rec []byte, fp fpstore.Fingerprint, at recordPos) error) error {
	if w.keyer == nil {
		var hdr []byte
		if w.opts.Spec.Header {
			hdr = w.headers.First()
		}
		k, err := ingest.NewKeyer(w.opts.Spec, hdr)
		if err != nil {
			return ingest.InInput(err, job.name)
		}
		w.keyer = k
	}
	c := job.chunk
	data, line, recNo := job.records()
	var err error
	// A simple record is one line: no need to count (bytes.Count per
	// record showed in the pprof of a dedup).
	c.Split(data, w.opts.Spec.Format, w.opts.Spec.Term, func(rec []byte, simple bool) bool {
		first := c.FirstRecord == 1 && recNo == 1 && !job.header
		var fp fpstore.Fingerprint
		var kerr error
		if w.opts.HexInput {
			fp, kerr = fpstore.ParseHex(trimTerm(rec, w.opts.Spec.Term))
		} else {
			fp, kerr = w.keyer.Fingerprint(rec, first, simple, w.opts.Hash)
		}
		if kerr != nil {
			re := &ingest.RecordError{Name: job.name, Line: line, Record: recNo, RowGroup: c.RowGroup, Input: job.in, Err: kerr}
			if err = w.opts.OnBad.Handle(re, rec); err != nil {
				return false
			}
		} else if err = fn(rec, fp, recordPos{job.in, line, recNo}); err != nil {
			return false
		}
		if simple {
			line++
		} else {
			line += int64(ingest.CountLines(rec))
		}
		recNo++
		return true
	})
	return err
}

func trimTerm(rec []byte, term byte) []byte {
	if n := len(rec); n > 0 && rec[n-1] == term {
		return rec[:n-1]
	}
	return rec
}

// runDefaults fills what a pipeline's options leave unset: all cores,
// stdin, a progress that nobody reads.
func runDefaults(threads int, inputs []string, p *ingest.Progress) (int, []string, *ingest.Progress) {
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	if len(inputs) == 0 {
		inputs = []string{"-"}
	}
	if p == nil {
		p = &ingest.Progress{}
	}
	return threads, inputs, p
}

// eachRecordAt calls fn for every record of the chunk with its position,
// without keying or hashing it: a second pass that already knows, by
// position, what to do with each record. Records are numbered exactly as
// eachAt numbers them (bad ones included).
func eachRecordAt(job chunkJob, spec ingest.KeySpec, fn func(rec []byte, at recordPos)) {
	c := job.chunk
	data := c.Data[job.skip:]
	recNo := c.FirstRecord
	if job.skip > 0 {
		recNo++
	}
	if job.header {
		recNo--
	}
	ingest.SplitFormat(data, spec.Format, spec.Term, func(rec []byte) bool {
		fn(rec, recordPos{in: job.in, record: recNo})
		recNo++
		return true
	})
}

// containsBatch is set.ContainsBatch of chunk c's keys fps, the set told
// first what the inputs still hold (expectLookups): every command that
// looks a chunk's keys up in an index does it here.
func containsBatch(set *fpstore.Set, p *ingest.Progress, c *ingest.Chunk, fps []fpstore.Fingerprint, found []bool, l *fpstore.Lookups) error {
	expectLookups(set, p, c)
	return set.ContainsBatch(fps, found, l)
}

// expectLookups tells set, before a batch of chunk c's keys, about how
// many more keys the inputs hold than have been read: the records read so
// far per byte read (before the first batch is counted, c's per byte of
// its data: of a compressed input, per byte decompressed, so too few),
// times the bytes left (fpstore.Set.ExpectMore). A cold index
// then plans for the whole input, not batch by batch. Inputs of unknown
// size (a pipe) tell it nothing.
func expectLookups(set *fpstore.Set, p *ingest.Progress, c *ingest.Chunk) {
	if n, ok := keysLeft(p.Total.Load(), p.RawBytes.Load(), p.Records.Load(), int64(c.Records), int64(len(c.Data))); ok {
		set.ExpectMore(n)
	}
}

// keysLeft estimates the records in the total-read bytes not read yet of
// inputs of total bytes (-1: unknown), by the recs records in the read
// bytes read so far, or before any is counted by a chunk's records per
// byte.
func keysLeft(total, read, recs, chunkRecs, chunkBytes int64) (uint64, bool) {
	per := read
	if recs <= 0 {
		recs, per = chunkRecs, chunkBytes
	}
	if total <= 0 || read <= 0 || recs <= 0 || per <= 0 {
		return 0, false
	}
	return uint64(float64(recs) * float64(max(total-read, 0)) / float64(per)), true
}

// inputSize is the bytes left to read of an input that is a regular file
// (standard input too, when redirected from one, or a spool of it), -1
// for any other.
func (opts readOptions) inputSize(name string) int64 {
	if name != "-" {
		if st, err := os.Stat(name); err == nil && st.Mode().IsRegular() {
			return st.Size()
		}
		return -1
	}
	f := os.Stdin
	if opts.Stdin != nil {
		var ok bool
		if f, ok = opts.Stdin.(*os.File); !ok {
			return -1
		}
	}
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return -1
	}
	at, err := f.Seek(0, io.SeekCurrent)
	if err != nil {
		return -1
	}
	return max(st.Size()-at, 0)
}
