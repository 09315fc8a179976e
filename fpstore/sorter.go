package fpstore

import (
	"bufio"
	"container/heap"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/fpdedup/fpdedup/internal/failpoint"
	"github.com/fpdedup/fpdedup/internal/prefetch"
	"github.com/fpdedup/fpdedup/internal/tempfile"
)

// partBits is how many leading bits partition fingerprints while they are
// collected: each partition is then sorted on its own (cache-sized, in
// parallel), and partitions come out in order. 2^10 partitions of ~10k
// fingerprints each for a 10M-key input, sorted while still in L2.
const partBits = 10

// Sorter collects fingerprints from several goroutines and gives them back
// sorted and unique. Beyond its memory budget it spills sorted runs to a
// temp directory and merges them at the end, so memory stays bounded
// whatever the input size. The result does not depend on the number of
// collectors, the budget, or the order of Adds.
type Sorter struct {
	tmpDir string
	budget int64 // bytes of fingerprints held in memory, all collectors together

	mu      sync.Mutex
	scratch *tempfile.Dir // made at the first spill: the runs live in it
	runs    []string
	nextRun int
	closed  bool
	spills  atomic.Int64
}

// NewSorter makes a sorter that holds at most budget bytes of fingerprints
// in memory and spills runs to tmpDir.
func NewSorter(tmpDir string, budget int64) *Sorter {
	return &Sorter{tmpDir: tmpDir, budget: max(budget, 1<<20)}
}

// Collector is one goroutine's share of a Sorter. Not safe for concurrent
// use; make one per goroutine.
type Collector struct {
	s     *Sorter
	parts [1 << partBits]partition
	arena *arena
}

// partition holds a partition's fingerprints in blocks carved from the
// collector's arena, never moved: growing one slice by doubling spends much
// of a build's CPU time in memmove and in clearing fresh pages.
type partition struct {
	full [][]Fingerprint
	cur  []Fingerprint
	n    int
}

// blockMax is the largest block (64 KiB). Blocks start small so that
// sparse partitions of small inputs cost little.
const blockMax = 4096

// take returns the partition's fingerprints, sorted and unique, in dst's
// array when it is large enough, and empties the partition.
func (p *partition) take(dst []Fingerprint) []Fingerprint {
	out := sortUniqueBlocks(append(p.full, p.cur), p.n, dst)
	*p = partition{}
	return out
}

// NewCollector returns a collector for one goroutine. Its arena holds its
// share of the sorter's budget.
func (s *Sorter) NewCollector(share int) (*Collector, error) {
	a, err := newArena(int(s.budget) / max(share, 1))
	if err != nil {
		return nil, fmt.Errorf("cannot reserve memory for fingerprints: %w", err)
	}
	return &Collector{s: s, arena: a}, nil
}

// Free returns the collector's memory. Its fingerprints must have been
// emitted (or are abandoned).
func (c *Collector) Free() { c.arena.free() }

func (c *Collector) add(fp Fingerprint) error {
	p := &c.parts[fp.Hi>>(64-partBits)]
	if len(p.cur) == cap(p.cur) {
		block := c.arena.alloc(min(max(2*cap(p.cur), 16), blockMax))
		if block == nil {
			if err := c.spill(); err != nil {
				return err
			}
			block = c.arena.alloc(16)
		}
		if p.cur != nil {
			p.full = append(p.full, p.cur)
		}
		p.cur = block
	}
	// Each partition's block fills a line every 4 fingerprints, and the
	// hardware cannot follow 1024 such streams: at each line's start the
	// next one (entries n+4 to n+7) is prefetched, so that the stores to
	// it find it in cache.
	if n := len(p.cur); n&3 == 0 && n+8 < cap(p.cur) {
		a := [1]uintptr{uintptr(unsafe.Pointer(&p.cur[:n+8][n+7]))}
		prefetch.Addrs(a[:])
	}
	p.cur = append(p.cur, fp)
	p.n++
	return nil
}

// Add collects fingerprints. When this collector's arena is full it spills
// its fingerprints as a sorted run.
func (c *Collector) Add(fps []Fingerprint) error {
	for _, fp := range fps {
		if err := c.add(fp); err != nil {
			return err
		}
	}
	return nil
}

