package fpstore

import (
	"errors"

	"fmt"
	flatbuffers "github.com/google/flatbuffers/go"

	"github.com/fpdedup/fpdedup/internal/atomicfile"
	"runtime"
	"sort"
	"sync"
)

// WriterOptions configure a Writer.
type WriterOptions struct {
	Spec  Spec
	Range Range // covered prefix range; zero value: everything
	// Threads is the number of segment builders, 0 for GOMAXPROCS. They
	// build while the caller fills the next segment and another goroutine
	// writes the last, in order; Threads+2 fingerprint buffers of 16 MiB
	// exist at most (Threads 1: 48 MiB, a merge's three stages on two
	// cores).
	Threads int
	// Group, if set, publishes the file with the command's other outputs at
	// its commit point: Commit then only makes it durable.
	Group *atomicfile.Group
	// Scratch writes a temporary of the run (a sorted run in a scratch
	// directory) in place: no lock, no rename, no fsync.
	Scratch bool
	// Sequential builds and writes each segment in the caller's goroutine,
	// holding one segment's fingerprints and one buffer: the least memory
	// (~36 MiB at most with the 2 MiB write buffer), for stitches and
	// temporary runs. Threads is then ignored.
	Sequential bool
}

// Writer writes a new index from fingerprints given in strictly ascending
// order. Segment boundaries depend only on the fingerprints (the trie rule
// of FORMAT.md "Segments"), and nothing else about the run reaches the file,
// so the same set gives the same bytes whatever produced it.
//
// A Writer is not safe for concurrent use. Commit publishes the file
// atomically; Abort (or any error) leaves the target untouched.
type Writer struct {
	af   *atomicfile.File
	path string
	opts WriterOptions

	pending     []Fingerprint // not yet in a segment; pending[0] starts the next one
	last        Fingerprint
	hasLast     bool
	lastEmitted Fingerprint
	emitted     bool

	futures chan *segmentFuture
	work    chan *segmentFuture
	wg      sync.WaitGroup
	written chan error

	pendings chan []Fingerprint
	fbs      chan *flatbuffers.Builder
	huge     hugeBuffers // backs pendings and fbs; freed when done

	made int             // fingerprint buffers mapped; at most cap(pendings) unless Sequential
	sb   *segmentBuilder // Sequential's

	// The first build or write error of the goroutines, seen by Add so
	// that the caller stops early rather than at Commit.
	asyncMu  sync.Mutex
	asyncErr error

	bw       *extentWriter
	off      uint64
	refs     []segmentRef
	err      error
	finished bool // Commit or Abort ran
}

type segmentFuture struct {
	node node
	fps  []Fingerprint
	base []Fingerprint // the buffer fps lies in: reused once the segment is written (its bytes are written from it)
	seg  builtSegment
	err  error
	done chan struct{}
}

// Create starts writing the index at path.
func Create(path string, opts WriterOptions) (*Writer, error) {
	if !littleEndian() {
		// Fingerprint vectors are copied from memory as they are (see
		// createFingerprintVector): on a big-endian machine the file
		// would be wrong with valid checksums.
		return nil, errors.New("fpdedup writes little-endian indexes and this machine is big-endian; refusing to write a wrong file")
	}
	if !opts.Range.Valid() {
		return nil, fmt.Errorf("invalid partition %d of 2^%d", opts.Range.Index, opts.Range.Bits)
	}
	if opts.Threads <= 0 {
		opts.Threads = runtime.GOMAXPROCS(0)
	}
	create := atomicfile.Create
	if opts.Scratch {
		create = atomicfile.CreateScratch
	}
	af, err := create(path)
	if err != nil {
		return nil, err
	}
	w := &Writer{
		af:      af,
		path:    path,
		opts:    opts,
		futures: make(chan *segmentFuture, opts.Threads+1),
		work:    make(chan *segmentFuture, opts.Threads),
		written: make(chan error, 1),
		// One spare per builder and one being filled: enough to never
		// allocate in steady state.
		pendings: make(chan []Fingerprint, opts.Threads+2),
		fbs:      make(chan *flatbuffers.Builder, opts.Threads+2),
		bw:       newExtentWriter(af),
	}
	if err := w.write(encodeHeader(header{Version: FormatVersion, PageSize: PageSize, SegmentMax: SegmentMax})); err != nil {
		af.Abort()
		return nil, err
	}
	if !opts.Sequential {
		for i := 0; i < opts.Threads; i++ {
			w.wg.Add(1)
			go w.builder()
		}
	}
	go w.writeSegments() // with Sequential it only reports nil at the end
	return w, nil
}

