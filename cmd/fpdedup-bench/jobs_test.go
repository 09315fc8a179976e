package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fpdedup/fpdedup/bench"
)

// The jobs outside the default set, which the scripts in bench/ choose:
// the scale-out's merges and builds check their outputs against a single
// build, and the mem job measures every command under every --mem.
func TestExtraJobs(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	runCmd(t, 0, "--progress", "never", "-q", "--peers", "none", "--runs", "1", "--records", "40k",
		"--jobs", "mem,build-partitions,merge-partitions", "--mem-sweep", "16MiB,64MiB", "--out", out, "--fpdedup", fpdedupBin)
	rep := readReport(t, out)
	if got := strings.Join(rep.Options.Jobs, ","); got != "merge-partitions,build-partitions,mem" {
		t.Errorf("options.jobs = %s, want them in the order they run", got)
	}
	if len(rep.Jobs) != 2 || rep.Jobs[0].Name != "merge-partitions" || rep.Jobs[1].Name != "build-partitions" {
		t.Fatalf("jobs: %v", jobNames(rep.Jobs))
	}
	for _, j := range rep.Jobs {
		for _, r := range j.Rows {
			if r.Kind == "fpdedup" && (r.Status != "ok" || r.CheckOK == nil || !*r.CheckOK) {
				t.Errorf("%s: %s: %s %s; check: %s", j.Name, r.Tool, r.Status, r.Why, r.Check)
			}
		}
	}
	m := rep.Memory
	if m == nil || len(m.Rows) < 26 || len(m.Rows)%2 != 0 {
		t.Fatalf("memory: %+v, want at least 13 commands (two of them bombs; reconcile against servers beside them) × 2 --mem", m)
	}
	for _, r := range m.Rows {
		// A refused row may end before its first sample (30 ms).
		if r.Status == "failed" || r.PeakAnonBytes <= 0 && r.Status != "refused" || r.OverBytes != r.PeakAnonBytes-r.MemBytes {
			t.Errorf("mem row %+v", r)
		}
	}
	if rep.Lookup == nil || rep.Lookup.Warm.Status != "not measured" || rep.Index != nil || rep.Bounded != nil {
		t.Errorf("without the build job: lookup %+v, index %+v, bounded %+v", rep.Lookup, rep.Index, rep.Bounded)
	}
	if rep.Data.AbsentBytes != 0 { // (the mem job reads the CSV, for replay, and its Parquet copy)
		t.Errorf("made inputs no chosen job reads: %+v", rep.Data)
	}
	md, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## mem: anonymous memory against --mem", "| dedup --record | 16MiB |", "Largest excess over --mem", "byte-identical to the single build"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	for _, unwanted := range []string{"## lookup", "## Targets", "## capacity"} {
		if strings.Contains(string(md), unwanted) {
			t.Errorf("report.md has %q, of a job that did not run", unwanted)
		}
	}
}

// Options that cannot run are usage errors, found before any work.
func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"--jobs", "nosuch"},
		{"--jobs", "query-present"}, // needs build
		{"--peers", "some"},
		{"--records", "1"},
		{"--records", "many"},
		{"--bounded-mem", "1MiB"},
		{"--mem-sweep", "64MB"},
		{"--progress", "sometimes"},
		{"extra-argument"},
		{"rss", "--", "true"}, // no -o
		{"fp", "--count", "lots"},
		{"--etcd-keys", "10"},
		{"--etcd-create", "lots"},
		{"--etcd-page", "0"},
		{"--etcd-mem", "1MiB"},
	} {
		_, stderr := runCmd(t, 2, append(args, "--fpdedup", fpdedupBin, "--out", t.TempDir())...)
		if !strings.HasPrefix(stderr, "fpdedup-bench: ") {
			t.Errorf("%v: stderr %q", args, stderr)
		}
	}
}

// The default fpdedup is the one beside this binary, else on PATH.
func TestFindFpdedup(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("PATH", dir)
	if _, err := findFpdedup(); err == nil {
		t.Errorf("found an fpdedup where there is none")
	}
	fake := filepath.Join(dir, "fpdedup")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := findFpdedup(); err != nil || got != fake {
		t.Errorf("findFpdedup = %q, %v; want %s", got, err, fake)
	}
}

