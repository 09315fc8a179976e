package ingest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/internal/atomicfile"
)

// RecordOptions say how records are read and keyed; build, query and
// dedup share them, so one record gives one fingerprint everywhere.
type RecordOptions struct {
	Spec      KeySpec
	Hash      Hash
	HexInput  bool // records are hex fingerprints (build --format fp, query --fp)
	OnBad     *BadPolicy
	MaxRecord int
}

// readOptions say what readChunks reads.
type readOptions struct {
	Inputs   []string
	Records  RecordOptions
	Progress *Progress
	// Headers receives each input's header record (csv/tsv --header),
	// checked identical to the first; nil when there is none.
	Headers *Headers
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
	if !bytes.Equal(bytes.TrimPrefix(trimNewline(h.first), []byte(bom)), bytes.TrimPrefix(trimNewline(hdr), []byte(bom))) {
		return fmt.Errorf("%s:1: header differs from the first input's (%q vs %q); headed inputs must share one header", name, trimNewline(hdr), trimNewline(h.first))
	}
	return nil
}

func (h *Headers) done() { h.once.Do(func() { close(h.ready) }) }

// chunkJob is one chunk of one input on its way to a worker.
type chunkJob struct {
	in     int // input index
	name   string
	rd     *ChunkReader
	chunk  *Chunk
	skip   int  // leading bytes of Data that are the header, not records
	header bool // the input has a header (record numbers exclude it)
}

