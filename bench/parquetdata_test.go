package bench

import (
	"context"
	"strings"
	"testing"
)

// parseEvent reads the generator's CSV records and refuses anything else
// by name, rather than writing a wrong row.
func TestParseEvent(t *testing.T) {
	e, err := parseEvent([]byte("u1234567,d0123abcde,1764633600003,payment,1234.05"))
	if err != nil || e.UserID != "u1234567" || e.DeviceID != "d0123abcde" || e.TimestampMs != 1764633600003 || e.EventType != "payment" || e.Amount != 123405 {
		t.Fatalf("%+v, %v", e, err)
	}
	for rec, want := range map[string]string{
		"u1,d2,3,login":            "4 fields",
		"u1,d2,x,login,0.00":       "invalid syntax",
		"u1,d2,3,login,12":         `amount "12"`,
		"u1,d2,3,login,1.5":        `amount "1.5"`,
		"u1,d2,3,login,a.00":       `amount "a.00"`,
		"u1,d2,3,login,0.00,extra": "6 fields",
		"u1,\"d,2\",3,login,0.00":  "6 fields",
		"u1,d2,3,refund,-12.34":    `amount "-12.34"`,
		"u1,d2,3,refund,1.-5":      `amount "1.-5"`,
	} {
		if _, err := parseEvent([]byte(rec)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", rec, err, want)
		}
	}
}

// A peer given a limit it cannot finish within has given up when its error
// says so (rowSpec.givesUp): reported with its last words, not a failure of
// the run, where the same exit of any other row is one, and so is any other
// error of the limited row.
func TestGaveUp(t *testing.T) {
	b := &runner{rep: &Report{}, peers: map[string]*Peer{}, hashes: map[string]string{}, stats: map[string]map[string]any{}, o: Options{Runs: 1}}
	fail := sh("echo 'Out of Memory Error: could not allocate' >&2; exit 1")
	j, err := b.runJob(context.Background(), &jobSpec{name: "parquet-bounded", unit: "rows", ref: "ok", rows: []rowSpec{
		{tool: "ok", kind: kindFpdedup, cmd: sh("true")},
		{tool: "limited", kind: kindPeer, cmd: fail, givesUp: "Out of Memory Error"},
		{tool: "broken", kind: kindPeer, cmd: fail},
		{tool: "limited, but broken otherwise", kind: kindPeer, cmd: sh("echo 'Binder Error: no column ts' >&2; exit 1"), givesUp: "Out of Memory Error"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if r := j.Rows[1]; r.Status != "gave up" || !strings.Contains(r.Why, "Out of Memory Error") {
		t.Errorf("limited: %s: %s", r.Status, r.Why)
	}
	for _, r := range j.Rows[2:] {
		if r.Status != "failed" {
			t.Errorf("%s: %s: %s", r.Tool, r.Status, r.Why)
		}
	}
	b.rep.Jobs = []Job{j}
	if n := b.rep.Problems(); n != 2 {
		t.Errorf("%d problems, want 2 (the broken rows)", n)
	}
}
