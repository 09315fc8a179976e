package fpstore

import (
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
)

// TestSetContainsBatch checks Set.ContainsBatch against a sorted reference
// for batch sizes on both sides of the sorted path's threshold and across
// its 64k windows, keys in random order (present, absent, repeated), a set
// of two indexes of several segments (so that a sorted window's keys move
// from segment to segment), and one Lookups reused from a larger batch to smaller
// ones and through a run of absent keys, which it answers unsorted.
func TestSetContainsBatch(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	all := sortUnique(randomFPs(r, 3*SegmentMax)) // index a holds 2-4 segments, b 1-2
	dir := t.TempDir()
	var a, b []Fingerprint
	for i, fp := range all {
		if i%3 == 0 {
			b = append(b, fp)
		} else {
			a = append(a, fp)
		}
	}
	var xs []*Index
	for i, fps := range [][]Fingerprint{a, b} {
		p := filepath.Join(dir, string(rune('a'+i))+".fpx")
		writeIndex(t, p, fps, WriterOptions{})
		x, err := Open(p)
		if err != nil {
			t.Fatal(err)
		}
		defer x.Close()
		xs = append(xs, x)
	}
	if n := len(xs[0].foot.segments); n < 2 {
		t.Fatalf("index a has %d segments: the test needs a key search to cross segments", n)
	}
	set, err := NewSet(xs)
	if err != nil {
		t.Fatal(err)
	}
	in := func(fp Fingerprint) bool {
		_, ok := slices.BinarySearchFunc(all, fp, Fingerprint.Compare)
		return ok
	}
	var look Lookups
	// Mixed batches (sorted), then absent ones (the first window sorted,
	// the rest in order), then mixed again (sorted from the second window).
	for k, n := range []int{sortedLookupMax + 4097, 200_000, sortedLookupMin, sortedLookupMin - 1, sortedLookupMin + 1, 1, 0, 20 * sortedLookupMax, sortedLookupMax, 150_000} {
		absent := k == 7
		fps := make([]Fingerprint, n)
		for i := range fps {
			switch c := r.IntN(3); {
			case c == 0 || absent:
				fps[i] = Fingerprint{r.Uint64(), r.Uint64()}
			case c == 1:
				fps[i] = all[r.IntN(len(all))]
			default:
				if i > 0 {
					fps[i] = fps[r.IntN(i)]
				}
			}
		}
		found := make([]bool, n+3) // longer than the batch: the tail is left alone
		for i := range found {
			found[i] = i%2 == 0 // stale answers must be overwritten
		}
		if err := set.ContainsBatch(fps, found, &look); err != nil {
			t.Fatal(err)
		}
		if found[n] != (n%2 == 0) || found[n+1] != (n%2 == 1) || found[n+2] != (n%2 == 0) {
			t.Fatalf("batch of %d: wrote past len(fps): %v", n, found[n:])
		}
		for i, fp := range fps {
			if found[i] != in(fp) {
				t.Fatalf("batch of %d: key %d (%s): %v, want %v", n, i, fp, found[i], in(fp))
			}
		}
	}
}
