package fpstore

import "fmt"

// What a lookup checks (FORMAT.md "How a reader reads"). A page CRC vouches
// for the bytes the writer wrote, not for their sense: a file whose
// checksums were recomputed after damage (crafted, or written by a broken
// writer) passes every one. A lookup that trusted the filter, the directory
// or the order of such a file would answer "absent" for a key it holds
// while Verify rejects it, and `dedup --against` would keep every record
// as new. So a lookup trusts no structure it has not
// checked, and the damage it finds is an ErrCorrupt error naming the file,
// segment and offset:
//
//   - A segment of at most lookupCheckWhole fingerprints is checked whole
//     before its first lookup, once per open index (checkForLookups): every
//     page, the fingerprints' order from the footer's first to its last,
//     the directory against the fingerprints, the filter against every
//     fingerprint. The segments of a small index are this small, and its
//     first lookup reads most of it anyway.
//   - A larger segment is not read whole for one lookup: a cold lookup
//     reads a page or three of it. Before the filter's first "absent" in
//     the segment, it must pass the footer's first fingerprint
//     (sampleFilter: one block, one page; a misplaced or foreign filter
//     fails it but for its false-positive rate); lookups of keys the
//     filter passes, and batches that skip it, do not pay for that. An all-zero filter block is not believed (zeroBlock).
//     An "absent" is proven where the lookup stopped (absentAt): fp lies
//     strictly between the fingerprints at its insertion point, whichever
//     bucket the directory gave, and the two either side are in order.
//     With the fingerprints in order that is a proof whatever the
//     directory says; the neighbours catch a swapped pair, since a key
//     moved away from its place leaves an inversion at the place, where a
//     lookup of it stops. Rank checks the neighbours of what it finds
//     (foundAt).
//
// What a lookup in a larger segment does not see: disorder away from the
// place it probes (more than a swapped pair), and a filter that is not
// zero but rejects keys other than the sample. Verify checks everything
// (Scan and the cursors check the order); an index from an untrusted
// source is verified first.

// lookupCheckWhole is the largest segment checked whole before its first
// lookup: 16384 fingerprints are a ~290 KiB segment, checked in ~0.15 ms
// with the file in the page cache (faults included), once per segment and
// open index.
const lookupCheckWhole = 1 << 14

