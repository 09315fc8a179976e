package fpstore

import (
	"fmt"
	"math/bits"
	"sort"
)

// What the readers check before they hand out fingerprints. Page CRCs
// catch damage that was not checksummed again; these catch the rest: a
// file whose checksums agree with bytes that break the format's
// invariants (FORMAT.md "Invariants"). No reader (Scan, the cursors and
// range cursors, the page stream of a stitch, and so dump, merge,
// reconcile and the dedup runs) hands out a sequence that Verify would
// reject: out of order, repeated, outside its segment's node or the
// covered range, or a count other than the footer's. It returns an
// ErrCorrupt error naming the file, segment and offset instead.
//
// The footer's part is checked at Open (decodeFooter: each segment's
// first and last lie in its node, nodes in the covered range, segments in
// ascending order with disjoint nodes, counts adding up; checkTrieRule:
// the segment boundaries). A segment's part is checked as its
// fingerprints arrive, by comparing each with the one before it: a run of
// a segment's fingerprints is strictly ascending, continues above the
// fingerprint read before it, starts with the footer's first and ends
// with its last. With the footer's checks that puts every fingerprint
// inside its node and the covered range, each segment's count right, and
// the whole stream strictly ascending.
//
// Lookups cannot afford reading a large segment whole; they check what
// they rely on as lookupcheck.go says.

// ascending reports whether fps is strictly ascending. Branch-free: the
// borrows of two subtractions, or'ed over the run; the position of a
// failure is found by firstDisorder, off the hot path.
func ascending(fps []Fingerprint) bool {
	if len(fps) < 2 {
		return true
	}
	var bad uint64
	prev := fps[0]
	for _, fp := range fps[1:] {
		_, c := bits.Sub64(prev.Lo, fp.Lo, 0)
		_, lt := bits.Sub64(prev.Hi, fp.Hi, c) // 1 when prev < fp
		bad |= lt ^ 1
		prev = fp
	}
	return bad == 0
}

// firstDisorder is the first k ≥ 1 with fps[k] not above fps[k-1], or -1.
func firstDisorder(fps []Fingerprint) int {
	for k := 1; k < len(fps); k++ {
		if !fps[k-1].Less(fps[k]) {
			return k
		}
	}
	return -1
}

// checkRun checks fps, the fingerprints [i0, i0+len(fps)) of segment seg
// (buffer s, vector at s.fpsAt): strictly ascending; above prev, the
// fingerprint read before them, when i0 > 0; starting with the footer's
// first when i0 = 0; ending with its last when they reach its count.
func (x *Index) checkRun(seg int, s *segment, i0 int, fps []Fingerprint, prev Fingerprint) error {
	if len(fps) == 0 {
		return nil
	}
	ref := s.ref
	at := func(k int) uint64 { return ref.offset + s.fpsAt + 16*uint64(k) }
	bad := func(k int, format string, a ...any) error {
		return fmt.Errorf("%s: %w: segment %d at offset %d: fingerprint %d (%s) at offset %d %s",
			x.path, ErrCorrupt, seg, ref.offset, k, fps[k-i0], at(k), fmt.Sprintf(format, a...))
	}
	switch {
	case i0 == 0 && fps[0] != ref.first:
		return bad(0, "is not the segment's first in the footer (%s)", ref.first)
	case i0 > 0 && !prev.Less(fps[0]) && !ref.node.contains(fps[0]):
		return bad(i0, "is outside the segment's node %s/%d", ref.node.Prefix, ref.node.Bits)
	case i0 > 0 && !prev.Less(fps[0]):
		return bad(i0, "is not above the one before it (%s): out of order or repeated", prev)
	}
	if !ascending(fps) {
		// Name a fingerprint outside the node rather than its neighbour.
		k := firstDisorder(fps)
		for _, j := range []int{k - 1, k} {
			if !ref.node.contains(fps[j]) {
				return bad(i0+j, "is outside the segment's node %s/%d", ref.node.Prefix, ref.node.Bits)
			}
		}
		return bad(i0+k, "is not above the one before it (%s): out of order or repeated", fps[k-1])
	}
	if n := i0 + len(fps); uint64(n) == ref.count && fps[len(fps)-1] != ref.last {
		return bad(n-1, "is not the segment's last in the footer (%s)", ref.last)
	}
	return nil
}

// checkFingerprints checks segment seg's fingerprint pages against their
// CRCs and the fingerprints' order (checkRun), a block at a time so that
// the order check reads what the CRC has just brought into the cache;
// once per open index (Scan).
func (x *Index) checkFingerprints(seg int, s *segment) error {
	if s.ordered.Load() {
		return nil
	}
	const block = 64 << 10 / 16
	var prev Fingerprint
	for i0 := 0; i0 < len(s.fps); i0 += block {
		i1 := min(i0+block, len(s.fps))
		if err := s.verifyRange(s.fpsAt+16*uint64(i0), s.fpsAt+16*uint64(i1)); err != nil {
			return err
		}
		if err := x.checkRun(seg, s, i0, s.fps[i0:i1], prev); err != nil {
			return err
		}
		prev = s.fps[i1-1]
	}
	s.ordered.Store(true)
	return nil
}

// checkTrieRule checks from the footer alone that the segment boundaries
// are the trie rule's (FORMAT.md "Segments"): every segment below the
// covered range's node has a parent node holding more than SegmentMax
// fingerprints. (decodeFooter has checked that each holds at most
// SegmentMax, in ascending order, with disjoint nodes.) The segments a
// node holds are a run of the sorted list: two binary searches over
// running counts each.
func checkTrieRule(f footer) error {
	segs := f.segments
	cum := make([]uint64, len(segs)+1)
	for i, s := range segs {
		cum[i+1] = cum[i] + s.count
	}
	for i, s := range segs {
		if s.node.Bits <= f.rng.Bits {
			continue
		}
		p := nodeOf(s.node.Prefix, uint(s.node.Bits)-1)
		lo := sort.Search(len(segs), func(k int) bool { return !segs[k].first.Less(p.Prefix) })
		hi := lo + sort.Search(len(segs)-lo, func(k int) bool { return !p.contains(segs[lo+k].first) })
		if held := cum[hi] - cum[lo]; held <= SegmentMax {
			return fmt.Errorf("%w: segment %d at offset %d: its parent node holds %d ≤ %d fingerprints, so the parent should be the segment (trie rule)",
				ErrCorrupt, i, s.offset, held, SegmentMax)
		}
	}
	return nil
}
