package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// firstLines is the reference: awk '!s[$0]++' with a Go map.
func firstLines(data string) string {
	seen := map[string]bool{}
	var b strings.Builder
	lines := strings.SplitAfter(data, "\n")
	for _, l := range lines {
		if l == "" {
			continue
		}
		key := strings.TrimSuffix(l, "\n")
		if !seen[key] {
			seen[key] = true
			b.WriteString(key + "\n")
		}
	}
	return b.String()
}

// TestBoundAgainstMap: the floor is only a floor if it does the job: its
// output must be what awk '!s[$0]++' prints, at block boundaries too.
func TestBoundAgainstMap(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var big strings.Builder
	for big.Len() < 9<<20 { // more than two 4 MiB blocks: lines straddle them
		fmt.Fprintf(&big, "u%d,%s\n", r.IntN(50_000), strings.Repeat("x", r.IntN(90)))
	}
	cases := map[string]string{
		"empty":          "",
		"one line":       "a\n",
		"unterminated":   "a\nb\na",
		"empty lines":    "\n\na\n\n",
		"repeats":        "b\na\nb\nc\na\n",
		"crlf kept":      "a\r\na\n",
		"blocks":         big.String(),
		"last repeated":  "x\ny\nx",
		"only unterm":    "zz",
		"nul and spaces": "a\x00b\n a\na \na\x00b\n",
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "in.txt")
			if err := os.WriteFile(f, []byte(in), 0o644); err != nil {
				t.Fatal(err)
			}
			out, _ := runCmd(t, 0, "-q", "bound", "--distinct", "200k", f)
			if want := firstLines(in); out != want {
				t.Errorf("bound printed %d bytes, the map reference %d; first difference near byte %d",
					len(out), len(want), firstDiff(out, want))
			}
		})
	}
}

func firstDiff(a, b string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestBoundErrors: a table too small for the input and a missing file are
// errors (exit 2), not a hang or a wrong floor.
func TestBoundErrors(t *testing.T) {
	f := filepath.Join(t.TempDir(), "in.txt")
	var b strings.Builder
	for i := range 10_000 {
		fmt.Fprintf(&b, "%d\n", i)
	}
	if err := os.WriteFile(f, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, stderr := runCmd(t, 2, "bound", "--distinct", "100", f); !strings.Contains(stderr, "raise --distinct") {
		t.Errorf("too small a table: stderr does not say to raise --distinct:\n%s", stderr)
	}
	runCmd(t, 2, "bound", "--distinct", "100", filepath.Join(t.TempDir(), "missing"))
	runCmd(t, 2, "bound", f) // no --distinct
}
