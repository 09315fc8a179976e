package rbloom

import (
	"fmt"
	"iter"
	"math/bits"
	"runtime"
	"sort"
	"sync"
	"unsafe"

	"github.com/fpdedup/fpdedup/internal/prefetch"
)

// A dump's data is every sub-filter's bit array, one after the other: byte
// g of it is byte g-start(k) of sub-filter k. BF.SCANDUMP key I (I >= 1)
// answers the bytes from g = I-1 to the end of their sub-filter or MaxChunk
// of them, whichever is less, with the iterator I+len to ask next; past the
// end it answers (0, ""). Any I may be asked, which is what lets a filter
// larger than memory be read in passes, each from its own first byte.

// offsets are the sub-filters' first bytes in the dump, and the total last.
func (h *Header) offsets() []uint64 {
	o := make([]uint64, len(h.Links)+1)
	for i := range h.Links {
		o[i+1] = o[i] + h.Links[i].Bytes
	}
	return o
}

// Piece is the part of one chunk that falls in a read's range: bytes Off …
// Off+len(Data)-1 of sub-filter Link.
type Piece struct {
	Link int
	Off  uint64
	Data []byte
}

// Reader checks the chunks of one read of a dump, the bytes [from, to) of
// its data, as they come: each must start where the last ended and stay
// within its sub-filter, and the end must come where the header says. A
// Reader allocates nothing the chunks ask for. Not safe for concurrent use.
type Reader struct {
	h        *Header
	off      []uint64
	pos, to  uint64
	link     int
	finished bool
}

// NewReader reads the dump's bytes [from, to); to <= h.Bytes().
func (h *Header) NewReader(from, to uint64) (*Reader, error) {
	off := h.offsets()
	total := off[len(off)-1]
	if from > to || to > total {
		return nil, fmt.Errorf("%w: bytes %d to %d of a dump of %d", ErrIterator, from, to, total)
	}
	r := &Reader{h: h, off: off, pos: from, to: to}
	r.link = sort.Search(len(h.Links), func(i int) bool { return off[i+1] > from })
	return r, nil
}

// Iter is the iterator to pass to the next BF.SCANDUMP.
func (r *Reader) Iter() int64 { return int64(r.pos) + 1 }

// Done reports whether every byte of the range has been read.
func (r *Reader) Done() bool { return r.pos == r.to }

// Next takes one BF.SCANDUMP answer after the header, the iterator it gave
// and its data, and returns the part of it within the range (all of it but
// for a read that stops inside a chunk). An answer of iterator 0 is the
// end: right only once every byte of the dump has been read, which a
// caller that wants the end confirmed asks for after Done.
func (r *Reader) Next(iter int64, data []byte) (Piece, error) {
	total := r.off[len(r.off)-1]
	if r.finished {
		return Piece{}, fmt.Errorf("%w: an answer after the end", ErrDumpLong)
	}
	if iter == 0 {
		if len(data) != 0 {
			return Piece{}, fmt.Errorf("%w: iterator 0 with %d bytes", ErrIterator, len(data))
		}
		if r.pos != total {
			return Piece{}, fmt.Errorf("%w: the end after %d bytes of %d", ErrDumpShort, r.pos, total)
		}
		r.finished = true
		return Piece{Link: len(r.h.Links)}, nil
	}
	if len(data) == 0 || len(data) > MaxChunk {
		return Piece{}, fmt.Errorf("%w: %d bytes at iterator %d", ErrChunkSize, len(data), iter)
	}
	if iter < 0 || uint64(iter)-1 < uint64(len(data)) {
		return Piece{}, fmt.Errorf("%w: iterator %d for %d bytes", ErrIterator, iter, len(data))
	}
	start := uint64(iter) - 1 - uint64(len(data))
	switch {
	case start < r.pos:
		return Piece{}, fmt.Errorf("%w: bytes %d to %d after %d were read", ErrChunkBackwards, start, start+uint64(len(data)), r.pos)
	case r.pos == total:
		return Piece{}, fmt.Errorf("%w: bytes %d to %d past its %d", ErrDumpLong, start, start+uint64(len(data)), total)
	case start > r.pos:
		return Piece{}, fmt.Errorf("%w: bytes %d to %d after %d were read", ErrChunkGap, start, start+uint64(len(data)), r.pos)
	case r.pos == r.to:
		return Piece{}, fmt.Errorf("%w: byte %d is past the read's range", ErrIterator, start)
	}
	end := start + uint64(len(data))
	if lend := r.off[r.link+1]; end > lend {
		return Piece{}, fmt.Errorf("%w: bytes %d to %d, sub-filter %d ends at %d", ErrChunkCrosses, start, end, r.link, lend)
	}
	n := min(end, r.to) - start
	p := Piece{Link: r.link, Off: start - r.off[r.link], Data: data[:n]}
	r.pos += n
	if r.pos == r.off[r.link+1] {
		r.link++
	}
	return p, nil
}

