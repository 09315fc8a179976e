package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"go/build"
	"image/png"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fpdedup/fpdedup/bench"
)

// benchJobs are the jobs every default report holds, whatever is installed.
var benchJobs = bench.DefaultJobs

// fpdedupBin is the fpdedup that the tests measure, built once by TestMain
// from this tree, as make bench builds it beside fpdedup-bench ($FPDEDUP
// instead, when set, as for the scripts in bench/).
var fpdedupBin string

func TestMain(m *testing.M) {
	// The bound row runs this binary as fpdedup-bench (Options.Bound is
	// os.Executable): the children are told so by the environment.
	if os.Getenv("FPDEDUP_BENCH_TEST_AS_MAIN") == "1" {
		main()
	}
	os.Setenv("FPDEDUP_BENCH_TEST_AS_MAIN", "1")
	if fpdedupBin = os.Getenv("FPDEDUP"); fpdedupBin != "" {
		os.Exit(m.Run())
	}
	os.Exit(func() int {
		dir, err := os.MkdirTemp("", "fpdedup-bench-test-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		defer os.RemoveAll(dir)
		fpdedupBin = filepath.Join(dir, "fpdedup")
		gobin, err := exec.LookPath("go")
		if err != nil {
			gobin = filepath.Join(build.Default.GOROOT, "bin", "go")
		}
		cmd := exec.Command(gobin, "build", "-o", fpdedupBin, "github.com/fpdedup/fpdedup/cmd/fpdedup")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "building fpdedup to measure:", err)
			return 2
		}
		return m.Run()
	}())
}

// runCmd runs fpdedup-bench in this process with TMPDIR in a test
// directory and wants exit code want.
func runCmd(t *testing.T, want int, args ...string) (stdout, stderr string) {
	t.Helper()
	t.Setenv("TMPDIR", t.TempDir())
	var o, e bytes.Buffer
	if code := run(args, &o, &e); code != want {
		t.Fatalf("fpdedup-bench %s: exit %d, want %d\nstderr:\n%s", strings.Join(args, " "), code, want, e.String())
	}
	return o.String(), e.String()
}

