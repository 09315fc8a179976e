package fpstore

import (
	"encoding/binary"
	"fmt"
	"io"
	"sort"
	"unsafe"

	"github.com/fpdedup/fpdedup/internal/failpoint"
)

// Cursor reads an index's fingerprints in ascending order. It streams the
// file with pread, a chunk of pages at a time, and checks every page's
// CRC-32C as it arrives (a whole pass checks the whole file: tables,
// directories and filters too), rather than reading the mapping: the
// first touch of a mapped page costs a fault even when the page is in the
// page cache, and a whole pass touching every page through the mapping is
// slower than pread and checksum of all of it (MADV_POPULATE_READ does not
// change that). Each chunk of fingerprints is checked as it arrives too:
// strictly ascending, above the last one read, from the footer's first of
// its segment to its last (readcheck.go), so a cursor hands out nothing
// Verify would reject; damage is an ErrCorrupt error naming the file,
// segment and offset. While the caller merges one chunk of a segment's
// fingerprints, the next is read on another goroutine (readAhead). Memory
// is two chunks, whatever the index size; nothing it returns aliases the
// mapping. Not safe for concurrent use.
type Cursor struct {
	x       *Index
	seg     int
	started bool          // segment seg's head pages are read; its fingerprints are being read
	read    int           // segment seg's fingerprints [0, read) are read and checked
	prev    Fingerprint   // the last fingerprint read and checked
	pos     int           // the next fingerprint of segment seg to hand out
	buf     []byte        // the chunk read last
	spare   []byte        // the buffer of the chunk before, for the next prefetch
	ahead   *readAhead    // the next chunk, being read
	chunk   []Fingerprint // the fingerprints [chunkAt, chunkAt+len) of segment seg to hand out, in buf
	chunkAt int

	// A cursor over a prefix range (the node rng, [lo, hi]) reads only the
	// segments whose nodes meet it. A segment whose node lies inside it is
	// read whole; one whose node is wider (the range is inside one
	// segment) is read whole as well, since only a whole read shows that
	// none of the range's fingerprints lie out of order elsewhere in it,
	// but only the range's part is handed out (partial).
	bounded bool
	rng     node
	lo, hi  Fingerprint
	partial bool

	copied copyCheck // readPages' state (a stitch's segment copy)
}

// readAhead is a chunk read ahead: pages [p0, p1) of segment s into buf.
// A merge's profile had its merging goroutine spend two thirds of its time
// in pread of the inputs (the page cache's work for a cold file), with a
// core to spare: the read of the next chunk now overlaps the merge of
// this one.
type readAhead struct {
	s      *segment
	p0, p1 uint64
	buf    []byte
	n      int
	err    error
	done   chan struct{}
}

// cursorChunk is how much a cursor reads at a time: large enough that a
// read's cost is the copy, small enough to stay in L2 while merged.
const cursorChunk = 256 << 10

// Cursor starts a cursor at the smallest fingerprint.
func (x *Index) Cursor() *Cursor { return &Cursor{x: x} }

// RangeCursor starts a cursor at the smallest fingerprint of prefix range
// r; it ends after the largest.
func (x *Index) RangeCursor(r Range) *Cursor {
	c := x.Cursor()
	if !r.Whole() {
		c.bounded, c.rng, c.lo, c.hi = true, r.node(), r.start(), r.last()
	}
	return c
}

// Read copies the next fingerprints into dst and returns how many; at the
// end it returns 0, io.EOF.
func (c *Cursor) Read(dst []Fingerprint) (int, error) {
	n := 0
	for n < len(dst) {
		sp, err := c.span()
		if err != nil {
			return n, err
		}
		if len(sp) == 0 {
			break
		}
		k := copy(dst[n:], sp)
		c.skip(k)
		n += k
	}
	if n == 0 && len(dst) > 0 {
		return 0, io.EOF
	}
	return n, nil
}

