package fpstore

import (
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/fpdedup/fpdedup/internal/devrate"
	"github.com/fpdedup/fpdedup/internal/pagecache"
)

// coldFile writes an index of 600k random keys (several 2 MiB extents)
// for the plan tests.
func coldFile(t *testing.T, seed uint64) (path string, all []Fingerprint, r *rand.Rand) {
	t.Helper()
	r = rand.New(rand.NewPCG(seed, seed+1))
	all = sortUnique(randomFPs(r, 600_000))
	path = filepath.Join(t.TempDir(), "x.fpx")
	writeIndex(t, path, all, WriterOptions{})
	return path, all, r
}

// openIndex opens path, closed at the test's end.
func openIndex(t *testing.T, path string, opts ...Option) *Index {
	t.Helper()
	x, err := Open(path, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close() })
	return x
}

// fixedRates prices cold batches with *r as it is when the first is
// planned.
func fixedRates(r *devrate.Rates) Option {
	return WithRates(func(string, int64) devrate.Rates { return *r })
}

// evict drops path from the page cache, all but what this process maps
// (what Open and earlier lookups touched: a tenth or so), and skips the
// test where the cache is the storage (tmpfs).
func evict(t *testing.T, path string) {
	t.Helper()
	if resident, err := pagecache.Drop(path); err != nil || resident > 0.5 {
		t.Skipf("%s stays in the page cache (%.0f%% resident, %v): tmpfs?", path, 100*resident, err)
	}
}

// coldCostOf is what a cold batch of n keys costs in x at one read a
// second, by the path the planner takes.
func coldCostOf(x *Index, n float64) float64 {
	c, _ := x.coldCost(n, 1)
	return c
}

// TestRandomCost: a batch is priced at coldReadsPerKey reads a key and
// coldReadsPerSegment for each segment it opens; the segments opened grow
// with the keys and never pass either the keys or the segments.
func TestRandomCost(t *testing.T) {
	for _, c := range []struct {
		n, segments int
		lo, hi      float64 // reads
	}{
		{0, 1024, 0, 0},
		{1, 1024, 1.1 + 5*0.99, 1.1 + 5},
		{1000, 1024, 1100 + 5*600, 1100 + 5*650},            // 1-e^-0.98 of the segments
		{100_000, 1024, 110_000 + 5*1023, 110_000 + 5*1024}, // every segment
		{100_000, 0, 110_000, 110_000},
	} {
		got := randomCost(float64(c.n), c.segments, 1) * coldShare
		if got < c.lo-1e-6 || got > c.hi+1e-6 {
			t.Errorf("randomCost(%d, %d) = %.1f reads, want [%.1f, %.1f]", c.n, c.segments, got, c.lo, c.hi)
		}
	}
	prev := 0.0
	for n := 1; n < 1<<20; n *= 2 {
		c := randomCost(float64(n), 1024, 1) * coldShare
		if c <= prev || c > coldReadsPerKey*float64(n)+coldReadsPerSegment*float64(min(n, 1024)) {
			t.Fatalf("randomCost(%d) = %.1f after %.1f", n, c, prev)
		}
		prev = c
	}
}

