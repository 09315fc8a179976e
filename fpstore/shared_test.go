package fpstore

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestContainsSharedAgainstMap checks a batch shared among goroutines
// against the keys written, for share counts that split segments and
// buckets anywhere, keys sorted and not, warm and cold (coldread.go):
// every answer in its place.
func TestContainsSharedAgainstMap(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	all := sortUnique(randomFPs(r, SegmentMax+SegmentMax/2)) // two segments
	path := filepath.Join(t.TempDir(), "x.fpx")
	writeIndex(t, path, all, WriterOptions{})
	x, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	in := func(fp Fingerprint) bool {
		_, ok := slices.BinarySearchFunc(all, fp, Fingerprint.Compare)
		return ok
	}
	for _, n := range []int{1, 2, 3, 4097, 10_000} {
		fps := make([]Fingerprint, n)
		for i := range fps {
			if i%2 == 0 {
				fps[i] = all[r.IntN(len(all))]
			} else {
				fps[i] = Fingerprint{r.Uint64(), r.Uint64()}
			}
		}
		for _, sorted := range []bool{false, true} {
			if sorted {
				slices.SortFunc(fps, Fingerprint.Compare)
			}
			for _, parts := range []int{2, 3, 7} {
				for _, cold := range []bool{false, true} {
					if parts > n {
						continue
					}
					found := make([]bool, n)
					for i := range found {
						found[i] = i%3 == 0 // stale answers must be overwritten
					}
					if err := x.containsShared(fps, found, sorted, parts, cold); err != nil {
						t.Fatal(err)
					}
					for i, fp := range fps {
						if found[i] != in(fp) {
							t.Fatalf("%d keys (sorted %v, cold %v) in %d shares: key %d (%s): %v, want %v", n, sorted, cold, parts, i, fp, found[i], in(fp))
						}
					}
				}
			}
		}
	}
}

// TestContainsSharedDamage damages a page only the last share reads: the
// batch fails with ErrCorrupt, as an unshared batch does, and the
// shares' answers before it are still right.
func TestContainsSharedDamage(t *testing.T) {
	r := rand.New(rand.NewPCG(43, 44))
	all := sortUnique(randomFPs(r, 200_000))
	path := filepath.Join(t.TempDir(), "x.fpx")
	writeIndex(t, path, all, WriterOptions{})
	x, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	s, err := x.segment(len(x.foot.segments) - 1)
	if err != nil {
		t.Fatal(err)
	}
	// A byte of the last page of fingerprints: the largest keys'.
	at := s.ref.offset + s.fpsAt + 16*uint64(len(s.fps)) - 5
	x.Close()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[at] ^= 0x40
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	x, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	fps := all[:len(all):len(all)] // sorted: the damaged page is the last share's
	found := make([]bool, len(fps))
	for _, cold := range []bool{false, true} {
		clear(found)
		err = x.containsShared(fps, found, true, 3, cold)
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("a damaged page in the last share (cold %v): %v, want ErrCorrupt", cold, err)
		}
		for i, ok := range found[:len(fps)/3] {
			if !ok {
				t.Fatalf("key %d of the first share (cold %v): absent, want present", i, cold)
			}
		}
	}
	// The same page read by the first share of keys in no order.
	head := slices.Clone(fps[len(fps)-10:])
	fps2 := append(head, fps[:len(fps)-10]...)
	x2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer x2.Close()
	if err := x2.containsShared(fps2, make([]bool, len(fps2)), false, 2, false); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a damaged page in the first share: %v, want ErrCorrupt", err)
	}
}
