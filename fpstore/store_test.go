package fpstore

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/FastFilter/xorfilter"
)

func randomFPs(r *rand.Rand, n int) []Fingerprint {
	fps := make([]Fingerprint, n)
	for i := range fps {
		fps[i] = Fingerprint{r.Uint64(), r.Uint64()}
	}
	return fps
}

func sortUnique(fps []Fingerprint) []Fingerprint {
	fps = slices.Clone(fps)
	slices.SortFunc(fps, Fingerprint.Compare)
	return slices.Compact(fps)
}

func writeIndex(t testing.TB, path string, fps []Fingerprint, opts WriterOptions) {
	t.Helper()
	if opts.Spec.Hash == "" {
		opts.Spec.Hash = "xxh3"
	}
	w, err := Create(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Add(fps...); err != nil {
		w.Abort()
		t.Fatal(err)
	}
	n, err := w.Commit()
	if err != nil {
		t.Fatal(err)
	}
	if n != uint64(len(fps)) {
		t.Fatalf("committed %d, want %d", n, len(fps))
	}
}

func TestRoundTripAgainstMap(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 2, 31, 32, 33, 1000, 100_000} {
		dir := t.TempDir()
		fps := sortUnique(randomFPs(r, n))
		path := filepath.Join(dir, "x.fpx")
		writeIndex(t, path, fps, WriterOptions{})
		x, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		if x.Len() != uint64(len(fps)) {
			t.Fatalf("n=%d: Len %d", n, x.Len())
		}
		for _, fp := range fps {
			ok, err := x.Contains(fp)
			if err != nil || !ok {
				t.Fatalf("n=%d: %s: %v %v", n, fp, ok, err)
			}
		}
		set := map[Fingerprint]bool{}
		for _, fp := range fps {
			set[fp] = true
		}
		for i := 0; i < 10000; i++ {
			fp := Fingerprint{r.Uint64(), r.Uint64()}
			ok, err := x.Contains(fp)
			if err != nil || ok != set[fp] {
				t.Fatalf("n=%d: absent %s: %v %v", n, fp, ok, err)
			}
		}
		var back []Fingerprint
		if err := x.Scan(func(s []Fingerprint) error { back = append(back, s...); return nil }); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(back, fps) && !(len(back) == 0 && len(fps) == 0) {
			t.Fatalf("n=%d: scan differs", n)
		}
		x.Close()
	}
}

// Several segments, with skewed prefixes that push the trie deep.
func TestSegmentsTrieRule(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	fps := randomFPs(r, 3*SegmentMax)
	// A cluster sharing 70 leading bits: the trie goes past the Hi word.
	for i := 0; i < SegmentMax+10; i++ {
		fps = append(fps, Fingerprint{0x1234_5678_9abc_def0, 0xfc00_0000_0000_0000 | r.Uint64()>>6})
	}
	fps = sortUnique(fps)
	path := filepath.Join(t.TempDir(), "x.fpx")
	writeIndex(t, path, fps, WriterOptions{})
	x, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if x.Segments() < 4 {
		t.Fatalf("%d segments", x.Segments())
	}
	for _, s := range x.foot.segments {
		if s.count > SegmentMax {
			t.Fatalf("segment of %d", s.count)
		}
	}
	for i := 0; i < len(fps); i += 97 {
		if ok, err := x.Contains(fps[i]); !ok || err != nil {
			t.Fatalf("%s: %v %v", fps[i], ok, err)
		}
	}
}

func TestCanonicalAcrossThreads(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	fps := sortUnique(randomFPs(r, 2*SegmentMax+12345))
	dir := t.TempDir()
	var files [][]byte
	for _, th := range []int{1, 2, 5} {
		p := filepath.Join(dir, "x.fpx")
		writeIndex(t, p, fps, WriterOptions{Threads: th})
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, b)
	}
	for i := 1; i < len(files); i++ {
		if !bytes.Equal(files[0], files[i]) {
			t.Fatal("bytes differ across thread counts")
		}
	}
}

func TestFuseProbeMatchesLibrary(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	keys := make([]uint64, 5000)
	for i := range keys {
		keys[i] = r.Uint64()
	}
	lib, err := xorfilter.NewBinaryFuse[uint8](slices.Clone(keys))
	if err != nil {
		t.Fatal(err)
	}
	f := newFuse8(lib.Seed, lib.SegmentLength, lib.SegmentCount, lib.Fingerprints)
	for i := 0; i < 100000; i++ {
		k := r.Uint64()
		if i < len(keys) {
			k = keys[i]
		}
		if f.contains(k) != lib.Contains(k) {
			t.Fatalf("key %x: probe %v, library %v", k, f.contains(k), lib.Contains(k))
		}
	}
}

func TestWriterRejectsDisorder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.fpx")
	w, err := Create(path, WriterOptions{Spec: Spec{Hash: "xxh3"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Add(Fingerprint{2, 0}, Fingerprint{1, 0}); err == nil {
		t.Fatal("accepted descending fingerprints")
	}
	if _, err := w.Commit(); err == nil {
		t.Fatal("committed after an error")
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatal("published after an error")
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 0 {
		t.Fatalf("debris left: %v", entries)
	}
}
