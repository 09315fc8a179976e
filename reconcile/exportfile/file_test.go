package exportfile_test

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fpdedup/fpdedup/reconcile"
	"github.com/fpdedup/fpdedup/reconcile/internal/reconciletest"
)

func TestMain(m *testing.M) { reconciletest.Main(m, reconcile.QuietRedisLogs) }

// An export file (no server needed): hex fingerprints, 32 and 64 digits,
// CRLF, gzip; or keys with --online-format key. Exact counts, outputs,
// backfill; exit 0 when the sides agree.
func TestFileSource(t *testing.T) {
	d := reconciletest.NewDataset(t, 20_000)
	var fps bytes.Buffer
	for i, k := range d.OnlineKeys() {
		switch i % 3 {
		case 0:
			fps.WriteString(reconciletest.FPHex(k) + "\n")
		case 1:
			fps.WriteString(strings.ToUpper(reconciletest.FullHex(k)) + "\r\n")
		default:
			fps.WriteString(reconciletest.FullHex(k) + "\n")
		}
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(fps.Bytes())
	zw.Close()
	os.WriteFile(filepath.Join(d.Dir, "export.gz"), gz.Bytes(), 0o644)
	reconciletest.Fpdedup(t, d.Dir, nil, "reconcile", "--index", d.Index, "--online", "file:export.gz", "--report", "r.json",
		"--missing", "m.fpx", "--extra", "e.fpx", "--backfill", "bf.txt", "--records", d.Records).Want(t, 1)
	rep := reconciletest.ReadReport(t, filepath.Join(d.Dir, "r.json"))
	reconciletest.WantCounts(t, rep.Counts, 18_000, 2_000, 200)
	if got := reconciletest.Dump(t, d.Dir, "m.fpx"); !slices.Equal(got, d.MissingFPs()) {
		t.Fatalf("m.fpx: %d", len(got))
	}
	if got := reconciletest.Dump(t, d.Dir, "e.fpx"); !slices.Equal(got, d.ExtraFPs()) {
		t.Fatalf("e.fpx: %d", len(got))
	}
	if bf := reconciletest.Must(os.ReadFile(filepath.Join(d.Dir, "bf.txt"))); string(bf) != d.MissingRecords() {
		t.Fatal("backfill differs")
	}
	if !slices.Equal(rep.Samples.OnlyOffline, d.MissingFPs()[:20]) || len(rep.Samples.OnlyOnline) != 20 {
		t.Fatalf("samples: %v %v", rep.Samples.OnlyOffline, rep.Samples.OnlyOnline)
	}

	// The same keys as keys; all of them: the sides agree, exit 0.
	os.WriteFile(filepath.Join(d.Dir, "keys.txt"), reconciletest.Must(os.ReadFile(d.Records)), 0o644)
	r := reconciletest.Fpdedup(t, d.Dir, nil, "reconcile", "--index", d.Index, "--online", "file:keys.txt", "--online-format", "key", "--report", "k.json").Want(t, 0)
	reconciletest.WantCounts(t, reconciletest.ReadReport(t, filepath.Join(d.Dir, "k.json")).Counts, 20_000, 0, 0)
	if !strings.Contains(r.Stderr, "the sides agree") {
		t.Fatalf("summary: %s", r.Stderr)
	}

	// A line that is not a fingerprint is an error naming file and line.
	os.WriteFile(filepath.Join(d.Dir, "bad.txt"), []byte(reconciletest.FPHex("a")+"\nnot hex\n"), 0o644)
	r = reconciletest.Fpdedup(t, d.Dir, nil, "reconcile", "--index", d.Index, "--online", "file:bad.txt").Want(t, 2)
	if !strings.Contains(r.Stderr, "bad.txt:2: not a 32- or 64-digit hex fingerprint") {
		t.Fatalf("stderr: %s", r.Stderr)
	}
	// --probe and --apply need a server.
	reconciletest.Fpdedup(t, d.Dir, nil, "reconcile", "--index", d.Index, "--online", "file:keys.txt", "--probe").Want(t, 2)
	reconciletest.Fpdedup(t, d.Dir, nil, "reconcile", "--index", d.Index, "--online", "file:keys.txt", "--apply").Want(t, 2)
}
