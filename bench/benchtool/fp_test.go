package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// fp writes distinct 32-digit lowercase hex lines, the same for the same
// seed and index, so that ranges of one seed overlap where their indexes do.
func TestFp(t *testing.T) {
	run := func(args ...string) []string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if err := fpMain(args, &stdout, &stderr); err != nil {
			t.Fatalf("fp %v: %v (%s)", args, err, stderr.String())
		}
		return strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n")
	}
	a := run("--seed", "3", "--count", "1000")
	b := run("--seed", "3", "--from", "800", "--count", "1000")
	c := run("--seed", "4", "--count", "1000")
	if len(a) != 1000 || len(b) != 1000 {
		t.Fatalf("got %d and %d lines, want 1000", len(a), len(b))
	}
	hex := regexp.MustCompile(`^[0-9a-f]{32}$`)
	seen := map[string]int{}
	for _, l := range append(append(append([]string{}, a...), b...), c...) {
		if !hex.MatchString(l) {
			t.Fatalf("line %q is not 32 lowercase hex digits", l)
		}
		seen[l]++
	}
	// a and b share their 200 common indexes; seed 4 shares nothing.
	if want := 1000 + 800 + 1000; len(seen) != want {
		t.Errorf("%d distinct fingerprints, want %d", len(seen), want)
	}
	for i := 0; i < 200; i++ {
		if a[800+i] != b[i] {
			t.Fatalf("index %d differs between ranges", 800+i)
		}
	}

	out := filepath.Join(t.TempDir(), "x.hex")
	var stdout, stderr bytes.Buffer
	if err := fpMain([]string{"--seed", "3", "--count", "1k", "-o", out}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(out); err != nil || string(got) != strings.Join(a, "\n")+"\n" {
		t.Errorf("fp -o differs from stdout (%v)", err)
	}
}

func TestParseProc(t *testing.T) {
	if pp, ok := parseStatPPID([]byte("123 (a b) c) S 45 123 123 0 -1")); !ok || pp != 45 {
		t.Errorf("parseStatPPID = %d, %v; want 45", pp, ok)
	}
	status := "Name:\tx\nVmRSS:\t    2264 kB\nRssAnon:\t     152 kB\nRssFile:\t    2112 kB\n"
	if kb, ok := parseRssAnon([]byte(status)); !ok || kb != 152 {
		t.Errorf("parseRssAnon = %d, %v; want 152", kb, ok)
	}
	if _, ok := parseRssAnon([]byte("Name:\tx\n")); ok {
		t.Errorf("parseRssAnon found RssAnon in a status without one")
	}
}

// rss passes the command's exit status through and samples its children:
// a shell that runs a child (not exec) is still measured.
func TestRss(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc")
	}
	out := filepath.Join(t.TempDir(), "anon")
	code, err := rssMain([]string{"-o", out, "--every", "5ms", "--", "sh", "-c", "sleep 0.1; exit 3"}, os.Stderr)
	if err != nil || code != 3 {
		t.Fatalf("rss = %d, %v; want exit 3", code, err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if s := strings.TrimSpace(string(b)); s == "" || s == "0" || strings.Trim(s, "0123456789") != "" {
		t.Errorf("peak = %q, want a positive KiB count", s)
	}
	if code, _ := rssMain([]string{"-o", out, "--", "sh", "-c", "kill -TERM $$"}, os.Stderr); code != 128+15 {
		t.Errorf("a command killed by SIGTERM gave %d, want 143", code)
	}
}
