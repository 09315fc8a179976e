package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/fpdedup/fpdedup/bench/gen"
	"github.com/fpdedup/fpdedup/internal/tempfile"
)

// installTestHooks lets a test deliver a signal at an exact stage of a run
// (see testHook): FPDEDUP_TEST_SIGNAL=STAGE:INT or STAGE:TERM. At STAGE the
// process signals itself and waits until the run has seen the signal, so
// what follows runs with the signal pending, deterministically.
func installTestHooks() {
	spec := os.Getenv("FPDEDUP_TEST_SIGNAL")
	if spec == "" {
		return
	}
	i := strings.LastIndex(spec, ":")
	stage, name := spec[:max(i, 0)], spec[i+1:]
	sig := syscall.SIGINT
	if name == "TERM" {
		sig = syscall.SIGTERM
	}
	seen := make(chan struct{})
	var once, sent sync.Once
	testHook = func(s string) {
		switch s {
		case "signal":
			once.Do(func() { close(seen) })
		case stage:
			// Once: a second signal sent while the run is ending could
			// arrive after its handler is gone and kill the process (a
			// stage reached twice did that to verify, under load).
			sent.Do(func() { _ = syscall.Kill(os.Getpid(), sig) })
			<-seen
		}
	}
}

// exitFixture is a directory with what every command needs: records, an
// index of them, a damaged copy, a SHA-256 index and an online export that
// agrees with it and one that does not.
type exitFixture struct {
	dir, records, index, damaged, shaIndex, online, onlineShort string
	first                                                       string // a record of records
}

