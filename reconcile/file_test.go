package reconcile_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
)

// An export file (no server needed): hex fingerprints, 32 and 64 digits,
// CRLF, gzip; or keys with --online-format key. Exact counts, outputs,
// backfill; exit 0 when the sides agree.
func TestFileSource(t *testing.T) {
	d := newDataset(t, 20_000)
	var fps bytes.Buffer
	for i, k := range d.onlineKeys() {
		switch i % 3 {
		case 0:
			fps.WriteString(fpHex(k) + "\n")
		case 1:
			fps.WriteString(strings.ToUpper(fullHex(k)) + "\r\n")
		default:
			fps.WriteString(fullHex(k) + "\n")
		}
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(fps.Bytes())
	zw.Close()
	os.WriteFile(filepath.Join(d.dir, "export.gz"), gz.Bytes(), 0o644)
	fpdedup(t, d.dir, nil, "reconcile", "--index", d.index, "--online", "file:export.gz", "--report", "r.json",
		"--missing", "m.fpx", "--extra", "e.fpx", "--backfill", "bf.txt", "--records", d.records).want(t, 1)
	rep := readReport(t, filepath.Join(d.dir, "r.json"))
	wantCounts(t, rep.Counts, 18_000, 2_000, 200)
	if got := dump(t, d.dir, "m.fpx"); !slices.Equal(got, d.missingFPs()) {
		t.Fatalf("m.fpx: %d", len(got))
	}
	if got := dump(t, d.dir, "e.fpx"); !slices.Equal(got, d.extraFPs()) {
		t.Fatalf("e.fpx: %d", len(got))
	}
	if bf := must(os.ReadFile(filepath.Join(d.dir, "bf.txt"))); string(bf) != d.missingRecords() {
		t.Fatal("backfill differs")
	}
	if !slices.Equal(rep.Samples.OnlyOffline, d.missingFPs()[:20]) || len(rep.Samples.OnlyOnline) != 20 {
		t.Fatalf("samples: %v %v", rep.Samples.OnlyOffline, rep.Samples.OnlyOnline)
	}

	// The same keys as keys; all of them: the sides agree, exit 0.
	os.WriteFile(filepath.Join(d.dir, "keys.txt"), must(os.ReadFile(d.records)), 0o644)
	r := fpdedup(t, d.dir, nil, "reconcile", "--index", d.index, "--online", "file:keys.txt", "--online-format", "key", "--report", "k.json").want(t, 0)
	wantCounts(t, readReport(t, filepath.Join(d.dir, "k.json")).Counts, 20_000, 0, 0)
	if !strings.Contains(r.stderr, "the sides agree") {
		t.Fatalf("summary: %s", r.stderr)
	}

	// A line that is not a fingerprint is an error naming file and line.
	os.WriteFile(filepath.Join(d.dir, "bad.txt"), []byte(fpHex("a")+"\nnot hex\n"), 0o644)
	r = fpdedup(t, d.dir, nil, "reconcile", "--index", d.index, "--online", "file:bad.txt").want(t, 2)
	if !strings.Contains(r.stderr, "bad.txt:2: not a 32- or 64-digit hex fingerprint") {
		t.Fatalf("stderr: %s", r.stderr)
	}
	// --probe and --apply need a server.
	fpdedup(t, d.dir, nil, "reconcile", "--index", d.index, "--online", "file:keys.txt", "--probe").want(t, 2)
	fpdedup(t, d.dir, nil, "reconcile", "--index", d.index, "--online", "file:keys.txt", "--apply").want(t, 2)
}

// An index of another hash is refused, with how to rebuild it; so is an
// index with a key recipe when --records are plain lines.
func TestSpecSafety(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "k.txt"), []byte("a\nb\n"), 0o644)
	fpdedup(t, dir, nil, "build", "-q", "-o", "x.fpx", "k.txt").want(t, 0)
	r := fpdedup(t, dir, nil, "reconcile", "--index", "x.fpx", "--online", "file:k.txt", "--online-format", "key", "--report", "r.json").want(t, 2)
	if !strings.Contains(r.stderr, "xxh3") || !strings.Contains(r.stderr, "--hash sha256") {
		t.Fatalf("stderr: %s", r.stderr)
	}
	if rep := readReport(t, filepath.Join(dir, "r.json")); rep.ExitCode != 2 || !strings.Contains(rep.Error, "--hash sha256") {
		t.Fatalf("report: %+v", rep)
	}
	os.WriteFile(filepath.Join(dir, "e.csv"), []byte("u,d,t\nu1,d1,1\n"), 0o644)
	fpdedup(t, dir, nil, "build", "-q", "--hash", "sha256", "--format", "csv", "--header", "--key", "u,d,t", "-o", "csv.fpx", "e.csv").want(t, 0)
	// --records are read with the index's recipe: k.txt is no such csv.
	r = fpdedup(t, dir, nil, "reconcile", "--index", "csv.fpx", "--online", "file:k.txt", "--online-format", "key", "--records", "k.txt", "--backfill", "bf").want(t, 2)
	if !strings.Contains(r.stderr, `--key "u": no such column in the header`) {
		t.Fatalf("stderr: %s", r.stderr)
	}
	// Read as lines, they are not the index's records.
	r = fpdedup(t, dir, nil, "reconcile", "--index", "csv.fpx", "--online", "file:k.txt", "--online-format", "key", "--records", "k.txt", "--backfill", "bf", "--format", "lines").want(t, 2)
	if !strings.Contains(r.stderr, "--assume-recipe") {
		t.Fatalf("stderr: %s", r.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "bf")); !os.IsNotExist(err) {
		t.Fatalf("a refused run left its backfill: %v", err)
	}
}

