package fpstore_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/klauspost/compress/gzip"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/ingest"
	"github.com/fpdedup/fpdedup/pipeline"
)

// Property tests of the build path the CLI takes (pipeline.Build → Sorter →
// Writer → Open) against a Go map: every key's fingerprint present, random
// other fingerprints absent; and metamorphic ones: the same key set built
// in another order, from other files, with other --threads or --mem
// (spilling or not) gives the same bytes; dump order is `LC_ALL=C sort -u`
// order.

// propKeys makes n random keys for records ending in term: short ASCII,
// random bytes (CR, NUL or newline where term allows, invalid UTF-8, BOM),
// the empty key, and repeats of earlier keys (near and far).
func propKeys(r *rand.Rand, n int, term byte) [][]byte {
	fixed := [][]byte{
		{}, {0}, []byte("a\x00b"), []byte("\r"), []byte("k\r"), []byte("k"),
		[]byte("\xff\xfe"), []byte("u\xff:d:1"), []byte("\xef\xbb\xbfk"), []byte(" k "),
		[]byte("\n"), []byte("a\nb"),
	}
	keys := make([][]byte, 0, n+len(fixed))
	for _, k := range fixed {
		if bytes.IndexByte(k, term) < 0 {
			keys = append(keys, k)
		}
	}
	for len(keys) < n {
		switch c := r.IntN(10); {
		case c < 4: // event-like ASCII
			keys = append(keys, fmt.Appendf(nil, "u%d:d%x:%d", r.IntN(1e6), r.Uint32(), 1_700_000_000_000+r.IntN(1e9)))
		case c < 7: // arbitrary bytes but the terminator
			k := make([]byte, r.IntN(40))
			for i := range k {
				for k[i] = byte(r.UintN(256)); k[i] == term; k[i] = byte(r.UintN(256)) {
				}
			}
			keys = append(keys, k)
		case c < 8 && len(keys) > 0: // a recent repeat
			keys = append(keys, keys[len(keys)-1-r.IntN(min(len(keys), 50))])
		case len(keys) > 0: // a repeat from anywhere
			keys = append(keys, keys[r.IntN(len(keys))])
		}
	}
	return keys
}

// propBigKeys are long records: 1 MiB (the chunk size) and around it.
func propBigKeys(r *rand.Rand, term byte) [][]byte {
	var keys [][]byte
	for _, n := range []int{1 << 20, 1<<20 - 1, 1<<20 + 1, 3 << 20} {
		k := make([]byte, n)
		for i := range k {
			k[i] = 'a' + byte(r.IntN(26))
		}
		if term != '\n' {
			k[n/2] = '\n'
		}
		keys = append(keys, k)
	}
	return keys
}

