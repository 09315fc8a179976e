package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/rogpeppe/go-internal/testscript"

	"github.com/fpdedup/fpdedup/bench/gen"
	"github.com/fpdedup/fpdedup/internal/tempfile"
	"github.com/fpdedup/fpdedup/schema"
)

// TestMain lets the test binary run as the fpdedup command inside scripts:
// each `fpdedup` or `exec fpdedup` line is a real process, so exit codes,
// signals and the process-wide settings (GOMAXPROCS, memory limit) are those
// of the real tool.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"fpdedup": func() {
			installTestHooks()
			os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
		},
	})
}

// TestScript runs the end-to-end scripts in testdata/script. Custom
// commands (see scriptCmds) build inputs and damage files byte by byte.
func TestScript(t *testing.T) {
	dir, files := filepath.Join("testdata", "script"), []string(nil)
	if raceBuild && testing.Short() {
		// CI's -race -short step: the scripts whose commands run the most
		// goroutines at once (the pipeline's readers and workers, the
		// Parquet row-group copies and decoding ahead, merge's
		// k-way streams, replay's tiers); every script runs in the plain
		// step. All of them under -race took ~490 s of the step's time.
		dir = ""
		for _, name := range raceScripts {
			files = append(files, filepath.Join("testdata", "script", name+".txtar"))
		}
	}
	testscript.Run(t, testscript.Params{
		Dir:                 dir,
		Files:               files,
		Cmds:                scriptCmds,
		RequireExplicitExec: false,
		Setup: func(env *testscript.Env) error {
			// Inputs are bytes; the summary must not depend on the locale.
			env.Setenv("LC_ALL", "C")
			env.Setenv("TMPDIR", env.WorkDir)
			// The bundled example, for the README's walkthroughs.
			example, err := filepath.Abs(filepath.Join("..", "..", "testdata", "example", "events.txt"))
			if err != nil {
				return err
			}
			env.Setenv("EXAMPLE", example)
			// The Parquet files DuckDB wrote, with their keys as DuckDB reads them.
			parquet, err := filepath.Abs(filepath.Join("..", "..", "testdata", "parquet"))
			if err != nil {
				return err
			}
			env.Setenv("PARQUET", parquet)
			return nil
		},
	})
}

// raceScripts are the scripts CI runs under -race (TestScript).
var raceScripts = []string{"parquet", "dedup_lines", "count_keep_check", "merge", "replay"}

var scriptCmds = map[string]func(ts *testscript.TestScript, neg bool, args []string){
	"exitcode":   cmdExitcode,
	"writebytes": cmdWritebytes,
	"flipbyte":   cmdFlipbyte,
	"truncate":   cmdTruncate,
	"gen":        cmdGen,
	"compress":   cmdCompress,
	"concat":     cmdConcat,
	"nodebris":   cmdNodebris,
	"jsonhas":    cmdJSONHas,
	"fpxoffset":  cmdFpxOffset,
	"setversion": cmdSetVersion,
	"setline":    cmdSetline,
	"bigline":    cmdBigline,
	"craft":      cmdCraft,
}

// exitcode N PROG ARGS... runs PROG (an fpdedup or a system command) and
// fails unless it exits with status N; stdout and stderr are kept for the
// following stdout/stderr/cmp lines, as after exec. testscript's `! cmd`
// only checks for a non-zero status, and fpdedup's contract tells 1 (a
// negative answer) from 2 (an error).
func cmdExitcode(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exitcode N PROG [ARGS...]")
	}
	want, err := strconv.Atoi(args[0])
	ts.Check(err)
	err = ts.Exec(args[1], args[2:]...)
	got := 0
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			ts.Fatalf("%s: %v", args[1], err)
		}
		got = ee.ExitCode()
	}
	if got != want {
		ts.Fatalf("%s exited with status %d, want %d", args[1], got, want)
	}
}

// writebytes FILE STRING writes STRING with Go escapes (\r, \x00, \xff,
// \ufeff...) interpreted, so CR, NUL, BOM and invalid UTF-8 are exact.
// FILE is unescaped too (a file name with a newline in it).
func cmdWritebytes(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: writebytes FILE STRING")
	}
	ts.Check(os.WriteFile(ts.MkAbs(unescape(ts, args[0])), []byte(unescape(ts, args[1])), 0o644))
}

func unescape(ts *testscript.TestScript, s string) string {
	u, err := strconv.Unquote(`"` + strings.ReplaceAll(s, `"`, `\"`) + `"`)
	ts.Check(err)
	return u
}