// Pass is a range of a dump's data, [From, To), small enough to hold.
type Pass struct{ From, To uint64 }

// Plan splits a dump into passes of at most budget bytes each (at least
// one byte), in order. A pass ends on the module's chunk grid (a
// sub-filter's start, or a multiple of MaxChunk into one) whenever the
// budget holds a whole chunk, so that every chunk read is read once. The
// passes are made as they are asked for: a header's claim of many costs
// nothing until they are read.
func (h *Header) Plan(budget int64) iter.Seq[Pass] {
	size := uint64(max(budget, 1))
	off := h.offsets()
	total := off[len(off)-1]
	return func(yield func(Pass) bool) {
		k := 0 // the sub-filter that holds byte `to`
		for from := uint64(0); from < total; {
			to := total
			if total-from > size {
				to = from + size
				for off[k+1] <= to {
					k++
				}
				if g := off[k] + (to-off[k])/MaxChunk*MaxChunk; g > from {
					to = g
				}
			}
			if !yield(Pass{from, to}) {
				return
			}
			from = to
		}
	}
}

// span is a part of one sub-filter held in memory: its bytes Off …
// Off+len(data)-1.
type span struct {
	link         int
	probe        probe
	off          uint64
	data         []byte
	starts, ends bool // holds the sub-filter's first byte, its last
}

// all reports whether every bit of h that falls in the span is set.
func (s *span) all(h Hash) bool {
	if s.starts && s.ends {
		return s.probe.all(s.data, h)
	}
	lo, hi := s.off, s.off+uint64(len(s.data))
	for i := range s.probe.hashes {
		p := s.probe.mod.Of(h.A + uint64(i)*h.B)
		if b := p >> 3; b >= lo && b < hi && s.data[b-lo]&(1<<(p&7)) == 0 {
			return false
		}
	}
	return true
}

// all reports whether every bit of h is set in a whole sub-filter's bytes,
// as BF.EXISTS tests it.
func (p probe) all(b []byte, h Hash) bool { return p.some(b, h, 0, p.hashes) }

// some reports whether bits from … to-1 of h (to at most p.hashes) are
// all set in b.
func (p probe) some(b []byte, h Hash, from, to uint32) bool {
	for i := from; i < min(to, p.hashes); i++ {
		if !isSet(b, p.mod.Of(h.A+uint64(i)*h.B)) {
			return false
		}
	}
	return true
}

// Window is one pass of an evaluation: the bytes of a Pass, filled from
// the dump's chunks, against which items are tested. Not safe for
// concurrent loading; once Done, Mark may be called from several
// goroutines for different keys only if they do not share a word of Marks
// (64 keys).
type Window struct {
	h     *Header
	r     *Reader
	pass  Pass
	buf   []byte
	spans []span
}

// Window prepares pass p in buf, which holds at least p.To-p.From bytes
// and is the only memory the pass's data takes.
func (h *Header) Window(p Pass, buf []byte) (*Window, error) {
	r, err := h.NewReader(p.From, p.To)
	if err != nil {
		return nil, err
	}
	if uint64(len(buf)) < p.To-p.From {
		return nil, fmt.Errorf("%w: a pass of %d bytes in a buffer of %d", ErrBudget, p.To-p.From, len(buf))
	}
	w := &Window{h: h, r: r, pass: p, buf: buf[:p.To-p.From]}
	for k := r.link; k < len(h.Links) && r.off[k] < p.To; k++ {
		lo, hi := max(r.off[k], p.From), min(r.off[k+1], p.To)
		w.spans = append(w.spans, span{
			link: k, probe: h.Links[k].probe(), off: lo - r.off[k],
			data:   w.buf[lo-p.From : hi-p.From],
			starts: lo == r.off[k], ends: hi == r.off[k+1],
		})
	}
	return w, nil
}

// Pass is the pass the window holds.
func (w *Window) Pass() Pass { return w.pass }

// Iter is the iterator to pass to the next BF.SCANDUMP.
func (w *Window) Iter() int64 { return w.r.Iter() }

// Done reports whether the pass's bytes are all loaded.
func (w *Window) Done() bool { return w.r.Done() }

