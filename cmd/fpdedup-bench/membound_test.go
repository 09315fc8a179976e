package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/fpdedup/fpdedup/bench"
	"github.com/fpdedup/fpdedup/internal/memplan"
	"github.com/fpdedup/fpdedup/internal/serverlock"
)

// TestMemBound: every command that reads data, reconcile's audits, --apply
// and --rebuild-shard and the Parquet dedup included, stays within the
// bound the README and --help state (memplan.Bound, and a Parquet input's
// row groups beside it) under three --mem values: the mem job's sweep on
// 200k records, each peak the larger of the bench's sampling and the
// command's own. A command past the bound is a finding, not noise: RSS
// does not depend on timing, and the bound has its overhead already.
// Reconcile against Redis runs when $FPDEDUP_REDIS_ADDR is set
// (scripts/services/with-services.sh). It runs under -short too: 27 s with
// the servers on a 2-core machine at load 9.
func TestMemBound(t *testing.T) {
	online := os.Getenv("FPDEDUP_REDIS_ADDR") != ""
	if online {
		serverlock.Hold(t)
	}
	out := filepath.Join(t.TempDir(), "out")
	t.Setenv("TMPDIR", t.TempDir())
	var o, e bytes.Buffer
	// A failed row (exit 1) is listed below with its message.
	if code := run([]string{"--progress", "never", "-q", "--peers", "none", "--runs", "1", "--records", "200k",
		"--jobs", "mem", "--mem-sweep", "16MiB,64MiB,256MiB", "--out", out, "--fpdedup", fpdedupBin}, &o, &e); code != 0 {
		t.Errorf("fpdedup-bench: exit %d\n%s", code, e.String())
	}
	m := readReport(t, out).Memory
	if m == nil {
		t.Fatal("no memory section in the report")
	}
	want := []string{"dedup", "dedup --record", "dedup --keep last", "count", "build", "merge", "query", "replay",
		"dedup (Parquet)", "count (Parquet)", "reconcile (export file)"}
	if online {
		want = append(want, "reconcile (Redis keys)", "reconcile --apply (Redis keys)", "reconcile (bitmap bloom)", "reconcile --rebuild-shard all (bitmap bloom)")
		if os.Getenv("CI") != "" {
			want = append(want, "reconcile (RedisBloom)")
		}
	}
	runs := map[string]int{}
	for _, r := range m.Rows {
		if r.Status == "failed" {
			t.Errorf("%s --mem %s failed: %s", r.Command, r.Mem, r.Why)
			continue
		}
		runs[r.Command]++
		bound := memplan.Bound(r.MemBytes) + r.RowGroupsBytes
		if r.BoundBytes != bound || r.Within != (r.PeakAnonBytes <= bound) {
			t.Errorf("%s --mem %s: the row says bound %d, within %v; memplan.Bound says %d", r.Command, r.Mem, r.BoundBytes, r.Within, bound)
		}
		if r.PeakAnonBytes > bound {
			t.Errorf("%s --mem %s: peak anonymous RSS %.1f MiB, past the stated bound %.1f MiB by %.1f MiB",
				r.Command, r.Mem, float64(r.PeakAnonBytes)/(1<<20), float64(bound)/(1<<20), float64(r.PeakAnonBytes-bound)/(1<<20))
		}
	}
	for _, c := range want {
		if runs[c] != 3 {
			t.Errorf("%s ran under %d of the 3 --mem values", c, runs[c])
		}
	}
	if rb := slices.ContainsFunc(m.Rows, func(r bench.MemoryRow) bool { return r.Command == "reconcile (RedisBloom)" }); online && !rb {
		t.Logf("RedisBloom not measured: %s", m.Online)
	}
}
