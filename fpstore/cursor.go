package fpstore

import (
	"encoding/binary"
	"fmt"
	"io"
	"sort"
	"unsafe"
)

// Cursor reads an index's fingerprints in ascending order. It streams the
// file with pread, a chunk of pages at a time, and checks every page's
// CRC-32C as it arrives (a whole pass checks the whole file: tables,
// directories and filters too), rather than reading the mapping: in this
// VM the first touch of a mapped page costs ~2 µs even when it is in the
// page cache (one byte per page of a 333 MiB index: 175-186 ms; pread and
// checksum of all of it: 63-76 ms; MADV_POPULATE_READ first made no
// difference). Memory is one chunk, whatever the index size; nothing it
// returns aliases the mapping. Not safe for concurrent use.
type Cursor struct {
	x        *Index
	seg      int
	pos      int // the next fingerprint of segment seg
	headDone bool
	buf      []byte        // the chunk read last
	chunk    []Fingerprint // segment seg's fingerprints [chunkAt, chunkAt+len) in buf
	chunkAt  int

	// A cursor over a prefix range reads only the fingerprints in
	// [lo, hi]: segments outside are never read, the edge ones from and
	// to a binary search.
	bounded bool
	lo, hi  Fingerprint
	end     int // segment seg's fingerprints before end are the cursor's; -1 until known
}

// cursorChunk is how much a cursor reads at a time: large enough that a
// read's cost is the copy, small enough to stay in L2 while merged.
const cursorChunk = 256 << 10

// Cursor starts a cursor at the smallest fingerprint.
func (x *Index) Cursor() *Cursor { return &Cursor{x: x, end: -1} }

// RangeCursor starts a cursor at the smallest fingerprint of prefix range
// r; it ends after the largest.
func (x *Index) RangeCursor(r Range) *Cursor {
	c := x.Cursor()
	if !r.Whole() {
		c.bounded, c.lo, c.hi = true, r.start(), r.last()
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
	for c.seg < len(c.x.foot.segments) {
		if i := c.pos - c.chunkAt; i >= 0 && i < len(c.chunk) {
			return c.chunk[i:], nil
		}
		if c.bounded {
			ref := c.x.foot.segments[c.seg]
			if c.hi.Less(ref.first) {
				c.seg = len(c.x.foot.segments) // past the range: done
				break
			}
			if ref.last.Less(c.lo) {
				c.seg, c.pos, c.end = c.seg+1, 0, -1
				continue
			}
		}
		var s *segment
		err := c.x.guard(func() (err error) {
			if s, err = c.x.segment(c.seg); err != nil {
				return err
			}
			if c.end < 0 {
				c.end = len(s.fps)
				if c.bounded {
					// The searches read a few mapped pages (checked
					// below with all the others before any is used).
					c.pos = sort.Search(len(s.fps), func(i int) bool { return !s.fps[i].Less(c.lo) })
					c.end = sort.Search(len(s.fps), func(i int) bool { return c.hi.Less(s.fps[i]) })
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		if !c.headDone {
			// The pages before the fingerprints: the table, the
			// directory and the filter.
			head := alignUp(s.fpsAt, PageSize) / PageSize
			for p := uint64(0); p < head; p += cursorChunk / PageSize {
				if _, err := c.readPages(s, p, min(p+cursorChunk/PageSize, head)); err != nil {
					return nil, err
				}
			}
			c.headDone = true
		}
		if c.pos < c.end {
			if err := c.readChunk(s); err != nil {
				return nil, err
			}
			continue
		}
		c.seg, c.pos, c.end, c.headDone, c.chunk, c.chunkAt = c.seg+1, 0, -1, false, nil, 0
	}
	return nil, nil
}

// skip moves past n fingerprints of the span.
func (c *Cursor) skip(n int) { c.pos += n }

// readChunk reads the pages holding the next cursorChunk bytes of
// fingerprints from c.pos on.
func (c *Cursor) readChunk(s *segment) error {
	i0 := c.pos
	i1 := min(i0+cursorChunk/16, c.end)
	b0, b1 := s.fpsAt+16*uint64(i0), s.fpsAt+16*uint64(i1)
	p0 := b0 / PageSize
	data, err := c.readPages(s, p0, alignUp(b1, PageSize)/PageSize)
	if err != nil {
		return err
	}
	// fpsAt is 8-aligned in the segment (the struct's alignment) and the
	// buffer is page-aligned, so the fingerprints are aligned.
	raw := data[b0-p0*PageSize : b1-p0*PageSize]
	c.chunk = unsafe.Slice((*Fingerprint)(unsafe.Pointer(unsafe.SliceData(raw))), i1-i0)
	c.chunkAt = i0
	return nil
}

// readPages reads pages [p0, p1) of segment s into the cursor's buffer and
// checks each against the segment's page CRC table.
func (c *Cursor) readPages(s *segment, p0, p1 uint64) ([]byte, error) {
	from, to := p0*PageSize, min(p1*PageSize, uint64(len(s.buf)))
	if cap(c.buf) < cursorChunk+2*PageSize {
		c.buf = make([]byte, cursorChunk+2*PageSize)
	}
	data := c.buf[:to-from]
	at := int64(s.ref.offset + from)
	if n, err := c.x.file.ReadAt(data, at); n < len(data) {
		if err == io.EOF || err == nil {
			return nil, fmt.Errorf("%s: %w: truncated: %d bytes at offset %d, read %d", c.x.path, ErrCorrupt, len(data), at, n)
		}
		return nil, fmt.Errorf("cannot read index %s: %w", c.x.path, err)
	}
	// The CRC table is in the mapping: read under the fault guard.
	err := c.x.guard(func() error {
		for p := p0; p < p1; p++ {
			page := data[(p-p0)*PageSize : min((p-p0+1)*PageSize, uint64(len(data)))]
			if got, want := crc32c(page), binary.LittleEndian.Uint32(s.crcs[4*p:]); got != want {
				return fmt.Errorf("%w: page checksum mismatch at offset %d (segment at %d, page %d)", ErrCorrupt, s.ref.offset+p*PageSize, s.ref.offset, p)
			}
		}
		return nil
	})
	return data, err
}
