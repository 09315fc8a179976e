package fpstore

import (
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
)

// TestRank: Rank is a fingerprint's position in ascending order, across
// segments, and says absent for what the index does not hold.
func TestRank(t *testing.T) {
	n := 2_500_000 // more than two segments of SegmentMax
	if testing.Short() {
		n = 50_000
	}
	r := rand.New(rand.NewPCG(7, 8))
	fps := make([]Fingerprint, n)
	for i := range fps {
		fps[i] = Fingerprint{Hi: r.Uint64(), Lo: r.Uint64()}
	}
	slices.SortFunc(fps, Fingerprint.Compare)
	fps = slices.Compact(fps)
	path := filepath.Join(t.TempDir(), "r.fpx")
	w, err := Create(path, WriterOptions{Spec: Spec{Hash: "xxh3-128"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Add(fps...); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	x, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if n > SegmentMax && x.Segments() < 2 {
		t.Fatalf("%d segments", x.Segments())
	}
	for i := 0; i < len(fps); i += 997 {
		rank, found, err := x.Rank(fps[i])
		if err != nil || !found || rank != uint64(i) {
			t.Fatalf("Rank(fps[%d]) = %d, %v, %v", i, rank, found, err)
		}
	}
	last := len(fps) - 1
	if rank, found, _ := x.Rank(fps[last]); !found || rank != uint64(last) {
		t.Fatalf("the last: %d %v", rank, found)
	}
	for range 1000 {
		fp := Fingerprint{Hi: r.Uint64(), Lo: r.Uint64()}
		_, inFPs := slices.BinarySearchFunc(fps, fp, Fingerprint.Compare)
		if _, found, err := x.Rank(fp); err != nil || found != inFPs {
			t.Fatalf("Rank(%v): found %v, want %v (%v)", fp, found, inFPs, err)
		}
	}
}
