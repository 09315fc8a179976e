package fpstore

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// Partitions that hold more than SegmentMax are copied segment by segment,
// those that hold less are re-packed with their siblings: either way the
// bytes are those of one build. Skewed on purpose: partition 0 of 4 holds
// 1.2M fingerprints, the others a handful.
func TestStitchEqualsBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds 1.2M-key indexes")
	}
	r := rand.New(rand.NewPCG(11, 12))
	var fps []Fingerprint
	for i := 0; i < SegmentMax+SegmentMax/5; i++ {
		fps = append(fps, Fingerprint{r.Uint64() >> 2, r.Uint64()}) // prefix 00
	}
	for p := uint64(1); p < 4; p++ {
		for i := 0; i < 10; i++ {
			fps = append(fps, Fingerprint{p<<62 | r.Uint64()>>2, r.Uint64()})
		}
	}
	fps = sortUnique(fps)
	dir := t.TempDir()
	whole := filepath.Join(dir, "whole.fpx")
	writeIndex(t, whole, fps, WriterOptions{})
	var parts []*Index
	for p := uint64(0); p < 4; p++ {
		rng := Range{Bits: 2, Index: p}
		var mine []Fingerprint
		for _, fp := range fps {
			if rng.Contains(fp) {
				mine = append(mine, fp)
			}
		}
		path := filepath.Join(dir, "p"+string(rune('0'+p))+".fpx")
		writeIndex(t, path, mine, WriterOptions{Range: rng})
		x, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer x.Close()
		parts = append(parts, x)
	}
	out := filepath.Join(dir, "stitched.fpx")
	st, err := Merge(out, []*Index{parts[2], parts[0], parts[3], parts[1]}, MergeOptions{Op: Union})
	if err != nil {
		t.Fatal(err)
	}
	if !st.Stitched {
		t.Fatal("disjoint partitions were not stitched")
	}
	a, _ := os.ReadFile(whole)
	b, _ := os.ReadFile(out)
	if !bytes.Equal(a, b) {
		t.Fatalf("stitched index (%d bytes) differs from the single build (%d bytes)", len(b), len(a))
	}
}
