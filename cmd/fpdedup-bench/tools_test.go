package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fpdedup/fpdedup/bench/gen"
)

// rss writes the sampled peak and passes its command's exit status on,
// 128+N for a signal.
func TestRSS(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc")
	}
	out := filepath.Join(t.TempDir(), "anon")
	runCmd(t, 3, "rss", "-o", out, "--every", "5ms", "--", "sh", "-c", "sleep 0.1; exit 3")
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if s := strings.TrimSpace(string(b)); s == "" || s == "0" || strings.Trim(s, "0123456789") != "" {
		t.Errorf("peak = %q, want a positive KiB count", s)
	}
	runCmd(t, 128+15, "rss", "-o", out, "sh", "-c", "kill -TERM $$") // without --: its flags are the command's
}

// fp writes what gen.Fingerprints writes, to stdout or a file.
func TestFp(t *testing.T) {
	var want bytes.Buffer
	if err := gen.Fingerprints(&want, 3, 1000, 2000); err != nil {
		t.Fatal(err)
	}
	stdout, _ := runCmd(t, 0, "fp", "--seed", "3", "--from", "1k", "--count", "2k")
	if stdout != want.String() {
		t.Errorf("fp to stdout differs from gen.Fingerprints")
	}
	out := filepath.Join(t.TempDir(), "x.hex")
	runCmd(t, 0, "fp", "--seed", "3", "--from", "1000", "--count", "2000", "-o", out)
	if got, err := os.ReadFile(out); err != nil || string(got) != want.String() {
		t.Errorf("fp -o differs from gen.Fingerprints (%v)", err)
	}
}

// fp --partition I/N writes, in order, the lines of the whole range whose
// first hex digits put them in prefix partition I: the four partitions
// together are the whole, each one its own.
func TestFpPartition(t *testing.T) {
	var whole bytes.Buffer
	if err := gen.Fingerprints(&whole, 3, 0, 4000); err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(whole.String(), "\n")
	total := 0
	for i := range 4 {
		var want strings.Builder
		for _, l := range lines {
			if l != "" && strings.IndexByte("0123456789abcdef", l[0])/4 == i {
				want.WriteString(l)
			}
		}
		got, _ := runCmd(t, 0, "fp", "--seed", "3", "--count", "4000", "--partition", fmt.Sprintf("%d/4", i))
		if got != want.String() || got == "" {
			t.Errorf("partition %d/4: %d bytes, want %d", i, len(got), want.Len())
		}
		total += len(got)
	}
	if total != whole.Len() {
		t.Errorf("the partitions hold %d bytes of the whole's %d", total, whole.Len())
	}
	for _, bad := range []string{"4/4", "1/3", "x", "1/1"} {
		if _, stderr := runCmd(t, 2, "fp", "--partition", bad); !strings.Contains(stderr, "--partition") {
			t.Errorf("--partition %s: %q", bad, stderr)
		}
	}
}

func TestWarm(t *testing.T) {
	runCmd(t, 0, "warm", "8MiB")
	if _, stderr := runCmd(t, 2, "warm", "lots"); !strings.Contains(stderr, `"lots" is not a size`) {
		t.Errorf("warm lots: %q", stderr)
	}
	runCmd(t, 2, "warm", "1GiB", "2GiB")
}

// pages reads the pages it says, in distinct huge pages it counts right,
// and the first touches of a new mapping fault.
func TestPages(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, bytes.Repeat([]byte{7}, 8<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _ := runCmd(t, 0, "pages", "--pages", "5000", path)
	got := map[string]float64{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var k string
		var v float64
		if _, err := fmt.Sscanf(line, "%s\t%g", &k, &v); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		got[k] = v
	}
	// 5000 draws of 2048 pages find about 91% of them (1-e^-2.44); the file is four
	// huge pages.
	if p := got["pages"]; p < 1750 || p > 2000 {
		t.Errorf("pages = %v, want about 1870 of the file's 2048", p)
	}
	if got["huge_pages"] != 4 {
		t.Errorf("huge_pages = %v, want 4", got["huge_pages"])
	}
	if got["map_faults"] < 1 || got["map_us_per_page"] <= 0 || got["pread_us_per_page"] <= 0 {
		t.Errorf("no faults or times: %v", got)
	}
	runCmd(t, 2, "pages", "--pages", "0", path)
	runCmd(t, 2, "pages", filepath.Join(t.TempDir(), "missing"))
}