func newExitFixture(t *testing.T, bin string) exitFixture {
	t.Helper()
	d := t.TempDir()
	f := exitFixture{
		dir: d, records: filepath.Join(d, "in.txt"), index: filepath.Join(d, "in.fpx"), damaged: filepath.Join(d, "damaged.fpx"),
		shaIndex: filepath.Join(d, "sha.fpx"), online: filepath.Join(d, "online.txt"), onlineShort: filepath.Join(d, "short.txt"),
	}
	var buf bytes.Buffer
	bw := bufio.NewWriter(&buf)
	if _, err := gen.Generate(bw, gen.Options{Records: 200_000, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	bw.Flush()
	if err := os.WriteFile(f.records, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	f.first, _, _ = strings.Cut(buf.String(), "\n")
	for _, args := range [][]string{
		{"build", "-q", "-o", f.index, f.records},
		{"build", "-q", "--hash", "sha256", "-o", f.shaIndex, f.records},
	} {
		if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
	}
	b, err := os.ReadFile(f.index)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/3] ^= 0x40 // a fingerprint page: verify names the damage
	if err := os.WriteFile(f.damaged, b, 0o644); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var all, short strings.Builder
	for i, line := range strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n") {
		sum := sha256.Sum256([]byte(line))
		h := hex.EncodeToString(sum[:16])
		if seen[h] {
			continue
		}
		seen[h] = true
		all.WriteString(h + "\n")
		if i%10 != 0 {
			short.WriteString(h + "\n")
		}
	}
	if err := os.WriteFile(f.online, []byte(all.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.onlineShort, []byte(short.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestExitCodes is the exit-code table of README "Exit codes", for every
// command: 0 done, 1 a negative answer, 2 usage or I/O error, 130 SIGINT,
// 143 SIGTERM, 141 a reader that closed stdout. The signals arrive while
// the command works (the "work" stage, see installTestHooks); nothing may be
// published then, and no temp file left.
func TestExitCodes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every command about seven times")
	}
	bin := fpdedupLink(t)
	f := newExitFixture(t, bin)
	out := func(name string) string { return filepath.Join(f.dir, "out", name) }
	if err := os.Mkdir(filepath.Join(f.dir, "out"), 0o755); err != nil {
		t.Fatal(err)
	}
	const na = -1
	type row struct {
		command string
		ok      []string // exits 0; its signalled runs must publish nothing
		neg     []string // exits 1 (nil: the command has no negative answer)
		usage   []string
		ioErr   []string
		pipe    []string // writes to stdout: 141 when the reader is gone (nil: n/a)
		output  string   // what ok publishes, absent after a signal
	}
	rows := []row{
		{"build", []string{"build", "-o", out("b.fpx"), f.records}, nil, []string{"build", f.records}, []string{"build", "-o", out("b.fpx"), out("missing.txt")}, nil, out("b.fpx")},
		{"dedup", []string{"dedup", "-o", out("d.txt"), "--record", out("d.fpx"), f.records}, nil, []string{"dedup", "--emit", "some", f.records}, []string{"dedup", out("missing.txt")}, []string{"dedup", f.records}, out("d.txt")},
		{"count", []string{"count", "-o", out("c.txt"), f.records}, []string{"count", "--check", f.records}, []string{"count", "--top", "-1", f.records}, []string{"count", out("missing.txt")}, []string{"count", f.records}, out("c.txt")},
		{"replay", []string{"replay", "--format", "csv", "--key", "1,2,3", "--time-field", "3", "--order", "arrival", "--l1", "4096,ttl=1s", "--l2", "shards=2,bits=8192,k=3", "--lost", out("lost.txt"), f.records}, nil,
			[]string{"replay", "--l2", "shards=0", f.records}, []string{"replay", "--l2", "shards=2,bits=8192,k=3", out("missing.txt")}, []string{"replay", "--l2", "shards=2,bits=8192,k=3", f.records}, out("lost.txt")},
		{"query", []string{"query", f.index, f.first}, []string{"query", f.index, "not a key of it"}, []string{"query"}, []string{"query", out("missing.fpx"), "k"}, []string{"query", "--fp", f.index, strings.Repeat("0", 32)}, ""},
		{"merge", []string{"merge", "-o", out("m.fpx"), f.index, f.index}, nil, []string{"merge", f.index}, []string{"merge", "-o", out("m.fpx"), f.damaged}, nil, out("m.fpx")},
		{"dump", []string{"dump", f.index}, nil, []string{"dump"}, []string{"dump", f.damaged}, []string{"dump", f.index}, ""},
		{"inspect", []string{"inspect", f.index}, nil, []string{"inspect"}, []string{"inspect", out("missing.fpx")}, []string{"inspect", f.index}, ""},
		{"verify", []string{"verify", f.index}, []string{"verify", f.damaged}, []string{"verify"}, []string{"verify", out("missing.fpx")}, []string{"verify", f.damaged}, ""},
		{"reconcile", []string{"reconcile", "--index", f.shaIndex, "--online", "file:" + f.online, "--missing", out("r.fpx")},
			[]string{"reconcile", "--index", f.shaIndex, "--online", "file:" + f.onlineShort},
			[]string{"reconcile", "--online", "file:" + f.online}, []string{"reconcile", "--index", f.shaIndex, "--online", "file:" + out("missing.txt")}, nil, ""},
		{"gen", []string{"gen", "--records", "100k", "-o", out("g.txt")}, nil, []string{"gen", "--records", "many"}, []string{"gen", "-o", out("no/such/dir/g.txt")}, []string{"gen", "--records", "100k"}, out("g.txt")},
	}
	run := func(t *testing.T, env string, args []string, closedStdout bool) (int, string) {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"--progress", "never"}, args...)...)
		cmd.Env = append(os.Environ(), "TMPDIR="+f.dir)
		if env != "" {
			cmd.Env = append(cmd.Env, "FPDEDUP_TEST_SIGNAL="+env)
		}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if closedStdout {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			r.Close()
			defer w.Close()
			cmd.Stdout = w
		}
		err := cmd.Run()
		var ee *exec.ExitError
		switch {
		case err == nil:
			return 0, stderr.String()
		case errors.As(err, &ee):
			return ee.ExitCode(), stderr.String()
		}
		t.Fatalf("%v: %v", args, err)
		return 0, ""
	}
	noDebris := func(t *testing.T) {
		t.Helper()
		for _, dir := range []string{f.dir, filepath.Join(f.dir, "out")} {
			for _, e := range entries(t, dir) {
				if tempfile.IsTemp(e) {
					t.Errorf("debris left in %s: %s", dir, e)
				}
			}
		}
	}
	var table strings.Builder
	fmt.Fprintf(&table, "%-10s %4s %4s %5s %4s %6s %7s %7s\n", "command", "ok", "neg", "usage", "I/O", "SIGINT", "SIGTERM", "SIGPIPE")
	for _, r := range rows {
		t.Run(r.command, func(t *testing.T) {
			got := map[string]int{}
			check := func(col string, want int, env string, args []string, closed bool) {
				if args == nil {
					got[col] = na
					return
				}
				code, stderr := run(t, env, args, closed)
				got[col] = code
				if code != want {
					t.Errorf("%s %v: exit %d, want %d; stderr:\n%s", col, args, code, want, stderr)
				}
				if want >= 128 && want != exitPipe && !strings.Contains(stderr, "interrupted by") {
					t.Errorf("%s %v: stderr does not say it was interrupted:\n%s", col, args, stderr)
				}
				if want == exitPipe && stderr != "" && !strings.HasPrefix(stderr, "fpdedup: ") && strings.Contains(stderr, "broken pipe") {
					t.Errorf("%s %v: a closed stdout is not quiet:\n%s", col, args, stderr)
				}
				noDebris(t)
			}
			check("ok", 0, "", r.ok, false)
			if r.output != "" {
				if _, err := os.Stat(r.output); err != nil {
					t.Errorf("ok run published nothing: %v", err)
				}
				os.Remove(r.output)
			}
			check("neg", exitNegative, "", r.neg, false)
			check("usage", exitError, "", r.usage, false)
			check("I/O", exitError, "", r.ioErr, false)
			check("SIGINT", exitInterrupt, "work:INT", r.ok, false)
			check("SIGTERM", exitTerm, "work:TERM", r.ok, false)
			if r.output != "" {
				if _, err := os.Stat(r.output); err == nil {
					t.Errorf("an interrupted run published %s", r.output)
				}
			}
			check("SIGPIPE", exitPipe, "", r.pipe, true)
			cell := func(col string) string {
				if got[col] == na {
					return "-"
				}
				return fmt.Sprint(got[col])
			}
			fmt.Fprintf(&table, "%-10s %4s %4s %5s %4s %6s %7s %7s\n", r.command, cell("ok"), cell("neg"), cell("usage"), cell("I/O"), cell("SIGINT"), cell("SIGTERM"), cell("SIGPIPE"))
		})
	}
	t.Logf("exit codes (- : not applicable):\n%s", table.String())
}