func (w *Writer) builder() {
	defer w.wg.Done()
	sb := segmentBuilder{fbs: w.fbs, huge: &w.huge}
	for f := range w.work {
		f.seg, f.err = sb.build(f.node, f.fps)
		close(f.done)
	}
}

// getPending returns an empty buffer of SegmentMax+1 fingerprints, reused
// when one is free (see segmentBuilder.fbs for why). Beyond cap(pendings)
// buffers it waits for the writer to hand one back: that bounds the
// memory, and the writer always does, error or not.
func (w *Writer) getPending() []Fingerprint {
	select {
	case b := <-w.pendings:
		return b
	default:
	}
	if w.opts.Sequential || w.made < cap(w.pendings) {
		w.made++
		return w.huge.fingerprints(SegmentMax + 1)
	}
	return <-w.pendings
}

func (w *Writer) setAsyncErr(err error) {
	w.asyncMu.Lock()
	defer w.asyncMu.Unlock()
	if w.asyncErr == nil {
		w.asyncErr = err
	}
}

func (w *Writer) asyncError() error {
	w.asyncMu.Lock()
	defer w.asyncMu.Unlock()
	return w.asyncErr
}

func (w *Writer) putPending(b []Fingerprint) {
	if cap(b) == SegmentMax+1 {
		select {
		case w.pendings <- b:
		default:
		}
	}
}

// writeSegments writes built segments in order, each at a page boundary.
func (w *Writer) writeSegments() {
	var err error
	for f := range w.futures {
		<-f.done
		if err == nil {
			err = f.err
		}
		if err == nil {
			err = w.writeBuilt(&f.seg)
		}
		if err != nil {
			w.setAsyncErr(err)
		}
		if f.base != nil {
			w.putPending(f.base[:0])
		}
		f.fps, f.base = nil, nil
	}
	w.written <- err
}

// writeBuilt writes a built segment at the next page boundary and hands its
// buffer back for reuse.
func (w *Writer) writeBuilt(seg *builtSegment) error {
	defer (&segmentBuilder{fbs: w.fbs}).release(seg)
	if err := w.padTo(alignUp(w.off, PageSize)); err != nil {
		return err
	}
	seg.ref.offset = w.off
	if err := w.write(seg.head); err != nil {
		return err
	}
	if err := w.write(seg.tail); err != nil {
		return err
	}
	if err := w.write(seg.crcs); err != nil {
		return err
	}
	w.refs = append(w.refs, seg.ref)
	return nil
}

// buildNow builds and writes a segment in the caller's goroutine
// (Sequential).
func (w *Writer) buildNow(n node, fps []Fingerprint) error {
	if w.sb == nil {
		w.sb = &segmentBuilder{fbs: w.fbs, huge: &w.huge}
	}
	seg, err := w.sb.build(n, fps)
	if err == nil {
		err = w.writeBuilt(&seg)
	}
	if err != nil && w.err == nil {
		w.err = err
	}
	return err
}

func (w *Writer) write(b []byte) error {
	n, err := w.bw.Write(b)
	w.off += uint64(n)
	if err != nil {
		return fmt.Errorf("cannot write %s: %w", w.af.Name(), err)
	}
	return nil
}

var zeroPage [PageSize]byte

func (w *Writer) padTo(off uint64) error {
	for w.off < off {
		if err := w.write(zeroPage[:min(off-w.off, PageSize)]); err != nil {
			return err
		}
	}
	return nil
}

// Add appends fingerprints, which must continue the strictly ascending
// sequence and lie in the covered range.
func (w *Writer) Add(fps ...Fingerprint) error {
	if w.err != nil {
		return w.err
	}
	if err := w.asyncError(); err != nil {
		w.err = err
		return err
	}
	for len(fps) > 0 {
		if w.pending == nil {
			w.pending = w.getPending()
		}
		n := min(len(fps), cap(w.pending)-len(w.pending))
		if err := w.check(fps[:n]); err != nil {
			w.err = err
			return err
		}
		w.pending = append(w.pending, fps[:n]...)
		fps = fps[n:]
		if len(w.pending) > SegmentMax {
			if w.cut(false); w.err != nil {
				return w.err
			}
		}
	}
	return nil
}

// check validates a batch: ascending after the last fingerprint, inside
// the range.
func (w *Writer) check(fps []Fingerprint) error {
	for i, fp := range fps {
		prev, has := w.last, w.hasLast
		if i > 0 {
			prev, has = fps[i-1], true
		}
		if has && !prev.Less(fp) {
			return fmt.Errorf("%w: %s after %s", ErrOrder, fp, prev)
		}
	}
	if !w.opts.Range.Whole() {
		for _, fp := range fps {
			if !w.opts.Range.Contains(fp) {
				return fmt.Errorf("%w: %s is not in partition %s", ErrOutOfRange, fp, w.opts.Range)
			}
		}
	}
	if len(fps) > 0 {
		w.last, w.hasLast = fps[len(fps)-1], true
	}
	return nil
}

