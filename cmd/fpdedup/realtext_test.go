package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestRealTextAgainstAwk: on text nobody generated (this machine's package
// database, and the names of its documentation files: repeats, long lines,
// odd bytes), count, dedup and dedup --keep last print what awk, uniq -c's
// layout and tac print, byte for byte.
func TestRealTextAgainstAwk(t *testing.T) {
	if _, err := exec.LookPath("awk"); err != nil {
		t.Skip("no awk")
	}
	dir := t.TempDir()
	var inputs []string
	if b, err := os.ReadFile("/var/lib/dpkg/status"); err == nil && len(b) > 0 {
		p := filepath.Join(dir, "dpkg-status")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, p)
	}
	if out, err := exec.Command("sh", "-c", "find /usr/share/doc /usr/share/man -name '*' 2>/dev/null | sed 's#.*/##'").Output(); err == nil && len(out) > 0 {
		p := filepath.Join(dir, "names")
		if err := os.WriteFile(p, out, 0o644); err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, p)
	}
	if len(inputs) == 0 {
		t.Skip("no real text on this machine")
	}
	bin := fpdedupLink(t)
	for _, in := range inputs {
		for _, tc := range []struct {
			name, reference string
			args            []string
		}{
			{"count", `awk '{c[$0]++; if (!o[$0]++) k[++n] = $0} END {for (i = 1; i <= n; i++) printf "%7d %s\n", c[k[i]], k[i]}'`, []string{"count"}},
			{"count --min-count 2 --tsv", `awk '{c[$0]++; if (!o[$0]++) k[++n] = $0} END {for (i = 1; i <= n; i++) if (c[k[i]] >= 2) printf "%d\t%s\n", c[k[i]], k[i]}'`, []string{"count", "--min-count", "2", "--tsv"}},
			{"dedup", `awk '!s[$0]++'`, []string{"dedup"}},
			{"dedup --keep last", `tac | awk '!s[$0]++' | tac`, []string{"dedup", "--keep", "last"}},
			{"dedup --emit duplicates", `awk 's[$0]++'`, []string{"dedup", "--emit", "duplicates"}},
		} {
			t.Run(filepath.Base(in)+"/"+tc.name, func(t *testing.T) {
				ref := exec.Command("sh", "-c", tc.reference)
				ref.Env = append(os.Environ(), "LC_ALL=C")
				f, err := os.Open(in)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				ref.Stdin = f
				want, err := ref.Output()
				if err != nil {
					t.Fatalf("%s: %v", tc.reference, err)
				}
				cmd := exec.Command(bin, append(append([]string{"-q"}, tc.args...), in)...)
				cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
				got, err := cmd.Output()
				if err != nil {
					t.Fatalf("%v: %v", tc.args, err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("%v on %s differs from %s (%d bytes vs %d)", tc.args, in, tc.reference, len(got), len(want))
				}
			})
		}
	}
}
