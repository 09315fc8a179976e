package fpstore

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/fpdedup/fpdedup/internal/atomicfile"
)

// MergeOptions configure Merge.
type MergeOptions struct {
	Op      SetOp
	Threads int // segment builders
	// Partition, when not whole, keeps only the fingerprints of that prefix
	// range (merge --partition I/N): one of N machines merging its share
	// of the same inputs; the N results stitch into the whole merge.
	Partition Range
	// Progress, when set, is called with the fingerprints written so far;
	// an error from it (an interrupt) stops the merge, publishing nothing.
	Progress func(written uint64) error
	// Group, if set, publishes the output at the command's commit point.
	Group *atomicfile.Group
}

// MergeStats are a merge's figures.
type MergeStats struct {
	Inputs       int    `json:"inputs"`
	InputKeys    uint64 `json:"input_fingerprints"`
	Fingerprints uint64 `json:"fingerprints"`
	Range        string `json:"partition"`
	// Stitched: the inputs were disjoint partitions, whose segments were
	// copied rather than merged.
	Stitched bool `json:"stitched"`
}

// Merge writes op over the input indexes to a new index at out, published
// atomically (out may name an input: the inputs stay mapped while the new
// file replaces the name). It streams every input once, in order, through
// a k-way merge, with memory independent of the index sizes; the output is
// canonical, so merging partial builds gives the bytes of one build.
//
// The inputs must share their spec. Their covered ranges must fit the
// operation: a union of indexes of one range keeps it, a union of disjoint
// partitions that tile a prefix range covers that range; a subtraction
// keeps the first input's range; an intersection needs one range.
func Merge(out string, inputs []*Index, opts MergeOptions) (MergeStats, error) {
	st := MergeStats{Inputs: len(inputs)}
	if len(inputs) == 0 {
		return st, errors.New("merge needs at least one index")
	}
	spec := inputs[0].Spec()
	for _, x := range inputs[1:] {
		if !x.Spec().Equal(spec) {
			return st, &SpecMismatchError{Paths: [2]string{inputs[0].Path(), x.Path()}, Specs: [2]Spec{spec, x.Spec()}}
		}
	}
	part := opts.Partition
	if !part.Whole() {
		// Inputs outside the partition add nothing (a subtraction's
		// first input must reach it); the others must cover it.
		var in []*Index
		for i, x := range inputs {
			if overlap(x.Range(), part) {
				in = append(in, x)
			} else if i == 0 && opts.Op != Union {
				return st, &PartitionError{Path: x.Path(), Has: x.Range(), Want: part}
			}
		}
		if len(in) == 0 {
			return st, fmt.Errorf("no input covers any of partition %s", part)
		}
		inputs = in
	}
	rng, err := mergedRange(inputs, opts.Op)
	if err != nil {
		return st, err
	}
	if !part.Whole() {
		if !overlap(rng, part) || rng.Bits > part.Bits {
			return st, &PartitionError{Has: rng, Want: part}
		}
		rng = part
	}
	st.Range = rng.String()
	cursors := make([]*Cursor, len(inputs))
	for i, x := range inputs {
		st.InputKeys += x.Len()
		cursors[i] = x.RangeCursor(part)
		_ = unix.Fadvise(int(x.file.Fd()), 0, 0, unix.FADV_SEQUENTIAL)
	}
	// The merge's memory is a few segments and one chunk per input,
	// whatever the sizes: Sequential for a stitch (segments are copied),
	// one builder for a k-way merge, whose segments are built and written
	// on other goroutines while this one merges the next (merging,
	// building and writing each take a comparable share of the CPU).
	xs, stitch := stitchable(inputs, opts.Op)
	stitch = stitch && part.Whole()
	w, err := Create(out, WriterOptions{Spec: spec, Range: rng, Sequential: stitch, Threads: 1, Group: opts.Group})
	if err != nil {
		return st, err
	}
	defer w.Abort()
	if stitch {
		// Disjoint partitions: copy their segments, no k-way merge.
		st.Stitched = true
		if err := stitchSegments(w, xs, rng); err != nil {
			return st, err
		}
		if st.Fingerprints, err = w.Commit(); err != nil {
			return st, err
		}
		return st, nil
	}
	var written uint64
	err = MergeCursors(cursors, opts.Op, func(fps []Fingerprint) error {
		written += uint64(len(fps))
		if opts.Progress != nil {
			if err := opts.Progress(written); err != nil {
				return err
			}
		}
		return w.Add(fps...)
	})
	if err != nil {
		return st, err
	}
	if st.Fingerprints, err = w.Commit(); err != nil {
		return st, err
	}
	return st, nil
}

func describeSpec(s Spec) string {
	if len(s.Key) == 0 {
		return s.Hash + " of whole records"
	}
	return fmt.Sprintf("%s of %v joined by %q", s.Hash, s.Key, s.KeySep)
}

// mergedRange is the covered range of op's result.
func mergedRange(inputs []*Index, op SetOp) (Range, error) {
	first := inputs[0].Range()
	same := true
	for _, x := range inputs[1:] {
		same = same && x.Range() == first
	}
	switch {
	case same:
		return first, nil
	case op == Subtract:
		return first, nil
	case op == Intersect:
		return Range{}, fmt.Errorf("cannot intersect indexes that cover different prefix ranges (%s and others)", first)
	}
	// A union of partitions: they must be disjoint and tile one node.
	minBits := uint8(64)
	for _, x := range inputs {
		if x.Range().Bits == 0 {
			return Range{}, nil // a whole index absorbs the rest
		}
		minBits = min(minBits, x.Range().Bits)
	}
	for i, a := range inputs {
		for _, b := range inputs[i+1:] {
			if overlap(a.Range(), b.Range()) && a.Range() != b.Range() {
				return Range{}, fmt.Errorf("%s (partition %s) and %s (partition %s) overlap without being equal", a.Path(), a.Range(), b.Path(), b.Range())
			}
		}
	}
	// Distinct partitions' widths must add up to a node's width, and all
	// lie under that node.
	seen := map[Range]bool{}
	total := 0.0
	for _, x := range inputs {
		if !seen[x.Range()] {
			seen[x.Range()] = true
			total += 1 / float64(uint64(1)<<x.Range().Bits)
		}
	}
	for bits := uint8(0); bits <= minBits; bits++ {
		if total == 1/float64(uint64(1)<<bits) {
			r := Range{Bits: bits, Index: first.Index >> (first.Bits - bits)}
			for _, x := range inputs {
				if x.Range().Index>>(x.Range().Bits-bits) != r.Index {
					return Range{}, fmt.Errorf("the partitions do not tile one prefix range")
				}
			}
			return r, nil
		}
	}
	return Range{}, fmt.Errorf("the partitions cover %.6g of the fingerprint space, not one whole prefix range: merge all N partitions of a build", total)
}

func overlap(a, b Range) bool {
	bits := min(a.Bits, b.Bits)
	return a.Index>>(a.Bits-bits) == b.Index>>(b.Bits-bits)
}