// writeKeys writes keys, each ended by term (the last one without it when
// final is false and it is not empty: a final record needs no terminator).
func writeKeys(t testing.TB, path string, keys [][]byte, term byte, final bool) {
	t.Helper()
	var b bytes.Buffer
	for i, k := range keys {
		b.Write(k)
		if i < len(keys)-1 || final || len(k) == 0 {
			b.WriteByte(term)
		}
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

type propBuild struct {
	inputs  []string
	term    byte
	hash    ingest.Hash
	threads int
	mem     int64
}

func buildKeys(t testing.TB, out string, b propBuild) pipeline.BuildStats {
	t.Helper()
	st, err := pipeline.Build(context.Background(), pipeline.BuildOptions{
		Inputs: b.inputs,
		Output: out,
		Records: ingest.RecordOptions{
			Spec: ingest.KeySpec{Format: ingest.FormatLines, Term: b.term},
			Hash: b.hash,
		},
		Spec:    fpstore.Spec{Hash: b.hash.String()},
		Threads: b.threads,
		Mem:     b.mem,
		TmpDir:  filepath.Dir(out),
	})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// checkAgainstMap opens the index at path and checks it against the keys.
func checkAgainstMap(t *testing.T, path string, h ingest.Hash, keys [][]byte, r *rand.Rand) {
	t.Helper()
	set := map[fpstore.Fingerprint]bool{}
	var fps []fpstore.Fingerprint
	for _, k := range keys {
		fp := h.Sum(k)
		set[fp] = true
		fps = append(fps, fp)
	}
	x, err := fpstore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if x.Len() != uint64(len(set)) {
		t.Fatalf("index holds %d fingerprints, the map %d", x.Len(), len(set))
	}
	if got := x.Spec().Hash; got != h.String() {
		t.Fatalf("spec hash %q, want %q", got, h)
	}
	for i, k := range keys {
		ok, err := x.Contains(fps[i])
		if err != nil || !ok {
			t.Fatalf("key %q (%s): Contains %v %v", trunc(k), fps[i], ok, err)
		}
	}
	found := make([]bool, len(fps))
	if err := x.ContainsBatch(fps, found); err != nil {
		t.Fatal(err)
	}
	for i, ok := range found {
		if !ok {
			t.Fatalf("key %q (%s): ContainsBatch absent", trunc(keys[i]), fps[i])
		}
	}
	// Absent: random fingerprints, fingerprints of keys not in the set,
	// and neighbours of present ones (same Hi, Lo±1).
	var probe []fpstore.Fingerprint
	for i := 0; i < 20000; i++ {
		probe = append(probe, fpstore.Fingerprint{Hi: r.Uint64(), Lo: r.Uint64()})
		probe = append(probe, h.Sum(fmt.Appendf(nil, "absent-%d-%d", i, r.Uint64())))
		fp := fps[r.IntN(len(fps))]
		probe = append(probe, fpstore.Fingerprint{Hi: fp.Hi, Lo: fp.Lo + 1}, fpstore.Fingerprint{Hi: fp.Hi, Lo: fp.Lo - 1})
	}
	found = make([]bool, len(probe))
	if err := x.ContainsBatch(probe, found); err != nil {
		t.Fatal(err)
	}
	for i, fp := range probe {
		ok, err := x.Contains(fp)
		if err != nil {
			t.Fatal(err)
		}
		if ok != set[fp] || found[i] != set[fp] {
			t.Fatalf("%s: Contains %v, ContainsBatch %v, map %v", fp, ok, found[i], set[fp])
		}
	}
	// Scan gives the map's fingerprints in ascending order.
	var got []fpstore.Fingerprint
	if err := x.Scan(func(s []fpstore.Fingerprint) error { got = append(got, s...); return nil }); err != nil {
		t.Fatal(err)
	}
	want := slices.Collect(func(yield func(fpstore.Fingerprint) bool) {
		for fp := range set {
			if !yield(fp) {
				return
			}
		}
	})
	slices.SortFunc(want, fpstore.Fingerprint.Compare)
	if !slices.Equal(got, want) {
		t.Fatalf("Scan gives %d fingerprints, not the map's %d sorted", len(got), len(want))
	}
	rep, err := fpstore.Verify(path)
	if err != nil || len(rep.Problems) > 0 {
		t.Fatalf("Verify: %v %v", err, rep.Problems)
	}
}

func trunc(k []byte) []byte {
	if len(k) > 40 {
		return k[:40]
	}
	return k
}

func TestBuildAgainstMap(t *testing.T) {
	n := 30_000
	if testing.Short() {
		n = 5_000
	}
	for _, tc := range []struct {
		name    string
		term    byte
		hash    ingest.Hash
		threads int
		final   bool
		big     bool
	}{
		{"lines-xxh3", '\n', ingest.XXH3, 2, true, false},
		{"lines-no-final-newline", '\n', ingest.XXH3, 1, false, false},
		{"lines-big-keys", '\n', ingest.XXH3, 2, true, true},
		{"nul-xxh3", 0, ingest.XXH3, 2, true, true},
		{"nul-no-final", 0, ingest.XXH3, 1, false, false},
		{"lines-sha256", '\n', ingest.SHA256, 2, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(len(tc.name)), uint64(tc.term)+7))
			keys := propKeys(r, n, tc.term)
			if tc.big {
				big := propBigKeys(r, tc.term)
				// Big keys among the others, and one repeated.
				for _, k := range append(big, big[0]) {
					at := r.IntN(len(keys) + 1)
					keys = slices.Insert(keys, at, k)
				}
			}
			dir := t.TempDir()
			in := filepath.Join(dir, "keys")
			writeKeys(t, in, keys, tc.term, tc.final)
			out := filepath.Join(dir, "x.fpx")
			st := buildKeys(t, out, propBuild{inputs: []string{in}, term: tc.term, hash: tc.hash, threads: tc.threads, mem: 1 << 30})
			if st.Records != int64(len(keys)) {
				t.Fatalf("build read %d records, want %d", st.Records, len(keys))
			}
			checkAgainstMap(t, out, tc.hash, keys, r)
		})
	}
}