// report redraws report.md and the charts of a report.json elsewhere.
func TestReportCommand(t *testing.T) {
	src, err := filepath.Glob(filepath.Join("..", "..", "bench", "results", "*", "report.json"))
	if err != nil || len(src) == 0 {
		t.Skip("no committed report.json")
	}
	out := filepath.Join(t.TempDir(), "redrawn")
	_, stderr := runCmd(t, 0, "report", "--out", out, src[0])
	if !strings.Contains(stderr, "report: "+filepath.Join(out, "report.md")) {
		t.Errorf("stderr: %s", stderr)
	}
	checkCharts(t, out)
}

// The scale job at two small sizes: every batch's answers exact, the
// bounded build byte-identical, the merge, the dedup and the single
// lookups measured, the report valid with its table and chart.
func TestScaleJob(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	runCmd(t, 0, "--progress", "never", "-q", "--peers", "none", "--jobs", "scale", "--scale-sizes", "20k,50k",
		"--scale-fio", "1s", "--out", out, "--fpdedup", fpdedupBin)
	rep := readReport(t, out)
	sc := rep.Scale
	if sc == nil || len(sc.Sizes) != 2 || sc.Sizes[0].Keys != 20_000 || sc.Sizes[1].Keys != 50_000 {
		t.Fatalf("scale: %+v", sc)
	}
	for _, s := range sc.Sizes {
		if s.Build.Status != "ok" || s.BytesPerKey < 10 || s.BytesPerKey > 40 || !s.BuildMemIdentical {
			t.Errorf("%d keys: build %+v, %.1f B/key, --mem build identical %v", s.Keys, s.Build, s.BytesPerKey, s.BuildMemIdentical)
		}
		// 10^2, 10^3, 10^4 keys (10^5 is past the index), present and
		// absent, warm and cold.
		if len(s.Queries) != 12 {
			t.Errorf("%d keys: %d queries, want 12", s.Keys, len(s.Queries))
		}
		for _, q := range s.Queries {
			if q.Run.Status != "ok" || !q.Correct || q.NsPerKey <= 0 {
				t.Errorf("%d keys: query %+v", s.Keys, q)
			}
		}
		// 10^3 and 10^4 present and absent through dedup --against.
		if len(s.DedupCold) != 4 {
			t.Errorf("%d keys: %d cold dedup --against batches, want 4", s.Keys, len(s.DedupCold))
		}
		for _, q := range s.DedupCold {
			if q.Run.Status != "ok" || !q.Correct || q.NsPerKey <= 0 {
				t.Errorf("%d keys: dedup --against %+v", s.Keys, q)
			}
		}
		if s.Single == nil || s.Single.Samples == 0 || s.Single.ProcessP50Ms <= 0 || s.Single.InProcessP50Us <= 0 {
			t.Errorf("%d keys: single lookups %+v", s.Keys, s.Single)
		}
		// 10^3 and 10^4 present and absent in a running process.
		if len(s.Running) != 4 {
			t.Errorf("%d keys: %d cold batches in a running process, want 4", s.Keys, len(s.Running))
		}
		for _, q := range s.Running {
			if q.Run.Status != "ok" || !q.Correct || q.NsPerKey <= 0 {
				t.Errorf("%d keys: a running process's batch %+v", s.Keys, q)
			}
		}
	}
	last := sc.Sizes[1]
	if last.Merge == nil || last.Merge.Merge.Status != "ok" || last.Merge.Floor.Status != "ok" || last.Merge.Ratio <= 0 {
		t.Errorf("merge: %+v", last.Merge)
	}
	if last.DedupAgainst == nil || last.DedupAgainst.Status != "ok" {
		t.Errorf("dedup --against: %+v", last.DedupAgainst)
	}
	if sc.Device == nil || sc.Model == nil || sc.Model.BytesPerKey <= 0 {
		t.Errorf("device %+v, model %+v", sc.Device, sc.Model)
	}
	md, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "## Scale: indexes of 20k, 50k keys") || strings.Contains(string(md), "**wrong**") {
		t.Errorf("report.md has no scale table, or a wrong answer")
	}
	if _, err := os.Stat(filepath.Join(out, "scale.png")); err != nil {
		t.Error(err)
	}
}

// readReport reads out/report.json, which must validate against the schema.
func readReport(t *testing.T, out string) bench.Report {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := bench.ValidateReport(raw); err != nil {
		t.Fatalf("report.json does not validate against bench/schema.json: %v", err)
	}
	var rep bench.Report
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	return rep
}
