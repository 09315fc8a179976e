package fpstore

import (
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/fpdedup/fpdedup/internal/pagecache"
)

// TestRank: Rank is a fingerprint's position in ascending order, across
// segments, and says absent for what the index does not hold.
func TestRank(t *testing.T) {
	x, fps, r := rankIndex(t)
	n := len(fps)
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

// rankIndex is an index of more than two segments' random fingerprints
// (fewer with -short), open, and its fingerprints in ascending order: a
// fingerprint's rank is its place there.
func rankIndex(t *testing.T, opts ...Option) (*Index, []Fingerprint, *rand.Rand) {
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
	x, err := Open(path, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close() })
	return x, fps, r
}

// TestRankBatch: RankBatch answers as Rank does, key by key, for batches
// of every size in no order, half present, warm and with the index
// dropped from the page cache before each batch and planned for pread
// (read through the mapping, each stage's pages asked for at once); the ranks of absent keys are 0 whatever the slice held.
func TestRankBatch(t *testing.T) {
	for _, cold := range []bool{false, true} {
		var opts []Option
		if cold {
			opts = append(opts, WithReadBuffers(16<<20))
		}
		x, fps, r := rankIndex(t, opts...)
		if cold {
			// Planned for pread, as a small cold batch of a large index
			// is (this one is small enough to be read whole).
			x.forcePath.Store(uint32(pathPread))
		}
		for _, size := range []int{1, 2, 31, 33, 1000, 5000} {
			keys := make([]Fingerprint, size)
			for i := range keys {
				if r.IntN(2) == 0 {
					keys[i] = fps[r.IntN(len(fps))]
				} else {
					keys[i] = Fingerprint{Hi: r.Uint64(), Lo: r.Uint64()}
				}
			}
			if cold {
				// Unmapped, then dropped (where the file system lets
				// it: on tmpfs the batch reads warm, and answers all
				// the same).
				_ = unix.Madvise(x.data, unix.MADV_DONTNEED)
				_, _ = pagecache.Drop(x.path)
			}
			ranks, found := make([]uint64, size), make([]bool, size)
			for i := range ranks {
				ranks[i] = ^uint64(0)
			}
			if err := x.RankBatch(keys, ranks, found); err != nil {
				t.Fatalf("cold %v, %d keys: %v", cold, size, err)
			}
			for i, fp := range keys {
				want, in := slices.BinarySearchFunc(fps, fp, Fingerprint.Compare)
				if !in {
					want = 0
				}
				if found[i] != in || ranks[i] != uint64(want) {
					t.Fatalf("cold %v, %d keys: key %d (%v): rank %d, found %v; want %d, %v", cold, size, i, fp, ranks[i], found[i], want, in)
				}
				if r1, f1, err := x.Rank(fp); err != nil || r1 != ranks[i] || f1 != found[i] {
					t.Fatalf("Rank(%v) = %d, %v, %v; RankBatch said %d, %v", fp, r1, f1, err, ranks[i], found[i])
				}
			}
		}
	}
	x, _, _ := rankIndex(t)
	if err := x.RankBatch(make([]Fingerprint, 3), make([]uint64, 2), make([]bool, 3)); err == nil {
		t.Fatal("RankBatch with too few ranks: no error")
	}
}