// offsetArg reads an offset or size: a number, negative to count from the
// end of a file of the given size, or $VAR+N / $VAR-N (after expansion:
// "12345+7").
func offsetArg(ts *testscript.TestScript, s string, size int64) int64 {
	var off int64
	if a, b, ok := strings.Cut(s, "+"); ok && a != "" {
		x, err1 := strconv.ParseInt(a, 0, 64)
		y, err2 := strconv.ParseInt(b, 0, 64)
		ts.Check(errors.Join(err1, err2))
		off = x + y
	} else if a, b, ok := strings.Cut(s[min(1, len(s)):], "-"); ok {
		x, err1 := strconv.ParseInt(s[:min(1, len(s))]+a, 0, 64)
		y, err2 := strconv.ParseInt(b, 0, 64)
		ts.Check(errors.Join(err1, err2))
		off = x - y
	} else {
		x, err := strconv.ParseInt(s, 0, 64)
		ts.Check(err)
		off = x
		if strings.HasPrefix(s, "-") {
			off = size + x
		}
	}
	return off
}

// flipbyte FILE OFFSET inverts every bit of the byte at OFFSET (negative:
// from the end).
func cmdFlipbyte(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: flipbyte FILE OFFSET")
	}
	name := ts.MkAbs(args[0])
	b, err := os.ReadFile(name)
	ts.Check(err)
	off := offsetArg(ts, args[1], int64(len(b)))
	if off < 0 || off >= int64(len(b)) {
		ts.Fatalf("offset %d outside %s of %d bytes", off, args[0], len(b))
	}
	b[off] ^= 0xff
	ts.Check(os.WriteFile(name, b, 0o644))
}

// truncate FILE SIZE cuts FILE to SIZE bytes (negative: that many fewer).
func cmdTruncate(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: truncate FILE SIZE")
	}
	name := ts.MkAbs(args[0])
	st, err := os.Stat(name)
	ts.Check(err)
	size := offsetArg(ts, args[1], st.Size())
	if size < 0 || size > st.Size() {
		ts.Fatalf("size %d outside 0..%d", size, st.Size())
	}
	ts.Check(os.Truncate(name, size))
}

// gen N FILE writes N deterministic synthetic event lines (gen.Generate,
// seed 1), ~38% repeats.
func cmdGen(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: gen N FILE")
	}
	n, err := strconv.ParseInt(args[0], 10, 64)
	ts.Check(err)
	f, err := os.Create(ts.MkAbs(args[1]))
	ts.Check(err)
	bw := bufio.NewWriter(f)
	_, err = gen.Generate(bw, gen.Options{Records: n, Seed: 1})
	ts.Check(err)
	ts.Check(bw.Flush())
	ts.Check(f.Close())
}

// compress gzip|zstd IN OUT compresses IN into OUT (one member or frame).
func cmdCompress(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: compress gzip|zstd IN OUT")
	}
	data, err := os.ReadFile(ts.MkAbs(args[1]))
	ts.Check(err)
	var buf bytes.Buffer
	switch args[0] {
	case "gzip":
		zw := gzip.NewWriter(&buf)
		_, err = zw.Write(data)
		ts.Check(errors.Join(err, zw.Close()))
	case "zstd":
		zw, err := zstd.NewWriter(&buf)
		ts.Check(err)
		_, err = zw.Write(data)
		ts.Check(errors.Join(err, zw.Close()))
	default:
		ts.Fatalf("unknown compression %q", args[0])
	}
	ts.Check(os.WriteFile(ts.MkAbs(args[2]), buf.Bytes(), 0o644))
}

// concat OUT IN... writes the concatenation of the INs to OUT (cat).
func cmdConcat(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: concat OUT IN...")
	}
	var out []byte
	for _, in := range args[1:] {
		b, err := os.ReadFile(ts.MkAbs(in))
		ts.Check(err)
		out = append(out, b...)
	}
	ts.Check(os.WriteFile(ts.MkAbs(args[0]), out, 0o644))
}

// nodebris DIR fails if DIR holds a temp file, scratch directory or lock
// file of a writer (tempfile.IsTemp): a failed run must clean up.
func cmdNodebris(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: nodebris DIR")
	}
	entries, err := os.ReadDir(ts.MkAbs(args[0]))
	ts.Check(err)
	for _, e := range entries {
		if tempfile.IsTemp(e.Name()) {
			ts.Fatalf("debris left behind: %s", e.Name())
		}
	}
}