// lookupSegment is segment(i) with the checks a lookup relies on made
// first, once (lookupReady, under the slot's lock); a failure is returned
// to every later lookup in the segment.
func (x *Index) lookupSegment(i int) (*segment, error) {
	s, err := x.segment(i)
	if err != nil {
		return nil, err
	}
	if !s.lookupReady.Load() {
		if err := x.readyForLookups(i, s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (x *Index) readyForLookups(i int, s *segment) error {
	slot := &x.segs[i]
	slot.mu.Lock()
	defer slot.mu.Unlock()
	if s.lookupReady.Load() {
		return nil
	}
	if slot.lookupErr != nil {
		return slot.lookupErr
	}
	if err := x.checkForLookups(i, s); err != nil {
		slot.lookupErr = err
		return err
	}
	s.lookupReady.Store(true)
	return nil
}

// checkForLookups checks segment i whole if it holds at most
// lookupCheckWhole fingerprints; a larger one's lookups check as they go.
func (x *Index) checkForLookups(i int, s *segment) error {
	ref := s.ref
	if ref.count > lookupCheckWhole {
		return nil
	}
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%s: %w: segment %d at offset %d: %s", x.path, ErrCorrupt, i, ref.offset, fmt.Sprintf(format, a...))
	}
	if err := s.verifyRange(0, uint64(len(s.buf))); err != nil {
		return err
	}
	// Order, and so every fingerprint in the node, from first to last.
	if err := x.checkFingerprints(i, s); err != nil {
		return err
	}
	// The directory: entry b is the number of fingerprints in the buckets
	// before b (FORMAT.md "Directory"), for the directory_bits it has.
	b := uint64(0)
	for k, fp := range s.fps {
		for bucket := fp.bits(s.depth, s.dirBits); b <= bucket; b++ {
			if s.dir[b] != uint32(k) {
				return bad("directory entry %d at offset %d is %d; the fingerprints say %d", b, ref.offset+s.dirAt+4*b, s.dir[b], k)
			}
		}
	}
	for ; b < uint64(len(s.dir)); b++ {
		if s.dir[b] != uint32(len(s.fps)) {
			return bad("directory entry %d at offset %d is %d; the fingerprints say %d", b, ref.offset+s.dirAt+4*b, s.dir[b], len(s.fps))
		}
	}
	for k, fp := range s.fps {
		if !BloomTest(&s.filter[BloomBlock(fp, uint64(len(s.filter)))], fp) {
			return bad("the filter rejects fingerprint %d (%s) at offset %d: it would answer absent", k, fp, ref.offset+s.fpsAt+16*uint64(k))
		}
	}
	s.filterSampled.Store(true)
	return nil
}

// trustFilter is made before the filter's "absent" is answered: the
// filter of a segment checked whole is, a larger one's must pass its
// sample first.
func (s *segment) trustFilter() error {
	if s.filterSampled.Load() {
		return nil
	}
	return s.sampleFilter()
}

// sampleFilter checks, once, that the filter passes the segment's first
// fingerprint (from the footer); a failure is returned to every later
// call. One sample, a page read once per large segment and process (a
// cold one-key query reads three): the footer's last as a second sample
// cost BenchmarkLookup/cold 3.6% more major faults, where a segment
// takes ~20 lookups an open, for a foreign filter's ~1% chance of
// passing one.
func (s *segment) sampleFilter() error {
	s.sampleMu.Lock()
	defer s.sampleMu.Unlock()
	if s.filterSampled.Load() {
		return nil
	}
	if s.sampleErr != nil {
		return s.sampleErr
	}
	fp := s.ref.first
	blk := BloomBlock(fp, uint64(len(s.filter)))
	if err := s.verifyPage((s.filterAt + 64*blk) / PageSize); err != nil {
		return err
	}
	if !BloomTest(&s.filter[blk], fp) {
		s.sampleErr = fmt.Errorf("%w: segment %d at offset %d: the filter block at offset %d rejects the segment's first fingerprint (%s): the filter would answer absent for keys the segment holds",
			ErrCorrupt, s.index, s.ref.offset, s.ref.offset+s.filterAt+64*blk, fp)
		return s.sampleErr
	}
	s.filterSampled.Store(true)
	return nil
}

// zeroBlock reports whether a filter block has no bit set. Every key sets
// a bit in its block, and with the blocks' ~51 keys on average no block of
// a sound filter over fingerprints of a hash is empty: an empty one is a
// zeroed filter, and its "absent" is not believed (the lookup reads the
// bucket, which answers exactly). It is one test on a line the probe has
// just read, made only when the probe says absent.
func zeroBlock(blk *[8]uint64) bool {
	return blk[0]|blk[1]|blk[2]|blk[3]|blk[4]|blk[5]|blk[6]|blk[7] == 0
}

// insertionPoint is where fp, not at p, would go, from where a walk that
// stopped at p (below fp only if it ran into the bucket's end) left it.
func insertionPoint(fps []Fingerprint, fp Fingerprint, p uint64) uint64 {
	if fps[p].Less(fp) {
		return p + 1
	}
	return p
}

// absentAt checks, before a lookup answers that fp is absent, that q is
// fp's place among the fingerprints: the one before q is below fp and the
// one at q above it (the footer's first and last at the ends), and the
// two either side of q are in order. It reads at most two fingerprints
// the walk has not (outside its bucket).
func (s *segment) absentAt(fp Fingerprint, q uint64) error {
	n := uint64(len(s.fps))
	if err := s.verifyRange(s.fpsAt+16*(q-min(q, 2)), s.fpsAt+16*min(q+2, n)); err != nil {
		return err
	}
	return s.absentIn(s.fps, 0, fp, q)
}

// absentIn is absentAt's check on win, the segment's fingerprints from
// index base on (the mapping's, or a copy the pread path read), which
// holds the two either side of q.
func (s *segment) absentIn(win []Fingerprint, base uint64, fp Fingerprint, q uint64) error {
	n := uint64(len(s.fps))
	from, to := q-min(q, 2), min(q+2, n)
	w := win[from-base : to-base] // w[k-from] is fingerprint k
	for k := from + 1; k < to; k++ {
		if k != q && !w[k-1-from].Less(w[k-from]) {
			return s.badOrderOf(k, w[k-from], "is not above the one before it (%s): out of order or repeated", w[k-1-from])
		}
	}
	switch {
	case q > 0 && !w[q-1-from].Less(fp):
		return s.badOrderOf(q-1, w[q-1-from], "is not below %s, which a lookup finds after it: out of order, or a directory entry off", fp)
	case q < n && !fp.Less(w[q-from]):
		return s.badOrderOf(q, w[q-from], "is not above %s, which a lookup finds before it: out of order, or a directory entry off", fp)
	case q == 0 && n > 0 && w[0] != s.ref.first:
		return s.badOrderOf(0, w[0], "is not the segment's first in the footer (%s)", s.ref.first)
	case q == n && n > 0 && w[n-1-from] != s.ref.last:
		return s.badOrderOf(n-1, w[n-1-from], "is not the segment's last in the footer (%s)", s.ref.last)
	}
	return nil
}

// foundAt checks, before Rank answers p for fp, that fp's neighbours are
// in order around it, and that it is the footer's first or last if at an
// end.
func (s *segment) foundAt(fp Fingerprint, p uint64) error {
	n := uint64(len(s.fps))
	if err := s.verifyRange(s.fpsAt+16*(p-min(p, 1)), s.fpsAt+16*min(p+2, n)); err != nil {
		return err
	}
	switch {
	case p > 0 && !s.fps[p-1].Less(fp):
		return s.badOrder(p, "is not above the one before it (%s): out of order or repeated", s.fps[p-1])
	case p+1 < n && !fp.Less(s.fps[p+1]):
		return s.badOrder(p+1, "is not above the one before it (%s): out of order or repeated", fp)
	case p == 0 && fp != s.ref.first:
		return s.badOrder(0, "is not the segment's first in the footer (%s)", s.ref.first)
	case p == n-1 && fp != s.ref.last:
		return s.badOrder(p, "is not the segment's last in the footer (%s)", s.ref.last)
	}
	return nil
}

func (s *segment) badOrder(k uint64, format string, a ...any) error {
	return s.badOrderOf(k, s.fps[k], format, a...)
}

// badOrderOf is badOrder for fingerprint k, whose value is v.
func (s *segment) badOrderOf(k uint64, v Fingerprint, format string, a ...any) error {
	return fmt.Errorf("%w: segment %d at offset %d: fingerprint %d (%s) at offset %d %s",
		ErrCorrupt, s.index, s.ref.offset, k, v, s.ref.offset+s.fpsAt+16*k, fmt.Sprintf(format, a...))
}

func (s *segment) badDirectory(b uint64) error {
	return fmt.Errorf("%w: segment %d at offset %d: directory entries %d and %d at offset %d (%d, %d) point outside its %d fingerprints",
		ErrCorrupt, s.index, s.ref.offset, b, b+1, s.ref.offset+s.dirAt+4*b, s.dir[b], s.dir[b+1], len(s.fps))
}
