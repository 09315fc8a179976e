package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestBarUnits: the progress bar counts bytes in the summaries' IEC units
// (MiB, powers of 1024), whether the total is known (a file) or not (stdin).
func TestBarUnits(t *testing.T) {
	for _, c := range []struct {
		name  string
		total int64
		want  string
	}{
		{"known total", 10 << 20, "3.0/10 MiB"},
		{"unknown total", -1, "3.0 MiB"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			bar := newBar(&buf, "dedup", c.total)
			if err := bar.Set64(3 << 20); err != nil {
				t.Fatal(err)
			}
			got := buf.String()
			if !strings.Contains(got, c.want) || strings.Contains(got, " MB") {
				t.Fatalf("the bar at 3 MiB of %d bytes reads %q, want %q in it", c.total, got, c.want)
			}
		})
	}
}