// cut emits the segments that the pending fingerprints decide. The next
// segment is the shallowest trie node on pending[0]'s path that holds at
// most SegmentMax fingerprints and no fingerprint already emitted (a node
// that holds an emitted one has a child that is a smaller segment, so it
// holds more than SegmentMax). With SegmentMax+1 pending fingerprints, or
// at the end of input, every such node's count is known.
//
// It stops at the first error: a Sequential emit that fails to write
// leaves pending as it was, and cutting on would retry the same write
// forever (a spin on a full disk).
func (w *Writer) cut(eof bool) {
	for w.err == nil && (len(w.pending) > SegmentMax || (eof && len(w.pending) > 0)) {
		k0 := w.pending[0]
		for d := uint(w.opts.Range.Bits); d <= 128; d++ {
			n := nodeOf(k0, d)
			if w.emitted && n.contains(w.lastEmitted) {
				continue
			}
			cnt := sort.Search(len(w.pending), func(i int) bool { return !n.contains(w.pending[i]) })
			if cnt > SegmentMax {
				continue
			}
			w.emit(n, cnt)
			break
		}
	}
	if len(w.pending) == 0 {
		w.pending = w.pending[:0:0]
	}
}

func (w *Writer) emit(n node, cnt int) {
	seg := w.pending[:cnt:cnt]
	w.lastEmitted, w.emitted = seg[cnt-1], true
	// The builder keeps seg; later appends go to a fresh array.
	// Sized so that Add never grows it: it is cut as soon as it holds
	// SegmentMax+1, so what is left after a cut fits in a new one.
	if w.opts.Sequential {
		if w.buildNow(n, seg) == nil {
			// One buffer: what is left moves to its front.
			w.pending = w.pending[:copy(w.pending[:cap(w.pending)], w.pending[cnt:])]
		}
		return
	}
	base := w.pending
	w.pending = append(w.getPending(), base[cnt:]...)
	f := &segmentFuture{node: n, fps: seg, base: base, done: make(chan struct{})}
	w.futures <- f
	w.work <- f
}

// Commit finishes the file and publishes it (with WriterOptions.Group:
// makes it durable, for the group to publish). It returns the number of
// fingerprints written.
func (w *Writer) Commit() (uint64, error) {
	if w.finished {
		return 0, errors.New("BUG: index writer committed twice")
	}
	w.finished = true
	if w.err == nil {
		w.cut(true)
	}
	close(w.work)
	close(w.futures)
	w.wg.Wait()
	if err := <-w.written; err != nil && w.err == nil {
		w.err = err
	}
	w.pending = nil
	defer w.huge.free()
	if w.err != nil {
		w.af.Abort()
		return 0, w.err
	}
	var total uint64
	for _, r := range w.refs {
		total += r.count
	}
	foot := encodeFooter(footer{version: FormatVersion, spec: w.opts.Spec, rng: w.opts.Range, fingerprints: total, segments: w.refs})
	err := w.padTo(alignUp(w.off, 8))
	at := w.off
	if err == nil {
		err = w.write(foot)
	}
	if err == nil {
		err = w.write(encodeTrailer(trailer{FooterOffset: at, FooterLength: uint64(len(foot)), FooterCRC: crc32c(foot)}))
	}
	if err == nil {
		if err = w.bw.Flush(); err != nil {
			err = fmt.Errorf("cannot write %s: %w", w.af.Name(), err)
		}
	}
	if err != nil {
		w.af.Abort()
		return 0, err
	}
	if err := w.opts.Group.Finish(w.af); err != nil {
		return 0, err
	}
	return total, nil
}

// Name is the file being written: its temp file until it is published
// (with WriterOptions.Group, until the group commits), then the target.
func (w *Writer) Name() string {
	if w.af.Done() {
		return w.path
	}
	return w.af.Name()
}

// Size is the number of bytes written: the file's size once Commit
// succeeded.
func (w *Writer) Size() int64 { return int64(w.off) }

// Abort stops writing and removes the temp file; the target is untouched.
func (w *Writer) Abort() {
	if w.finished {
		return
	}
	w.finished = true
	if w.err == nil {
		w.err = fmt.Errorf("aborted")
	}
	w.pending = nil
	close(w.work)
	close(w.futures)
	w.wg.Wait()
	<-w.written
	w.huge.free()
	w.af.Abort()
}
