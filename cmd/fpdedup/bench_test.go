package main

import (
	"bytes"
	"fmt"
	"go/build"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fpdedup/fpdedup/bench/gen"
)

// fpdedupLink makes the test binary callable as "fpdedup" (TestMain runs
// it as the command under that name), so that bench can measure it as a
// separate process, as it measures an installed binary.
func fpdedupLink(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "fpdedup")
	if err := os.Symlink(exe, link); err != nil {
		t.Fatal(err)
	}
	return link
}

func runFpdedup(t *testing.T, link string, args ...string) (stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(link, args...)
	cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Run(); err != nil {
		t.Fatalf("fpdedup %s: %v\nstderr:\n%s", strings.Join(args, " "), err, e.String())
	}
	return o.String(), e.String()
}

// fpdedup gen writes exactly what gen.Generate writes, and on the command
// line --repeat 0 and --far 0 mean none (in gen.Options, 0 is the default).
// bench gen, its old name, writes the same and says it is the old name.
func TestGenIsTheGenerator(t *testing.T) {
	link := fpdedupLink(t)
	for _, tc := range []struct {
		args []string
		o    gen.Options
	}{
		{[]string{"--records", "5k", "--seed", "9"}, gen.Options{Records: 5000, Seed: 9}},
		{[]string{"--records", "3000", "--format", "csv", "--repeat", "0.5", "--far", "0"}, gen.Options{Records: 3000, Seed: 1, Format: "csv", Repeat: 0.5, Far: -1}},
		{[]string{"--records", "2k", "--format", "jsonl", "--repeat", "0"}, gen.Options{Records: 2000, Seed: 1, Format: "jsonl", Repeat: -1}},
	} {
		var want bytes.Buffer
		st, err := gen.Generate(&want, tc.o)
		if err != nil {
			t.Fatal(err)
		}
		stdout, stderr := runFpdedup(t, link, append([]string{"gen"}, tc.args...)...)
		if stdout != want.String() {
			t.Errorf("gen %v differs from gen.Generate(%+v)", tc.args, tc.o)
		}
		if want := fmt.Sprintf("gen: %d records, %d distinct, ", st.Records, st.Distinct); !strings.HasPrefix(stderr, want) {
			t.Errorf("gen %v: summary %q, want it to begin %q", tc.args, stderr, want)
		}
		old, oldStderr := runFpdedup(t, link, append([]string{"bench", "gen"}, tc.args...)...)
		if old != stdout || !strings.HasPrefix(oldStderr, "fpdedup: bench gen is now fpdedup gen") {
			t.Errorf("bench gen %v: not the same bytes as gen, or no word on the new name: %q", tc.args, oldStderr)
		}
	}
}

// fpdedup bench without gen points to fpdedup-bench, with exit 2, whatever
// flags of the old runner it is given.
func TestBenchPointsToFpdedupBench(t *testing.T) {
	link := fpdedupLink(t)
	for _, args := range [][]string{{"bench"}, {"bench", "--quick", "--peers", "none"}, {"bench", "--out", "x"}} {
		cmd := exec.Command(link, args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
			t.Errorf("fpdedup %v: %v, want exit 2", args, err)
		}
		if !strings.Contains(stderr.String(), "fpdedup-bench --quick --peers none") {
			t.Errorf("fpdedup %v: stderr %q does not name fpdedup-bench", args, stderr.String())
		}
	}
}

// The product links neither the benchmark harness (package bench, whose
// charts need plotting, font and PDF libraries: ~10 MB) nor any of those
// libraries; of bench/ it links the generator, bench/gen, alone.
func TestProductHasNoBenchHarness(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		gobin = filepath.Join(build.Default.GOROOT, "bin", "go")
	}
	out, err := exec.Command(gobin, "list", "-deps", "-f", "{{.ImportPath}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	forbidden := []string{
		"gonum.org/v1/plot", "codeberg.org/go-latex", "codeberg.org/go-pdf", "codeberg.org/go-fonts",
		"git.sr.ht/~sbinet/gg", "github.com/golang/freetype", "golang.org/x/image", "github.com/ajstarks/svgo",
	}
	const benchDir = "github.com/fpdedup/fpdedup/bench"
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps printed %d packages: %q", len(deps), out)
	}
	for _, p := range deps {
		for _, f := range forbidden {
			if p == f || strings.HasPrefix(p, f+"/") {
				t.Errorf("cmd/fpdedup depends on %s (a plotting, font or PDF library)", p)
			}
		}
		if (p == benchDir || strings.HasPrefix(p, benchDir+"/")) && p != benchDir+"/gen" {
			t.Errorf("cmd/fpdedup imports %s: of bench/ the product may link bench/gen alone", p)
		}
	}
}