// TestSignalAtCommitPoint: a signal just before the commit point publishes
// nothing and exits 130/143 saying so; a signal just after it changes
// nothing: exit 0, the outputs in place, the summary printed (never
// "nothing was published" for what was).
func TestSignalAtCommitPoint(t *testing.T) {
	bin := fpdedupLink(t)
	dir := t.TempDir()
	in := filepath.Join(dir, "in.txt")
	if err := os.WriteFile(in, []byte("a\nb\na\nc\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	idx := filepath.Join(dir, "idx.fpx")
	if out, err := exec.Command(bin, "build", "-o", idx, in).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	old := []byte("the old contents\n")
	for _, tc := range []struct {
		name    string
		args    []string
		outputs []string
	}{
		{"build", []string{"build", "-o", "@o.fpx", "--stats-json", "@st.json", in}, []string{"o.fpx", "st.json"}},
		{"merge", []string{"merge", "-o", "@o.fpx", "--metrics", "@m.prom", idx, idx}, []string{"o.fpx", "m.prom"}},
		{"dedup -o --record", []string{"dedup", "-o", "@o.txt", "--record", "@o.fpx", in}, []string{"o.txt", "o.fpx"}},
		{"dedup --record to stdout", []string{"dedup", "--record", "@o.fpx", "--on-bad", "quarantine=@q.txt", in}, []string{"o.fpx"}},
		{"gen -o", []string{"gen", "--records", "1000", "-o", "@o.txt"}, []string{"o.txt"}},
	} {
		for _, stage := range []string{"commit:before", "commit:after"} {
			for _, sig := range []string{"INT", "TERM"} {
				t.Run(tc.name+"/"+stage+"/"+sig, func(t *testing.T) {
					wd := t.TempDir()
					var args []string
					for _, a := range tc.args {
						args = append(args, strings.ReplaceAll(a, "@", wd+"/"))
					}
					for _, o := range tc.outputs {
						if err := os.WriteFile(filepath.Join(wd, o), old, 0o644); err != nil {
							t.Fatal(err)
						}
					}
					cmd := exec.Command(bin, args...)
					cmd.Env = append(os.Environ(), "FPDEDUP_TEST_SIGNAL="+stage+":"+sig, "TMPDIR="+wd)
					var stderr bytes.Buffer
					cmd.Stderr = &stderr
					err := cmd.Run()
					code := 0
					var ee *exec.ExitError
					if errors.As(err, &ee) {
						code = ee.ExitCode()
					} else if err != nil {
						t.Fatal(err)
					}
					for _, o := range tc.outputs {
						b, err := os.ReadFile(filepath.Join(wd, o))
						if err != nil {
							t.Fatal(err)
						}
						if replaced := !bytes.Equal(b, old); replaced != (stage == "commit:after") {
							t.Errorf("%s replaced: %v, at %s", o, replaced, stage)
						}
					}
					for _, e := range entries(t, wd) {
						if tempfile.IsTemp(e) {
							t.Errorf("debris: %s", e)
						}
					}
					want := map[string]int{"INT": exitInterrupt, "TERM": exitTerm}[sig]
					if stage == "commit:after" {
						want = 0
						if strings.Contains(stderr.String(), "nothing was published") {
							t.Errorf("published, but says otherwise:\n%s", stderr.String())
						}
					} else if !strings.Contains(stderr.String(), "nothing was published") {
						t.Errorf("stderr does not say nothing was published:\n%s", stderr.String())
					}
					if code != want {
						t.Errorf("exit %d, want %d; stderr:\n%s", code, want, stderr.String())
					}
				})
			}
		}
	}
}
