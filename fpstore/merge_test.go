package fpstore

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// setRefs is the reference for the set algebra: a Go map of every
// input's fingerprints, how many inputs hold each and whether the first
// does; it gives the three operations' results from one pass.
func setRefs(sets [][]Fingerprint) map[SetOp][]Fingerprint {
	type seen struct {
		n     int
		first bool
	}
	total := 0
	for _, s := range sets {
		total += len(s)
	}
	held := make(map[Fingerprint]seen, total)
	for i, s := range sets {
		for _, fp := range s {
			h := held[fp]
			h.n++
			h.first = h.first || i == 0
			held[fp] = h
		}
	}
	out := map[SetOp][]Fingerprint{}
	for fp, h := range held {
		out[Union] = append(out[Union], fp)
		if h.first && h.n == 1 {
			out[Subtract] = append(out[Subtract], fp)
		}
		if h.n == len(sets) {
			out[Intersect] = append(out[Intersect], fp)
		}
	}
	for _, fps := range out {
		slices.SortFunc(fps, Fingerprint.Compare)
	}
	return out
}

// setRef is setRefs' result for op.
func setRef(op SetOp, sets [][]Fingerprint) []Fingerprint {
	return setRefs(sets)[op]
}

// mergeShapes makes k input sets of one kind from a pool of fingerprints.
// The segment boundaries fall differently in each (sizes from a few to a
// few segments), which the two-way merge's per-segment spans must cross.
func mergeShapes(r *rand.Rand, shape string, k, n int) [][]Fingerprint {
	pool := sortUnique(randomFPs(r, n))
	sets := make([][]Fingerprint, k)
	for i := range sets {
		switch shape {
		case "random": // overlapping at random
			for _, fp := range pool {
				if r.IntN(3) == 0 {
					sets[i] = append(sets[i], fp)
				}
			}
		case "identical":
			sets[i] = slices.Clone(pool)
		case "disjoint": // interleaved, no fingerprint in two
			for j, fp := range pool {
				if j%k == i {
					sets[i] = append(sets[i], fp)
				}
			}
		case "nested": // each input a subset of the one before
			prev := pool
			if i > 0 {
				prev = sets[i-1]
			}
			for _, fp := range prev {
				if i == 0 || r.IntN(4) != 0 {
					sets[i] = append(sets[i], fp)
				}
			}
		case "blocks": // long runs from one input, then another
			for j, fp := range pool {
				if (j/50_000)%k == i || r.IntN(50) == 0 {
					sets[i] = append(sets[i], fp)
				}
			}
		case "empty-some":
			if i%2 == 0 {
				sets[i] = slices.Clone(pool[:n/(i+2)])
			}
		}
	}
	return sets
}

// TestMergeAgainstMap runs union, subtract and intersect through Merge
// (the two-way in-place loop, the linear scan, the heap) and compares the
// result with a Go map, and with the bytes of one build of the expected
// set (the result is canonical).
func TestMergeAgainstMap(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	dir := t.TempDir()
	type tc struct {
		shape string
		k, n  int
	}
	var cases []tc
	for _, shape := range []string{"random", "identical", "disjoint", "nested", "blocks", "empty-some"} {
		for _, k := range []int{1, 2, 3, 9, 64} {
			n := 60_000
			if k == 2 {
				n = 1_500_000 // two segments or more in each input
			}
			if k == 64 && shape != "random" {
				continue
			}
			cases = append(cases, tc{shape, k, n})
		}
	}
	if testing.Short() {
		cases = cases[:4]
	}
	for _, c := range cases {
		sets := mergeShapes(r, c.shape, c.k, c.n)
		var paths []string
		for i, s := range sets {
			p := filepath.Join(dir, fmt.Sprintf("in%d.fpx", i))
			writeIndex(t, p, s, WriterOptions{})
			paths = append(paths, p)
		}
		refs := setRefs(sets)
		for _, op := range []SetOp{Union, Subtract, Intersect} {
			t.Run(fmt.Sprintf("%s/k=%d/op=%d", c.shape, c.k, op), func(t *testing.T) {
				inputs := make([]*Index, len(paths))
				for i, p := range paths {
					x, err := Open(p)
					if err != nil {
						t.Fatal(err)
					}
					defer x.Close()
					inputs[i] = x
				}
				out := filepath.Join(dir, "out.fpx")
				st, err := Merge(out, inputs, MergeOptions{Op: op})
				if err != nil {
					t.Fatal(err)
				}
				want := refs[op]
				if st.Fingerprints != uint64(len(want)) {
					t.Fatalf("merged %d fingerprints, the map has %d", st.Fingerprints, len(want))
				}
				x, err := Open(out)
				if err != nil {
					t.Fatal(err)
				}
				defer x.Close()
				got := make([]Fingerprint, 0, len(want))
				buf := make([]Fingerprint, 1000)
				for c := x.Cursor(); ; {
					n, err := c.Read(buf)
					if n == 0 || err != nil {
						break
					}
					got = append(got, buf[:n]...)
				}
				if !slices.Equal(got, want) {
					t.Fatalf("merged set differs from the map's (%d vs %d fingerprints)", len(got), len(want))
				}
				ref := filepath.Join(dir, "ref.fpx")
				writeIndex(t, ref, want, WriterOptions{})
				a, _ := os.ReadFile(out)
				b, _ := os.ReadFile(ref)
				if !bytes.Equal(a, b) {
					t.Fatal("merge output is not byte-identical to a build of the same set")
				}
			})
		}
	}
}