// span returns the next unread fingerprints, checked, in the cursor's
// buffer: valid until span is called again. It is empty at the end.
func (c *Cursor) span() ([]Fingerprint, error) {
	segs := c.x.foot.segments
	for c.seg < len(segs) {
		if i := c.pos - c.chunkAt; i >= 0 && i < len(c.chunk) {
			return c.chunk[i:], nil
		}
		if !c.started && c.bounded {
			// Nodes are disjoint and in ascending order (checked at Open).
			n := segs[c.seg].node
			if c.hi.Less(n.Prefix) {
				c.seg = len(segs) // this node and the later ones lie past the range: done
				break
			}
			if !c.rng.contains(n.Prefix) && !n.contains(c.lo) {
				c.seg++ // disjoint from the range
				continue
			}
			c.partial = n.Bits < c.rng.Bits
		}
		var s *segment
		err := c.x.guard(func() (err error) {
			s, err = c.x.segment(c.seg)
			return err
		})
		if err != nil {
			return nil, err
		}
		if !c.started {
			// The pages before the fingerprints: the table, the
			// directory and the filter.
			head := alignUp(s.fpsAt, PageSize) / PageSize
			for p := uint64(0); p < head; p += cursorChunk / PageSize {
				if _, err := c.pread(s, p, min(p+cursorChunk/PageSize, head)); err != nil {
					return nil, err
				}
			}
			c.started, c.read, c.pos, c.chunk, c.chunkAt = true, 0, 0, nil, 0
		}
		if c.read < len(s.fps) {
			if err := c.readChunk(s); err != nil {
				return nil, err
			}
			continue
		}
		c.seg, c.started, c.pos, c.chunk, c.chunkAt = c.seg+1, false, 0, nil, 0
	}
	return nil, nil
}

// skip moves past n fingerprints of the span.
func (c *Cursor) skip(n int) { c.pos += n }

// readChunk reads the pages holding the next cursorChunk bytes of segment
// s's fingerprints, checks them (checkRun) and makes what of them the
// cursor hands out the next span.
func (c *Cursor) readChunk(s *segment) error {
	i0 := c.read
	i1 := min(i0+cursorChunk/16, len(s.fps))
	b0, b1 := s.fpsAt+16*uint64(i0), s.fpsAt+16*uint64(i1)
	p0 := b0 / PageSize
	data, err := c.pread(s, p0, alignUp(b1, PageSize)/PageSize)
	if err != nil {
		return err
	}
	// fpsAt is 8-aligned in the segment (the struct's alignment) and the
	// buffer is page-aligned, so the fingerprints are aligned.
	raw := data[b0-p0*PageSize : b1-p0*PageSize]
	fps := unsafe.Slice((*Fingerprint)(unsafe.Pointer(unsafe.SliceData(raw))), i1-i0)
	if err := c.x.checkRun(c.seg, s, i0, fps, c.prev); err != nil {
		return err
	}
	c.prev, c.read = fps[len(fps)-1], i1
	if i1 < len(s.fps) {
		n0, n1 := s.fpsAt+16*uint64(i1), s.fpsAt+16*uint64(min(i1+cursorChunk/16, len(s.fps)))
		c.startAhead(s, n0/PageSize, alignUp(n1, PageSize)/PageSize)
	}
	at := i0
	if c.partial {
		// Checked ascending, so the range's part is found by search.
		a := sort.Search(len(fps), func(k int) bool { return !fps[k].Less(c.lo) })
		b := a + sort.Search(len(fps)-a, func(k int) bool { return c.hi.Less(fps[a+k]) })
		fps, at = fps[a:b], i0+a
	}
	c.chunk, c.chunkAt, c.pos = fps, at, at
	return nil
}

// pread reads pages [p0, p1) of segment s into the cursor's buffer and
// checks each against the segment's page CRC table.
func (c *Cursor) pread(s *segment, p0, p1 uint64) ([]byte, error) {
	from, to := p0*PageSize, min(p1*PageSize, uint64(len(s.buf)))
	a := c.ahead
	if a != nil {
		<-a.done
		c.ahead = nil
		if a.s == s && a.p0 == p0 && a.p1 == p1 {
			c.buf, c.spare = a.buf, c.buf
		} else {
			c.spare, a = a.buf, nil // a guess that missed: its buffer serves the next
		}
	}
	if cap(c.buf) < cursorChunk+2*PageSize {
		c.buf = make([]byte, cursorChunk+2*PageSize)
	}
	data := c.buf[:to-from]
	at := int64(s.ref.offset + from)
	if err := failpoint.Hit(failpoint.Read, c.x.path); err != nil {
		return nil, fmt.Errorf("cannot read index %s: %w", c.x.path, err)
	}
	var n int
	var err error
	if a != nil {
		n, err = a.n, a.err
	} else {
		n, err = c.x.file.ReadAt(data, at)
	}
	if n < len(data) {
		if err == io.EOF || err == nil {
			return nil, fmt.Errorf("%s: %w: truncated: %d bytes at offset %d, read %d", c.x.path, ErrCorrupt, len(data), at, n)
		}
		return nil, fmt.Errorf("cannot read index %s: %w", c.x.path, err)
	}
	// The CRC table is in the mapping: read under the fault guard.
	err = c.x.guard(func() error {
		for p := p0; p < p1; p++ {
			page := data[(p-p0)*PageSize : min((p-p0+1)*PageSize, uint64(len(data)))]
			if err := s.checkRead(p, page, crc32c(page), binary.LittleEndian.Uint32(s.crcs[4*p:])); err != nil {
				return err
			}
		}
		return nil
	})
	return data, err
}

