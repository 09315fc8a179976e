package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestOutputTable is the exit-code × output-role table of issue 26: every
// command, every output flag, each output naming
//
//   - an input of the same command (a FILE of records, an index such as
//     --against, --index, IDX or --spec-from, a --files0-from list, standard
//     input when it is a regular file, and the first input again through a
//     hard link, a path through .. and a symlink): refused with exit 2
//     before any work, the input byte for byte as it was and nothing left
//     beside it, unless the README documents the pair as in place (merge -o
//     H H x; dedup -o in in, and dedup -o in < in as e022de8 keeps it):
//     then exit 0 and the input replaced by the result;
//   - a device (/dev/null) or a FIFO (drained by a reader, as `cat fifo &`
//     would): written through, exit 0;
//   - a symlink to a fresh path: exit 0, the target written, the link still
//     a link;
//   - a missing directory (nodir/out, ./nodir/../INPUT, a symlink into
//     nodir): exit 2 before any work, nothing created.
//
// The rules are README "Exit codes, outputs and signals", the root
// command's help and outputs.go. Each case runs in a fresh copy of the
// fixture, in process, but for those whose standard input is a file: the
// commands read the process's own, so those run as a process of their own.
// The cases run one after another (in-process runs share the working
// directory). --checkpoint goes with --apply, to Redis or MySQL only: only
// its refusals are checked.
func TestOutputTable(t *testing.T) {
	fx := newOutputTableFixture(t)
	fx.bin = fpdedupLink(t) // for standard input from a file: a process of its own
	n := 0
	for _, c := range outputTableCommands(fx) {
		for _, o := range c.outputs {
			for _, k := range outputTableCases(c, o) {
				n++
				name := c.name + "/" + o.name + "/" + k.name
				t.Run(name, func(t *testing.T) {
					k.run(t, fx, c, o)
				})
			}
		}
	}
	t.Logf("%d cases", n)
}

// otInput is one way a command reads one of its inputs.
type otInput struct {
	role  string   // as in the subtest's name: FILE, against, stdin, …
	path  string   // the fixture file it reads
	args  []string // the command's arguments (after its words) reading it this way
	stdin string   // the fixture file standard input is (< stdin), if any
}

// otOutput is one output flag.
type otOutput struct {
	name  string // as in the subtest's name
	flag  string // as the refusal names it
	arg   func(path string) []string
	fills bool // writes bytes even from the small fixture (what a FIFO's reader must see)
}

type otCommand struct {
	name    string   // as in the subtest's name
	words   []string // the command: dedup, bench gen
	inputs  []otInput
	outputs []otOutput
	// need is a required output given (to a fresh name) when another flag
	// is under test.
	need []string
	// inPlace: for an output flag, the input roles it may replace (README:
	// merge -o H H x, dedup -o in in).
	inPlace map[string][]string
	// unwritable: why an output cannot be written here at all (no online
	// store to --apply to): only its refusals are checked.
	unwritable string
}

func (c otCommand) args(in otInput, o otOutput, path string) []string {
	args := slices.Concat([]string{"--progress", "never"}, c.words, in.args)
	if len(c.need) > 0 && c.need[0] != o.flag {
		args = append(args, c.need...)
	}
	return append(args, o.arg(path)...)
}

func (c otCommand) inPlaceFor(o otOutput, in otInput) bool {
	return slices.Contains(c.inPlace[o.flag], in.role)
}

// outputTableFixture is the directory every case starts from (copied), and
// what an in-place run leaves.
type outputTableFixture struct {
	dir        string
	bin        string   // fpdedup, for the runs that read standard input
	files      []string // the fixture's files: every input is one of them
	wantDedup  string   // dedup in.txt
	wantMerged string   // dump of merge in.fpx b.fpx
}

