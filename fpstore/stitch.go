package fpstore

import (
	"fmt"
	"io"
	"slices"
)

// Stitching disjoint partitions (docs/SCALE-OUT.md). A partition P built
// alone cuts its segments with P as the trie's root; a whole build cuts
// the same segments inside P whenever P holds more than SegmentMax
// fingerprints, since every ancestor of P then holds more too. So such a
// partition's segments are copied byte for byte (their checksums checked),
// and only partitions of at most SegmentMax are re-packed: together with
// their siblings, into the shallowest node that holds at most SegmentMax.

// copySegment appends segment i of x as it is, after checking all its
// pages. Any pending fingerprints must have been cut first.
func (w *Writer) copySegment(x *Index, i int) error {
	x.readWhole() // whole segments are read through the mapping
	var seg builtSegment
	var s *segment
	err := x.guard(func() (err error) {
		if s, err = x.segment(i); err != nil {
			return err
		}
		ref := x.foot.segments[i]
		seg = builtSegment{
			head:   s.buf,
			crcs:   slices.Clone(x.data[ref.offset+ref.length : ref.end()]),
			length: ref.length,
			ref:    ref,
		}
		if w.hasLast && !w.last.Less(seg.ref.first) {
			return fmt.Errorf("%w: segment %d of %s starts at %s, after %s", ErrOrder, i, x.Path(), seg.ref.first, w.last)
		}
		if !w.opts.Sequential {
			return s.verifyRange(0, uint64(len(s.buf)))
		}
		return nil
	})
	if err != nil {
		return err
	}
	w.last, w.hasLast = seg.ref.last, true
	w.lastEmitted, w.emitted = seg.ref.last, true
	if w.opts.Sequential {
		// Streamed through a cursor's buffer, pread and checked a chunk of
		// pages at a time, not written from the mapping: the first touch
		// of a mapped page costs a fault (see Cursor), and copying into
		// fresh heap memory another.
		if err := w.padTo(alignUp(w.off, PageSize)); err != nil {
			return err
		}
		seg.ref.offset = w.off
		c := x.Cursor()
		pages := (seg.length + PageSize - 1) / PageSize
		for p := uint64(0); p < pages; p += cursorChunk / PageSize {
			data, err := c.readPages(s, p, min(p+cursorChunk/PageSize, pages))
			if err != nil {
				return err
			}
			if err := w.write(data); err != nil {
				return err
			}
		}
		if err := w.write(seg.crcs); err != nil {
			return err
		}
		w.refs = append(w.refs, seg.ref)
		return nil
	}
	f := &segmentFuture{seg: seg, done: make(chan struct{})}
	close(f.done)
	w.futures <- f
	return nil
}

// addNode appends fps (sorted, all in n) as the segment of node n, whatever
// the trie rule would say from the stream alone: the caller knows n's
// count in the whole set.
func (w *Writer) addNode(n node, fps []Fingerprint) error {
	if err := w.check(fps); err != nil {
		return err
	}
	w.lastEmitted, w.emitted = fps[len(fps)-1], true
	if w.opts.Sequential {
		return w.buildNow(n, fps)
	}
	seg := append(w.getPending()[:0], fps...)
	f := &segmentFuture{node: n, fps: seg, base: seg, done: make(chan struct{})}
	w.futures <- f
	w.work <- f
	return nil
}

// stitchable reports whether a union of inputs is disjoint partitions, and
// returns them in prefix order.
func stitchable(inputs []*Index, op SetOp) ([]*Index, bool) {
	if op != Union || len(inputs) < 2 {
		return nil, false
	}
	xs := slices.Clone(inputs)
	slices.SortFunc(xs, func(a, b *Index) int {
		return a.Range().start().Compare(b.Range().start())
	})
	for i, x := range xs {
		if x.Range().Whole() || (i > 0 && overlap(xs[i-1].Range(), x.Range())) {
			return nil, false
		}
	}
	return xs, true
}

// start is the smallest fingerprint of the range.
func (r Range) start() Fingerprint {
	if r.Bits == 0 {
		return Fingerprint{}
	}
	return Fingerprint{Hi: r.Index << (64 - r.Bits)}
}

// last is the largest fingerprint of the range.
func (r Range) last() Fingerprint {
	if r.Bits == 0 {
		return Fingerprint{Hi: ^uint64(0), Lo: ^uint64(0)}
	}
	return Fingerprint{Hi: r.start().Hi | ^uint64(0)>>r.Bits, Lo: ^uint64(0)}
}

func (r Range) node() node { return node{Prefix: r.start(), Bits: r.Bits} }

// stitch writes the union of disjoint partitions xs (in prefix order) that
// tile root.
func stitchSegments(w *Writer, xs []*Index, root Range) error {
	held := func(n node) uint64 {
		var c uint64
		for _, x := range xs {
			if n.contains(x.Range().start()) {
				c += x.Len()
			}
		}
		return c
	}
	for i := 0; i < len(xs); {
		x := xs[i]
		if x.Len() > SegmentMax {
			for s := range x.foot.segments {
				if err := w.copySegment(x, s); err != nil {
					return err
				}
			}
			i++
			continue
		}
		// The shallowest node on x's path (below the root) holding at
		// most SegmentMax: every partition under it goes in one segment.
		p := x.Range().node()
		a := p
		for d := uint(root.Bits); d <= uint(p.Bits); d++ {
			if n := nodeOf(p.Prefix, d); held(n) <= SegmentMax {
				a = n
				break
			}
		}
		// At most SegmentMax: read straight into a pending buffer of the
		// writer (huge pages, reused), not a growing slice, whose
		// memmove and GC would be much of a small stitch's work.
		fps := w.getPending()[:0]
		j := i
		for ; j < len(xs) && a.contains(xs[j].Range().start()); j++ {
			c := xs[j].Cursor()
			for {
				if len(fps) == cap(fps) {
					return fmt.Errorf("BUG: partitions under %s/%d hold more than SegmentMax", a.Prefix, a.Bits)
				}
				n, err := c.Read(fps[len(fps):cap(fps)])
				if err == io.EOF {
					break
				}
				if err != nil {
					return err
				}
				fps = fps[:len(fps)+n]
			}
		}
		if len(fps) > 0 {
			if err := w.addNode(a, fps); err != nil {
				return err
			}
		}
		w.putPending(fps[:0])
		i = j
	}
	return nil
}