// Load takes one BF.SCANDUMP answer (the iterator it gave and its data)
// and copies the part of it in the pass.
func (w *Window) Load(iter int64, data []byte) error {
	p, err := w.r.Next(iter, data)
	if err != nil {
		return err
	}
	if len(p.Data) > 0 {
		copy(w.buf[w.r.off[p.Link]+p.Off-w.pass.From:], p.Data)
	}
	return nil
}

// Marks is what an evaluation in passes remembers of each of n keys: a
// bit for "present: all its bits are set in a sub-filter tested whole", and
// a bit for "all its bits seen so far are set" in the one sub-filter split
// between this pass and the next. Keys are numbered 0 … n-1 and each pass
// must see them under the same numbers.
type Marks struct {
	found, alive []uint64
	n            int
}

// NewMarks is the marks of n keys: n/4 bytes.
func NewMarks(n int) *Marks {
	w := (n + 63) / 64
	return &Marks{found: make([]uint64, w), alive: make([]uint64, w), n: n}
}

// Present reports whether key i is in the filter: after the last pass,
// exactly BF.EXISTS's answer.
func (m *Marks) Present(i int) bool { return m.found[i>>6]&(1<<(i&63)) != 0 }

// Len is the number of keys.
func (m *Marks) Len() int { return m.n }

// Found is the bits of the keys present so far, key i at bit i%64 of
// word i/64; valid until m is marked again.
func (m *Marks) Found() []uint64 { return m.found }

// Count is the number of keys present.
func (m *Marks) Count() int {
	c := 0
	for _, x := range m.found {
		c += bits.OnesCount64(x)
	}
	return c
}

// MarksBytes is the memory NewMarks(n) takes.
func MarksBytes(n int) int64 { return int64((n+63)/64) * 16 }

func (m *Marks) set(v []uint64, i int, on bool) {
	if on {
		v[i>>6] |= 1 << (i & 63)
	} else {
		v[i>>6] &^= 1 << (i & 63)
	}
}

func (m *Marks) get(v []uint64, i int) bool { return v[i>>6]&(1<<(i&63)) != 0 }

// Mark tests key i, the item given, against the pass and records it in m.
func (w *Window) Mark(m *Marks, i int, item []byte) {
	if m.Present(i) {
		return
	}
	w.MarkHash(m, i, w.h.Hash(item))
}

// MarkHash is Mark for an item whose hash the caller has.
func (w *Window) MarkHash(m *Marks, i int, h Hash) {
	if m.Present(i) || w.markParts(m, i, h) {
		return
	}
	// The newest sub-filters first, as the module tests them: they are
	// the largest and hold most of the items.
	for k := len(w.spans) - 1; k >= 0; k-- {
		if s := &w.spans[k]; s.starts && s.ends && s.probe.all(s.data, h) {
			m.set(m.found, i, true)
			return
		}
	}
}

// markParts tests key i in the spans that hold part of a sub-filter: the
// rest of one split from the last pass (the key is in it if all its bits
// there were set, and all here are) and one the next pass goes on with
// (m keeps whether all its bits here are set). It reports whether the
// key is found.
func (w *Window) markParts(m *Marks, i int, h Hash) bool {
	spans := w.spans
	if len(spans) > 0 && !spans[0].starts {
		s := &spans[0]
		ok := m.get(m.alive, i) && s.all(h)
		if !s.ends {
			m.set(m.alive, i, ok)
			return false
		}
		if ok {
			m.set(m.found, i, true)
			return true
		}
		spans = spans[1:]
	}
	if len(spans) > 0 && !spans[len(spans)-1].ends {
		m.set(m.alive, i, spans[len(spans)-1].all(h))
	}
	return false
}

// MarkAll is MarkHash of keys first, first+1, … (their hashes in order),
// over the machine's cores: a key's test is a few cache misses in a
// filter far larger than the cache, so the keys are shared among
// goroutines, each its own words of m (first a multiple of 64; from any
// other key, one goroutine tests them all).
func (w *Window) MarkAll(m *Marks, first int, hashes []Hash) {
	w.markShared(m, first, len(hashes), func(from, to int) {
		w.markRange(m, first, hashes, from, to)
	})
}

// MarkItems is Mark of keys first, first+1, … (their items in order),
// shared among goroutines as MarkAll shares them: each hashes its own
// keys (those m has found already need no hash) into hashes, which holds
// len(items).
func (w *Window) MarkItems(m *Marks, first int, items [][]byte, hashes []Hash) {
	hashes = hashes[:len(items)]
	w.markShared(m, first, len(items), func(from, to int) {
		for i := from; i < to; i++ {
			if !m.Present(first + i) {
				hashes[i] = w.h.Hash(items[i])
			}
		}
		w.markRange(m, first, hashes, from, to)
	})
}