func TestUsageErrors(t *testing.T) {
	d := newDataset(t, 10)
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--online", "file:x"}, "needs --index"},
		{[]string{"--index", d.index, "--online", "mysql://u@h/d?table=t&column=c", "--ttl", "1h"}, "--ttl is for Redis keys"},
		{[]string{"--index", d.index, "--online", "file:x", "--backfill", "o"}, "--backfill needs --records"},
		{[]string{"--index", d.index, "--online", "file:x", "--checkpoint", "c"}, "--checkpoint goes with --apply"},
		{[]string{"--index", d.index, "--online", "redis://u:pw@h/0?match=a*"}, "holds a password"},
		{[]string{"--index", d.index, "--online", "file:x", "--missing", d.index}, "is also an input (--index"},
		{[]string{"--index", d.index, "--online", "file:x", "--online-format", "csv"}, "--online-format"},
		{[]string{"--index", d.index, "--online", "file:x", "--format", "csv", "--key", "1"}, "give the records too"},
		{[]string{"--index", d.index, "--online", "file:x", "--records", "r", "--backfill", "b", "--on-bad", "drop"}, "--on-bad"},
	} {
		r := fpdedup(t, d.dir, nil, append([]string{"reconcile"}, c.args...)...).want(t, 2)
		if !strings.Contains(r.stderr, c.msg) {
			t.Errorf("%v: %s", c.args, r.stderr)
		}
	}
}

// A run interrupted by a signal (SIGTERM while the export is read, slowed
// by --read-rate) exits 143; its report, written at once, says exit 143
// too and what was under way; nothing else is published.
func TestInterruptedReportSaysTheSignal(t *testing.T) {
	d := newDataset(t, 50_000)
	// 64-digit lines: several 1 MiB chunks, each paced after the first.
	export := strings.Join(hexes(d.onlineKeys(), fullHex), "\n") + "\n"
	if err := os.WriteFile(filepath.Join(d.dir, "export.txt"), []byte(export), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(cliBinary(t), "reconcile", "--index", d.index, "--online", "file:export.txt", "--read-rate", "5k",
		"--report", "r.json", "--missing", "m.fpx")
	cmd.Dir = d.dir
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
	rep := readReport(t, filepath.Join(d.dir, "r.json"))
	if rep.ExitCode != 143 || !strings.Contains(rep.Error, "interrupted by SIGTERM") || rep.Agree {
		t.Fatalf("report: exit %d, agree %v, error %q; want exit 143 and the signal", rep.ExitCode, rep.Agree, rep.Error)
	}
	if _, err := os.Stat(filepath.Join(d.dir, "m.fpx")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("--missing of an interrupted run: %v", err)
	}
}
