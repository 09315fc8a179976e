package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchEtcd runs the etcd jobs small (5000 keys read in pages of 1000,
// 2000 created, one run) on an etcd member of their own, through the
// command, and checks what they wrote, not how fast: every row measured
// and its check passed (the audit's counts, etcdctl's keys whole and page
// by page, every key of both applies read back by the bench), the member
// and etcdctl named among the peers, issue 45's targets judged. Without
// etcd or etcdctl it skips, or fails in CI.
func TestBenchEtcd(t *testing.T) {
	for _, bin := range []string{"etcd", "etcdctl"} {
		if _, err := exec.LookPath(bin); err != nil {
			needInCI(t, bin+" is not on PATH (Debian packages etcd-server, etcd-client)")
		}
	}
	out := filepath.Join(t.TempDir(), "out")
	runCmd(t, 0, "--progress", "never", "--jobs", "etcd-audit,etcd-apply", "--etcd-keys", "5k", "--etcd-create", "2k", "--etcd-page", "1000",
		"--runs", "1", "--out", out, "--fpdedup", fpdedupBin)
	rep := readReport(t, out)
	if len(rep.Jobs) != 2 || rep.Jobs[0].Name != "etcd-audit" || rep.Jobs[1].Name != "etcd-apply" {
		t.Fatalf("jobs %v", jobNames(rep.Jobs))
	}
	for _, j := range rep.Jobs {
		for _, r := range j.Rows {
			if r.Status != "ok" || r.Median == nil || len(r.Runs) != 1 {
				t.Errorf("%s: %s: status %s (%s), %d runs", j.Name, r.Tool, r.Status, r.Why, len(r.Runs))
			}
			if r.CheckOK == nil || !*r.CheckOK {
				t.Errorf("%s: %s: check %q", j.Name, r.Tool, r.Check)
			}
		}
	}
	if len(rep.Jobs[0].Rows) != 3 || len(rep.Jobs[1].Rows) != 2 {
		t.Fatalf("rows: %d and %d, want the audit, etcdctl whole and page by page; the apply and the bare loop", len(rep.Jobs[0].Rows), len(rep.Jobs[1].Rows))
	}
	for _, want := range []string{"5000 keys read at revision", "5000 keys printed", "5000 keys read in pages"} {
		if !strings.Contains(rep.Jobs[0].Rows[0].Check+rep.Jobs[0].Rows[1].Check+rep.Jobs[0].Rows[2].Check, want) {
			t.Errorf("the audit's checks say nothing of %q: %q, %q, %q", want, rep.Jobs[0].Rows[0].Check, rep.Jobs[0].Rows[1].Check, rep.Jobs[0].Rows[2].Check)
		}
	}
	for _, r := range rep.Jobs[1].Rows {
		if !strings.Contains(r.Check, "read back by the bench: 2000 of 2000 keys") {
			t.Errorf("%s: check %q", r.Tool, r.Check)
		}
	}
	peers := map[string]string{}
	for _, p := range rep.Peers {
		peers[p.Name] = p.Status
	}
	if peers["etcd"] != "ok" || peers["etcdctl"] != "ok" {
		t.Errorf("peers %v: want etcd and etcdctl ok", peers)
	}
	var judged int
	for _, tg := range rep.Targets {
		if tg.Issue == 45 {
			judged++
			if tg.Met == nil {
				t.Errorf("issue 45 target %q not measured: %s", tg.Goal, tg.Measured)
			}
		}
	}
	if judged != 4 {
		t.Errorf("%d of issue 45's targets judged, want 4", judged)
	}
}
