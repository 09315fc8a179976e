package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDemoScript runs the README's first command, scripts/demo.sh, as a
// new user would: it must build, run every job it shows and say that
// dedup's output is identical to awk's, leaving its files in the
// checkout's demo-out (a shared /tmp directory another user made first
// refused them: the build log could not be written and the build "failed").
func TestDemoScript(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		if _, err := os.Stat("/usr/local/go/bin/go"); err != nil {
			t.Skip("no go tool to build with")
		}
	}
	out := filepath.Join("..", "..", "demo-out")
	if err := os.RemoveAll(out); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", filepath.Join("..", "..", "scripts", "demo.sh"))
	cmd.Env = os.Environ()
	for i, e := range cmd.Env {
		if strings.HasPrefix(e, "DEMO_DIR=") {
			cmd.Env[i] = "DEMO_DIR=" + out
		}
	}
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("demo.sh: %v\n%s", err, b)
	}
	for _, want := range []string{"identical to awk", "dedup: 2000 records, 1240 first occurrences", "(exit 1: a key repeats)", ": ok (1240 fingerprints in 1 segment)"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("demo.sh's output lacks %q:\n%s", want, b)
		}
	}
	for _, f := range []string{"unique.txt", "day1.fpx", "events.fpx"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("demo.sh left no %s in demo-out: %v", f, err)
		}
	}
}
