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
// scratch must have len(fps) and is overwritten.
func (s *Set) ContainsBatch(fps []Fingerprint, found, scratch []bool) error {
	if err := s.indexes[0].ContainsBatch(fps, found); err != nil {
		return err
	}
	for _, x := range s.indexes[1:] {
		if err := x.ContainsBatch(fps, scratch); err != nil {
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
