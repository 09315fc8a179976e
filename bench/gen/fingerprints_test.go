package gen

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
)

// Fingerprints writes distinct 32-digit lowercase hex lines, the same for
// the same seed and index, so that ranges of one seed overlap where their
// indexes do.
func TestFingerprints(t *testing.T) {
	run := func(seed, from, count uint64) []string {
		t.Helper()
		var b bytes.Buffer
		if err := Fingerprints(&b, seed, from, count); err != nil {
			t.Fatal(err)
		}
		return strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	}
	a := run(3, 0, 1000)
	b := run(3, 800, 1000)
	c := run(4, 0, 1000)
	if len(a) != 1000 || len(b) != 1000 {
		t.Fatalf("got %d and %d lines, want 1000", len(a), len(b))
	}
	hex := regexp.MustCompile(`^[0-9a-f]{32}$`)
	seen := map[string]int{}
	for _, l := range append(append(append([]string{}, a...), b...), c...) {
		if !hex.MatchString(l) {
			t.Fatalf("line %q is not 32 lowercase hex digits", l)
		}
		seen[l]++
	}
	// a and b share their 200 common indexes; seed 4 shares nothing.
	if want := 1000 + 800 + 1000; len(seen) != want {
		t.Errorf("%d distinct fingerprints, want %d", len(seen), want)
	}
	for i := range 200 {
		if a[800+i] != b[i] {
			t.Fatalf("index %d differs between ranges", 800+i)
		}
	}
	// Frozen (what bench/benchtool fp wrote): the lines of a seed never
	// change, so runs on different days measure the same keys.
	if a[0] != "b1233a982eb871b2a8753667864ce902" || a[1] != "72997223a76406491f22c0367648dd2c" {
		t.Errorf("seed 3 starts %s, %s; the sequence changed", a[0], a[1])
	}
	if l := run(1, 1_000_000, 1); l[0] != "fb055abbd5e493bd1c5d048b64f107b4" {
		t.Errorf("seed 1, index 1M: %s; the sequence changed", l[0])
	}
}
