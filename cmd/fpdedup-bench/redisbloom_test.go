package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/fpdedup/fpdedup/bench"
)

// TestBenchRedisBloom runs the RedisBloom jobs small (2000 truth keys, 4
// filters, one run) on a redis-server of their own with the module, and
// checks what they wrote: every row measured, fpdedup's audit finding
// exactly the keys BF.MEXISTS finds not held, its rebuild reading every
// filter back, its apply and redis-cli --pipe of the same commands each
// leaving every truth key held in the emptied filters, the bare rows
// and the truth's own pass (its count checked) beside them, the peer
// named. Without
// redis-server or the module it skips, or fails in CI.
func TestBenchRedisBloom(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		needInCI(t, "redis-server is not on PATH")
	}
	if _, err := bench.RedisBloomModule(); err != nil {
		needInCI(t, err.Error())
	}
	out := filepath.Join(t.TempDir(), "out")
	runCmd(t, 0, "--progress", "never", "--jobs", "redisbloom-audit,redisbloom-rebuild,redisbloom-apply", "--rb-keys", "2000", "--rb-shards", "4",
		"--runs", "1", "--out", out, "--fpdedup", fpdedupBin)
	rep := readReport(t, out)
	if len(rep.Jobs) != 3 || rep.Jobs[0].Name != "redisbloom-audit" || rep.Jobs[1].Name != "redisbloom-rebuild" || rep.Jobs[2].Name != "redisbloom-apply" {
		t.Fatalf("jobs %v", jobNames(rep.Jobs))
	}
	for _, j := range rep.Jobs {
		for _, r := range j.Rows {
			if r.Status != "ok" || r.Median == nil || len(r.Runs) != 1 {
				t.Errorf("%s: %s: status %s (%s), %d runs", j.Name, r.Tool, r.Status, r.Why, len(r.Runs))
			}
			if (r.Kind != "floor" && r.CheckOK == nil) || (r.CheckOK != nil && !*r.CheckOK) {
				t.Errorf("%s: %s: check %q", j.Name, r.Tool, r.Check)
			}
		}
	}
	if len(rep.Jobs[0].Rows) != 4 || len(rep.Jobs[1].Rows) != 3 || len(rep.Jobs[2].Rows) != 2 {
		t.Errorf("rows: %d, %d and %d, want the audit, its two floors (the dump reads, the truth's own pass) and BF.MEXISTS; the rebuild and its two floors; the apply and redis-cli --pipe", len(rep.Jobs[0].Rows), len(rep.Jobs[1].Rows), len(rep.Jobs[2].Rows))
	}
}

// needInCI skips a test for want of what, or fails it in CI.
func needInCI(t *testing.T, what string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatal(what)
	}
	t.Skip(what)
}