// readChunks opens the inputs one after another and cuts them into chunks
// at record boundaries of the format, peeling each input's header off.
func readChunks(ctx context.Context, opts readOptions, jobs chan<- chunkJob) error {
	if opts.Headers != nil {
		defer opts.Headers.done()
	}
	// A read error in the middle of a too-long record must not leave the
	// workers' Handle waiting for its last piece.
	defer opts.Records.OnBad.quarantinePart(nil, true)
	var total int64
	for _, name := range opts.Inputs {
		if name == "-" {
			total = -1
			break
		}
		if st, err := os.Stat(name); err == nil && st.Mode().IsRegular() && total >= 0 {
			total += st.Size()
		}
	}
	opts.Progress.Total.Store(total)
	spec := opts.Records.Spec
	var before int64
	for i, name := range opts.Inputs {
		in, err := Open(name)
		if err != nil {
			return err
		}
		rd := NewFormatChunkReader(in, in.Name, spec.Format, spec.Term, 1<<20, opts.Records.MaxRecord)
		rd.Overlong = opts.Records.OnBad.quarantinePart
		first := true
		for {
			c, err := rd.Next()
			opts.Progress.RawBytes.Store(before + in.RawRead())
			if err != nil {
				var re *RecordError
				if errors.As(err, &re) && errors.Is(err, ErrRecordTooLong) && opts.Records.OnBad.tolerates() {
					// Its bytes went to quarantine as the reader passed them.
					if err := opts.Records.OnBad.countStreamed(re); err != nil {
						in.Close()
						return err
					}
					continue
				}
				in.Close()
				if errors.Is(err, io.EOF) {
					break
				}
				return err
			}
			job := chunkJob{in: i, name: in.Name, rd: rd, chunk: c, header: spec.Header}
			if first && spec.Header {
				var hdr []byte
				SplitFormat(c.Data, spec.Format, spec.Term, func(rec []byte) bool { hdr = rec; return false })
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

// recordWorker keys and fingerprints the records of chunks; one per
// goroutine (its Keyer keeps scratch space).
type recordWorker struct {
	opts    *RecordOptions
	headers *Headers
	keyer   *Keyer
}

func newRecordWorker(opts *RecordOptions, headers *Headers) *recordWorker {
	return &recordWorker{opts: opts, headers: headers}
}

// each calls fn for every record of the chunk (the raw bytes, terminator
// included, and the fingerprint of its key), in order. A bad record is an
// error naming file, line and record under --on-bad fail; otherwise it is
// counted (and quarantined) and fn is not called for it.
func (w *recordWorker) each(job chunkJob, fn func(rec []byte, fp fpstore.Fingerprint) error) error {
	if w.keyer == nil {
		var hdr []byte
		if w.opts.Spec.Header {
			hdr = w.headers.First()
		}
		k, err := NewKeyer(w.opts.Spec, hdr)
		if err != nil {
			return fmt.Errorf("%s: %w", job.name, err)
		}
		w.keyer = k
	}
	c := job.chunk
	data := c.Data[job.skip:]
	line := c.FirstLine
	recNo := c.FirstRecord
	if job.skip > 0 {
		line += int64(CountLines(c.Data[:job.skip]))
		recNo++
	}
	if job.header {
		recNo-- // data records are numbered without the header
	}
	// A newline-terminated line is one line: no need to count (bytes.Count
	// per record was 6% of a dedup's CPU time in pprof).
	oneLine := w.opts.Spec.Format == FormatLines && w.opts.Spec.Term == '\n'
	var err error
	SplitFormat(data, w.opts.Spec.Format, w.opts.Spec.Term, func(rec []byte) bool {
		first := c.FirstRecord == 1 && recNo == 1 && !job.header
		var fp fpstore.Fingerprint
		var kerr error
		if w.opts.HexInput {
			fp, kerr = fpstore.ParseHex(trimTerm(rec, w.opts.Spec.Term))
		} else {
			var key []byte
			if key, kerr = w.keyer.Key(rec, first); kerr == nil {
				fp = w.opts.Hash.Sum(key)
			}
		}
		if kerr != nil {
			re := &RecordError{Name: job.name, Line: line, Record: recNo, Err: kerr}
			if err = w.opts.OnBad.Handle(re, rec); err != nil {
				return false
			}
		} else if err = fn(rec, fp); err != nil {
			return false
		}
		if oneLine {
			line++
		} else {
			line += int64(CountLines(rec))
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

// BadPolicy is --on-bad: fail (stop at the first bad record, exit 2), skip
// (count it), or quarantine=FILE (count it and write it there verbatim).
// Safe for concurrent use.
type BadPolicy struct {
	mode string
	path string
	mu   sync.Mutex
	file *atomicfile.File
	err  error // the quarantine file's first write failure
	// streaming: a too-long record is being written in pieces
	// (quarantinePart); streamed (on mu) wakes Handle when it is whole.
	streaming bool
	streamed  sync.Cond
	n         atomic.Int64
	first     *RecordError
}

// ParseOnBad reads an --on-bad value.
func ParseOnBad(s string) (*BadPolicy, error) {
	switch {
	case s == "fail" || s == "":
		return &BadPolicy{mode: "fail"}, nil
	case s == "skip":
		return &BadPolicy{mode: "skip"}, nil
	case len(s) > len("quarantine=") && s[:len("quarantine=")] == "quarantine=":
		p := &BadPolicy{mode: "quarantine", path: s[len("quarantine="):]}
		p.streamed.L = &p.mu
		return p, nil
	}
	return nil, fmt.Errorf("--on-bad must be fail, skip or quarantine=FILE, not %q", s)
}

func (p *BadPolicy) tolerates() bool { return p != nil && p.mode != "fail" }

// Count is the number of bad records seen.
func (p *BadPolicy) Count() int64 {
	if p == nil {
		return 0
	}
	return p.n.Load()
}

// First is the first bad record's error, for the summary; nil if none.
func (p *BadPolicy) First() error {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.first == nil {
		return nil
	}
	return p.first
}

func (p *BadPolicy) count(re *RecordError, _ []byte) {
	p.n.Add(1)
	if re != nil {
		p.mu.Lock()
		if p.first == nil {
			p.first = re
		}
		p.mu.Unlock()
	}
}

// Handle applies the policy to one bad record: re under fail; else the
// record is counted and, under quarantine, written there unchanged (rec
// may be nil: a bad record with no bytes to keep).
func (p *BadPolicy) Handle(re *RecordError, rec []byte) error {
	if !p.tolerates() {
		return re
	}
	p.count(re, rec)
	if p.mode != "quarantine" {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.streaming {
		p.streamed.Wait() // a too-long record is being written: keep it whole
	}
	return p.write(rec)
}

// write appends to the quarantine file, made at the first bad record; the
// first failure sticks. Called with mu held.
func (p *BadPolicy) write(b []byte) error {
	if p.err != nil {
		return p.err
	}
	if p.file == nil {
		f, err := atomicfile.Create(p.path)
		if err != nil {
			p.err = fmt.Errorf("--on-bad quarantine: %w", err)
			return p.err
		}
		p.file = f
	}
	if _, err := p.file.Write(b); err != nil {
		p.err = fmt.Errorf("--on-bad quarantine: cannot write %s: %w", p.path, err)
	}
	return p.err
}

// quarantinePart is a ChunkReader's Overlong: under quarantine, the pieces
// of a too-long record go to the file as the reader passes them, so the
// record is kept verbatim though it was never held in memory. Other bad
// records wait (Handle) until its last piece is written.
func (p *BadPolicy) quarantinePart(part []byte, end bool) {
	if p == nil || p.mode != "quarantine" {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(part) > 0 {
		_ = p.write(part) // a failure sticks: countStreamed reports it
	}
	p.streaming = !end
	if end {
		p.streamed.Broadcast()
	}
}

// countStreamed counts a too-long record whose bytes quarantinePart took,
// and reports a failure to write them.
func (p *BadPolicy) countStreamed(re *RecordError) error {
	p.count(re, nil)
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// Quarantine is the quarantine=FILE path, "" under fail and skip.
func (p *BadPolicy) Quarantine() string {
	if p == nil {
		return ""
	}
	return p.path
}

// Close hands the quarantine file to g, to be published with the run's
// other outputs, when the run succeeded, and removes it otherwise.
func (p *BadPolicy) Close(g *atomicfile.Group, success bool) error {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.file == nil {
		return nil
	}
	f := p.file
	p.file = nil
	if !success {
		f.Abort()
		return nil
	}
	return g.Finish(f)
}

// runDefaults fills what a pipeline's options leave unset: all cores,
// stdin, a progress that nobody reads.
func runDefaults(threads int, inputs []string, p *Progress) (int, []string, *Progress) {
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	if len(inputs) == 0 {
		inputs = []string{"-"}
	}
	if p == nil {
		p = &Progress{}
	}
	return threads, inputs, p
}