// startAhead starts reading pages [p0, p1) of segment s into the spare
// buffer, for pread to take when it is asked for them.
func (c *Cursor) startAhead(s *segment, p0, p1 uint64) {
	from, to := p0*PageSize, min(p1*PageSize, uint64(len(s.buf)))
	if cap(c.spare) < cursorChunk+2*PageSize {
		c.spare = make([]byte, cursorChunk+2*PageSize)
	}
	a := &readAhead{s: s, p0: p0, p1: p1, buf: c.spare, done: make(chan struct{})}
	c.spare, c.ahead = nil, a
	data, at, f := a.buf[:to-from], int64(s.ref.offset+from), c.x.file
	go func() {
		defer close(a.done)
		a.n, a.err = f.ReadAt(data, at)
	}()
}

// copyCheck is readPages' state: the segment being streamed, the next page
// and fingerprint expected, the last fingerprint checked, and the first
// bytes of a fingerprint split between two reads.
type copyCheck struct {
	seg    *segment
	next   uint64
	fp     int
	prev   Fingerprint
	part   [16]byte
	partOf int // bytes of part held
}

// readPages is pread for a stream of a whole segment's pages, read in
// order from page 0 (a stitch copies segments so): besides the page CRCs
// it checks the fingerprints as they pass (checkRun), so a segment copied
// whole into another index is in order from the footer's first to its
// last too. Its directory and filter are not rebuilt: their pages' CRCs
// are checked, and Verify compares them with the canonical ones.
func (c *Cursor) readPages(s *segment, p0, p1 uint64) ([]byte, error) {
	k := &c.copied
	if p0 == 0 {
		*k = copyCheck{seg: s}
	} else if k.seg != s || p0 != k.next {
		return nil, fmt.Errorf("BUG: readPages of segment at offset %d: pages from %d, not from %d", s.ref.offset, p0, k.next)
	}
	data, err := c.pread(s, p0, p1)
	if err != nil {
		return nil, err
	}
	k.next = p1
	seg := c.x.segIndex(s)
	from, to := p0*PageSize, p0*PageSize+uint64(len(data))
	n := len(s.fps)
	byteOf := func(i int) uint64 { return s.fpsAt + 16*uint64(i) }
	if k.partOf > 0 {
		// The rest of a fingerprint begun in the last read.
		rest := 16 - k.partOf
		if rest > len(data) {
			return nil, fmt.Errorf("%s: %w: segment %d at offset %d: fingerprint %d runs past the buffer", c.x.path, ErrCorrupt, seg, s.ref.offset, k.fp)
		}
		copy(k.part[k.partOf:], data[:rest])
		fp := Fingerprint{binary.LittleEndian.Uint64(k.part[0:]), binary.LittleEndian.Uint64(k.part[8:])}
		if err := c.x.checkRun(seg, s, k.fp, []Fingerprint{fp}, k.prev); err != nil {
			return nil, err
		}
		k.prev, k.fp, k.partOf = fp, k.fp+1, 0
	}
	if b := byteOf(k.fp); k.fp < n && b < to {
		// The fingerprints wholly in this read (aligned: see readChunk).
		i1 := min(n, k.fp+int((to-b)/16))
		if i1 > k.fp {
			raw := data[b-from : byteOf(i1)-from]
			fps := unsafe.Slice((*Fingerprint)(unsafe.Pointer(unsafe.SliceData(raw))), i1-k.fp)
			if err := c.x.checkRun(seg, s, k.fp, fps, k.prev); err != nil {
				return nil, err
			}
			k.prev, k.fp = fps[len(fps)-1], i1
		}
		if b := byteOf(k.fp); k.fp < n && b < to {
			// The first bytes of one that the next read ends.
			k.partOf = copy(k.part[:], data[b-from:])
		}
	}
	if to == uint64(len(s.buf)) && k.fp != n {
		return nil, fmt.Errorf("%s: %w: segment %d at offset %d: %d of its %d fingerprints in its buffer", c.x.path, ErrCorrupt, seg, s.ref.offset, k.fp, n)
	}
	return data, nil
}

// segIndex is the number of segment s in the footer.
func (x *Index) segIndex(s *segment) int {
	return sort.Search(len(x.foot.segments), func(i int) bool { return x.foot.segments[i].offset >= s.ref.offset })
}
