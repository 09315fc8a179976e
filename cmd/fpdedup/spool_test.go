package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fpdedup/fpdedup/internal/failpoint"
)

// TestCountStdinSpoolWriteFails: count reading stdin copies it to
// --tmpdir for its second pass; when that copy cannot be written, the
// message names --tmpdir and the spool and keeps the cause, rather than
// calling it a read error of "-".
func TestCountStdinSpoolWriteFails(t *testing.T) {
	in := filepath.Join(t.TempDir(), "in.txt")
	if err := os.WriteFile(in, []byte("a\nb\na\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(in)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	stdin := os.Stdin
	os.Stdin = f
	defer func() { os.Stdin = stdin }()
	tmp := t.TempDir()
	disarm := failpoint.Arm(1, failpoint.Write)
	code, _, stderr := runInProcess("count", "--tmpdir", tmp)
	disarm()
	want := "--tmpdir " + tmp + ": cannot write the spool of standard input: injected fault"
	if code != exitError || !strings.Contains(stderr, want) || strings.Contains(stderr, "cannot read") {
		t.Fatalf("exit %d, want %d with %q:\n%s", code, exitError, want, stderr)
	}
}