// jsonhas FILE PATH... checks that FILE is one valid JSON document and that
// every dotted PATH names a present, non-null member.
func cmdJSONHas(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 1 {
		ts.Fatalf("usage: jsonhas FILE PATH...")
	}
	b, err := os.ReadFile(ts.MkAbs(args[0]))
	ts.Check(err)
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		ts.Fatalf("%s: invalid JSON: %v", args[0], err)
	}
	if dec.More() {
		ts.Fatalf("%s: more than one JSON document", args[0])
	}
	for _, path := range args[1:] {
		v := doc
		for _, k := range strings.Split(path, ".") {
			m, ok := v.(map[string]any)
			if !ok {
				ts.Fatalf("%s: %s: %v is not an object", args[0], path, v)
			}
			if v, ok = m[k]; !ok || v == nil {
				ts.Fatalf("%s: %s missing", args[0], path)
			}
		}
	}
}

// fpxoffset FILE WHAT VAR sets $VAR to a file offset in an index, read
// from its trailer and footer with the generated schema code (the file
// must be sound): WHAT is footer, seg0 (segment 0's buffer), fps0 (the
// first fingerprint of segment 0), fpsend0 (just past its last one),
// pages0 (its page CRC table).
func cmdFpxOffset(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: fpxoffset FILE footer|seg0|fps0|fpsend0|pages0 VAR")
	}
	b, err := os.ReadFile(ts.MkAbs(args[0]))
	ts.Check(err)
	if len(b) < 96 {
		ts.Fatalf("%s: too short", args[0])
	}
	tr := b[len(b)-32:]
	footOff := binary.LittleEndian.Uint64(tr[0:])
	footLen := binary.LittleEndian.Uint64(tr[8:])
	foot := schema.GetRootAsFooter(b[footOff:footOff+footLen], 0)
	var v uint64
	if args[1] == "footer" {
		v = footOff
	} else {
		var ref schema.SegmentRef
		if !foot.Segments(&ref, 0) {
			ts.Fatalf("%s: no segment", args[0])
		}
		segOff := ref.Offset()
		seg := schema.GetRootAsSegment(b[segOff:segOff+ref.Length()], 0)
		// The generated accessor finds the vector (its vtable slot is
		// the schema's business, not this helper's).
		var fp schema.Fingerprint
		if !seg.Fingerprints(&fp, 0) {
			ts.Fatalf("%s: segment 0 has no fingerprints vector", args[0])
		}
		fpsAt := segOff + uint64(fp.Table().Pos)
		switch args[1] {
		case "seg0":
			v = segOff
		case "fps0":
			v = fpsAt
		case "fpsend0":
			v = fpsAt + 16*uint64(seg.FingerprintsLength())
		case "pages0":
			v = segOff + (ref.Length()+3)/4*4
		default:
			ts.Fatalf("unknown part %q", args[1])
		}
	}
	ts.Setenv(args[2], fmt.Sprint(v))
}

// setversion FILE N writes format version N into the header and
// recomputes the header checksum: a well-formed file from the future.
func cmdSetVersion(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: setversion FILE N")
	}
	name := ts.MkAbs(args[0])
	b, err := os.ReadFile(name)
	ts.Check(err)
	n, err := strconv.ParseUint(args[1], 10, 32)
	ts.Check(err)
	binary.LittleEndian.PutUint32(b[8:], uint32(n))
	binary.LittleEndian.PutUint32(b[60:], crc32.Checksum(b[:60], crc32.MakeTable(crc32.Castagnoli)))
	ts.Check(os.WriteFile(name, b, 0o644))
}

// setline VAR FILE N sets $VAR to line N of FILE (1-based; negative: from
// the end), without its newline.
func cmdSetline(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: setline VAR FILE N")
	}
	lines := strings.Split(strings.TrimSuffix(ts.ReadFile(args[1]), "\n"), "\n")
	n, err := strconv.Atoi(args[2])
	ts.Check(err)
	if n < 0 {
		n += len(lines) + 1
	}
	if n < 1 || n > len(lines) {
		ts.Fatalf("%s has no line %s", args[1], args[2])
	}
	ts.Setenv(args[0], lines[n-1])
}

// bigline FILE SIZE writes one line of SIZE bytes ('x' then a counter
// pattern), its newline, and a short line "after".
func cmdBigline(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: bigline FILE SIZE")
	}
	n, err := strconv.Atoi(args[1])
	ts.Check(err)
	b := make([]byte, 0, n+7)
	for i := 0; len(b) < n; i++ {
		b = append(b, 'a'+byte(i%26))
	}
	b = append(b, "\nafter\n"...)
	ts.Check(os.WriteFile(ts.MkAbs(args[0]), b, 0o644))
}