// spill writes this collector's fingerprints as one sorted, unique run.
func (c *Collector) spill() error {
	// At most every fingerprint in the arena goes to disk: say so plainly
	// before starting rather than fail on ENOSPC half way.
	var st unix.Statfs_t
	if err := unix.Statfs(c.s.tmpDir, &st); err == nil {
		if free := int64(st.Bavail) * st.Bsize; free < int64(c.arena.used) {
			return &SpillSpaceError{Dir: c.s.tmpDir, Free: free, Need: int64(c.arena.used)}
		}
	}
	f, err := c.s.createRun()
	if err != nil {
		return fmt.Errorf("cannot spill a sorted run: %w", err)
	}
	bw := bufio.NewWriterSize(failpoint.Writer(f, f.Name()), 1<<20)
	var rec [16]byte
	var buf []Fingerprint
	for p := range c.parts {
		buf = c.parts[p].take(buf)
		for _, fp := range buf {
			binary.BigEndian.PutUint64(rec[0:], fp.Hi)
			binary.BigEndian.PutUint64(rec[8:], fp.Lo)
			if _, err := bw.Write(rec[:]); err != nil {
				break // bw keeps the error for Flush
			}
		}
	}
	err = bw.Flush()
	if ferr := failpoint.Hit(failpoint.Close, f.Name()); err == nil {
		err = ferr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		// Not registered: a failed run is never merged, only removed.
		os.Remove(f.Name())
		return fmt.Errorf("cannot write sorted run %s: %w", f.Name(), err)
	}
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	if c.s.closed {
		os.Remove(f.Name())
		return errors.New("sorter closed")
	}
	c.s.runs = append(c.s.runs, f.Name())
	c.arena.reset()
	c.s.spills.Add(1)
	return nil
}

// createRun makes a new run file in the sorter's scratch directory, made
// in tmpDir at the first spill.
func (s *Sorter) createRun() (*os.File, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errors.New("sorter closed")
	}
	if s.scratch == nil {
		d, err := tempfile.MkDir(s.tmpDir)
		if err != nil {
			return nil, err
		}
		s.scratch = d
	}
	name := filepath.Join(s.scratch.Path, fmt.Sprintf("run-%d", s.nextRun))
	s.nextRun++
	if err := failpoint.Hit(failpoint.Create, name); err != nil {
		return nil, err
	}
	return os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
}

// Spills is the number of runs written to disk.
func (s *Sorter) Spills() int64 { return s.spills.Load() }

// Emit gives every distinct fingerprint to fn in ascending order, in
// batches; it consumes the collectors. fn's slice is reused after it
// returns. With no spilled run, partitions are sorted in parallel by
// threads goroutines; otherwise the in-memory rest is spilled too and all
// runs are merged.
func (s *Sorter) Emit(collectors []*Collector, threads int, fn func([]Fingerprint) error) error {
	s.mu.Lock()
	spilled := len(s.runs) > 0
	s.mu.Unlock()
	if !spilled {
		return emitInMemory(collectors, max(threads, 1), fn)
	}
	for _, c := range collectors {
		if c.arena.used > 0 {
			if err := c.spill(); err != nil {
				return err
			}
		}
	}
	return s.mergeRuns(fn)
}

func emitInMemory(collectors []*Collector, threads int, fn func([]Fingerprint) error) error {
	type result struct {
		p    int
		fps  []Fingerprint
		done chan struct{}
	}
	// Partitions are sorted by a pool of workers and handed to fn in order;
	// the results channel bounds how far sorting runs ahead.
	results := make(chan *result, 2*threads)
	jobs := make(chan *result, 2*threads)
	// Sorted partitions are built in recycled arrays: fn copies what it
	// keeps before it returns.
	free := make(chan []Fingerprint, 4*threads)
	stop := make(chan struct{})
	go func() {
		defer close(results)
		defer close(jobs)
		for p := 0; p < 1<<partBits; p++ {
			r := &result{p: p, done: make(chan struct{})}
			select {
			case results <- r:
				jobs <- r
			case <-stop:
				return
			}
		}
	}()
	for w := 0; w < threads; w++ {
		go func() {
			for r := range jobs {
				var blocks [][]Fingerprint
				n := 0
				for _, c := range collectors {
					p := &c.parts[r.p]
					blocks = append(append(blocks, p.full...), p.cur)
					n += p.n
					*p = partition{}
				}
				var dst []Fingerprint
				select {
				case dst = <-free:
				default:
				}
				r.fps = sortUniqueBlocks(blocks, n, dst)
				close(r.done)
			}
		}()
	}
	var err error
	for r := range results {
		<-r.done
		if err == nil && len(r.fps) > 0 {
			if err = fn(r.fps); err != nil {
				close(stop)
			}
		}
		select {
		case free <- r.fps:
		default:
		}
	}
	return err
}

// Close removes the spilled runs. Safe to call more than once, and from a
// signal handler's goroutine while collectors are still spilling.
func (s *Sorter) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.runs = nil
	return s.scratch.Remove()
}

type runReader struct {
	r   *bufio.Reader
	f   *os.File
	cur Fingerprint
}

func (r *runReader) next() (bool, error) {
	var rec [16]byte
	if _, err := io.ReadFull(r.r, rec[:]); err != nil {
		if err == io.EOF {
			return false, nil
		}
		return false, fmt.Errorf("cannot read sorted run %s: %w", r.f.Name(), err)
	}
	r.cur = Fingerprint{binary.BigEndian.Uint64(rec[0:]), binary.BigEndian.Uint64(rec[8:])}
	return true, nil
}

type runHeap []*runReader