// TestPlanPrices: the plans of the batches the scale job asks of a 10^9-key
// index (17.4 GB, 1024 segments) at this machine's rates (44k random reads
// a second, 3 GB/s read whole): 10^5 keys, alone or as the four 1 MiB
// chunks of a query's input, read what they need; a stream of such chunks
// reads the file whole once its random reads have cost as much, and not
// before.
func TestPlanPrices(t *testing.T) {
	const (
		size     = 17_400_000_000
		segments = 1024
		rand     = 44_000
		seq      = 3e9
	)
	whole := wholeCost(size, seq)
	if batch := randomCost(100_000, segments, rand); readsWhole(0, batch, batch, whole) {
		t.Fatalf("10^5 keys (%.2f s at random) read the whole file (%.2f s)", batch, whole)
	}
	spent, switched := 0.0, -1
	const chunk = 31_775 // fingerprints in a 1 MiB chunk of query --fp's input
	for i := range 100 {
		batch := randomCost(chunk, segments, rand)
		if readsWhole(spent, batch, batch, whole) {
			switched = i
			break
		}
		spent += batch
	}
	// A chunk costs ~1.4 s at random: four fit in the whole read's 5.8 s.
	if switched != 4 {
		t.Fatalf("a stream of %d-key chunks read the file whole at chunk %d (spent %.2f s at random, whole %.2f s), want 4", chunk, switched, spent, whole)
	}
	one := randomCost(1_000_000, segments, rand)
	if !readsWhole(0, one, one, whole) {
		t.Fatal("10^6 keys in one batch read at random")
	}
	// Told of the keys to come, a chunk is planned for them: 10^6 keys
	// read whole from the first chunk; with 0.3 of the whole read's time
	// left to spend at random after 0.9 spent, the rest stays random
	// (what is spent is spent), unless the batches alone pass the whole
	// read (an estimate that came in low).
	first := randomCost(chunk, segments, rand)
	if !readsWhole(0, first, randomCost(1_000_000, segments, rand), whole) {
		t.Fatal("a chunk of 10^6 keys expected read at random")
	}
	if readsWhole(0.9*whole, 0.05*whole, 0.3*whole, whole) {
		t.Fatal("the keys left, at 0.3 of the whole read, read whole after 0.9 spent")
	}
	if !readsWhole(0.9*whole, 0.2*whole, 0.3*whole, whole) {
		t.Fatal("batches past the whole read's cost stayed random")
	}
}

// TestPlanAddsUp: an index out of memory, asked for a few cold batches in
// a row, prices them together: with rates that make a batch cost 0.4 of
// the whole read, the first two are read at random and the third reads
// the file whole, dropping the pages the first two read (readWhole).
// Answers are right throughout, in the batch that drops them and after.
func TestPlanAddsUp(t *testing.T) {
	path, all, r := coldFile(t, 43)
	var rates devrate.Rates
	x := openIndex(t, path, fixedRates(&rates))
	const n = 200
	rates = devrate.Rates{Random: coldCostOf(x, n) / 0.4, Seq: float64(x.Size())}
	for b := range 4 {
		if b < 3 { // the fourth batch follows the whole read
			evict(t, path)
		}
		keys := make([]Fingerprint, n)
		for i := range keys {
			keys[i] = all[r.IntN(len(all))]
		}
		found := make([]bool, n)
		if err := x.ContainsBatch(keys, found); err != nil {
			t.Fatal(err)
		}
		for i, ok := range found {
			if !ok {
				t.Fatalf("batch %d: %v not found", b, keys[i])
			}
		}
		if got, want := x.whole.Load(), b >= 2; got != want {
			t.Fatalf("after batch %d: read whole %v, want %v (priced %.2f s of %.2f)", b, got, want, float64(x.coldSpent.Load())/1e9, wholeCost(x.size, float64(x.Size())))
		}
	}
}

