package main

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/fpdedup/fpdedup/internal/atomicfile"
)

// TestWriteMetrics: the text format as node_exporter's textfile collector
// reads it (and as client_golang's expfmt wrote it before): a HELP and a
// TYPE line and one sample a gauge, families sorted by name, nested
// figures joined by _, booleans 0/1, non-numbers left out, floats in their
// shortest form (-0 as 0), NaN and infinities spelled as the format wants, and the
// HELP text escaped.
func TestWriteMetrics(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.prom")
	inv := &invocation{metrics: path}
	stats := map[string]any{
		"command":   "dedup",
		"dedup":     map[string]any{"records": 1e6, "ratio": 0.375, "ok": true, "name": "in.txt"},
		"bad":       map[string]any{"nan": math.NaN(), "inf": math.Inf(1), "minus": math.Inf(-1), "neg": -1.5, "zero": math.Copysign(0, -1)},
		"odd-key\\": map[string]any{"x\ny": 2.0},
	}
	g := &atomicfile.Group{}
	if err := inv.writeMetrics(g, "dedup", stats); err != nil {
		t.Fatal(err)
	}
	if err := g.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got := regexp.MustCompile(`(?m)^(fpdedup_dedup_last_success_timestamp_seconds) \d\.\d+e\+09$`).ReplaceAllString(string(b), "$1 NOW")
	want := `# HELP fpdedup_dedup_bad_inf fpdedup dedup: bad_inf of the last run
# TYPE fpdedup_dedup_bad_inf gauge
fpdedup_dedup_bad_inf +Inf
# HELP fpdedup_dedup_bad_minus fpdedup dedup: bad_minus of the last run
# TYPE fpdedup_dedup_bad_minus gauge
fpdedup_dedup_bad_minus -Inf
# HELP fpdedup_dedup_bad_nan fpdedup dedup: bad_nan of the last run
# TYPE fpdedup_dedup_bad_nan gauge
fpdedup_dedup_bad_nan NaN
# HELP fpdedup_dedup_bad_neg fpdedup dedup: bad_neg of the last run
# TYPE fpdedup_dedup_bad_neg gauge
fpdedup_dedup_bad_neg -1.5
# HELP fpdedup_dedup_bad_zero fpdedup dedup: bad_zero of the last run
# TYPE fpdedup_dedup_bad_zero gauge
fpdedup_dedup_bad_zero 0
# HELP fpdedup_dedup_last_success_timestamp_seconds when the last successful run ended
# TYPE fpdedup_dedup_last_success_timestamp_seconds gauge
fpdedup_dedup_last_success_timestamp_seconds NOW
# HELP fpdedup_dedup_odd_key__x_y fpdedup dedup: odd-key\\_x\ny of the last run
# TYPE fpdedup_dedup_odd_key__x_y gauge
fpdedup_dedup_odd_key__x_y 2
# HELP fpdedup_dedup_ok fpdedup dedup: ok of the last run
# TYPE fpdedup_dedup_ok gauge
fpdedup_dedup_ok 1
# HELP fpdedup_dedup_ratio fpdedup dedup: ratio of the last run
# TYPE fpdedup_dedup_ratio gauge
fpdedup_dedup_ratio 0.375
# HELP fpdedup_dedup_records fpdedup dedup: records of the last run
# TYPE fpdedup_dedup_records gauge
fpdedup_dedup_records 1e+06
`
	if got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
	// Two figures that come to one name are an error, not a file the
	// collector refuses.
	inv.metrics = filepath.Join(t.TempDir(), "m2.prom")
	err = inv.writeMetrics(&atomicfile.Group{}, "dedup", map[string]any{"a-b": 1.0, "a_b": 2.0})
	if err == nil || !strings.Contains(err.Error(), "two figures are named fpdedup_dedup_a_b") {
		t.Fatalf("got %v", err)
	}
}
