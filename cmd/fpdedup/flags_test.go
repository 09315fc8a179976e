package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// TestThreadsCapped: --threads beyond the cores is capped to them (each
// thread's buffers come out of --mem: 100000 threads grew past 2 GB under
// --mem 64MiB, and a larger figure met the OOM killer).
func TestThreadsCapped(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.txt")
	if err := os.WriteFile(in, []byte("a\nb\na\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, threads := range []string{"100000", "99999999999"} {
		stats := filepath.Join(dir, "s.json")
		code, out, stderr := runInProcess("dedup", "-q", "--threads", threads, "--mem", "64MiB", "--stats-json", stats, in)
		if code != 0 || out != "a\nb\n" {
			t.Fatalf("--threads %s: exit %d, stdout %q\n%s", threads, code, out, stderr)
		}
		b, err := os.ReadFile(stats)
		if err != nil {
			t.Fatal(err)
		}
		var st struct{ Threads int }
		if err := json.Unmarshal(b, &st); err != nil {
			t.Fatal(err)
		}
		if st.Threads != runtime.NumCPU() {
			t.Errorf("--threads %s: ran %d threads, want the %d cores", threads, st.Threads, runtime.NumCPU())
		}
	}
}
