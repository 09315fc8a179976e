package main

import (
	"bytes"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/fpdedup/fpdedup/ingest"
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

// TestProgressLeavesNoGoroutine: once the bar is stopped, nothing of it
// runs on: no goroutine draws on stderr after the command has finished,
// whether the total is known or not.
func TestProgressLeavesNoGoroutine(t *testing.T) {
	for _, total := range []int64{-1, 10 << 20} {
		var w lockedBuffer
		inv := &invocation{progress: "always", stderr: &w}
		p := new(ingest.Progress)
		p.Total.Store(total)
		stop := inv.showProgress("dedup", p)
		p.RawBytes.Store(3 << 20)
		stop()
		buf := make([]byte, 1<<20)
		stacks := string(buf[:runtime.Stack(buf, true)])
		if strings.Contains(stacks, "schollz/progressbar") {
			t.Fatalf("total %d: a progress bar goroutine outlives stop:\n%s", total, stacks)
		}
	}
}

// lockedBuffer is a bytes.Buffer safe to write from the bar's goroutine.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