func newOutputTableFixture(t *testing.T) outputTableFixture {
	t.Helper()
	fx := outputTableFixture{dir: t.TempDir()}
	scratch := t.TempDir()
	at := func(name string) string { return filepath.Join(fx.dir, name) }
	write := func(path, s string) {
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	must := func(args ...string) string {
		code, stdout, stderr := runInProcess(args...)
		if code != 0 {
			t.Fatalf("fpdedup %s: exit %d\n%s", strings.Join(args, " "), code, stderr)
		}
		return stdout
	}
	// A record over --max-record 50: a bad record, skipped (--on-bad skip)
	// unless --on-bad quarantine=FILE, under test, comes after.
	write(at("in.txt"), "a\nb\na\nc\n"+strings.Repeat("x", 100)+"\n")
	write(filepath.Join(scratch, "b.txt"), "c\nd\n")
	must("build", "-q", "--max-record", "50", "--on-bad", "skip", "-o", at("in.fpx"), at("in.txt"))
	must("build", "-q", "-o", at("b.fpx"), filepath.Join(scratch, "b.txt"))
	must("build", "-q", "--max-record", "50", "--on-bad", "skip", "--hash", "sha256", "-o", at("sha.fpx"), at("in.txt"))
	write(at("fp.txt"), must("dump", at("in.fpx")))
	var online strings.Builder
	for _, k := range []string{"a", "b", "c"} {
		sum := sha256.Sum256([]byte(k))
		online.WriteString(hex.EncodeToString(sum[:16]) + "\n")
	}
	write(at("online.txt"), online.String()) // agrees with sha.fpx: reconcile exits 0
	write(at("list0"), "in.txt\x00")
	if err := os.Mkdir(at("sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	fx.wantDedup = must("dedup", "--max-record", "50", "--on-bad", "skip", at("in.txt"))
	must("merge", "-q", "-o", filepath.Join(scratch, "u.fpx"), at("in.fpx"), at("b.fpx"))
	fx.wantMerged = must("dump", filepath.Join(scratch, "u.fpx"))
	ents, err := os.ReadDir(fx.dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Type().IsRegular() {
			fx.files = append(fx.files, e.Name())
		}
	}
	return fx
}

func outputTableCommands(fx outputTableFixture) []otCommand {
	flagOut := func(flag string, fills bool) otOutput {
		return otOutput{name: flag, flag: flag, arg: func(p string) []string { return []string{flag, p} }, fills: fills}
	}
	// The quarantine gets in.txt's one bad record: it comes after the
	// --on-bad skip of every command line that reads records, and wins.
	quarantine := otOutput{name: "--on-bad=quarantine", flag: "--on-bad quarantine", fills: true,
		arg: func(p string) []string { return []string{"--on-bad", "quarantine=" + p} }}
	// reconcile counts a record over --max-record and does not quarantine
	// it (reconcile/records.go: "its bytes were never held"): the file is
	// published empty.
	emptyQuarantine := quarantine
	emptyQuarantine.fills = false
	stats, metrics := flagOut("--stats-json", true), flagOut("--metrics", true)
	skip := []string{"--max-record", "50", "--on-bad", "skip"}
	records := func(extra ...string) []otInput {
		extra = slices.Concat(skip, extra)
		return []otInput{
			{role: "FILE", path: "in.txt", args: slices.Concat(extra, []string{"in.txt"})},
			{role: "files0-from", path: "list0", args: slices.Concat(extra, []string{"--files0-from", "list0"})},
			{role: "stdin", path: "in.txt", args: extra, stdin: "in.txt"},
		}
	}
	idx := func(extra ...string) []otInput {
		return []otInput{{role: "IDX", path: "in.fpx", args: append(slices.Clone(extra), "in.fpx")}}
	}
	replay := []string{"--l2", "shards=2,bits=2^10,k=3"}
	online := []string{"--index", "sha.fpx", "--online", "file:online.txt"}
	withRecords := slices.Concat(skip, online, []string{"--records", "in.txt"})
	return []otCommand{
		{
			name: "build", words: []string{"build"},
			inputs: append(records(),
				otInput{role: "spec-from", path: "in.fpx", args: []string{"--format", "fp", "--spec-from", "in.fpx", "fp.txt"}}),
			outputs: []otOutput{flagOut("-o", true), quarantine, stats, metrics},
			need:    []string{"-o", "need.fpx"},
		},
		{
			name: "dedup", words: []string{"dedup"},
			inputs: append(records(),
				otInput{role: "against", path: "in.fpx", args: slices.Concat(skip, []string{"--against", "in.fpx", "in.txt"})}),
			outputs: []otOutput{flagOut("-o", true), flagOut("--record", true), flagOut("--duplicates", true), quarantine, stats, metrics},
			inPlace: map[string][]string{"-o": {"FILE", "stdin"}},
		},
		{
			name: "count", words: []string{"count"}, inputs: records(),
			outputs: []otOutput{flagOut("-o", true), quarantine, stats, metrics},
		},
		{
			name: "replay", words: []string{"replay"}, inputs: records(replay...),
			outputs: []otOutput{flagOut("--lost", false), quarantine, stats, metrics},
		},
		{
			// Keys from standard input, a file (in.txt, which holds them).
			name: "query", words: []string{"query"},
			inputs: []otInput{
				{role: "IDX", path: "in.fpx", args: slices.Concat(skip, []string{"in.fpx"}), stdin: "in.txt"},
				{role: "index", path: "in.fpx", args: slices.Concat(skip, []string{"--index", "in.fpx"}), stdin: "in.txt"},
				{role: "stdin", path: "in.txt", args: slices.Concat(skip, []string{"in.fpx"}), stdin: "in.txt"},
			},
			outputs: []otOutput{quarantine, stats, metrics},
		},
		{
			name: "merge", words: []string{"merge"},
			inputs: []otInput{
				{role: "IDX", path: "in.fpx", args: []string{"in.fpx", "b.fpx"}},
				{role: "IDX2", path: "b.fpx", args: []string{"in.fpx", "b.fpx"}},
			},
			outputs: []otOutput{flagOut("-o", true), stats, metrics},
			need:    []string{"-o", "need.fpx"},
			inPlace: map[string][]string{"-o": {"IDX", "IDX2"}},
		},
		{name: "dump", words: []string{"dump"}, inputs: idx(), outputs: []otOutput{stats, metrics}},
		{name: "inspect", words: []string{"inspect"}, inputs: idx("--probes", "1000"), outputs: []otOutput{stats, metrics}},
		{name: "verify", words: []string{"verify"}, inputs: idx(), outputs: []otOutput{stats, metrics}},
		{
			// The online side a file (it agrees: exit 0); no records.
			name: "reconcile", words: []string{"reconcile"},
			inputs: []otInput{
				{role: "index", path: "sha.fpx", args: online},
				{role: "online", path: "online.txt", args: online},
			},
			outputs: []otOutput{flagOut("--missing", true), flagOut("--extra", true), flagOut("--report", true), stats, metrics},
		},
		{
			// With records, which are read for --backfill.
			name: "reconcile-records", words: []string{"reconcile"},
			inputs: []otInput{
				{role: "records", path: "in.txt", args: withRecords},
				{role: "FILE", path: "in.txt", args: slices.Concat(skip, online, []string{"in.txt"})},
				{role: "stdin", path: "in.txt", args: slices.Concat(skip, online, []string{"--records", "-"}), stdin: "in.txt"},
				{role: "index", path: "sha.fpx", args: withRecords},
				{role: "online", path: "online.txt", args: withRecords},
			},
			outputs: []otOutput{flagOut("--backfill", false), flagOut("--missing", true), flagOut("--extra", true),
				flagOut("--report", true), emptyQuarantine, stats, metrics},
			need: []string{"--backfill", "need.txt"},
		},
		{
			// --checkpoint goes with --apply, which file: does not take: a
			// Redis nobody listens on (the refusals come before any
			// connection).
			name: "reconcile", words: []string{"reconcile"},
			inputs: []otInput{{role: "index", path: "sha.fpx",
				args: []string{"--index", "sha.fpx", "--online", "redis://127.0.0.1:1/0?set=seen", "--apply", "--retries", "0", "--timeout", "1s"}}},
			outputs:    []otOutput{flagOut("--checkpoint", true)},
			unwritable: "--checkpoint needs --apply to a Redis or MySQL store",
		},
		{name: "gen", words: []string{"gen"}, inputs: []otInput{{args: []string{"--records", "10"}}},
			outputs: []otOutput{flagOut("-o", true), stats, metrics}},
		{name: "bench-gen", words: []string{"bench", "gen"}, inputs: []otInput{{args: []string{"--records", "10"}}},
			outputs: []otOutput{flagOut("-o", true), stats, metrics}},
	}
}

// otKind is what a case expects.
type otKind int

const (
	otRefused otKind = iota // exit 2 before any work, nothing changed or created
	otInPlace               // exit 0, the input replaced by the result
	otThrough               // exit 0, written through (device, FIFO)
	otFresh                 // exit 0, a symlink's fresh target written
)

type otCase struct {
	name string
	in   otInput // how the command reads its inputs
	kind otKind
	// out makes, in the case's directory, what the output names, and says
	// what it names: its path on the command line and, for an in-place
	// case, the file that holds the result.
	out  func(t *testing.T) (path, target string)
	fifo bool
}

func outputTableCases(c otCommand, o otOutput) []otCase {
	var cs []otCase
	first := c.inputs[0]
	hasInput := first.path != ""
	refusedOr := func(in otInput) otKind {
		if c.inPlaceFor(o, in) {
			return otInPlace
		}
		return otRefused
	}
	names := func(p string) func(*testing.T) (string, string) {
		return func(*testing.T) (string, string) { return p, p }
	}
	link := func(name, target string) func(*testing.T) (string, string) {
		return func(t *testing.T) (string, string) {
			if err := os.Symlink(target, name); err != nil {
				t.Fatal(err)
			}
			return name, target
		}
	}
	if hasInput {
		for _, in := range c.inputs {
			cs = append(cs, otCase{name: "input-" + in.role, in: in, kind: refusedOr(in), out: names(in.path)})
		}
		cs = append(cs,
			otCase{name: "hardlink-to-input", in: first, kind: refusedOr(first), out: func(t *testing.T) (string, string) {
				if err := os.Link(first.path, "hard"); err != nil {
					t.Fatal(err)
				}
				return "hard", "hard"
			}},
			otCase{name: "dotdot-to-input", in: first, kind: refusedOr(first), out: func(*testing.T) (string, string) {
				return "./sub/../" + first.path, first.path
			}},
			otCase{name: "symlink-to-input", in: first, kind: refusedOr(first), out: link("lnk", first.path)},
		)
	}
	cs = append(cs,
		otCase{name: "devnull", in: first, kind: otThrough, out: names("/dev/null")},
		otCase{name: "fifo", in: first, kind: otThrough, fifo: true, out: func(t *testing.T) (string, string) {
			if err := syscall.Mkfifo("fifo", 0o644); err != nil {
				t.Fatal(err)
			}
			return "fifo", "fifo"
		}},
		otCase{name: "symlink-to-fresh", in: first, kind: otFresh, out: link("lnk", "fresh.out")},
		otCase{name: "nodir", in: first, kind: otRefused, out: names("nodir/out")},
		otCase{name: "symlink-into-nodir", in: first, kind: otRefused, out: link("lnk", "nodir/out")},
	)
	dotdot := "./nodir/../x"
	if hasInput {
		dotdot = "./nodir/../" + first.path
	}
	cs = append(cs, otCase{name: "nodir-dotdot", in: first, kind: otRefused, out: func(*testing.T) (string, string) { return dotdot, "" }})
	return cs
}

func (k otCase) run(t *testing.T, fx outputTableFixture, c otCommand, o otOutput) {
	if c.unwritable != "" && k.kind != otRefused {
		t.Skipf("not checked: %s", c.unwritable)
	}
	dir := t.TempDir()
	copyFixture(t, fx.dir, dir)
	t.Chdir(dir)
	path, target := k.out(t)
	args := c.args(k.in, o, path)

	var release func() ([]byte, error)
	if k.fifo {
		release = drainFIFO(filepath.Join(dir, path))
	}
	before := snapshotDir(t, dir)
	var code int
	var stdout, stderr bytes.Buffer
	if k.in.stdin == "" {
		code = run(args, strings.NewReader(""), &stdout, &stderr)
	} else {
		// Standard input a regular file (< in.txt): the commands read the
		// process's own, so a process of its own.
		f, err := os.Open(k.in.stdin)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(fx.bin, args...)
		cmd.Dir, cmd.Stdin, cmd.Stdout, cmd.Stderr = dir, f, &stdout, &stderr
		cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
		err = cmd.Run()
		f.Close()
		var exit *exec.ExitError
		switch {
		case errors.As(err, &exit):
			code = exit.ExitCode()
		case err != nil:
			t.Fatal(err)
		}
	}
	var fifoGot []byte
	if release != nil {
		var err error
		if fifoGot, err = release(); err != nil {
			t.Fatal(err)
		}
	}
	after := snapshotDir(t, dir)

	var bad []string
	fail := func(format string, a ...any) { bad = append(bad, fmt.Sprintf(format, a...)) }
	wantCode := 0
	if k.kind == otRefused {
		wantCode = 2
	}
	if code != wantCode {
		fail("exit %d, want %d", code, wantCode)
	}
	// No temp file or lock left, whatever happened.
	for name := range after {
		if strings.Contains(name, ".fpdedup-tmp-") || strings.Contains(name, ".fpdedup-lock") {
			fail("debris left: %s", name)
		}
	}
	switch k.kind {
	case otRefused:
		// Before any work: nothing written, nothing created, nothing
		// removed, no summary; the message names the flag and the path.
		if diff := diffSnapshots(before, after); diff != "" {
			fail("the directory changed:\n%s", diff)
		}
		if stdout.Len() > 0 {
			fail("stdout not empty (work was done): %q", stdout.String())
		}
		for line := range strings.Lines(stderr.String()) {
			if !strings.HasPrefix(line, "fpdedup: ") && !strings.HasPrefix(line, "  hint:") {
				fail("stderr has more than the refusal (work was done): %q", line)
				break
			}
		}
		if !strings.Contains(stderr.String(), o.flag) || !strings.Contains(stderr.String(), path) {
			fail("stderr does not name %s %s", o.flag, path)
		}
	default:
		// Every input byte for byte as it was (but the one replaced in
		// place).
		for _, f := range fx.files {
			if k.kind == otInPlace && filepath.Clean(target) == f {
				continue
			}
			if !bytes.Equal(before[f].data, after[f].data) || before[f].mode != after[f].mode {
				fail("input %s changed", f)
			}
		}
	}
	switch k.kind {
	case otInPlace:
		if code == 0 {
			got, err := os.ReadFile(target)
			switch {
			case err != nil:
				fail("%v", err)
			case c.name == "merge":
				if _, dump, _ := runInProcess("dump", target); dump != fx.wantMerged {
					fail("%s holds %q, want the merge %q", target, dump, fx.wantMerged)
				}
			case string(got) != fx.wantDedup:
				fail("%s holds %q, want the dedup %q", target, got, fx.wantDedup)
			}
		}
	case otThrough:
		if k.fifo && o.fills && len(fifoGot) == 0 {
			fail("nothing written through the FIFO")
		}
		if k.fifo && after[path].mode&fs.ModeNamedPipe == 0 {
			fail("%s is no longer a FIFO: %v", path, after[path].mode)
		}
	case otFresh:
		st, err := os.Stat(target)
		switch {
		case err != nil:
			fail("the link's target: %v", err)
		case !st.Mode().IsRegular():
			fail("the link's target is %v", st.Mode())
		case o.fills && st.Size() == 0:
			fail("the link's target is empty")
		}
	}
	if k.kind == otInPlace || k.kind == otFresh {
		if l, ok := before[path]; ok && l.mode&fs.ModeSymlink != 0 {
			if a := after[path]; a.mode&fs.ModeSymlink == 0 || a.link != l.link {
				fail("%s is no longer a link to %s: %v %q", path, l.link, a.mode, a.link)
			}
		}
	}

	what := fmt.Sprintf("fpdedup %s (in %s)\nexit %d, stdout %q, stderr:\n%s", strings.Join(args[2:], " "), dir, code, truncate(stdout.String(), 200), stderr.String())
	for _, b := range bad {
		t.Error(b)
	}
	if len(bad) > 0 {
		t.Log(what)
	}
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// drainFIFO reads the FIFO at path as `cat path &` would, from before the
// run. release, after the run, returns what it read; when the command never
// opened the FIFO (a refusal), it opens it as a writer itself so that the
// reader's open returns.
func drainFIFO(path string) (release func() ([]byte, error)) {
	done := make(chan []byte, 1)
	go func() {
		f, err := os.Open(path) // blocks until a writer opens it
		if err != nil {
			done <- nil
			return
		}
		b, _ := io.ReadAll(f)
		f.Close()
		done <- b
	}()
	return func() ([]byte, error) {
		for {
			select {
			case b := <-done:
				return b, nil
			default:
			}
			w, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0)
			if err == nil {
				w.Close()
				return <-done, nil
			}
			if !errors.Is(err, syscall.ENXIO) {
				return nil, err
			}
			time.Sleep(time.Millisecond) // the reader is not in its open yet, or just done
		}
	}
}

func copyFixture(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

type otEntry struct {
	mode fs.FileMode
	link string // a symlink's target
	data []byte // a regular file's bytes
}

// snapshotDir is every name under dir (symlinks not followed), with what
// it is and holds.
func snapshotDir(t *testing.T, dir string) map[string]otEntry {
	t.Helper()
	m := map[string]otEntry{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		e := otEntry{mode: info.Mode()}
		switch {
		case e.mode.IsRegular():
			e.data, err = os.ReadFile(p)
		case e.mode&fs.ModeSymlink != 0:
			e.link, err = os.Readlink(p)
		}
		m[rel] = e
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func diffSnapshots(before, after map[string]otEntry) string {
	var b strings.Builder
	for name, e := range before {
		a, ok := after[name]
		switch {
		case !ok:
			fmt.Fprintf(&b, "  removed %s\n", name)
		case a.mode != e.mode || a.link != e.link || !bytes.Equal(a.data, e.data):
			fmt.Fprintf(&b, "  changed %s\n", name)
		}
	}
	for name := range after {
		if _, ok := before[name]; !ok {
			fmt.Fprintf(&b, "  created %s\n", name)
		}
	}
	return b.String()
}
