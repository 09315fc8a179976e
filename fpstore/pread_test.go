package fpstore

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/fpdedup/fpdedup/internal/devrate"
	"github.com/fpdedup/fpdedup/internal/pagecache"
	"golang.org/x/sys/unix"
)

// readPathFiles writes the indexes the read path tests use: 1.1·10^6
// random keys under prefix 00 and 5000 elsewhere (segments of ~550k keys
// beside small ones, checked whole before their first lookup: the two
// ways a lookup checks a segment), in one index of the whole range and
// in the partition of prefix 00 (range 0 of 2 bits).
func readPathFiles(t *testing.T) (paths [2]string, all []Fingerprint) {
	t.Helper()
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(71, 72))
	all = randomFPs(r, 1_105_000)
	for i := range all[:1_100_000] {
		all[i].Hi >>= 2
	}
	all = sortUnique(all)
	var part []Fingerprint
	for _, fp := range all {
		if fp.Hi>>62 == 0 {
			part = append(part, fp)
		}
	}
	paths = [2]string{filepath.Join(dir, "all.fpx"), filepath.Join(dir, "part.fpx")}
	writeIndex(t, paths[0], all, WriterOptions{})
	writeIndex(t, paths[1], part, WriterOptions{Range: Range{Bits: 2, Index: 0}})
	return paths, all
}

// TestReadPaths: every path a lookup can take (the mapping, the mapping
// with each stage's pages asked for at once, pread, the whole read)
// answers as a Go map of the keys does, for batches of 1, 10^3 and 10^4
// keys present, absent and mixed, in an index of the whole range and in a
// partition, through ContainsBatch, Contains and a Set.
func TestReadPaths(t *testing.T) {
	paths, all := readPathFiles(t)
	in := make(map[Fingerprint]bool, len(all))
	for _, fp := range all {
		in[fp] = true
	}
	for pi, path := range paths {
		// pread twice: with the default buffers, and with the least
		// (rounds of a few keys, no directory held past the first few).
		for pc, p := range []readPath{pathMapped, pathAdvised, pathPread, pathWhole, pathPread} {
			x := openIndex(t, path, WithReadBuffers(testReadBuffers))
			if pc == 4 {
				x.readBuffers = minReadBuffers
			}
			x.forcePath.Store(uint32(p))
			if p == pathMapped {
				t.Logf("%s: %d segments", path, x.Segments())
			}
			r := rand.New(rand.NewPCG(uint64(pc), uint64(pi)))
			for _, n := range []int{1, 1000, 10_000} {
				for _, shape := range []string{"present", "absent", "mixed"} {
					keys := make([]Fingerprint, n)
					for i := range keys {
						if shape == "present" || shape == "mixed" && i%2 == 0 {
							keys[i] = all[r.IntN(len(all))]
						} else {
							keys[i] = Fingerprint{r.Uint64(), r.Uint64()}
						}
					}
					name := fmt.Sprintf("index %d path %d (case %d): %d keys %s", pi, p, pc, n, shape)
					found := make([]bool, n)
					if err := x.ContainsBatch(keys, found); err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					for i, fp := range keys {
						want := in[fp] && x.Range().Contains(fp)
						if found[i] != want {
							t.Fatalf("%s: ContainsBatch says %v for %s, want %v", name, found[i], fp, want)
						}
					}
					if n > 1000 {
						continue
					}
					for _, fp := range keys {
						ok, err := x.Contains(fp)
						if err != nil {
							t.Fatalf("%s: Contains: %v", name, err)
						}
						if want := in[fp] && x.Range().Contains(fp); ok != want {
							t.Fatalf("%s: Contains says %v for %s, want %v", name, ok, fp, want)
						}
					}
				}
			}
			if pi == 0 {
				set, err := NewSet([]*Index{x})
				if err != nil {
					t.Fatal(err)
				}
				keys := make([]Fingerprint, 20_000)
				for i := range keys {
					if i%3 == 0 {
						keys[i] = all[r.IntN(len(all))]
					} else {
						keys[i] = Fingerprint{r.Uint64(), r.Uint64()}
					}
				}
				found := make([]bool, len(keys))
				var l Lookups
				if err := set.ContainsBatch(keys, found, &l); err != nil {
					t.Fatalf("path %d: Set: %v", p, err)
				}
				for i, fp := range keys {
					if found[i] != in[fp] {
						t.Fatalf("path %d: Set says %v for %s, want %v", p, found[i], fp, in[fp])
					}
				}
			}
		}
	}
}

