package reconciletest

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/fpdedup/fpdedup/reconcile/report"
)

// CLIReport is what `fpdedup reconcile --report` writes: the run's
// figures, then the CLI's error message and exit code.
type CLIReport struct {
	report.Report
	Error    string `json:"error,omitempty"`
	ExitCode int    `json:"exit_code"`
}

// ReadReport reads the report at path.
func ReadReport(t *testing.T, path string) *CLIReport {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r CLIReport
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("report %s: %v", path, err)
	}
	return &r
}

// WantCounts fails unless c is both, offline and online.
func WantCounts(t *testing.T, c report.Counts, both, offline, online int64) {
	t.Helper()
	if c != (report.Counts{Both: both, OnlyOffline: offline, OnlyOnline: online}) {
		t.Fatalf("counts %+v, want both %d, only offline %d, only online %d", c, both, offline, online)
	}
}

// Dump lists an index's fingerprints with the CLI.
func Dump(t *testing.T, dir, index string) []string {
	t.Helper()
	r := Fpdedup(t, dir, nil, "dump", index).Want(t, 0)
	return strings.Fields(r.Stdout)
}
