package fpstore

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"testing"
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
	// find (the leading-bits table, then a short scan or a search) against
	// a search of every segment: at each segment's first and last
	// fingerprint and beside them, in the deep cluster, and at random.
	if x.lutBits == 0 {
		t.Fatalf("%d segments but no leading-bits table", x.Segments())
	}
	segs := x.foot.segments
	ref := func(fp Fingerprint) int {
		i := sort.Search(len(segs), func(k int) bool { return fp.Less(segs[k].node.Prefix) }) - 1
		if i < 0 || !segs[i].node.contains(fp) {
			return -1
		}
		return i
	}
	probes := randomFPs(r, 100_000)
	for i := 0; i < len(fps); i += 1013 {
		probes = append(probes, fps[i])
	}
	for _, s := range segs {
		p := s.node.Prefix
		probes = append(probes, p, Fingerprint{p.Hi, p.Lo - 1}, Fingerprint{p.Hi - 1, p.Lo}, Fingerprint{p.Hi + 1, p.Lo})
	}
	probes = append(probes, Fingerprint{}, Fingerprint{^uint64(0), ^uint64(0)})
	for _, fp := range probes {
		if got, want := x.find(fp), ref(fp); got != want {
			t.Fatalf("find(%s) = segment %d, want %d", fp, got, want)
		}
	}
	present := fps
	if testing.Short() {
		// The race step: every 16th key, in every segment still.
		present = nil
		for i := 0; i < len(fps); i += 16 {
			present = append(present, fps[i])
		}
	}
	checkLookups(t, x, fps, append(probes, present...), true)
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

// The segment filter never misses a member, and its false-positive rate
// on random probes is the blocked-bloom formula's (within 10%).
func TestBloomAgainstFormula(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	keys := randomFPs(r, 200_000)
	nb := BloomBlocks(len(keys), bloomBitsPerKey)
	blocks := make([][8]uint64, nb)
	for _, fp := range keys {
		BloomAdd(&blocks[BloomBlock(fp, uint64(nb))], fp)
	}
	for _, fp := range keys {
		if !BloomTest(&blocks[BloomBlock(fp, uint64(nb))], fp) {
			t.Fatalf("member %s rejected", fp)
		}
	}
	// Keys that share a long prefix (one segment deep in the trie) must
	// not degrade the filter.
	for _, prefix := range []uint64{0, 0xabcdef0123400000} {
		pass, n := 0, 1_000_000
		for i := 0; i < n; i++ {
			fp := Fingerprint{prefix | r.Uint64()>>24, r.Uint64()}
			if BloomTest(&blocks[BloomBlock(fp, uint64(nb))], fp) {
				pass++
			}
		}
		got, want := float64(pass)/float64(n), BloomFPR(len(keys), nb)
		if got < want*0.9 || got > want*1.1 {
			t.Errorf("prefix %x: measured %.4f%%, formula %.4f%%", prefix, 100*got, 100*want)
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

// TestPagesCheckedOnce: pages checked by many goroutines at once are
// counted once each, so that a segment counts as wholly checked (and its
// lookups skip the page checks) only when every page has been: verifying
// all pages but one leaves checked false, the last makes it true.
func TestPagesCheckedOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.fpx")
	writeIndex(t, path, sortUnique(randomFPs(rand.New(rand.NewPCG(7, 8)), 200_000)), WriterOptions{})
	for range 10 { // each a fresh mapping, its pages unchecked: ten races
		checkPagesOnce(t, path)
	}
}

func checkPagesOnce(t *testing.T, path string) {
	x, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	s, err := x.segment(0)
	if err != nil {
		t.Fatal(err)
	}
	pages := s.ref.pages()
	if pages < 100 {
		t.Fatalf("a segment of %d pages is too small to race on", pages)
	}
	last := pages / 2 // left for the end
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range pages {
				p := (i + uint64(g)) % pages // every goroutine on nearly the same page at once
				if p == last {
					continue
				}
				if err := s.verifyPage(p); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if s.checked() || s.unverified.Load() != 1 {
		t.Fatalf("all pages but one checked: checked %v, %d unchecked", s.checked(), s.unverified.Load())
	}
	if err := s.verifyPage(last); err != nil {
		t.Fatal(err)
	}
	if !s.checked() {
		t.Fatalf("every page checked, yet %d unchecked", s.unverified.Load())
	}
}

// TestOpenFooterPastTail: Open reads the footer in the one read of the
// file's end when it fits (openTail), and after it when it does not: a
// tail of the trailer alone, of part of the footer, of all of it and of
// the whole file open the same index, every key found.
func TestOpenFooterPastTail(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	fps := randomFPs(r, SegmentMax+5000)
	slices.SortFunc(fps, Fingerprint.Compare)
	fps = slices.Compact(fps)
	path := filepath.Join(t.TempDir(), "x.fpx")
	writeIndex(t, path, fps, WriterOptions{})
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func(was func(int64) int64) { openTailOf = was }(openTailOf)
	for _, tail := range []int64{TrailerSize, TrailerSize + 7, 4 << 10, 1 << 20, st.Size()} {
		openTailOf = func(size int64) int64 { return min(size, tail) }
		x, err := Open(path)
		if err != nil {
			t.Fatalf("a tail of %d bytes: %v", tail, err)
		}
		if x.Segments() < 2 {
			t.Fatalf("%d segments: the test wants a footer of several", x.Segments())
		}
		for _, i := range []int{0, len(fps) / 2, len(fps) - 1} {
			if ok, err := x.Contains(fps[i]); err != nil || !ok {
				t.Fatalf("a tail of %d bytes: key %d: %v %v", tail, i, ok, err)
			}
		}
		x.Close()
	}
}
