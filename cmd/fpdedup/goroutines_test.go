package main

import (
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestRunLeavesNothingBehind runs every command in process, on paths that
// succeed, give a negative answer and fail early, and checks that no
// goroutine started by run outlives it and that the process-wide settings
// a command changes (GOMAXPROCS, the heap limit) are put back: tests run
// hundreds of commands in one process, and what one run leaves spins or
// throttles beside all the others.
func TestRunLeavesNothingBehind(t *testing.T) {
	dir := t.TempDir()
	records := filepath.Join(dir, "in.txt")
	var sb strings.Builder
	for i := range 3000 {
		sb.WriteString("k" + strings.Repeat("x", i%2000%7) + strconv.Itoa(i%2000) + "\n")
	}
	if err := os.WriteFile(records, []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	index := filepath.Join(dir, "in.fpx")
	at := func(name string) string { return filepath.Join(dir, name) }
	sha := at("sha.fpx")
	if code, _, stderr := runInProcess("build", "-q", "--hash", "sha256", "-o", sha, records); code != 0 {
		t.Fatal(stderr)
	}
	code, dump, stderr := runInProcess("dump", sha)
	if code != 0 {
		t.Fatal(stderr)
	}
	online := at("online.txt")
	if err := os.WriteFile(online, []byte(dump), 0o644); err != nil {
		t.Fatal(err)
	}
	runs := []struct {
		want int
		args []string
	}{
		{0, []string{"build", "-q", "-o", index, records}},
		{0, []string{"build", "-q", "--threads", "1", "--mem", "16MiB", "--stats-json", at("st.json"), "-o", at("b.fpx"), records}},
		{0, []string{"dedup", "-q", "-o", at("u.txt"), "--record", at("r.fpx"), records}},
		{1, []string{"dedup", "-q", "--check", records}},
		{0, []string{"count", "-q", "-o", at("c.txt"), records}},
		{0, []string{"replay", "-q", "--l2", "shards=2,bits=512,k=2", records}},
		{1, []string{"query", "--count", index, "kx1", "absent-key"}},
		{0, []string{"query", "--only", "present", "--metrics", at("m.prom"), index, "kx1"}},
		{0, []string{"merge", "-q", "-o", at("m.fpx"), index, at("r.fpx")}},
		{0, []string{"dump", index}},
		{0, []string{"inspect", index}},
		{0, []string{"verify", index}},
		{0, []string{"reconcile", "-q", "--index", sha, "--online", "file:" + online}},
		{2, []string{"dedup", "--no-such-flag", records}},
		{2, []string{"dedup", "-o", at("nodir/x.txt"), records}},
		{2, []string{"query", at("missing.fpx"), "k"}},
		{2, []string{"verify", records}},
		{0, []string{"--version"}},
		{0, []string{"dedup", "--help"}},
	}
	// The first run starts what lives as long as the process (os/signal's
	// watcher of the runtime's signal queue).
	runInProcess("--version")
	base := runtime.NumGoroutine()
	procs := runtime.GOMAXPROCS(0)
	limit := debug.SetMemoryLimit(-1)
	for round := range 3 {
		for _, r := range runs {
			args := r.args
			if code, _, stderr := runInProcess(args...); code != r.want {
				t.Fatalf("%v: exit %d, want %d\n%s", args, code, r.want, stderr)
			}
			if n := settledGoroutines(base); n > base {
				buf := make([]byte, 1<<20)
				t.Fatalf("round %d, %v: %d goroutines after the run, %d before:\n%s", round, args, n, base, buf[:runtime.Stack(buf, true)])
			}
			if p, l := runtime.GOMAXPROCS(0), debug.SetMemoryLimit(-1); p != procs || l != limit {
				t.Fatalf("%v: GOMAXPROCS %d and memory limit %d after the run, %d and %d before", args, p, l, procs, limit)
			}
		}
	}
}

// settledGoroutines is the goroutine count once those that are ending have
// ended (a goroutine that has signalled its end may not have returned yet),
// or after a second, whichever comes first.
func settledGoroutines(want int) int {
	deadline := time.Now().Add(time.Second)
	for {
		n := runtime.NumGoroutine()
		if n <= want || time.Now().After(deadline) {
			return n
		}
		time.Sleep(5 * time.Millisecond)
	}
}