// TestBuildCanonical builds one key set many ways and wants identical
// bytes: shuffled with extra repeats, split across files (one gzip), with
// 1 or 2 threads, and with a small --mem that spills sorted runs.
func TestBuildCanonical(t *testing.T) {
	n := 700_000 // above what --mem 32MiB keeps in memory with 2 threads
	if testing.Short() {
		n = 100_000
	}
	r := rand.New(rand.NewPCG(41, 42))
	keys := propKeys(r, n, '\n')
	dir := t.TempDir()
	orig := filepath.Join(dir, "orig")
	writeKeys(t, orig, keys, '\n', true)

	shuffled := slices.Clone(keys)
	r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	shuffled = append(shuffled, keys[:1000]...)
	shuf := filepath.Join(dir, "shuffled")
	writeKeys(t, shuf, shuffled, '\n', false)

	// Three parts, the middle one gzipped.
	third := len(keys) / 3
	var parts []string
	for i, p := range [][][]byte{keys[:third], keys[third : 2*third], keys[2*third:]} {
		name := filepath.Join(dir, fmt.Sprintf("part%d", i))
		writeKeys(t, name, p, '\n', true)
		if i == 1 {
			b, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			var z bytes.Buffer
			zw := gzip.NewWriter(&z)
			zw.Write(b)
			if err := zw.Close(); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(name, z.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		parts = append(parts, name)
	}

	builds := []struct {
		name string
		b    propBuild
	}{
		{"orig-2-threads-1GiB", propBuild{inputs: []string{orig}, threads: 2, mem: 1 << 30}},
		{"orig-1-thread-1GiB", propBuild{inputs: []string{orig}, threads: 1, mem: 1 << 30}},
		{"shuffled-2-threads-1GiB", propBuild{inputs: []string{shuf}, threads: 2, mem: 1 << 30}},
		{"parts-2-threads-1GiB", propBuild{inputs: parts, threads: 2, mem: 1 << 30}},
		{"orig-2-threads-32MiB", propBuild{inputs: []string{orig}, threads: 2, mem: 32 << 20}},
		{"shuffled-1-thread-32MiB", propBuild{inputs: []string{shuf}, threads: 1, mem: 32 << 20}},
	}
	var first []byte
	for i, bl := range builds {
		bl.b.term = '\n'
		out := filepath.Join(dir, bl.name+".fpx")
		st := buildKeys(t, out, bl.b)
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d records, %d distinct, %d spilled runs, %d bytes", bl.name, st.Records, st.Distinct, st.Spills, len(b))
		if bl.b.mem == 32<<20 && !testing.Short() && st.Spills == 0 {
			t.Errorf("%s: no spilled runs; the test means to compare the spill path", bl.name)
		}
		if i == 0 {
			first = b
			checkAgainstMap(t, out, ingest.XXH3, keys, r)
			checkDumpIsSortU(t, out, keys)
			continue
		}
		if !bytes.Equal(b, first) {
			t.Errorf("%s: bytes differ from %s (%d vs %d bytes)", bl.name, builds[0].name, len(b), len(first))
		}
		os.Remove(out)
	}
}

// checkDumpIsSortU compares the index's fingerprints, printed as dump
// prints them, with `LC_ALL=C sort -u` of the keys' hex fingerprints
// computed here.
func checkDumpIsSortU(t *testing.T, path string, keys [][]byte) {
	t.Helper()
	sortPath, err := exec.LookPath("sort")
	if err != nil {
		t.Log("no sort(1); skipping the sort -u comparison")
		return
	}
	var hexes []byte
	for _, k := range keys {
		hexes = append(ingest.XXH3.Sum(k).AppendHex(hexes), '\n')
	}
	cmd := exec.Command(sortPath, "-u")
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	cmd.Stdin = bytes.NewReader(hexes)
	want, err := cmd.Output()
	if err != nil {
		t.Fatalf("sort -u: %v", err)
	}
	x, err := fpstore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	var dump []byte
	if err := x.Scan(func(fps []fpstore.Fingerprint) error {
		for _, fp := range fps {
			dump = append(fp.AppendHex(dump), '\n')
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(dump, want) {
		t.Fatalf("dump differs from LC_ALL=C sort -u (%d vs %d bytes)", len(dump), len(want))
	}
}

// TestBuildSpillLarge: ~3M keys (several segments) built with a small
// --mem, spilling sorted runs to the temp dir and merging them, equal byte
// for byte to the in-memory build.
func TestBuildSpillLarge(t *testing.T) {
	n := 3_000_000
	if testing.Short() {
		n = 600_000
	}
	r := rand.New(rand.NewPCG(51, 52))
	dir := t.TempDir()
	in := filepath.Join(dir, "keys")
	var b bytes.Buffer
	b.Grow(n * 32)
	scratch := make([]byte, 0, 64)
	for i := 0; i < n; i++ {
		// ~10% repeats of an earlier key.
		j := i
		if i > 0 && r.IntN(10) == 0 {
			j = r.IntN(i)
		}
		line := append(strconv.AppendInt(append(scratch[:0], 'u'), int64(j), 10), ':', 'd')
		line = append(strconv.AppendInt(line, int64(j*7919%100003), 10), ':')
		line = append(strconv.AppendInt(line, int64(1_700_000_000_000+j), 10), '\n')
		b.Write(line)
	}
	if err := os.WriteFile(in, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	mem := filepath.Join(dir, "mem.fpx")
	st1 := buildKeys(t, mem, propBuild{inputs: []string{in}, term: '\n', threads: 2, mem: 1 << 30})
	spill := filepath.Join(dir, "spill.fpx")
	st2 := buildKeys(t, spill, propBuild{inputs: []string{in}, term: '\n', threads: 2, mem: 32 << 20})
	t.Logf("in memory: %+v", st1)
	t.Logf("spilling:  %+v", st2)
	if st1.Spills != 0 {
		t.Errorf("the 1GiB build spilled %d runs", st1.Spills)
	}
	if st2.Spills == 0 {
		t.Fatalf("the 32MiB build of %d keys did not spill", n)
	}
	if st1.Distinct != st2.Distinct || st1.Records != int64(n) || st2.Records != int64(n) {
		t.Fatalf("counts differ: %+v vs %+v", st1, st2)
	}
	a, err := os.ReadFile(mem)
	if err != nil {
		t.Fatal(err)
	}
	c, err := os.ReadFile(spill)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, c) {
		t.Fatalf("spilled build differs from the in-memory one (%d vs %d bytes)", len(c), len(a))
	}
	// No run files left behind.
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if n := e.Name(); n != "keys" && n != "mem.fpx" && n != "spill.fpx" {
			t.Errorf("left behind: %s", n)
		}
	}
	x, err := fpstore.Open(spill)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if !testing.Short() && x.Segments() < 3 {
		t.Errorf("%d segments; want several", x.Segments())
	}
	// Every written key present (in batches), others absent.
	lines := bytes.Split(bytes.TrimSuffix(b.Bytes(), []byte("\n")), []byte("\n"))
	written := make([]fpstore.Fingerprint, len(lines))
	for i, l := range lines {
		written[i] = ingest.XXH3.Sum(l)
	}
	found := make([]bool, len(written))
	if err := x.ContainsBatch(written, found); err != nil {
		t.Fatal(err)
	}
	for i, ok := range found {
		if !ok {
			t.Fatalf("written key %q absent", lines[i])
		}
	}
	for i := 0; i < 100_000; i++ {
		fp := ingest.XXH3.Sum(fmt.Appendf(nil, "never-%d", i))
		if ok, err := x.Contains(fp); ok || err != nil {
			t.Fatalf("%s: %v %v", fp, ok, err)
		}
	}
}