// TestStep2 checks the branch-free two-way step on every relation of two
// heads, including equal ones and the shared high word, against the map.
func TestStep2(t *testing.T) {
	a := []Fingerprint{{1, 1}, {1, 5}, {2, 0}, {3, 3}, {^uint64(0), ^uint64(0)}}
	b := []Fingerprint{{0, 9}, {1, 5}, {1, 6}, {3, 2}, {3, 3}, {^uint64(0), 0}}
	for _, op := range []SetOp{Union, Subtract, Intersect} {
		out := make([]Fingerprint, 20)
		i, j, k := step2(a, b, out, op)
		got := out[:k]
		// Finish the tails as merge2 does.
		if op == Union || op == Subtract {
			got = append(got, a[i:]...)
		}
		if op == Union {
			got = append(got, b[j:]...)
		}
		if want := setRef(op, [][]Fingerprint{a, b}); !slices.Equal(got, want) {
			t.Errorf("op %d: got %v, want %v", op, got, want)
		}
	}
}

// TestMergePartition: N machines each merging prefix range I/N of the same
// inputs get exactly the range's share of the result, and merging their N
// outputs (a stitch) gives the bytes of the whole merge.
func TestMergePartition(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	dir := t.TempDir()
	n := 2_400_000 // several segments per partition of 8
	if testing.Short() {
		n = 800_000 // -race -short in CI; the plain run merges the larger
	}
	sets := mergeShapes(r, "random", 3, n)
	var inputs []*Index
	for i, s := range sets {
		p := filepath.Join(dir, fmt.Sprintf("in%d.fpx", i))
		writeIndex(t, p, s, WriterOptions{})
		x, err := Open(p)
		if err != nil {
			t.Fatal(err)
		}
		defer x.Close()
		inputs = append(inputs, x)
	}
	refs := setRefs(sets)
	for _, op := range []SetOp{Union, Subtract, Intersect} {
		whole := filepath.Join(dir, fmt.Sprintf("whole%d.fpx", op))
		if _, err := Merge(whole, inputs, MergeOptions{Op: op}); err != nil {
			t.Fatal(err)
		}
		want := refs[op]
		for _, n := range []uint64{2, 8} {
			bits := uint8(0)
			for 1<<bits < n {
				bits++
			}
			var parts []*Index
			for i := uint64(0); i < n; i++ {
				part := Range{Bits: bits, Index: i}
				p := filepath.Join(dir, fmt.Sprintf("part%d-%d-%d.fpx", op, n, i))
				st, err := Merge(p, inputs, MergeOptions{Op: op, Partition: part})
				if err != nil {
					t.Fatal(err)
				}
				var share int
				for _, fp := range want {
					if part.Contains(fp) {
						share++
					}
				}
				if st.Fingerprints != uint64(share) || st.Range != part.String() {
					t.Fatalf("op %d partition %s: %d fingerprints, range %s; want %d, %s", op, part, st.Fingerprints, st.Range, share, part)
				}
				x, err := Open(p)
				if err != nil {
					t.Fatal(err)
				}
				defer x.Close()
				parts = append(parts, x)
			}
			stitched := filepath.Join(dir, "stitched.fpx")
			st, err := Merge(stitched, parts, MergeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !st.Stitched {
				t.Errorf("op %d, %d partitions: merged by k-way, not stitched", op, n)
			}
			a, _ := os.ReadFile(whole)
			b, _ := os.ReadFile(stitched)
			if !bytes.Equal(a, b) {
				t.Fatalf("op %d: the %d stitched partition merges differ from the whole merge", op, n)
			}
		}
	}
}
