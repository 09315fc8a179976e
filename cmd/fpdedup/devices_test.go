package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDeviceMeasureAnnounced: a lookup batch in a cold index whose disk's
// rates nothing gives measures the disk only when the command may (here
// measureAbove is lowered to every index): with a line on stderr, and
// under -q never, nor with --device-rates. On 9cdcd90 a measure, run by
// the storage library during the query, was never said.
func TestDeviceMeasureAnnounced(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", dir)
	t.Setenv("FPDEDUP_DEVICE", "")
	defer func(was int64) { measureAbove = was }(measureAbove)
	measureAbove = 0
	// Several segments, so that a batch finds most of their pages cold
	// (the first one's header comes in with the file's header at open).
	var keys bytes.Buffer
	for i := range 3_000_000 {
		fmt.Fprintf(&keys, "k%d\n", i)
	}
	in := filepath.Join(dir, "keys.txt")
	index := filepath.Join(dir, "keys.fpx")
	if err := os.WriteFile(in, keys.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runInProcess("build", "-q", "-o", index, in); code != 0 {
		t.Fatalf("build: %d %s", code, stderr)
	}
	const said = "fpdedup: measuring the read rates of the disk under "
	for _, c := range []struct {
		args     []string
		measured bool
	}{
		{[]string{"dedup", "--against", index, "-o", "/dev/null", in}, true},
		{[]string{"dedup", "-q", "--against", index, "-o", "/dev/null", in}, false},
		{[]string{"dedup", "--device-rates", "rand=1000,seq=1e9", "--against", index, "-o", "/dev/null", in}, false},
	} {
		evictFile(t, index)
		code, _, stderr := runInProcess(c.args...)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s", c.args, code, stderr)
		}
		if got := strings.Contains(stderr, said+index); got != c.measured {
			t.Errorf("%v: measure said %v, want %v:\n%s", c.args, got, c.measured, stderr)
		}
	}
}