// TestPlanExpects: told how many keys follow (Set.ExpectMore), a cold
// index prices its first batch with them and reads the file whole at once
// when all of them would cost more at random; told of few, it reads the
// batch at random. A partition expects its share.
func TestPlanExpects(t *testing.T) {
	path, all, r := coldFile(t, 45)
	const n = 200
	for _, c := range []struct {
		more  uint64
		whole bool
	}{
		{0, false},
		{n, false}, // the batch and as many again: 0.8 of the whole read
		{2 * n, true},
		{1 << 40, true},
	} {
		var rates devrate.Rates
		x, err := Open(path, fixedRates(&rates))
		if err != nil {
			t.Fatal(err)
		}
		rates = devrate.Rates{Random: coldCostOf(x, n) / 0.4, Seq: float64(x.Size())}
		evict(t, path)
		set, err := NewSet([]*Index{x})
		if err != nil {
			t.Fatal(err)
		}
		set.ExpectMore(c.more)
		keys := make([]Fingerprint, n)
		for i := range keys {
			keys[i] = all[r.IntN(len(all))]
		}
		found := make([]bool, n)
		var l Lookups
		if err := set.ContainsBatch(keys, found, &l); err != nil {
			t.Fatal(err)
		}
		if countTrue(found) != n {
			t.Fatalf("expecting %d more: %d of %d keys found", c.more, countTrue(found), n)
		}
		if got := x.whole.Load(); got != c.whole {
			t.Errorf("expecting %d more: read whole %v, want %v", c.more, got, c.whole)
		}
		x.Close()
	}

	// Partition 1 of 4 expects a quarter of the keys.
	ppath := filepath.Join(t.TempDir(), "p.fpx")
	var part []Fingerprint
	for _, fp := range all {
		if fp.Hi>>62 == 1 {
			part = append(part, fp)
		}
	}
	writeIndex(t, ppath, part, WriterOptions{Range: Range{Bits: 2, Index: 1}})
	p := openIndex(t, ppath)
	(&Set{indexes: []*Index{p}}).ExpectMore(4000) // NewSet wants the whole range
	if got := p.more.Load(); got != 1000 {
		t.Fatalf("a partition of a quarter of the range expects %d of 4000 keys, want 1000", got)
	}
}

// TestPlanWholeFits: an index larger than the machine's memory is never
// read whole by lookups, however many keys are to come (each batch would
// read its keys' extents again), and not after many lookups either.
func TestPlanWholeFits(t *testing.T) {
	path, all, _ := coldFile(t, 47)
	x := openIndex(t, path, fixedRates(&devrate.Rates{Random: 1, Seq: 1e12})) // whole would win
	was := memoryForWhole
	memoryForWhole = func() uint64 { return uint64(x.Size()) - 1 }
	defer func() { memoryForWhole = was }()
	evict(t, path)
	set, err := NewSet([]*Index{x})
	if err != nil {
		t.Fatal(err)
	}
	set.ExpectMore(1 << 40)
	keys := all[:4*x.ReadAheadAfter()]
	found := make([]bool, len(keys))
	var l Lookups
	if err := set.ContainsBatch(keys, found, &l); err != nil {
		t.Fatal(err)
	}
	if countTrue(found) != len(keys) {
		t.Fatalf("%d of %d keys found", countTrue(found), len(keys))
	}
	for _, fp := range all[:10] {
		if _, err := x.Contains(fp); err != nil {
			t.Fatal(err)
		}
	}
	if x.whole.Load() {
		t.Fatal("an index larger than memory read whole")
	}
}

// TestDropPartial: a whole read after cold batches first drops the pages
// of every extent partly in memory (so that it reads them in huge
// folios), and keeps the extents wholly in memory.
func TestDropPartial(t *testing.T) {
	path, _, r := coldFile(t, 49)
	x := openIndex(t, path)
	if x.Size() < 3*extentSize {
		t.Fatalf("%d bytes: too few extents for this test", x.Size())
	}
	evict(t, path)
	var sink byte
	for at := 0; at < extentSize; at += PageSize { // extent 0 wholly
		sink += x.data[at]
	}
	for range 50 { // a few pages of the others
		sink += x.data[extentSize+r.IntN(len(x.data)-extentSize)]
	}
	runtime.KeepAlive(sink)
	x.coldSpent.Store(1)
	x.readWhole()
	vec := make([]byte, extentSize/PageSize)
	for at := 0; at < len(x.data); at += extentSize {
		end := min(at+extentSize, len(x.data))
		pages := (end - at + PageSize - 1) / PageSize
		in, err := pagecache.Resident(x.data[at:end], vec)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case at == 0 && in != pages:
			t.Errorf("extent 0, wholly in memory, kept %d of %d pages", in, pages)
		case at > 0 && in != 0 && in != pages:
			t.Errorf("extent at %d: %d of %d pages left in memory", at, in, pages)
		}
	}
}
