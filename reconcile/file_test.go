package reconcile_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fpdedup/fpdedup/reconcile/internal/reconciletest"
)

// An index of another hash is refused, with how to rebuild it; so is an
// index with a key recipe when --records are plain lines.
func TestSpecSafety(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "k.txt"), []byte("a\nb\n"), 0o644)
	reconciletest.Fpdedup(t, dir, nil, "build", "-q", "-o", "x.fpx", "k.txt").Want(t, 0)
	r := reconciletest.Fpdedup(t, dir, nil, "reconcile", "--index", "x.fpx", "--online", "file:k.txt", "--online-format", "key", "--report", "r.json").Want(t, 2)
	if !strings.Contains(r.Stderr, "xxh3") || !strings.Contains(r.Stderr, "--hash sha256") {
		t.Fatalf("stderr: %s", r.Stderr)
	}
	if rep := reconciletest.ReadReport(t, filepath.Join(dir, "r.json")); rep.ExitCode != 2 || !strings.Contains(rep.Error, "--hash sha256") {
		t.Fatalf("report: %+v", rep)
	}
	os.WriteFile(filepath.Join(dir, "e.csv"), []byte("u,d,t\nu1,d1,1\n"), 0o644)
	reconciletest.Fpdedup(t, dir, nil, "build", "-q", "--hash", "sha256", "--format", "csv", "--header", "--key", "u,d,t", "-o", "csv.fpx", "e.csv").Want(t, 0)
	// --records are read with the index's recipe: k.txt is no such csv.
	r = reconciletest.Fpdedup(t, dir, nil, "reconcile", "--index", "csv.fpx", "--online", "file:k.txt", "--online-format", "key", "--records", "k.txt", "--backfill", "bf").Want(t, 2)
	if !strings.Contains(r.Stderr, `--key "u": no such column in the header`) {
		t.Fatalf("stderr: %s", r.Stderr)
	}
	// Read as lines, they are not the index's records.
	r = reconciletest.Fpdedup(t, dir, nil, "reconcile", "--index", "csv.fpx", "--online", "file:k.txt", "--online-format", "key", "--records", "k.txt", "--backfill", "bf", "--format", "lines").Want(t, 2)
	if !strings.Contains(r.Stderr, "--assume-recipe") {
		t.Fatalf("stderr: %s", r.Stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "bf")); !os.IsNotExist(err) {
		t.Fatalf("a refused run left its backfill: %v", err)
	}
}

func TestUsageErrors(t *testing.T) {
	d := reconciletest.NewDataset(t, 10)
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--online", "file:x"}, "needs --index"},
		{[]string{"--index", d.Index, "--online", "mysql://u@h/d?table=t&column=c", "--ttl", "1h"}, "--ttl is for Redis keys"},
		{[]string{"--index", d.Index, "--online", "file:x", "--backfill", "o"}, "--backfill needs --records"},
		{[]string{"--index", d.Index, "--online", "file:x", "--checkpoint", "c"}, "--checkpoint goes with --apply"},
		{[]string{"--index", d.Index, "--online", "redis://u:pw@h/0?match=a*"}, "holds a password"},
		{[]string{"--index", d.Index, "--online", "file:x", "--missing", d.Index}, "is also an input (--index"},
		{[]string{"--index", d.Index, "--online", "file:x", "--online-format", "csv"}, "--online-format"},
		{[]string{"--index", d.Index, "--online", "file:x", "--format", "csv", "--key", "1"}, "give the records too"},
		{[]string{"--index", d.Index, "--online", "file:x", "--records", "r", "--backfill", "b", "--on-bad", "drop"}, "--on-bad"},
	} {
		r := reconciletest.Fpdedup(t, d.Dir, nil, append([]string{"reconcile"}, c.args...)...).Want(t, 2)
		if !strings.Contains(r.Stderr, c.msg) {
			t.Errorf("%v: %s", c.args, r.Stderr)
		}
	}
}

// A run interrupted by a signal (SIGTERM while the export is read, slowed
// by --read-rate) exits 143; its report, written at once, says exit 143
// too and what was under way; nothing else is published.
func TestInterruptedReportSaysTheSignal(t *testing.T) {
	d := reconciletest.NewDataset(t, 50_000)
	// 64-digit lines: several 1 MiB chunks, each paced after the first.
	export := strings.Join(reconciletest.Hexes(d.OnlineKeys(), reconciletest.FullHex), "\n") + "\n"
	if err := os.WriteFile(filepath.Join(d.Dir, "export.txt"), []byte(export), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(reconciletest.CLIBinary(t), "reconcile", "--index", d.Index, "--online", "file:export.txt", "--read-rate", "5k",
		"--report", "r.json", "--missing", "m.fpx")
	cmd.Dir = d.Dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(700 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGTERM)
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 143 {
		t.Fatalf("after SIGTERM: %v, want exit 143\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "interrupted by SIGTERM; nothing was published") {
		t.Fatalf("stderr: %s", stderr.String())
	}
	rep := reconciletest.ReadReport(t, filepath.Join(d.Dir, "r.json"))
	if rep.ExitCode != 143 || !strings.Contains(rep.Error, "interrupted by SIGTERM") || rep.Agree {
		t.Fatalf("report: exit %d, agree %v, error %q; want exit 143 and the signal", rep.ExitCode, rep.Agree, rep.Error)
	}
	if _, err := os.Stat(filepath.Join(d.Dir, "m.fpx")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("--missing of an interrupted run: %v", err)
	}
}
