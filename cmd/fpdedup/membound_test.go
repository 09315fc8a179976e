package main

import (
	"os"
	"strings"
	"testing"

	"github.com/fpdedup/fpdedup/internal/memplan"
)

// TestMemBoundStated: the README and --help state the bound on the
// process's memory with the plan's figures (memplan.Floor, Overhead), and
// the README's figures for reconcile are its plan's.
func TestMemBoundStated(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := strings.Join(strings.Fields(string(b)), " ")
	for _, want := range []string{
		"stays within " + memplan.BoundText("`--mem`", ""),
		strings.NewReplacer("Memory: reconcile shares", "Reconcile shares", "--mem", "`--mem`", "--stats-json", "`--stats-json`").Replace(reconcileMemSentence()),
	} {
		if !strings.Contains(readme, want) {
			t.Errorf("the README does not say %q", want)
		}
	}
	_, out, _ := runInProcess("--help")
	if !strings.Contains(strings.Join(strings.Fields(out), " "), "stays within "+memplan.BoundText("--mem", "")) {
		t.Errorf("--help does not state the bound %q:\n%s", memplan.BoundText("--mem", ""), out)
	}
	if _, out, _ = runInProcess("reconcile", "--help"); !strings.Contains(strings.Join(strings.Fields(out), " "), reconcileMemSentence()) {
		t.Errorf("reconcile --help does not say how it shares --mem:\n%s", out)
	}
}