// markShared runs mark over keys 0 … n-1 (first, first+1, … in m), in
// ranges of whole words of m, one a goroutine, when there are enough keys
// to be worth one.
func (w *Window) markShared(m *Marks, first, n int, mark func(from, to int)) {
	const minShare = 4096
	parts := min(runtime.GOMAXPROCS(0), n/minShare)
	if parts <= 1 || first&63 != 0 {
		parts = 1
	}
	words := (n + 63) / 64
	share := func(p int) {
		mark(min(words*p/parts*64, n), min(words*(p+1)/parts*64, n))
	}
	var wg sync.WaitGroup
	for p := 1; p < parts; p++ {
		wg.Go(func() { share(p) })
	}
	share(0)
	wg.Wait()
}

// markRange is MarkHash of keys first+from … first+to-1, a group at a
// time and a sub-filter at a time, newest first. A key's test stops at its
// first bit not set, and in a sub-filter that does not hold the key that
// is most often its first or second bit: the group's first two bits there
// are asked for (prefetch), then tested, then the other bits of the keys
// that passed, so that the group's misses overlap where one key's tests
// would wait for them one by one, and no line is asked for that a test
// would not read.
func (w *Window) markRange(m *Marks, first int, hashes []Hash, from, to int) {
	var lines [markGroup * maxPrefetched]uintptr
	var live, next [markGroup]int
	parts := len(w.spans) > 0 && (!w.spans[0].starts || !w.spans[len(w.spans)-1].ends)
	for i := from; i < to; i += markGroup {
		n := 0
		for j := i; j < min(i+markGroup, to); j++ {
			if !m.Present(first+j) && !(parts && w.markParts(m, first+j, hashes[j])) {
				live[n] = j
				n++
			}
		}
		for k := len(w.spans) - 1; k >= 0 && n > 0; k-- {
			s := &w.spans[k]
			if !s.starts || !s.ends {
				continue
			}
			const early = 2 // the bits asked for first
			s.prefetch(hashes, live[:n], 0, early, lines[:0])
			left, passed := 0, 0
			for _, j := range live[:n] {
				if s.probe.some(s.data, hashes[j], 0, early) {
					next[passed] = j
					passed++
				} else {
					live[left] = j
					left++
				}
			}
			s.prefetch(hashes, next[:passed], early, maxPrefetched, lines[:0])
			for _, j := range next[:passed] {
				if s.probe.some(s.data, hashes[j], early, s.probe.hashes) {
					m.set(m.found, first+j, true)
				} else {
					live[left] = j
					left++
				}
			}
			n = left
		}
	}
}

// markGroup is how many keys' bits markRange asks the CPU for before it
// tests them: about the misses its buffers keep in flight.
const markGroup = 16

// maxPrefetched is the most bits of a key asked for ahead.
const maxPrefetched = 8

// prefetch asks for the cache lines of the whole sub-filter s that bits
// from … to-1 of keys live (their hashes in hashes) fall in.
func (s *span) prefetch(hashes []Hash, live []int, from, to uint32, lines []uintptr) {
	to = min(to, s.probe.hashes)
	if len(s.data) == 0 || from >= to {
		return
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(s.data)))
	for _, i := range live {
		h := hashes[i]
		for j := from; j < to; j++ {
			if b := s.probe.mod.Of(h.A+uint64(j)*h.B) >> 3; b < uint64(len(s.data)) {
				lines = append(lines, base+uintptr(b))
			}
		}
	}
	prefetch.Addrs(lines)
}

// Fill adds the bits set in the pass to fill, by sub-filter (len(fill) is
// the number of sub-filters): after every pass, each sub-filter's fill,
// from which FPR gives the false-positive rate. Only bits below a
// sub-filter's modulus count: those past it are never set by the module.
func (w *Window) Fill(fill []uint64) {
	for k := range w.spans {
		s := &w.spans[k]
		fill[s.link] += onesBelow(s.data, s.off, s.probe.mod.M())
	}
}

// onesBelow counts the bits set in b, bytes off … of a sub-filter, whose
// offsets are below m.
func onesBelow(b []byte, off, m uint64) uint64 {
	last := (m + 7) / 8 // bytes holding an offset below m
	if off >= last {
		return 0
	}
	b = b[:min(uint64(len(b)), last-off)]
	c := ones(b)
	if m%8 != 0 && off+uint64(len(b)) == last {
		c -= ones([]byte{b[len(b)-1] &^ (1<<(m%8) - 1)})
	}
	return c
}
