package fpstore

import (
	"fmt"
	"slices"
)

// Set is several indexes answered as if they were merged: history plus
// recent days, without compacting first. Safe for concurrent lookups.
type Set struct {
	indexes []*Index
	spec    Spec
}

// NewSet checks that the indexes share a hash and together cover the whole
// fingerprint space (a partial index alone would answer "absent" for keys
// it never saw) and returns them as one set. Key recipes are compared by
// the caller where records are read; here only the hash must agree.
func NewSet(indexes []*Index) (*Set, error) {
	if len(indexes) == 0 {
		return nil, fmt.Errorf("no index given")
	}
	spec := indexes[0].Spec()
	for _, x := range indexes[1:] {
		if x.Spec().Hash != spec.Hash {
			return nil, &SpecMismatchError{Paths: [2]string{indexes[0].Path(), x.Path()}, Specs: [2]Spec{spec, x.Spec()}, HashOnly: true}
		}
	}
	if gap, ok := uncovered(indexes); !ok {
		return nil, fmt.Errorf("the indexes cover only part of the fingerprint space (nothing covers prefix range starting at %016x); add the other partitions or merge them first", gap)
	}
	return &Set{indexes: indexes, spec: spec}, nil
}

// uncovered finds the first 64-bit prefix no index covers.
func uncovered(indexes []*Index) (uint64, bool) {
	type iv struct{ lo, hi uint64 } // inclusive
	var ivs []iv
	for _, x := range indexes {
		r := x.Range()
		if r.Bits == 0 {
			return 0, true
		}
		lo := r.Index << (64 - r.Bits)
		ivs = append(ivs, iv{lo, lo + (1<<(64-r.Bits) - 1)})
	}
	slices.SortFunc(ivs, func(a, b iv) int {
		switch {
		case a.lo < b.lo:
			return -1
		case a.lo > b.lo:
			return 1
		}
		return 0
	})
	next := uint64(0)
	for _, v := range ivs {
		if v.lo > next {
			return next, false
		}
		if v.hi == ^uint64(0) {
			return 0, true
		}
		next = max(next, v.hi+1)
	}
	return next, false
}

// Spec is the spec of the set's first index (all share its hash).
func (s *Set) Spec() Spec { return s.spec }

// Indexes are the set's members.
func (s *Set) Indexes() []*Index { return s.indexes }

// ContainsBatch sets found[i] to whether fps[i] is in any index of the set.
// found must have at least len(fps) elements; only found[:len(fps)] is
// written. l holds the calling goroutine's buffers: one Lookups per
// goroutine, reused from batch to batch.
//
// The batch is answered 64k keys at a time. A window of 4096 keys or more
// is answered in the order of the keys' leading bits, which is the order of
// their places in the index, and the answers are put back in the batch's
// order (unless the last window's keys were mostly absent: see
// containsWindow). Keys that are neighbours in that order share directory
// lines and pages of the index (a window of a query's keys puts several in
// each 1/4096 of a large index), so fewer lookups miss the cache and the
// TLB; a counting sort on 12 bits is two passes over the window (the order
// inside a bucket does not matter).
func (s *Set) ContainsBatch(fps []Fingerprint, found []bool, l *Lookups) error {
	for base := 0; base < len(fps); base += sortedLookupMax {
		end := min(base+sortedLookupMax, len(fps))
		if err := s.containsWindow(fps[base:end], found[base:end], l); err != nil {
			return err
		}
	}
	return nil
}

// ExpectMore tells the set about how many keys the caller will look up
// after the next batch it asks for: an estimate from its input's size,
// when it knows one. A cold index then plans each batch for all of
// them, reading the file whole at once when that costs less than reading
// their pages at random, where it would otherwise find out only after
// reading at random for as long (coldread.go). A partition expects its
// share of them.
func (s *Set) ExpectMore(keys uint64) {
	for _, x := range s.indexes {
		x.more.Store(keys >> x.foot.rng.Bits)
	}
}

// Lookups are one goroutine's buffers for Set.ContainsBatch. The zero
// value is ready to use.
type Lookups struct {
	counts  [1<<lookupSortBits + 1]int32
	perm    []int32
	sorted  []Fingerprint
	found   []bool
	scratch []bool
	absent  bool // fewer than a quarter of the last window were present
}

const (
	lookupSortBits  = 12
	sortedLookupMin = 4096
	sortedLookupMax = 1 << 16
)

func (s *Set) containsWindow(fps []Fingerprint, found []bool, l *Lookups) error {
	n := len(fps)
	if cap(l.perm) < n {
		l.perm = make([]int32, n)
		l.sorted = make([]Fingerprint, n)
		l.found = make([]bool, n)
		l.scratch = make([]bool, n)
	}
	// Sorting pays for the keys that get past the filter to the directory
	// and the fingerprints; an absent key is answered by the filter block
	// its low bits pick, in whatever order, and the sort is extra work, so
	// it is skipped after a window less than a quarter present. Unsorted
	// windows update the rule too, so keys turning present are sorted from
	// the next window.
	if n < sortedLookupMin || l.absent {
		if err := s.containsInOrder(fps, found[:n], l.scratch[:n], false); err != nil {
			return err
		}
		l.absent = 4*countTrue(found[:n]) < n
		return nil
	}
	perm, sorted, sfound := l.perm[:n], l.sorted[:n], l.found[:n]
	clear(l.counts[:])
	for _, fp := range fps {
		l.counts[fp.Hi>>(64-lookupSortBits)+1]++
	}
	for b := 1; b < len(l.counts); b++ {
		l.counts[b] += l.counts[b-1]
	}
	for i, fp := range fps {
		b := fp.Hi >> (64 - lookupSortBits)
		perm[l.counts[b]] = int32(i)
		sorted[l.counts[b]] = fp
		l.counts[b]++
	}
	if err := s.containsInOrder(sorted, sfound, l.scratch[:n], true); err != nil {
		return err
	}
	for j, i := range perm {
		found[i] = sfound[j]
	}
	l.absent = 4*countTrue(sfound) < n
	return nil
}

func countTrue(bs []bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// containsInOrder answers fps in the order given, which sorted says is
// ascending in the leading bits; scratch has len(fps).
func (s *Set) containsInOrder(fps []Fingerprint, found, scratch []bool, sorted bool) error {
	if err := s.indexes[0].containsBatch(fps, found, sorted); err != nil {
		return err
	}
	for _, x := range s.indexes[1:] {
		if err := x.containsBatch(fps, scratch, sorted); err != nil {
			return err
		}
		for i, ok := range scratch {
			found[i] = found[i] || ok
		}
	}
	return nil
}

// Close closes every index.
func (s *Set) Close() error {
	var first error
	for _, x := range s.indexes {
		if err := x.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