func (h runHeap) Len() int           { return len(h) }
func (h runHeap) Less(i, j int) bool { return h[i].cur.Less(h[j].cur) }
func (h runHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *runHeap) Push(x any)        { *h = append(*h, x.(*runReader)) }
func (h *runHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func (s *Sorter) mergeRuns(fn func([]Fingerprint) error) error {
	s.mu.Lock()
	names := append([]string(nil), s.runs...)
	s.mu.Unlock()
	h := make(runHeap, 0, len(names))
	defer func() {
		for _, r := range h {
			r.f.Close()
		}
	}()
	for _, name := range names {
		f, err := os.Open(name)
		if ferr := failpoint.Hit(failpoint.Open, name); err == nil && ferr != nil {
			f.Close()
			err = ferr
		}
		if err != nil {
			return fmt.Errorf("cannot open sorted run: %w", err)
		}
		r := &runReader{f: f, r: bufio.NewReaderSize(failpoint.Reader(f, name), 256<<10)}
		ok, err := r.next()
		if err != nil {
			f.Close()
			return err
		}
		if ok {
			h = append(h, r)
		} else {
			f.Close()
		}
	}
	heap.Init(&h)
	batch := make([]Fingerprint, 0, 8192)
	var last Fingerprint
	have := false
	for h.Len() > 0 {
		r := h[0]
		if !have || last != r.cur {
			last, have = r.cur, true
			batch = append(batch, r.cur)
			if len(batch) == cap(batch) {
				if err := fn(batch); err != nil {
					return err
				}
				batch = batch[:0]
			}
		}
		ok, err := r.next()
		if err != nil {
			return err
		}
		if ok {
			heap.Fix(&h, 0)
		} else {
			r.f.Close()
			heap.Pop(&h)
		}
	}
	if len(batch) > 0 {
		return fn(batch)
	}
	return nil
}

// sortUniqueBlocks sorts n fingerprints, given in blocks, that share their
// first partBits bits, and removes repeats. A counting pass on the next
// bits scatters them into a new array in buckets of one or two (uniform
// keys), which insertion sort finishes: much faster than a comparison sort
// (linear for uniform keys). Buckets that skewed input makes large get a
// comparison sort, so no input is quadratic.
func sortUniqueBlocks(blocks [][]Fingerprint, n int, dst []Fingerprint) []Fingerprint {
	out, _ := sortUniqueCounting(blocks, n, dst)
	return out
}

// sortUniqueCounting is sortUniqueBlocks that also returns how many
// fingerprints insertion sort moved: the part of the work that a bad
// bucketing would make quadratic (the comparison sort is pdqsort, n log n
// at worst), which a test bounds.
func sortUniqueCounting(blocks [][]Fingerprint, n int, dst []Fingerprint) ([]Fingerprint, int) {
	moves := 0
	a := dst[:0]
	if cap(a) < n {
		a = make([]Fingerprint, n, n+n/4)
	}
	a = a[:n]
	if n <= 32 {
		k := 0
		for _, b := range blocks {
			k += copy(a[k:], b)
		}
		moves += insertionSort(a)
	} else {
		radixBits := min(uint(bits.Len(uint(n))), 20)
		shift := 64 - partBits - radixBits
		mask := uint64(1)<<radixBits - 1
		ends := make([]int32, 1<<radixBits) // small: 4 bytes per key at most
		for _, b := range blocks {
			for _, fp := range b {
				ends[(fp.Hi>>shift)&mask]++
			}
		}
		var sum, widest int32
		for b, c := range ends {
			ends[b] = sum
			sum += c
			widest = max(widest, c)
		}
		for _, b := range blocks {
			for _, fp := range b {
				k := (fp.Hi >> shift) & mask
				a[ends[k]] = fp
				ends[k]++
			}
		}
		if widest <= 16 {
			// One insertion sort over the whole array, which is in order
			// but within buckets: each fingerprint moves at most 15 places,
			// and the compare across buckets, always false, is predicted,
			// where a call a bucket (most hold 0, 1 or 2) would be a
			// branch mispredicted on each bucket's size.
			moves += insertionSort(a)
		} else {
			start := 0
			for _, end := range ends {
				if bucket := a[start:end]; len(bucket) <= 16 {
					moves += insertionSort(bucket)
				} else {
					slices.SortFunc(bucket, Fingerprint.Compare)
				}
				start = int(end)
			}
		}
	}
	if n == 0 {
		return a, moves
	}
	// Repeats dropped without a branch on each (in the event streams
	// fpdedup is for, a large share of keys repeat, at random: a branch
	// would be mispredicted often): every fingerprint is written, and the end moves past it only
	// when it differs from the one before.
	prev, k := a[0], 1
	for _, fp := range a[1:] {
		a[k] = fp
		x := fp.Hi ^ prev.Hi | fp.Lo ^ prev.Lo
		k += int((x | -x) >> 63)
		prev = fp
	}
	return a[:k], moves
}

// insertionSort sorts a and returns how many elements it moved.
func insertionSort(a []Fingerprint) int {
	moves := 0
	for i := 1; i < len(a); i++ {
		v := a[i]
		j := i
		for j > 0 && v.Less(a[j-1]) {
			a[j] = a[j-1]
			j--
		}
		moves += i - j
		a[j] = v
	}
	return moves
}