// TestBenchQuick runs the benchmark the way CI can afford (fpdedup only,
// 100k records, one run) and checks what it wrote, not how fast anything
// was: report.json against bench/schema.json with every job in it, each
// fpdedup row measured and right, the peers reported rather than dropped,
// report.md, and charts that parse as SVG and decode as PNG. Then a second
// run compares itself with the first.
func TestBenchQuick(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	_, stderr := runCmd(t, 0, "--progress", "never", "--quick", "--peers", "none",
		"--records", "100k", "--out", out, "--fpdedup", fpdedupBin)
	if !strings.Contains(stderr, "report: "+filepath.Join(out, "report.md")) {
		t.Errorf("no summary naming the report on stderr:\n%s", stderr)
	}

	rep := readReport(t, out)
	if rep.Data.Records != 100_000 || rep.Data.Distinct != 62_000 {
		t.Errorf("data: %d records, %d distinct; want 100000 and 62000", rep.Data.Records, rep.Data.Distinct)
	}
	for i, name := range benchJobs {
		if i >= len(rep.Jobs) || rep.Jobs[i].Name != name {
			t.Fatalf("job %d is not %q; jobs: %+v", i, name, jobNames(rep.Jobs))
		}
		j := rep.Jobs[i]
		for _, r := range j.Rows {
			switch {
			case r.Kind == "fpdedup":
				if r.Status != "ok" || r.Median == nil || len(r.Runs) != 1 {
					t.Errorf("%s: %s: status %s (%s), %d runs", name, r.Tool, r.Status, r.Why, len(r.Runs))
				} else if r.CheckOK == nil || !*r.CheckOK {
					t.Errorf("%s: %s: check failed: %s", name, r.Tool, r.Check)
				}
				if r.Median != nil && (r.Median.WallS <= 0 || r.Median.MaxRSS <= 0 || r.MBPerS <= 0) {
					t.Errorf("%s: %s: figures missing: %+v", name, r.Tool, r.Median)
				}
			case r.Status != "skipped":
				t.Errorf("%s: %s: with --peers none the status is %q, want skipped", name, r.Tool, r.Status)
			}
		}
		if j.Rows[0].Tool != j.Reference {
			t.Errorf("%s: the reference %q is not the first row", name, j.Reference)
		}
	}
	// The Parquet jobs read the CSV's records written as Parquet: the
	// build from it holds the CSV build's fingerprints, its count the CSV
	// count's keys and counts, and the bounded dedup wrote the unbounded
	// one's rows.
	if rep.Data.ParquetBytes <= 0 || rep.Data.ParquetRowGroupBytes <= 0 {
		t.Errorf("no events.parquet: %+v", rep.Data)
	}
	for job, want := range map[string]string{
		"parquet-build":   "the same fingerprints as the Parquet build",
		"parquet-count":   "the Parquet count's keys and counts, in its order",
		"parquet-bounded": "the same rows in the same order as fpdedup dedup in memory",
	} {
		for _, j := range rep.Jobs {
			if j.Name == job && !slices.ContainsFunc(j.Rows, func(r bench.Row) bool { return strings.Contains(r.Check, want) }) {
				t.Errorf("%s: no row checked %q: %+v", job, want, j.Rows)
			}
		}
	}
	issue29 := 0
	for _, tg := range rep.Targets {
		if tg.Issue == 29 {
			issue29++
		}
	}
	if issue29 != 4 {
		t.Errorf("%d targets of issue 29, want 4", issue29)
	}
	if rep.Lookup == nil || rep.Lookup.Warm.Status != "ok" || rep.Lookup.Warm.Present == nil || rep.Lookup.Warm.Absent == nil {
		t.Errorf("no warm lookup latency: %+v", rep.Lookup)
	} else if c := rep.Lookup.Cold; c.Status != "ok" && c.Why == "" {
		t.Errorf("cold lookups neither measured nor explained: %+v", c)
	}
	if rep.Index == nil || rep.Index.Fingerprints != 62_000 || rep.Index.BytesPerKey <= 0 || rep.Index.FilterFPRTheory <= 0 {
		t.Errorf("index figures: %+v", rep.Index)
	}
	if b := rep.Bounded; b == nil || b.Status != "ok" || b.Mode != "lsm" || b.FilterFPRFormula <= 0 {
		t.Errorf("bounded dedup figures: %+v", b)
	}
	if c := rep.Capacity; c == nil || len(c.Steps) == 0 || c.Steps[0].Machines < 1 || len(c.Assumptions) == 0 {
		t.Errorf("capacity: %+v", c)
	}
	if len(rep.Peers) == 0 {
		t.Errorf("no peers listed")
	}
	for _, p := range rep.Peers {
		if p.Status != "skipped" {
			t.Errorf("peer %s: %s, want skipped", p.Name, p.Status)
		}
	}

	md, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range append([]string{"Load average", "## capacity", "## lookup", "## index"}, benchJobs...) {
		if !bytes.Contains(md, []byte(want)) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	checkCharts(t, out)

	// --compare against the first run: the figures of both are listed.
	out2 := filepath.Join(t.TempDir(), "out2")
	stdout, _ := runCmd(t, 0, "--progress", "never", "-q", "--quick", "--peers", "none",
		"--records", "2k", "--out", out2, "--fpdedup", fpdedupBin, "--compare", filepath.Join(out, "report.json"))
	for _, want := range []string{"compared with the run of", "other data", "fpdedup build", "wall_s"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("--compare output lacks %q:\n%s", want, stdout)
		}
	}
	raw2, err := os.ReadFile(filepath.Join(out2, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := bench.ValidateReport(raw2); err != nil {
		t.Fatalf("second report.json: %v", err)
	}
}

func jobNames(js []bench.Job) []string {
	var n []string
	for _, j := range js {
		n = append(n, j.Name)
	}
	return n
}

// checkCharts parses every SVG as XML (an <svg> root) and decodes every
// PNG.
func checkCharts(t *testing.T, dir string) {
	t.Helper()
	for _, name := range bench.Files {
		path := filepath.Join(dir, name)
		f, err := os.Open(path)
		if err != nil {
			t.Error(err)
			continue
		}
		switch filepath.Ext(name) {
		case ".svg":
			root := ""
			d := xml.NewDecoder(f)
			for {
				tok, err := d.Token()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Errorf("%s is not well-formed XML: %v", name, err)
					break
				}
				if se, ok := tok.(xml.StartElement); ok && root == "" {
					root = se.Name.Local
				}
			}
			if root != "svg" {
				t.Errorf("%s: root element %q, want svg", name, root)
			}
		case ".png":
			img, err := png.Decode(f)
			if err != nil {
				t.Errorf("%s: %v", name, err)
			} else if b := img.Bounds(); b.Dx() < 100 || b.Dy() < 100 {
				t.Errorf("%s: %v: too small to be a chart", name, b)
			}
		}
		f.Close()
	}
}