// TestPreadShared: a set's read buffers are shared among its indexes by
// their keys, within the budget given; batches from several goroutines
// at once read with pread (taking turns with the budget) and answer as a
// Go map does.
func TestPreadShared(t *testing.T) {
	paths, all := readPathFiles(t)
	in := make(map[Fingerprint]bool, len(all))
	for _, fp := range all {
		in[fp] = true
	}
	xs := []*Index{openIndex(t, paths[0]), openIndex(t, paths[1])}
	set, err := NewSet(xs)
	if err != nil {
		t.Fatal(err)
	}
	set.ShareReadBuffers(testReadBuffers)
	if sum := xs[0].readBuffers + xs[1].readBuffers; sum > testReadBuffers || sum < testReadBuffers-2 {
		t.Errorf("shared %d + %d bytes of %d", xs[0].readBuffers, xs[1].readBuffers, testReadBuffers)
	}
	if got, want := float64(xs[1].readBuffers)/float64(xs[0].readBuffers), float64(xs[1].Len())/float64(xs[0].Len()); math.Abs(got-want) > 0.01 {
		t.Errorf("the partition has %.3f of the history's buffers, %.3f of its keys", got, want)
	}
	for _, x := range xs {
		x.forcePath.Store(uint32(pathPread))
	}
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for g := range errs {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(91, uint64(g)))
			var l Lookups
			for range 5 {
				keys := make([]Fingerprint, 3000)
				for i := range keys {
					if i%2 == 0 {
						keys[i] = all[r.IntN(len(all))]
					} else {
						keys[i] = Fingerprint{r.Uint64(), r.Uint64()}
					}
				}
				found := make([]bool, len(keys))
				if err := set.ContainsBatch(keys, found, &l); err != nil {
					errs[g] = err
					return
				}
				for i, fp := range keys {
					if found[i] != in[fp] {
						errs[g] = fmt.Errorf("goroutine %d: the set says %v for %s, want %v", g, found[i], fp, in[fp])
						return
					}
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	// The slabs kept for the next batch are within the rounds' half of
	// each index's budget, and were kept.
	kept := 0
	for _, x := range xs {
		var held int64
		for _, slabs := range x.preadSlabs {
			for _, slab := range slabs {
				held += int64(cap(slab))
				kept++
			}
		}
		if held > x.readBuffers/2 {
			t.Errorf("%s keeps %d bytes of slabs, its budget %d", x.path, held, x.readBuffers)
		}
	}
	if kept == 0 {
		t.Error("no slab was kept for the next batch")
	}
}

// evictMapped drops x's file from the page cache, the pages this process
// maps included (MADV_DONTNEED first: evict keeps what a mapping holds).
func evictMapped(t *testing.T, x *Index) {
	t.Helper()
	if err := unix.Madvise(x.data, unix.MADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	evict(t, x.path)
}

// testReadBuffers is what the tests' indexes hold for pread.
const testReadBuffers = 32 << 20

// residentPages is how many of x's pages are in the page cache.
func residentPages(t *testing.T, x *Index) int {
	t.Helper()
	in, err := pagecache.Resident(x.data, make([]byte, (len(x.data)+PageSize-1)/PageSize))
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// coldReadFile writes an index of 3·10^6 random keys (48 MB: its pages
// far more than a batch's keys) for the device read counts.
func coldReadFile(t *testing.T) (string, []Fingerprint) {
	t.Helper()
	r := rand.New(rand.NewPCG(81, 82))
	all := sortUnique(randomFPs(r, 3_000_000))
	path := filepath.Join(t.TempDir(), "x.fpx")
	writeIndex(t, path, all, WriterOptions{})
	return path, all
}

// TestColdReadsPerKey counts the pages a cold lookup brings into the page
// cache (mincore before and after, the file dropped from the cache with
// POSIX_FADV_DONTNEED first, its mapped pages unmapped): a cold batch of 10^3 keys, present then
// absent, reads at most 1.5 pages a key, the directories and the segments'
// headers included; then, the directories held, single cold lookups
// (Contains) at most 1.5 a key too, until they are ReadAheadAfter. The file is priced so that reading it
// whole never pays (its rates: random reads free, the whole read slow).
func TestColdReadsPerKey(t *testing.T) {
	path, all := coldReadFile(t)
	x := openIndex(t, path, WithReadBuffers(testReadBuffers), WithRates(func(string, int64) devrate.Rates { return devrate.Rates{Random: 1e9, Seq: 1} }))
	r := rand.New(rand.NewPCG(83, 84))
	const n = 1000
	for _, shape := range []string{"present", "absent"} {
		evictMapped(t, x)
		keys := make([]Fingerprint, n)
		for i := range keys {
			if shape == "present" {
				keys[i] = all[r.IntN(len(all))]
			} else {
				keys[i] = Fingerprint{r.Uint64(), r.Uint64()}
			}
		}
		before := residentPages(t, x)
		found := make([]bool, n)
		if err := x.ContainsBatch(keys, found); err != nil {
			t.Fatal(err)
		}
		read := residentPages(t, x) - before
		if c := countTrue(found); shape == "present" && c != n || shape == "absent" && c > 1 {
			t.Fatalf("%s: %d of %d keys found", shape, c, n)
		}
		t.Logf("a cold batch of %d %s keys read %d pages: %.2f a key", n, shape, read, float64(read)/n)
		if float64(read) > 1.5*n {
			t.Errorf("a cold batch of %d %s keys read %d pages: %.2f a key, more than 1.5", n, shape, read, float64(read)/n)
		}
	}
	// Single lookups in a running process: the segments open, the
	// directories held (by a cold batch: a warm one would count its keys
	// towards ReadAheadAfter, and read the file whole).
	evictMapped(t, x)
	warm := make([]Fingerprint, 20_000)
	for i := range warm {
		warm[i] = Fingerprint{r.Uint64(), r.Uint64()}
	}
	if err := x.ContainsBatch(warm, make([]bool, len(warm))); err != nil {
		t.Fatal(err)
	}
	evictMapped(t, x)
	// Fewer than ReadAheadAfter (96 here), past which lookups read the
	// file whole.
	singles := int(x.ReadAheadAfter()) - 10
	before := residentPages(t, x)
	for i := range singles {
		fp := presentOrNot(r, all, i)
		ok, err := x.Contains(fp)
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 && !ok {
			t.Fatalf("%s not found", fp)
		}
	}
	read := residentPages(t, x) - before
	t.Logf("%d single cold lookups read %d pages: %.2f a key", singles, read, float64(read)/float64(singles))
	if float64(read) > 1.5*float64(singles) {
		t.Errorf("%d single cold lookups read %d pages: %.2f a key, more than 1.5", singles, read, float64(read)/float64(singles))
	}
}

// TestGuessBucket: the guess of where a key's bucket lies among a
// segment's fingerprints (read with its header by a single cold lookup)
// holds the key's place for most keys, present and absent, in segments of
// many sizes, and guesses nothing of a segment it cannot.
func TestGuessBucket(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 7))
	for _, n := range []int{1, 2, 100, 10_000, 200_000} {
		fps := randomFPs(r, n)
		slices.SortFunc(fps, Fingerprint.Compare)
		ref := segmentRef{count: uint64(n), first: fps[0], last: fps[n-1]}
		in := 0
		const probes = 2000
		for i := range probes {
			fp := fps[r.IntN(n)]
			if i%2 == 1 {
				fp = Fingerprint{r.Uint64(), r.Uint64()}
			}
			at, _ := slices.BinarySearchFunc(fps, fp, Fingerprint.Compare)
			from, to := guessBucket(ref, fp)
			if from > to || to > 16*uint64(n) {
				t.Fatalf("%d keys: guess [%d, %d) outside the segment", n, from, to)
			}
			if from <= 16*uint64(at) && 16*uint64(at) <= to {
				in++
			}
		}
		if in < probes*8/10 {
			t.Errorf("%d keys: the guess held %d of %d keys' places", n, in, probes)
		}
	}
	if from, to := guessBucket(segmentRef{}, Fingerprint{1, 2}); from != 0 || to != 0 {
		t.Errorf("an empty segment: guess [%d, %d)", from, to)
	}
}

// TestColdSinglesGuess: single cold lookups in a process that holds no
// directory page read where each key's bucket most likely lies, alone:
// most keys, present and absent, are answered from that one read, at
// most 1.2 reads a key, and as a Go map says. With guesses made to miss
// (a window of a few dozen fingerprints), the keys are answered through
// their directory pages after it, as a Go map says too. By default a
// segment's directory is read whole with its wholeDirAfter'th guess and
// held, and its later keys are looked up through it. Each case also from
// several goroutines at once.
func TestColdSinglesGuess(t *testing.T) {
	path, all := coldReadFile(t)
	in := make(map[Fingerprint]bool, len(all))
	for _, fp := range all {
		in[fp] = true
	}
	for _, c := range []struct {
		name   string
		spread float64
		after  uint32
	}{{"guess", guessSpread, math.MaxUint32}, {"miss", 0, math.MaxUint32}, {"hold", guessSpread, wholeDirAfter}} {
		t.Run(c.name, func(t *testing.T) {
			defer func(s float64, a uint32) { guessSpread, wholeDirAfter = s, a }(guessSpread, wholeDirAfter)
			guessSpread, wholeDirAfter = c.spread, c.after
			x := openIndex(t, path, WithReadBuffers(testReadBuffers))
			x.forcePath.Store(uint32(pathPread))
			r := rand.New(rand.NewPCG(91, uint64(c.spread)))
			const n = 400
			for i := range n {
				fp := presentOrNot(r, all, i)
				ok, err := x.Contains(fp)
				if err != nil {
					t.Fatal(err)
				}
				if ok != in[fp] {
					t.Fatalf("Contains says %v for %s, want %v", ok, fp, in[fp])
				}
			}
			runs, placed, missed := x.preadRuns.Load(), x.guessed.Load(), x.guessMissed.Load()
			t.Logf("%d single lookups: %d reads (%.2f a key), %d placed by the guess, %d missed", n, runs, float64(runs)/n, placed, missed)
			if c.name != "miss" && float64(runs) > 1.2*n {
				t.Errorf("%.2f reads a key", float64(runs)/n)
			}
			switch c.name {
			case "guess":
				if placed < n*9/10 {
					t.Errorf("%d of %d keys placed by the guess", placed, n)
				}
			case "miss":
				// A key whose directory page a miss before it read is
				// looked up through it, unguessed.
				if missed < 50 {
					t.Errorf("%d guesses missed, %d placed, with no spread: the fallback is barely tried", missed, placed)
				}
			case "hold":
				segs := uint64(x.Segments())
				if placed+missed != segs*uint64(wholeDirAfter) {
					t.Errorf("%d keys guessed, want %d (%d a segment, then its directory)", placed+missed, segs*uint64(wholeDirAfter), wholeDirAfter)
				}
				for si := range x.segs {
					if !x.segs[si].seg.Load().dirWholeHeld() {
						t.Fatalf("segment %d: its directory not held whole", si)
					}
				}
			}
			// From several goroutines at once (each a round of its own).
			var wg sync.WaitGroup
			errs := make([]error, 4)
			for g := range errs {
				wg.Go(func() {
					r := rand.New(rand.NewPCG(uint64(g), 93))
					for i := range 100 {
						fp := presentOrNot(r, all, i)
						if ok, err := x.Contains(fp); err != nil || ok != in[fp] {
							errs[g] = fmt.Errorf("concurrent Contains(%s) = %v, %v; want %v", fp, ok, err, in[fp])
							return
						}
					}
				})
			}
			wg.Wait()
			for _, err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestPreadDamagedAgain: a single lookup whose page fails its checksum is
// an error, and so is the next lookup of the same key: the round a single
// lookup reads in is kept for the next one, which must read and check the
// page again, not answer from what the failed round left.
func TestPreadDamagedAgain(t *testing.T) {
	path, all := coldReadFile(t)
	fp := all[len(all)/3]
	x := openIndex(t, path, WithReadBuffers(testReadBuffers))
	s, err := x.lookupSegment(x.find(fp))
	if err != nil {
		t.Fatal(err)
	}
	pos, ok := slices.BinarySearchFunc(s.fps, fp, Fingerprint.Compare)
	if !ok {
		t.Fatalf("%s not in its segment", fp)
	}
	// A byte of a fingerprint three places away, on the same page.
	at := s.ref.offset + s.fpsAt + 16*uint64(pos)
	other := at + 48
	if other/PageSize != at/PageSize {
		other = at - 48
	}
	x.Close()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, int64(other)); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x40
	if _, err := f.WriteAt(b, int64(other)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	x = openIndex(t, path, WithReadBuffers(testReadBuffers))
	x.forcePath.Store(uint32(pathPread))
	for i := range 3 {
		if ok, err := x.Contains(fp); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("lookup %d of a key on a damaged page: %v, %v; want ErrCorrupt", i+1, ok, err)
		}
	}
}

// presentOrNot is the i'th key of a run that alternates: one of all, then
// a random one (absent but by a chance of 2^-128 a key).
func presentOrNot(r *rand.Rand, all []Fingerprint, i int) Fingerprint {
	if i%2 == 1 {
		return Fingerprint{r.Uint64(), r.Uint64()}
	}
	return all[r.IntN(len(all))]
}

// TestColdBatchesHoldDirectories: a segment whose batches' keys have read
// its directory a page at a time for as long as one read of the whole
// directory costs (wholeDirPays, at the device's rates) reads it whole
// with the next batch and holds it, so that a running process's later
// cold batches read their buckets' pages alone: fewer pages a key than a
// process whose rates never make it pay (it holds only the pages its keys
// read), and answers as a Go map says either way.
func TestColdBatchesHoldDirectories(t *testing.T) {
	path, all := coldReadFile(t)
	in := make(map[Fingerprint]bool, len(all))
	for _, fp := range all {
		in[fp] = true
	}
	perKey := map[bool]float64{}
	for _, hold := range []bool{true, false} {
		// A directory of 32 pages is priced at 1 + 128 KiB × rand / seq
		// pages read one at a time: 15.7 with hold, never without.
		seq := 2.5e8
		if !hold {
			seq = 1
		}
		x := openIndex(t, path, WithReadBuffers(testReadBuffers), WithRates(func(string, int64) devrate.Rates { return devrate.Rates{Random: 28000, Seq: seq} }))
		x.forcePath.Store(uint32(pathPread))
		r := rand.New(rand.NewPCG(95, 96))
		batch := func(n int) int {
			t.Helper()
			evictMapped(t, x)
			keys := make([]Fingerprint, n)
			for i := range keys {
				keys[i] = presentOrNot(r, all, i)
			}
			found := make([]bool, n)
			before := residentPages(t, x)
			if err := x.ContainsBatch(keys, found); err != nil {
				t.Fatal(err)
			}
			for i, fp := range keys {
				if found[i] != in[fp] {
					t.Fatalf("ContainsBatch says %v for %s, want %v", found[i], fp, in[fp])
				}
			}
			return residentPages(t, x) - before
		}
		wholeHeld := func() (n int) {
			for si := range x.segs {
				if s := x.segs[si].seg.Load(); s != nil && s.dirWholeHeld() {
					n++
				}
			}
			return n
		}
		// A first batch reads its keys' directory pages alone (~13 a
		// segment for 16 keys: below the price), whatever it costs; the
		// third finds the price paid and reads the directories whole.
		const small = MinPricedBatch
		batch(small)
		if n := wholeHeld(); n != 0 {
			t.Errorf("hold %v: %d directories held whole after a batch of %d keys", hold, n, small)
		}
		for range 3 {
			batch(small)
		}
		if n := wholeHeld(); hold && n != x.Segments() {
			t.Errorf("%d of %d directories held whole after %d keys", n, x.Segments(), 4*small)
		}
		const n = 400
		read := batch(n)
		perKey[hold] = float64(read) / n
		t.Logf("hold %v: a cold batch of %d keys read %d pages, %.2f a key", hold, n, read, perKey[hold])
	}
	if perKey[true] >= perKey[false] || perKey[true] > 1.3 {
		t.Errorf("pages read a key: %.2f holding whole directories, %.2f holding the pages read; want fewer, at most 1.3", perKey[true], perKey[false])
	}
}
